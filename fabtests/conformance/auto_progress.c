/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * FI_PROGRESS_AUTO (fi_domain(3), fi_exanet(7) PROGRESS) between real processes: a target that
 * computes without calling libfabric still serves an RMA write, an RMA read, a fetching atomic
 * and a rendezvous-size tagged send from an initiator.
 *
 * A page of shared memory (mapped before the fork) carries the target's "computing" flag. The
 * target posts its receive, tells the initiator to start, raises the flag and spins on
 * arithmetic, making no libfabric call, until the initiator says it is done (bounded); only then
 * does it lower the flag and call in. The initiator notes the flag as it takes each completion.
 *
 *   auto:   every completion arrives while the flag is still up (the target's progress thread
 *           served them);
 *   manual: the same program, with FI_PROGRESS_MANUAL and a target that computes for a fixed
 *           second: no completion arrives while the flag is up (each operation needs the target's
 *           progress, so without the thread nothing completes until the target calls in).
 *
 * The two halves together show what the thread does: the manual half fails if the operations
 * chosen would complete without the target, and the auto half fails without the thread. No time
 * is asserted except the generous bounds of the waits. Data are checked at both ends.
 *
 * Environment: AUTO_PROGRESS_MODES (default "auto,manual").
 */
#include "xt.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define BIG (4u << 20)            /* each transfer: beyond the target's staging area (2 MiB) */
#define REGION (3 * BIG)          /* write lands in [0, BIG), read comes from [BIG, 2 BIG) */
#define ATOMIC_OFF (2 * BIG)      /* the fetch-add's word */
#define ATOMIC_INIT 1000u
#define TAG 0x77
#define MANUAL_COMPUTE_S 1.0      /* manual: the target computes this long, then calls in */
#define AUTO_COMPUTE_MAX_S 60.0   /* auto: at most this long (the initiator ends it sooner) */
#define OPS 4

struct shared {
	atomic_int computing;       /* target: 1 while it makes no libfabric call */
	atomic_int initiator_done;  /* initiator: every completion taken */
	atomic_int seen_computing;  /* initiator: completions taken while computing was 1 */
	atomic_int seen_after;      /* initiator: completions taken after it went to 0 */
};

struct target_desc {
	uint64_t key, base;
};

static struct shared *g_sh;
static enum fi_progress g_mode;

static void open_ep(struct xt_ep *x)
{
	struct fi_info *h = xt_hints();
	h->caps |= FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	h->domain_attr->data_progress = g_mode;
	xt_open(x, h, 0);
	fi_freeinfo(h);
	XT_CHECK(x->info->domain_attr->data_progress == g_mode, "data_progress %d granted as %d", g_mode,
		 x->info->domain_attr->data_progress);
}

/* The work a computing rank does: no libfabric call, no system call but the clock. */
static void compute(double max_s)
{
	const double end = xt_now_s() + max_s;
	volatile uint64_t acc = 1;
	while (!atomic_load(&g_sh->initiator_done) && xt_now_s() < end)
		for (int i = 0; i < 10000; i++)
			acc = acc * 6364136223846793005ull + 1442695040888963407ull;
}

static int target_main(int index, int sock)
{
	(void)index;
	struct xt_ep x;
	open_ep(&x);
	unsigned char *region = aligned_alloc(4096, REGION);
	unsigned char *rbuf = aligned_alloc(4096, BIG);
	XT_CHECK(region && rbuf, "malloc");
	memset(region, 0, BIG);
	xt_fill(region + BIG, BIG, 2); /* what the initiator reads */
	uint64_t init = ATOMIC_INIT;
	memcpy(region + ATOMIC_OFF, &init, sizeof init);
	memset(rbuf, 0, BIG);
	struct fid_mr *mr;
	XT_RC(fi_mr_reg(x.domain, region, REGION, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 1, 0, &mr, NULL));
	/* Offsets unless the provider kept FI_MR_VIRT_ADDR (exanet clears it: fi_getinfo). */
	const uint64_t base = (x.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)region : 0;
	struct target_desc d = {fi_mr_key(mr), base};
	fi_addr_t peer = xt_exchange(&x, sock, 1, NULL);
	xt_send_all(sock, &d, sizeof d);
	XT_RC(fi_trecv(x.ep, rbuf, BIG, NULL, peer, TAG, 0, rbuf));

	/* Up first, then the go: the initiator never sees the flag down before the compute. */
	atomic_store(&g_sh->computing, 1);
	xt_sync(sock);
	compute(g_mode == FI_PROGRESS_AUTO ? AUTO_COMPUTE_MAX_S : MANUAL_COMPUTE_S);
	atomic_store(&g_sh->computing, 0);

	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	XT_CHECK(xt_wait(x.rxcq, &e, &err, 60) == 1, "receive failed: %s", fi_strerror(err.err));
	XT_CHECK(e.len == BIG && e.tag == TAG && xt_verify(rbuf, BIG, 3), "rendezvous data");
	/* Manual: the initiator's operations still need us. */
	xt_sync_progress(sock, x.txcq);
	XT_CHECK(xt_verify(region, BIG, 1), "RMA write data at the target");
	uint64_t after;
	memcpy(&after, region + ATOMIC_OFF, sizeof after);
	XT_CHECK(after == ATOMIC_INIT + 5, "atomic word %llu", (unsigned long long)after);
	xt_sync(sock);
	XT_RC(fi_close(&mr->fid));
	xt_close(&x);
	free(region);
	free(rbuf);
	return 0;
}

static void initiator(int sock)
{
	struct xt_ep x;
	open_ep(&x);
	unsigned char *wbuf = aligned_alloc(4096, BIG), *rdbuf = aligned_alloc(4096, BIG),
		      *sbuf = aligned_alloc(4096, BIG);
	XT_CHECK(wbuf && rdbuf && sbuf, "malloc");
	xt_fill(wbuf, BIG, 1);
	xt_fill(sbuf, BIG, 3);
	memset(rdbuf, 0, BIG);
	uint64_t operand = 5, fetched = 0;
	fi_addr_t peer = xt_exchange(&x, sock, 0, NULL);
	struct target_desc d;
	xt_recv_all(sock, &d, sizeof d);
	xt_sync(sock);
	XT_CHECK(atomic_load(&g_sh->computing) == 1, "target not computing at the start");

	static const char *names[OPS] = {"RMA write", "RMA read", "fetch-add", "rendezvous send"};
	char ctx[OPS];
	/* Delivery complete: the target checks the written data after the initiator's completion and
	 * a socket handshake, with no further libfabric call of its own. A transmit-complete write
	 * leaves the state at the target undefined (fi_cq(3)); exanet's staged engine completes
	 * it once the last chunk is queued, and the target copies that chunk out on its next progress
	 * (the 2026-11-27 TSan run caught the target checking before it). */
	struct iovec wiov = {wbuf, BIG};
	struct fi_rma_iov wrma = {d.base, BIG, d.key};
	struct fi_msg_rma wmsg = {.msg_iov = &wiov, .iov_count = 1, .addr = peer, .rma_iov = &wrma,
				  .rma_iov_count = 1, .context = &ctx[0]};
	XT_RC(fi_writemsg(x.ep, &wmsg, FI_COMPLETION | FI_DELIVERY_COMPLETE));
	XT_RC(fi_read(x.ep, rdbuf, BIG, NULL, peer, d.base + BIG, d.key, &ctx[1]));
	XT_RC(fi_fetch_atomic(x.ep, &operand, 1, NULL, &fetched, NULL, peer, d.base + ATOMIC_OFF, d.key,
			      FI_UINT64, FI_SUM, &ctx[2]));
	/* The send may say -FI_EAGAIN until the write before it has handed all its data to the
	 * engine (exanet keeps sends after writes in order, FI_ORDER_SAW): 4 MiB staged through the
	 * target's 2 MiB area needs the target's progress for that, so under manual progress the
	 * send goes once the target calls in. */
	XT_POST(x.txcq, fi_tsend(x.ep, sbuf, BIG, NULL, peer, TAG, &ctx[3]));
	int done[OPS] = {0};
	for (int n = 0; n < OPS; n++) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		XT_CHECK(xt_wait(x.txcq, &e, &err, 90) == 1, "operation failed: %s", fi_strerror(err.err));
		const int computing = atomic_load(&g_sh->computing);
		const int i = (int)((char *)e.op_context - ctx);
		XT_CHECK(i >= 0 && i < OPS && !done[i], "unexpected context");
		done[i] = 1;
		atomic_fetch_add(computing ? &g_sh->seen_computing : &g_sh->seen_after, 1);
		printf("  %-16s completed %s the target's compute\n", names[i], computing ? "during" : "after");
	}
	atomic_store(&g_sh->initiator_done, 1);
	XT_CHECK(xt_verify(rdbuf, BIG, 2), "RMA read data");
	XT_CHECK(fetched == ATOMIC_INIT, "fetch-add returned %llu", (unsigned long long)fetched);
	xt_sync_progress(sock, x.txcq);
	xt_sync(sock);
	xt_close(&x);
	free(wbuf);
	free(rdbuf);
	free(sbuf);
}

static void run(enum fi_progress mode)
{
	g_mode = mode;
	memset(g_sh, 0, sizeof *g_sh);
	int socks[1];
	pid_t pids[1];
	xt_spawn(1, target_main, socks, pids);
	initiator(socks[0]);
	xt_reap(1, pids);
	const int during = atomic_load(&g_sh->seen_computing), after = atomic_load(&g_sh->seen_after);
	if (mode == FI_PROGRESS_AUTO) {
		XT_CHECK(during == OPS, "auto: %d of %d operations completed only after the target called in",
			 after, OPS);
		xt_pass("auto: a computing target served RMA write, read, atomic and rendezvous");
	} else {
		XT_CHECK(during == 0, "manual: %d of %d operations completed while the target computed "
			 "(they do not need its progress: the auto half proves nothing)", during, OPS);
		xt_pass("manual: nothing completed until the target called in");
	}
}

int main(void)
{
	xt_init(240);
	/* The staged engine, which needs the target's progress: cross-memory attach (which the
	 * default engine choice may take for any write) lands without it, and the manual half
	 * would prove nothing. */
	setenv("FI_EXANET_DMA_ENGINE", "staged", 0);
	g_sh = mmap(NULL, sizeof *g_sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	XT_CHECK(g_sh != MAP_FAILED, "mmap");
	const char *modes = getenv("AUTO_PROGRESS_MODES");
	if (!modes)
		modes = "auto,manual";
	if (strstr(modes, "auto"))
		run(FI_PROGRESS_AUTO);
	if (strstr(modes, "manual"))
		run(FI_PROGRESS_MANUAL);
	return 0;
}
