/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * RMA with a busy target (seed 004): the rate of RMA writes an initiator gets from a target that
 * computes, against how long the target computes between its calls into libfabric. Two
 * processes on this host, any provider (FI_PROVIDER selects it). A benchmark, not a test: it
 * prints numbers and checks only that the data arrived.
 *
 *   busy_target_bench [compute_us...]   (default: 0 1 10 100 1000 10000)
 * Output, one line per compute time:   compute_us write_kops write_MBps read_kops
 *
 * The target loops: compute for compute_us (arithmetic, no call, no system call), then one
 * fi_cq_read(cq, NULL, 0), as an application that computes and tests now and then. The
 * initiator keeps WINDOW fi_write (then fi_read) of SIZE bytes in flight for DURATION_MS each
 * and counts completions. Under manual progress a target that calls in every 10 ms serves at
 * most about WINDOW operations per 10 ms; with a progress thread (PROGRESS=auto) the rate should
 * not depend on compute_us: flat is the goal.
 * Environment: PROGRESS (manual or auto: the target's data_progress hint; the initiator always
 * asks for manual and polls), SIZE (default 4096), WINDOW (default 16), DURATION_MS (default
 * 1000 per measurement).
 */
#include "xt.h"

#include <rdma/fi_rma.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZE (4u << 20)

struct shared {
	atomic_int stop;       /* initiator: this measurement is over */
	atomic_ulong rounds;   /* target: compute rounds done (how often it called in) */
};

static struct shared *g_sh;
static size_t g_size, g_window, g_duration_ms;
static enum fi_progress g_target_progress = FI_PROGRESS_MANUAL;
static size_t g_computes[64], g_ncomputes;
static int g_sread = 1; /* WAIT=sread (default) or poll */

struct side {
	struct xt_ep x;
	struct fid_mr *mr;
	void *desc;
	unsigned char *buf; /* registered: writes land in the lower half, reads come from the upper */
	uint64_t peer_addr, peer_key;
	fi_addr_t peer;
};

static void open_side(struct side *s, int sock, int initiator)
{
	struct fi_info *h = xt_hints();
	h->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	h->domain_attr->data_progress = initiator ? FI_PROGRESS_MANUAL : g_target_progress;
	/* xt_open's, with CQs that can be waited on (fi_cq_sread). */
	struct xt_ep *x = &s->x;
	memset(x, 0, sizeof *x);
	XT_RC(fi_getinfo(xt_api_version, NULL, NULL, 0, h, &x->info));
	fi_freeinfo(h);
	XT_RC(fi_fabric(x->info->fabric_attr, &x->fabric, NULL));
	XT_RC(fi_domain(x->fabric, x->info, &x->domain, NULL));
	struct fi_av_attr aa = {.type = FI_AV_MAP};
	XT_RC(fi_av_open(x->domain, &aa, &x->av, NULL));
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_UNSPEC};
	XT_RC(fi_cq_open(x->domain, &ca, &x->txcq, NULL));
	XT_RC(fi_cq_open(x->domain, &ca, &x->rxcq, NULL));
	XT_RC(fi_endpoint(x->domain, x->info, &x->ep, NULL));
	XT_RC(fi_ep_bind(x->ep, &x->av->fid, 0));
	XT_RC(fi_ep_bind(x->ep, &x->txcq->fid, FI_TRANSMIT));
	XT_RC(fi_ep_bind(x->ep, &x->rxcq->fid, FI_RECV));
	XT_RC(fi_enable(x->ep));
	x->namelen = sizeof x->name;
	XT_RC(fi_getname(&x->ep->fid, x->name, &x->namelen));
	s->buf = aligned_alloc(4096, 2 * MAX_SIZE);
	XT_CHECK(s->buf, "out of memory");
	memset(s->buf, 0, 2 * MAX_SIZE);
	s->mr = xt_mr_reg_bound(&s->x, s->buf, 2 * MAX_SIZE, 7);
	s->desc = fi_mr_desc(s->mr);
	s->peer = xt_exchange(&s->x, sock, initiator, NULL);
	xt_exchange_region(&s->x, sock, s->buf, s->mr, &s->peer_addr, &s->peer_key);
}

/* The target's application: compute, call in once, again, until the initiator is done. */
static void busy_target(struct side *s, size_t compute_us)
{
	volatile uint64_t acc = 1;
	unsigned long rounds = 0;
	while (!atomic_load_explicit(&g_sh->stop, memory_order_acquire)) {
		const double end = xt_now_s() + compute_us * 1e-6;
		while (xt_now_s() < end)
			for (int i = 0; i < 64; i++)
				acc = acc * 6364136223846793005ull + 1442695040888963407ull;
		fi_cq_read(s->x.rxcq, NULL, 0);
		rounds++;
	}
	atomic_store(&g_sh->rounds, rounds);
}

/* WINDOW operations in flight for DURATION_MS; returns completed operations per second. */
static double rate(struct side *s, int read)
{
	unsigned char *local = read ? s->buf : s->buf + MAX_SIZE;
	const uint64_t remote = s->peer_addr + (read ? MAX_SIZE : 0);
	size_t posted = 0, done = 0;
	const double t0 = xt_now_s(), end = t0 + g_duration_ms * 1e-3;
	double t = t0;
	while (t < end || done < posted) {
		while (t < end && posted - done < g_window) {
			ssize_t rc = read ? fi_read(s->x.ep, local, g_size, s->desc, s->peer, remote, s->peer_key, NULL)
					  : fi_write(s->x.ep, local, g_size, s->desc, s->peer, remote, s->peer_key, NULL);
			if (rc == -FI_EAGAIN)
				break;
			XT_CHECK(rc == 0, "post = %zd (%s)", rc, fi_strerror((int)-rc));
			posted++;
		}
		struct fi_cq_tagged_entry e[16];
		/* A full window waits in fi_cq_sread (WAIT=sread, the default): it leaves the core to
		 * the target and its progress thread on a machine with fewer cores than threads. */
		ssize_t got = g_sread && (posted - done == g_window || t >= end)
				      ? fi_cq_sread(s->x.txcq, e, 16, NULL, 100)
				      : fi_cq_read(s->x.txcq, e, 16);
		if (got > 0) {
			done += (size_t)got;
		} else if (got != -FI_EAGAIN) {
			struct fi_cq_err_entry err = {0};
			fi_cq_readerr(s->x.txcq, &err, 0);
			XT_CHECK(0, "RMA error %d (%s)", err.err, fi_strerror(err.err));
		}
		t = xt_now_s();
	}
	return (double)done / (t - t0);
}

static int run(int initiator, int sock)
{
	struct side s;
	open_side(&s, sock, initiator);
	if (initiator) {
		printf("%-10s %12s %12s %12s %14s\n", "compute_us", "write_kops", "write_MBps", "read_kops",
		       "target_calls");
		xt_fill(s.buf + MAX_SIZE, g_size, 5);
	} else {
		xt_fill(s.buf + MAX_SIZE, g_size, 6); /* what the reads bring back */
	}
	for (size_t i = 0; i < g_ncomputes; i++) {
		double w = 0, r = 0;
		unsigned long calls = 0;
		for (int read = 0; read < 2; read++) {
			atomic_store(&g_sh->stop, 0);
			xt_sync(sock);
			if (initiator) {
				const double ops = rate(&s, read);
				atomic_store_explicit(&g_sh->stop, 1, memory_order_release);
				*(read ? &r : &w) = ops;
			} else {
				busy_target(&s, g_computes[i]);
			}
			xt_sync(sock);
			if (initiator)
				calls += atomic_load(&g_sh->rounds);
		}
		if (initiator) {
			printf("%-10zu %12.1f %12.1f %12.1f %14lu\n", g_computes[i], w / 1e3, w * g_size / 1e6,
			       r / 1e3, calls);
			fflush(stdout);
		}
	}
	if (initiator)
		XT_CHECK(xt_verify(s.buf, g_size, 6), "read data");
	xt_sync_progress(sock, s.x.txcq);
	if (!initiator)
		XT_CHECK(xt_verify(s.buf, g_size, 5), "written data");
	xt_sync(sock);
	XT_RC(fi_close(&s.mr->fid));
	xt_close(&s.x);
	free(s.buf);
	return 0;
}

static int child(int index, int sock)
{
	(void)index;
	return run(0, sock);
}

int main(int argc, char **argv)
{
	xt_init(1800);
	g_size = xt_env_size("SIZE", 4096);
	g_window = xt_env_size("WINDOW", 16);
	g_duration_ms = xt_env_size("DURATION_MS", 1000);
	XT_CHECK(g_size >= 1 && g_size <= MAX_SIZE && g_window >= 1, "SIZE 1..%u, WINDOW >= 1", MAX_SIZE);
	const char *w = getenv("WAIT");
	if (w && !strcmp(w, "poll"))
		g_sread = 0;
	else
		XT_CHECK(!w || !*w || !strcmp(w, "sread"), "WAIT=sread|poll");
	const char *p = getenv("PROGRESS");
	if (p && !strcmp(p, "auto"))
		g_target_progress = FI_PROGRESS_AUTO;
	else
		XT_CHECK(!p || !*p || !strcmp(p, "manual"), "PROGRESS=manual|auto");
	for (int i = 1; i < argc && g_ncomputes < 64; i++)
		g_computes[g_ncomputes++] = strtoull(argv[i], NULL, 10);
	if (!g_ncomputes) {
		static const size_t dflt[] = {0, 1, 10, 100, 1000, 10000};
		for (size_t i = 0; i < sizeof dflt / sizeof dflt[0]; i++)
			g_computes[g_ncomputes++] = dflt[i];
	}
	g_sh = mmap(NULL, sizeof *g_sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	XT_CHECK(g_sh != MAP_FAILED, "mmap");
	int sock;
	pid_t pid;
	xt_spawn(1, child, &sock, &pid);
	run(1, sock);
	xt_reap(1, &pid);
	return 0;
}
