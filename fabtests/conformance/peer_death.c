/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A peer killed in the middle of a rendezvous: the survivor gets an error completion within
 * seconds instead of waiting forever, in both directions, and the dead peer's shared memory is
 * reclaimed by the survivor (the killed process cannot unlink it itself). The same for an RMA
 * read, and for a fetching atomic, waiting on a target that dies.
 */
#include "xt.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_ext_exanet.h>
#include <rdma/fi_rma.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BIG (16u << 20)

static int segment_exists(const char *name)
{
	struct fi_exanet_addr a;
	memcpy(&a, name, sizeof a);
	char path[128];
	snprintf(path, sizeof path, "/dev/shm/exanet.%u.%u.%u", (unsigned)getuid(), a.pdid, a.port);
	struct stat st;
	return stat(path, &st) == 0;
}

/* Child: opens, exchanges names, posts one 16 MiB operation, reports, then stops progressing. */
static int stalled_peer(int role_sender, int sock)
{
	struct xt_ep x;
	xt_open_default(&x, 0);
	fi_addr_t peer = xt_exchange(&x, sock, 1, NULL);
	void *buf = malloc(BIG);
	if (role_sender)
		XT_RC(fi_tsend(x.ep, buf, BIG, NULL, peer, 1, NULL));
	else /* another tag: no RTR of ours serves the parent's send, which waits for a CTS */
		XT_RC(fi_trecv(x.ep, buf, BIG, NULL, peer, 2, 0, NULL));
	xt_sync(sock);
	pause(); /* never progresses again; the parent kills us */
	return 0;
}

static int child_sender(int i, int sock) { (void)i; return stalled_peer(1, sock); }
static int child_receiver(int i, int sock) { (void)i; return stalled_peer(0, sock); }

static void run(int survivor_sends)
{
	int sock;
	pid_t pid;
	xt_spawn(1, survivor_sends ? child_receiver : child_sender, &sock, &pid);
	struct xt_ep x;
	xt_open_default(&x, 0);
	char name[64];
	fi_addr_t peer = xt_exchange(&x, sock, 0, name);
	void *buf = malloc(BIG);
	int ctx;
	xt_sync(sock); /* the child's 16 MiB operation is posted */
	if (survivor_sends)
		XT_RC(fi_tsend(x.ep, buf, BIG, NULL, peer, 1, &ctx));
	else
		XT_RC(fi_trecv(x.ep, buf, BIG, NULL, peer, 1, 0, &ctx));
	/* Let the handshake start, then kill the peer in the middle of it. */
	for (int i = 0; i < 1000; i++)
		fi_cq_read(survivor_sends ? x.txcq : x.rxcq, NULL, 0);
	kill(pid, SIGKILL);
	int status;
	waitpid(pid, &status, 0);
	XT_CHECK(segment_exists(name), "the killed peer's segment should still be there before reclaim");

	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct fi_cq_err_entry err = {0};
	XT_CHECK(xt_wait(survivor_sends ? x.txcq : x.rxcq, NULL, &err, 20) == 0,
		 "an operation with a dead peer must fail");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	XT_CHECK(err.err != 0 && err.op_context == &ctx, "error completion err %d", err.err);
	printf("  error %d (%s) after %.2f s\n", err.err, fi_strerror(err.err),
	       (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9);
	XT_CHECK(!segment_exists(name), "the dead peer's segment was not reclaimed");
	/* The endpoint stays usable: a message to itself still goes through. */
	fi_addr_t self = xt_insert(&x, x.name);
	uint64_t v = 42, got = 0;
	XT_RC(fi_trecv(x.ep, &got, sizeof got, NULL, self, 9, 0, NULL));
	XT_RC(fi_tsend(x.ep, &v, sizeof v, NULL, self, 9, NULL));
	XT_CHECK(xt_wait(x.rxcq, NULL, NULL, 10) == 1 && got == 42, "loopback after a peer died");
	free(buf);
	xt_close(&x);
}

/* Child for the closed-endpoint case: posts a 16 MiB receive, then closes its endpoint (the
 * process lives on) and reports. */
static int closing_peer(int i, int sock)
{
	(void)i;
	struct xt_ep x;
	xt_open_default(&x, 0);
	fi_addr_t peer = xt_exchange(&x, sock, 1, NULL);
	void *buf = malloc(BIG);
	/* another tag: the parent's RTS waits here unexpected, and no RTR serves it */
	XT_RC(fi_trecv(x.ep, buf, BIG, NULL, peer, 2, 0, NULL));
	xt_sync(sock);   /* the parent's send is posted */
	xt_close(&x);
	xt_sync(sock);   /* closed */
	xt_sync(sock);   /* the parent is done */
	free(buf);
	return 0;
}

static void run_closed(void)
{
	int sock;
	pid_t pid;
	xt_spawn(1, closing_peer, &sock, &pid);
	struct xt_ep x;
	xt_open_default(&x, 0);
	fi_addr_t peer = xt_exchange(&x, sock, 0, NULL);
	void *buf = malloc(BIG);
	int ctx;
	XT_RC(fi_tsend(x.ep, buf, BIG, NULL, peer, 1, &ctx)); /* its RTS is out; no CTS yet */
	xt_sync(sock);
	xt_sync(sock); /* the peer closed its endpoint, its process lives on */
	struct fi_cq_err_entry err = {0};
	XT_CHECK(xt_wait(x.txcq, NULL, &err, 20) == 0 && err.err != 0 && err.op_context == &ctx,
		 "a rendezvous with a closed endpoint must fail");
	uint64_t v = 1;
	ssize_t rc = fi_tsend(x.ep, &v, sizeof v, NULL, peer, 2, NULL);
	XT_CHECK(rc < 0, "a send to a closed endpoint returned %zd", rc);
	printf("  pending send: error %d (%s); new send: %zd (%s)\n", err.err, fi_strerror(err.err), rc,
	       fi_strerror((int)-rc));
	xt_sync(sock);
	free(buf);
	xt_close(&x);
	xt_reap(1, &pid);
}

/* RMA: an initiator waiting for a read the target must answer (no CMA, so the target writes the
 * data back) gets an error completion when the target dies, not a hang. */
static void open_rma(struct xt_ep *x)
{
	struct fi_info *h = xt_hints();
	h->caps |= FI_RMA | FI_ATOMIC;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY;
	xt_open(x, h, 0);
	fi_freeinfo(h);
}

static int stalled_target(int i, int sock)
{
	(void)i;
	struct xt_ep x;
	open_rma(&x);
	xt_exchange(&x, sock, 1, NULL);
	void *buf = calloc(1, BIG);
	struct fid_mr *mr;
	XT_RC(fi_mr_reg(x.domain, buf, BIG, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL));
	/* the returned mr_mode says how to address it (exanet: offsets, whatever was offered) */
	const uint64_t base = (x.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)buf : 0;
	uint64_t desc[2] = {base, fi_mr_key(mr)};
	xt_send_all(sock, desc, sizeof desc);
	pause(); /* never progresses: the parent kills us */
	return 0;
}

/* A receive posted first sends its RTR; then its endpoint closes. The sender later finds the
 * stored RTR for its send, and must fail the send rather than write into a buffer that belongs
 * to the application again. The buffer is checked untouched. */
static int rtr_closing_peer(int i, int sock)
{
	(void)i;
	struct xt_ep x;
	xt_open_default(&x, 0);
	fi_addr_t peer = xt_exchange(&x, sock, 1, NULL);
	char *buf = malloc(BIG);
	memset(buf, 0x5a, BIG);
	XT_RC(fi_trecv(x.ep, buf, BIG, NULL, peer, 1, 0, NULL)); /* the RTR goes out now */
	xt_sync(sock);
	xt_close(&x);
	xt_sync(sock); /* closed */
	xt_sync(sock); /* the parent's send has failed */
	for (size_t k = 0; k < BIG; k++)
		if (buf[k] != 0x5a)
			xt_fail(__FILE__, __LINE__, "byte %zu of the closed receive's buffer was written", k);
	free(buf);
	return 0;
}

static void run_rtr_closed(void)
{
	int sock;
	pid_t pid;
	xt_spawn(1, rtr_closing_peer, &sock, &pid);
	struct xt_ep x;
	xt_open_default(&x, 0);
	fi_addr_t peer = xt_exchange(&x, sock, 0, NULL);
	uint64_t hello = 1; /* connects to the peer while it is open (left unexpected there) */
	XT_RC(fi_tinject(x.ep, &hello, sizeof hello, peer, 9));
	xt_sync(sock); /* its RTR is in our mailbox */
	xt_sync(sock); /* and its endpoint is closed */
	void *buf = calloc(1, BIG);
	int ctx;
	XT_RC(fi_tsend(x.ep, buf, BIG, NULL, peer, 1, &ctx));
	struct fi_cq_err_entry err = {0};
	XT_CHECK(xt_wait(x.txcq, NULL, &err, 20) == 0 && err.err != 0 && err.op_context == &ctx,
		 "a send answering the RTR of a closed endpoint must fail");
	xt_sync(sock);
	free(buf);
	xt_close(&x);
	xt_reap(1, &pid);
}

static void run_rma_target_killed(void)
{
	setenv("FI_EXANET_USE_CMA", "0", 1);
	int sock;
	pid_t pid;
	xt_spawn(1, stalled_target, &sock, &pid);
	struct xt_ep x;
	open_rma(&x);
	fi_addr_t peer = xt_exchange(&x, sock, 0, NULL);
	uint64_t desc[2];
	xt_recv_all(sock, desc, sizeof desc);
	void *buf = malloc(BIG);
	int ctx;
	XT_POST(x.txcq, fi_read(x.ep, buf, BIG, NULL, peer, desc[0], desc[1], &ctx));
	for (int i = 0; i < 1000; i++)
		fi_cq_read(x.txcq, NULL, 0);
	kill(pid, SIGKILL);
	int status;
	waitpid(pid, &status, 0);
	struct fi_cq_err_entry err = {0};
	XT_CHECK(xt_wait(x.txcq, NULL, &err, 20) == 0 && err.err == FI_ECONNRESET && err.op_context == &ctx,
		 "a read from a dead target must fail with FI_ECONNRESET (err %d)", err.err);
	free(buf);
	xt_close(&x);
	unsetenv("FI_EXANET_USE_CMA");
}

/* An atomic waits for the target to perform it and answer: a target killed first fails it. */
static void run_atomic_target_killed(void)
{
	int sock;
	pid_t pid;
	xt_spawn(1, stalled_target, &sock, &pid);
	struct xt_ep x;
	open_rma(&x);
	fi_addr_t peer = xt_exchange(&x, sock, 0, NULL);
	uint64_t desc[2];
	xt_recv_all(sock, desc, sizeof desc);
	uint64_t one = 1, old = 0;
	int ctx;
	XT_POST(x.txcq, fi_fetch_atomic(x.ep, &one, 1, NULL, &old, NULL, peer, desc[0], desc[1], FI_UINT64, FI_SUM,
			      &ctx));
	for (int i = 0; i < 1000; i++)
		fi_cq_read(x.txcq, NULL, 0);
	kill(pid, SIGKILL);
	int status;
	waitpid(pid, &status, 0);
	struct fi_cq_err_entry err = {0};
	XT_CHECK(xt_wait(x.txcq, NULL, &err, 20) == 0 && err.err == FI_ECONNRESET && err.op_context == &ctx,
		 "an atomic on a dead target must fail with FI_ECONNRESET (err %d)", err.err);
	xt_close(&x);
}

int main(void)
{
	xt_init(120);
	run_closed();
	xt_pass("peer endpoint closed (process alive): pending and new sends fail");
	run_rtr_closed();
	xt_pass("receive's endpoint closed after its RTR: the send fails, the buffer is untouched");
	run(0);
	xt_pass("sender killed while the receiver waits for its data");
	run(1);
	xt_pass("receiver killed while the sender waits for its CTS");
	run_rma_target_killed();
	xt_pass("RMA target killed while a read waits for its answer");
	run_atomic_target_killed();
	xt_pass("atomic target killed while a fetch-add waits for its answer");
	return 0;
}
