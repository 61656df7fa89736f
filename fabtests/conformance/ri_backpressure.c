/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Receiver-initiated rendezvous writes that meet back-pressure at the sender's device. After a
 * small message each way (the connection is up), the receiver posts N large receives, one RTR
 * each, and progresses until all are stored at the sender; then it makes no progress, so takes
 * none of the sender's packets, while the sender starts its N sends. Each RTR'd send puts a
 * landing record before its write: over the network backend (net.ri_backpressure) the sender's
 * 128 credits at the receiver run out part-way, and the remaining sends must wait (the DMA
 * backlog) and go out once the receiver drains, never fail. Before the fix the record's "again"
 * was taken for an error: sends completed with FI_EIO, which an Open MPI job across two hosts
 * (multinode.mpi_netns) reported as MPI_ERR_INTERN in MPI_Waitall. On the emulation nothing
 * pushes back and the same exchange is simply checked. Every byte, tag and send completion is
 * checked, and that RTRs served all N sends.
 */
#include "xt.h"

#include <rdma/fi_ext_exanet.h>
#include <string.h>

#define N 200
#define BIG (128u << 10) /* above the medium limit (64 KiB): a rendezvous */

struct side {
	struct xt_ep x;
	fi_addr_t peer;
	int sock;
	struct fi_exanet_counters base;
};

static void open_side(struct side *s, int sock, int first)
{
	xt_open_default(&s->x, 0);
	s->sock = sock;
	s->peer = xt_exchange(&s->x, sock, first, NULL);
	s->base = xt_counters(s->x.ep);
}

#define DELTA(s, field) (xt_counters((s)->x.ep).field - (s)->base.field)

/* One small message each way: afterwards the lower provider's connection is up, and packets
 * leave when sent, whether or not their sender progresses. */
static void warm_up(struct side *s, int first)
{
	char one = 1, got = 0;
	for (int turn = 0; turn < 2; turn++) {
		if ((turn == 0) == first) {
			xt_send_one(s->x.ep, s->x.txcq, &one, 1, s->peer, 7);
		} else {
			XT_RC(fi_trecv(s->x.ep, &got, 1, NULL, s->peer, 7, 0, NULL));
			XT_CHECK(xt_wait(s->x.rxcq, NULL, NULL, 30) == 1 && got == 1, "warm-up message");
		}
	}
}

static int sender(int i, int sock)
{
	(void)i;
	struct side s;
	open_side(&s, sock, 1);
	warm_up(&s, 1); /* no RTR in it (base stays: the receiver's RTRs may come while we wait) */
	unsigned char *b = malloc((size_t)N * BIG);
	XT_CHECK(b, "out of memory");
	for (int k = 0; k < N; k++)
		xt_fill(b + (size_t)k * BIG, BIG, 500 + k);
	/* every RTR has arrived before any send starts, so each send is served by one */
	const double until = xt_now_s() + 30;
	while (DELTA(&s, rtr_stored) < N) {
		fi_cq_read(s.x.txcq, NULL, 0);
		XT_CHECK(xt_now_s() < until, "only %llu of %d RTRs arrived",
			 (unsigned long long)DELTA(&s, rtr_stored), N);
	}
	xt_sync(sock); /* every RTR is here: the receiver stops progressing */
	for (int k = 0; k < N; k++) {
		ssize_t rc;
		while ((rc = fi_tsend(s.x.ep, b + (size_t)k * BIG, BIG, NULL, s.peer, 1000 + k,
				      NULL)) == -FI_EAGAIN) {
			fi_cq_read(s.x.txcq, NULL, 0);
			XT_CHECK(xt_now_s() < until, "send %d refused (EAGAIN) while the receiver sleeps", k);
		}
		XT_RC(rc);
	}
	xt_sync(sock); /* all N started: the receiver takes our packets from now on */
	for (int k = 0; k < N; k++) {
		struct fi_cq_err_entry err = {0};
		XT_CHECK(xt_wait(s.x.txcq, NULL, &err, 30) == 1, "send %d of %d failed: %d (%s)", k, N,
			 err.err, fi_strerror(err.err));
	}
	XT_CHECK(DELTA(&s, ri_sent) == N, "RTRs served %llu of %d sends",
		 (unsigned long long)DELTA(&s, ri_sent), N);
	xt_sync_progress(sock, s.x.txcq);
	xt_close(&s.x);
	free(b);
	return 0;
}

int main(void)
{
	xt_init(120);
	const char *family = getenv("FI_EXANET_PROTOCOL");
	if (family && strcmp(family, "write")) {
		printf("SKIP: RTRs are the write family's (FI_EXANET_PROTOCOL=write)\n");
		return 0;
	}
	int sock;
	pid_t pid;
	xt_spawn(1, sender, &sock, &pid);
	struct side s;
	open_side(&s, sock, 0);
	warm_up(&s, 0);
	s.base = xt_counters(s.x.ep);
	unsigned char *b = calloc(N, BIG);
	XT_CHECK(b, "out of memory");
	struct fi_cq_tagged_entry e;
	for (int k = 0; k < N; k++)
		XT_RC(fi_trecv(s.x.ep, b + (size_t)k * BIG, BIG, NULL, s.peer, 1000 + k, 0,
			       b + (size_t)k * BIG));
	XT_CHECK(DELTA(&s, rtr_sent) == N, "%llu RTRs sent for %d receives",
		 (unsigned long long)DELTA(&s, rtr_sent), N);
	/* progress until every RTR is at the sender (over the network ours wait for its credits;
	 * it sends nothing else meanwhile), then none at all while it starts its N sends */
	xt_sync_progress(sock, s.x.rxcq);
	xt_sync(sock);
	for (int k = 0; k < N; k++) {
		struct fi_cq_err_entry err = {0};
		XT_CHECK(xt_wait(s.x.rxcq, &e, &err, 30) == 1, "receive failed: %d (%s)", err.err,
			 fi_strerror(err.err));
		const size_t at = (size_t)((unsigned char *)e.op_context - b) / BIG;
		XT_CHECK(at < N && e.tag == 1000 + at && e.len == BIG, "receive %zu: tag %#llx len %zu",
			 at, (unsigned long long)e.tag, e.len);
		XT_CHECK(xt_verify(b + at * BIG, BIG, 500 + (unsigned)at), "receive %zu: payload differs", at);
	}
	xt_sync_progress(sock, s.x.rxcq);
	xt_close(&s.x);
	xt_reap(1, &pid);
	free(b);
	xt_pass("receiver-initiated writes wait out the sender's back-pressure, none fails");
	return 0;
}
