/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Message semantics between two processes: truncation (FI_ETRUNC with olen, nothing written past
 * the buffer) on every protocol, inject (buffer reusable at once, no completion, size limit),
 * FI_SELECTIVE_COMPLETION, fi_cancel, FI_PEEK/FI_CLAIM/FI_DISCARD, FI_SOURCE with
 * fi_cq_readfrom, and bad input answered with an error code instead of a crash.
 */
#include "xt.h"

#include <string.h>

static const size_t trunc_sizes[] = {30, 8000, 1 << 20};

static ssize_t retry_tsend(struct xt_ep *x, const void *buf, size_t len, fi_addr_t to, uint64_t tag, void *ctx)
{
	ssize_t rc;
	while ((rc = fi_tsend(x->ep, buf, len, NULL, to, tag, ctx)) == -FI_EAGAIN)
		fi_cq_read(x->txcq, NULL, 0);
	return rc;
}

static int sender(int index, int sock)
{
	(void)index;
	struct xt_ep x;
	xt_open_default(&x, FI_SELECTIVE_COMPLETION);
	fi_addr_t peer = xt_exchange(&x, sock, 1, NULL);

	/* truncation: one message per protocol */
	for (unsigned i = 0; i < 3; i++) {
		unsigned char *buf = malloc(trunc_sizes[i]);
		xt_fill(buf, trunc_sizes[i], i);
		xt_sync(sock);
		struct fi_msg_tagged m = {.msg_iov = &(struct iovec){buf, trunc_sizes[i]}, .iov_count = 1,
					  .addr = peer, .tag = 50 + i};
		XT_POST(x.txcq, fi_tsendmsg(x.ep, &m, FI_COMPLETION));
		XT_CHECK(xt_wait(x.txcq, NULL, NULL, 30) == 1, "truncated send must still succeed");
		free(buf);
	}

	/* inject: the buffer is reused at once, and no completion ever appears */
	unsigned char small[64];
	xt_sync(sock);
	for (unsigned i = 0; i < 10; i++) {
		xt_fill(small, sizeof small, 100 + i);
		ssize_t rc;
		while ((rc = fi_tinject(x.ep, small, sizeof small, peer, 100 + i)) == -FI_EAGAIN)
			fi_cq_read(x.txcq, NULL, 0);
		XT_RC(rc);
		memset(small, 0xff, sizeof small); /* the provider must have copied it already */
	}
	size_t too_big = x.info->tx_attr->inject_size + 1;
	unsigned char *big = calloc(1, too_big);
	XT_CHECK(fi_tinject(x.ep, big, too_big, peer, 1) < 0, "inject above inject_size accepted");
	free(big);
	XT_CHECK(xt_drain(x.txcq) == 0, "an inject produced a completion");
	xt_pass("inject copies at once, never completes, refuses oversize");

	/* selective completion: flags 0 gives no entry, FI_COMPLETION gives one */
	xt_sync(sock);
	int ctx_quiet, ctx_loud;
	struct fi_msg_tagged quiet = {.msg_iov = &(struct iovec){small, 8}, .iov_count = 1, .addr = peer,
				      .tag = 200, .context = &ctx_quiet};
	struct fi_msg_tagged loud = quiet;
	loud.tag = 201;
	loud.context = &ctx_loud;
	XT_POST(x.txcq, fi_tsendmsg(x.ep, &quiet, 0));
	XT_POST(x.txcq, fi_tsendmsg(x.ep, &loud, FI_COMPLETION));
	struct fi_cq_tagged_entry e;
	XT_CHECK(xt_wait(x.txcq, &e, NULL, 30) == 1 && e.op_context == &ctx_loud, "selective send");
	XT_CHECK(xt_drain(x.txcq) == 0, "a send without FI_COMPLETION produced an entry");
	xt_pass("FI_SELECTIVE_COMPLETION on sends");

	/* peek / claim / discard targets, cancel target */
	xt_sync(sock);
	static unsigned char rndv[100000];
	xt_fill(rndv, sizeof rndv, 9);
	XT_RC(retry_tsend(&x, small, 16, peer, 300, NULL));
	XT_RC(retry_tsend(&x, rndv, sizeof rndv, peer, 301, NULL));
	XT_RC(retry_tsend(&x, rndv, sizeof rndv, peer, 302, NULL));
	xt_sync_progress(sock, x.txcq); /* receiver peeks, claims, discards: we progress */

	/* bad input */
	XT_CHECK(fi_tsend(x.ep, NULL, 10, NULL, peer, 1, NULL) == -FI_EINVAL, "NULL buffer with a length");
	XT_CHECK(fi_tsend(x.ep, small, 8, NULL, 12345, 1, NULL) < 0, "invalid fi_addr accepted");
	XT_CHECK(fi_tsend(x.ep, small, 8, NULL, FI_ADDR_UNSPEC, 1, NULL) < 0, "FI_ADDR_UNSPEC destination accepted");
	struct fi_msg_tagged bad = {.msg_iov = &(struct iovec){small, 8}, .iov_count = 1, .addr = peer, .tag = 1};
	XT_CHECK(fi_tsendmsg(x.ep, &bad, 1ULL << 62) < 0, "unknown flag accepted");
	struct iovec many[9];
	for (int i = 0; i < 9; i++)
		many[i] = (struct iovec){small, 1};
	XT_CHECK(fi_tsendv(x.ep, many, NULL, 9, peer, 1, NULL) < 0, "more iovecs than iov_limit accepted");
	XT_CHECK(xt_drain(x.txcq) == 0, "a refused send produced a completion");
	xt_pass("bad input refused with error codes");
	xt_sync(sock);
	xt_close(&x);
	return 0;
}

int main(void)
{
	xt_init(120);
	int sock;
	pid_t pid;
	xt_spawn(1, sender, &sock, &pid);
	struct xt_ep x;
	struct fi_info *h = xt_hints();
	h->caps |= FI_SOURCE;
	xt_open(&x, h, FI_SELECTIVE_COMPLETION);
	fi_freeinfo(h);
	fi_addr_t peer = xt_exchange(&x, sock, 0, NULL);

	for (unsigned i = 0; i < 3; i++) {
		size_t cap = trunc_sizes[i] / 2;
		unsigned char *buf = malloc(cap + 64);
		memset(buf, 0x5a, cap + 64);
		int ctx;
		struct fi_msg_tagged m = {.msg_iov = &(struct iovec){buf, cap}, .iov_count = 1,
					  .addr = peer, .tag = 50 + i, .context = &ctx};
		XT_RC(fi_trecvmsg(x.ep, &m, FI_COMPLETION));
		xt_sync(sock);
		struct fi_cq_err_entry err = {0};
		XT_CHECK(xt_wait(x.rxcq, NULL, &err, 30) == 0, "truncation must be an error completion");
		XT_CHECK(err.err == FI_ETRUNC, "err %d, want FI_ETRUNC", err.err);
		XT_CHECK(err.op_context == &ctx, "error context");
		XT_CHECK(err.len == cap && err.olen == trunc_sizes[i] - cap, "len %zu olen %zu", err.len, err.olen);
		XT_CHECK(err.tag == 50 + i, "error tag");
		XT_CHECK(xt_verify(buf, cap, i), "the part that fits");
		for (size_t k = cap; k < cap + 64; k++)
			XT_CHECK(buf[k] == 0x5a, "written past the buffer");
		free(buf);
	}
	xt_pass("truncation on eager, medium and rendezvous");

	xt_sync(sock);
	for (unsigned i = 0; i < 10; i++) {
		unsigned char got[64];
		struct fi_msg_tagged m = {.msg_iov = &(struct iovec){got, sizeof got}, .iov_count = 1,
					  .addr = peer, .tag = 100 + i};
		XT_RC(fi_trecvmsg(x.ep, &m, FI_COMPLETION));
		struct fi_cq_tagged_entry e;
		XT_CHECK(xt_wait(x.rxcq, &e, NULL, 30) == 1, "inject receive");
		XT_CHECK(xt_verify(got, sizeof got, 100 + i), "inject payload %u", i);
	}

	/* selective completion on receives, and FI_SOURCE through fi_cq_readfrom */
	xt_sync(sock);
	unsigned char a[8], b[8];
	int ctx_quiet, ctx_loud;
	struct fi_msg_tagged quiet = {.msg_iov = &(struct iovec){a, 8}, .iov_count = 1,
				      .addr = FI_ADDR_UNSPEC, .tag = 200, .context = &ctx_quiet};
	struct fi_msg_tagged loud = {.msg_iov = &(struct iovec){b, 8}, .iov_count = 1,
				     .addr = FI_ADDR_UNSPEC, .tag = 201, .context = &ctx_loud};
	XT_RC(fi_trecvmsg(x.ep, &quiet, 0));
	XT_RC(fi_trecvmsg(x.ep, &loud, FI_COMPLETION));
	struct fi_cq_tagged_entry e;
	fi_addr_t src = FI_ADDR_NOTAVAIL;
	ssize_t r;
	while ((r = fi_cq_readfrom(x.rxcq, &e, 1, &src)) == -FI_EAGAIN)
		;
	XT_CHECK(r == 1 && e.op_context == &ctx_loud, "selective receive");
	XT_CHECK(src == peer, "FI_SOURCE gave %llu, want %llu", (unsigned long long)src, (unsigned long long)peer);
	XT_CHECK(xt_drain(x.rxcq) == 0, "a receive without FI_COMPLETION produced an entry");
	xt_pass("FI_SELECTIVE_COMPLETION on receives; FI_SOURCE with fi_cq_readfrom");

	/* peek: nothing yet for tag 999 */
	struct fi_context pctx;
	struct fi_msg_tagged probe = {.addr = peer, .tag = 999, .context = &pctx};
	XT_RC(fi_trecvmsg(x.ep, &probe, FI_PEEK | FI_COMPLETION));
	struct fi_cq_err_entry err = {0};
	XT_CHECK(xt_wait(x.rxcq, NULL, &err, 10) == 0 && err.err == FI_ENOMSG, "peek of nothing: FI_ENOMSG");
	XT_CHECK(err.op_context == &pctx, "peek error context");
	xt_sync(sock); /* the sender sends tags 300 (16 B), 301 and 302 (100000 B) */
	for (int found = 0; !found;) {
		probe.tag = 301;
		XT_RC(fi_trecvmsg(x.ep, &probe, FI_PEEK | FI_CLAIM | FI_COMPLETION));
		found = xt_wait(x.rxcq, &e, &err, 10);
		XT_CHECK(found || err.err == FI_ENOMSG, "peek error %d", err.err);
	}
	XT_CHECK(e.len == 100000 && e.tag == 301, "peek reports len %zu tag %llu", e.len, (unsigned long long)e.tag);
	static unsigned char claimed[100000];
	struct fi_msg_tagged take = {.msg_iov = &(struct iovec){claimed, sizeof claimed}, .iov_count = 1,
				     .addr = peer, .tag = 301, .context = &pctx};
	XT_RC(fi_trecvmsg(x.ep, &take, FI_CLAIM | FI_COMPLETION));
	XT_CHECK(xt_wait(x.rxcq, &e, NULL, 30) == 1 && e.len == sizeof claimed, "claimed receive");
	XT_CHECK(xt_verify(claimed, sizeof claimed, 9), "claimed payload");
	probe.tag = 302;
	for (int found = 0; !found;) {
		XT_RC(fi_trecvmsg(x.ep, &probe, FI_PEEK | FI_DISCARD | FI_COMPLETION));
		found = xt_wait(x.rxcq, &e, &err, 10);
	}
	probe.tag = 302;
	XT_RC(fi_trecvmsg(x.ep, &probe, FI_PEEK | FI_COMPLETION));
	XT_CHECK(xt_wait(x.rxcq, &e, &err, 10) == 0 && err.err == FI_ENOMSG, "a discarded message is gone");
	xt_sync_progress(sock, x.rxcq); /* the discarded rendezvous send completed at the sender */
	xt_pass("FI_PEEK, FI_CLAIM, FI_DISCARD");

	/* cancel: a posted receive for tag 300's twin that never comes */
	int cctx;
	unsigned char cbuf[16];
	XT_RC(fi_trecv(x.ep, cbuf, sizeof cbuf, NULL, peer, 777, 0, &cctx));
	XT_RC(fi_cancel(&x.ep->fid, &cctx));
	XT_CHECK(xt_wait(x.rxcq, NULL, &err, 10) == 0, "cancel gives an error completion");
	XT_CHECK(err.err == FI_ECANCELED && err.op_context == &cctx && (err.flags & FI_RECV), "cancel entry");
	XT_CHECK(xt_drain(x.rxcq) == 0, "exactly one entry for a cancel");
	/* tag 300 is still there for an ordinary receive */
	XT_RC(fi_trecvmsg(x.ep, &(struct fi_msg_tagged){.msg_iov = &(struct iovec){cbuf, 16}, .iov_count = 1,
							 .addr = peer, .tag = 300}, FI_COMPLETION));
	XT_CHECK(xt_wait(x.rxcq, &e, NULL, 10) == 1 && e.tag == 300, "message after a cancel");
	xt_pass("fi_cancel");

	xt_sync_progress(sock, x.rxcq); /* sender checks bad input */
	xt_close(&x);
	xt_reap(1, &pid);
	return 0;
}
