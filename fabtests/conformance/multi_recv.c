/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * FI_MULTI_RECV on FI_MSG: one posted buffer takes many messages back to back (eager, medium and
 * rendezvous ones), each with its own completion pointing into the buffer, until less than
 * FI_OPT_MIN_MULTI_RECV is left; the completion that releases the buffer, and only that one,
 * carries FI_MULTI_RECV. Messages that arrived before the buffer was posted fill it first.
 */
#include "xt.h"

#include <string.h>

#define BUF (64 * 1024)
#define MIN 4096
static const size_t sizes[] = {100, 3000, 20000, 8, 9000, 7000, 12000, 11000};
#define N (sizeof sizes / sizeof sizes[0])  /* 62,108 bytes: leaves 3,428 < MIN free in BUF */
/* Round 3, as libfabric's fi_multi_recv runs it: a stream of equal messages into a buffer
 * posted as two halves that each hold HALF_MSGS, each half reposted when released. Medium
 * messages without bounce-ring credit go by rendezvous while later ones are copied at once. */
#define SLEN 1024
#define HALF_MSGS 64
#define STREAM 1000

static int sender(int index, int sock)
{
	(void)index;
	struct xt_ep x;
	xt_open_default(&x, 0);
	fi_addr_t peer = xt_exchange(&x, sock, 1, NULL);
	static unsigned char bufs[2 * N][20000];
	for (int round = 0; round < 2; round++) {
		xt_sync_progress(sock, x.txcq);  /* round 0: buffer posted first; round 1: messages first */
		for (size_t i = 0; i < N; i++) {
			unsigned char *b = bufs[round * N + i];
			xt_fill(b, sizes[i], (unsigned)(round * 100 + i));
			ssize_t rc;
			while ((rc = fi_send(x.ep, b, sizes[i], NULL, peer, NULL)) == -FI_EAGAIN)
				fi_cq_read(x.txcq, NULL, 0);
			XT_RC(rc);
		}
		for (size_t i = 0; i < N; i++)
			XT_CHECK(xt_wait(x.txcq, NULL, NULL, 30) == 1, "send");
	}
	xt_sync_progress(sock, x.txcq);
	static unsigned char sbuf[STREAM][SLEN];
	size_t done = 0;
	for (size_t i = 0; i < STREAM; i++) {
		xt_fill(sbuf[i], SLEN, (unsigned)(1000 + i));
		ssize_t rc;
		while ((rc = fi_send(x.ep, sbuf[i], SLEN, NULL, peer, NULL)) == -FI_EAGAIN)
			done += fi_cq_read(x.txcq, NULL, 0) > 0;
		XT_RC(rc);
	}
	for (; done < STREAM; done++)
		XT_CHECK(xt_wait(x.txcq, NULL, NULL, 30) == 1, "stream send");
	xt_sync_progress(sock, x.txcq);
	xt_close(&x);
	return 0;
}

static void check_round(struct xt_ep *x, unsigned char *buf, int round, void *ctx)
{
	size_t seen = 0, released = 0;
	unsigned char *next = buf;
	unsigned char *start_of[N] = {0};
	while (seen < N) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		XT_CHECK(xt_wait(x->rxcq, &e, &err, 30) == 1, "multi-receive completion error %d", err.err);
		XT_CHECK(e.op_context == ctx, "context of a multi-receive completion");
		XT_CHECK((unsigned char *)e.buf >= buf && (unsigned char *)e.buf + e.len <= buf + BUF,
			 "completion buf outside the posted buffer");
		/* which message is it? lengths are distinct */
		size_t i = 0;
		while (i < N && sizes[i] != e.len)
			i++;
		XT_CHECK(i < N && !start_of[i], "unexpected length %zu", e.len);
		start_of[i] = e.buf;
		XT_CHECK(xt_verify(e.buf, e.len, (unsigned)(round * 100 + i)), "payload of message %zu", i);
		if (e.flags & FI_MULTI_RECV)
			released++;
		seen++;
		XT_CHECK(released == 0 || seen == N, "FI_MULTI_RECV before the last completion");
	}
	XT_CHECK(released == 1, "FI_MULTI_RECV must mark exactly the releasing completion");
	for (size_t i = 0; i < N; i++) {  /* packed back to back in send order */
		XT_CHECK(start_of[i] == next, "message %zu at offset %td, want %td", i, start_of[i] - buf, next - buf);
		next += sizes[i];
	}
}

int main(void)
{
	xt_init(60);
	int sock;
	pid_t pid;
	xt_spawn(1, sender, &sock, &pid);
	struct fi_info *h = xt_hints();
	h->caps |= FI_MULTI_RECV;
	struct xt_ep x;
	xt_open(&x, h, 0);
	fi_freeinfo(h);
	XT_CHECK(x.info->caps & FI_MULTI_RECV, "FI_MULTI_RECV not granted");
	fi_addr_t peer = xt_exchange(&x, sock, 0, NULL);
	(void)peer;
	size_t min = MIN, got = 0, len = sizeof got;
	XT_RC(fi_setopt(&x.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof min));
	XT_RC(fi_getopt(&x.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &got, &len));
	XT_CHECK(got == MIN, "FI_OPT_MIN_MULTI_RECV read back %zu", got);

	static unsigned char buf[BUF];
	struct fi_context ctx;
	struct iovec iov = {buf, BUF};
	struct fi_msg m = {.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = &ctx};
	XT_RC(fi_recvmsg(x.ep, &m, FI_MULTI_RECV | FI_COMPLETION));
	xt_sync_progress(sock, x.rxcq);
	check_round(&x, buf, 0, &ctx);
	xt_pass("multi-receive buffer posted first: packed, one FI_MULTI_RECV at release");

	xt_sync_progress(sock, x.rxcq);  /* round 1: let the messages arrive unexpected */
	for (int i = 0; i < 20000; i++)
		fi_cq_read(x.rxcq, NULL, 0);
	memset(buf, 0, sizeof buf);
	XT_RC(fi_recvmsg(x.ep, &m, FI_MULTI_RECV | FI_COMPLETION));
	check_round(&x, buf, 1, &ctx);
	xt_pass("messages that arrived first fill the buffer in order");

	/* Round 3: every message's completion, in send order; each half's FI_MULTI_RECV on its
	 * HALF_MSGS-th and before any completion in the other half. */
	static unsigned char halves[2][HALF_MSGS * SLEN];
	struct fi_context hctx[2];
	XT_RC(fi_setopt(&x.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &(size_t){SLEN}, sizeof(size_t)));
	for (int h = 0; h < 2; h++) {
		struct iovec hv = {halves[h], sizeof halves[h]};
		struct fi_msg hm = {.msg_iov = &hv, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = &hctx[h]};
		XT_RC(fi_recvmsg(x.ep, &hm, FI_MULTI_RECV));
	}
	xt_sync_progress(sock, x.rxcq);
	int cur = 0, in_half = 0;
	for (size_t i = 0; i < STREAM; i++) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		XT_CHECK(xt_wait(x.rxcq, &e, &err, 30) == 1, "stream completion error %d", err.err);
		XT_CHECK(e.op_context == &hctx[cur], "message %zu completed in half %d while half %d was filling",
			 i, e.op_context == &hctx[0] ? 0 : 1, cur);
		XT_CHECK((unsigned char *)e.buf == halves[cur] + (size_t)in_half * SLEN && e.len == SLEN,
			 "message %zu at offset %td of half %d, want %d", i, (unsigned char *)e.buf - halves[cur],
			 cur, in_half * SLEN);
		XT_CHECK(xt_verify(e.buf, SLEN, (unsigned)(1000 + i)), "payload of stream message %zu", i);
		in_half++;
		XT_CHECK(!(e.flags & FI_MULTI_RECV) == (in_half < HALF_MSGS),
			 "FI_MULTI_RECV on message %d of a half of %d", in_half, HALF_MSGS);
		if (e.flags & FI_MULTI_RECV) {
			struct iovec hv = {halves[cur], sizeof halves[cur]};
			struct fi_msg hm = {.msg_iov = &hv, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = &hctx[cur]};
			XT_RC(fi_recvmsg(x.ep, &hm, FI_MULTI_RECV));
			cur ^= 1;
			in_half = 0;
		}
	}
	xt_pass("a stream of equal messages into two reposted halves: completions in order, each half "
		"released on its last message");

	struct fi_msg_tagged t = {.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC};
	XT_CHECK(fi_trecvmsg(x.ep, &t, FI_MULTI_RECV) < 0, "FI_MULTI_RECV on a tagged receive");
	xt_sync_progress(sock, x.rxcq);
	xt_close(&x);
	xt_reap(1, &pid);
	return 0;
}
