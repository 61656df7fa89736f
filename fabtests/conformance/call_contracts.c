/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What each data-path call family promises about its arguments and its completion, checked call
 * by call on one endpoint that talks to itself (fi_msg(3), fi_tagged(3), fi_rma(3)):
 *
 *   - bad iovec arrays are refused with a clear code and post nothing: more entries than the
 *     granted iov_limit (rma_iov_limit for remote ranges), a NULL base with a length, lengths
 *     whose sum wraps size_t (-FI_EINVAL), a total above max_msg_size (-FI_EMSGSIZE), an RMA
 *     whose local and remote lengths differ (-FI_EINVAL);
 *   - FI_INJECT among the flags of fi_sendmsg, fi_tsendmsg and fi_writemsg still writes a
 *     completion (the flag only returns the buffer at once); fi_inject, fi_tinject,
 *     fi_injectdata, fi_tinjectdata, fi_inject_write and fi_inject_writedata never do;
 *   - fi_mr_reg(NULL, len > 0) is accepted: exanet does not ask for FI_MR_ALLOCATED (fi_mr(3)),
 *     so memory no page backs may be registered (what RMA into it does: rma_unbacked.c);
 *   - a receive in several iovecs that is shorter than the message ends in FI_ETRUNC with olen,
 *     holds the message's first bytes and writes nothing into the gaps between its buffers, for
 *     a buffered (medium) message and a rendezvous one.
 */
#include "xt.h"

#include <rdma/fi_rma.h>
#include <stdlib.h>
#include <string.h>

#define REGION 4096

static struct xt_ep x;
static fi_addr_t self;
static size_t limit, rma_limit;
static struct fid_mr *mr;
static unsigned char region[REGION];
static uint64_t rkey;

static void nothing_pending(const char *what)
{
	XT_CHECK(xt_drain(x.txcq) == 0, "%s: a completion for a refused call", what);
	XT_CHECK(xt_drain(x.rxcq) == 0, "%s: a receive completion for a refused call", what);
}

/* Each way of handing a message call a bad iovec array, with the code it must give. */
struct bad_iov {
	const char *what;
	size_t count;
	int want;
};

static void fill_bad(struct iovec *iov, const struct bad_iov *b, unsigned char *buf)
{
	for (size_t i = 0; i < b->count; i++)
		iov[i] = (struct iovec){buf, 1};
	if (!strcmp(b->what, "NULL base with a length")) {
		iov[b->count - 1].iov_base = NULL;
	} else if (!strcmp(b->what, "a sum that wraps size_t")) {
		iov[0].iov_len = SIZE_MAX / 2 + 1;
		iov[1].iov_len = SIZE_MAX / 2 + 1;
	} else if (!strcmp(b->what, "a total above max_msg_size")) {
		for (size_t i = 0; i < b->count; i++)
			iov[i].iov_len = x.info->ep_attr->max_msg_size / 2 + 1;
	}
}

static void message_calls(void)
{
	static unsigned char buf[64];
	struct iovec iov[64];
	const struct bad_iov cases[] = {
		{"more entries than iov_limit", limit + 1, -FI_EINVAL},
		{"NULL base with a length", 2, -FI_EINVAL},
		{"a sum that wraps size_t", 2, -FI_EINVAL},
		{"a total above max_msg_size", 2, -FI_EMSGSIZE},
	};
	int ctx;
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		const struct bad_iov *b = &cases[c];
		fill_bad(iov, b, buf);
		struct fi_msg m = {.msg_iov = iov, .iov_count = b->count, .addr = self, .context = &ctx};
		struct fi_msg_tagged t = {.msg_iov = iov, .iov_count = b->count, .addr = self, .tag = 1, .context = &ctx};
		ssize_t rc;
		XT_CHECK((rc = fi_sendv(x.ep, iov, NULL, b->count, self, &ctx)) == b->want, "fi_sendv, %s: %zd", b->what, rc);
		XT_CHECK((rc = fi_sendmsg(x.ep, &m, 0)) == b->want, "fi_sendmsg, %s: %zd", b->what, rc);
		XT_CHECK((rc = fi_tsendv(x.ep, iov, NULL, b->count, self, 1, &ctx)) == b->want, "fi_tsendv, %s: %zd", b->what, rc);
		XT_CHECK((rc = fi_tsendmsg(x.ep, &t, 0)) == b->want, "fi_tsendmsg, %s: %zd", b->what, rc);
		/* a receive has no size limit of its own: a capacity above max_msg_size is fine */
		const int rwant = b->want == -FI_EMSGSIZE ? 1 : b->want;
		if (rwant != 1) {
			XT_CHECK((rc = fi_recvv(x.ep, iov, NULL, b->count, self, &ctx)) == rwant, "fi_recvv, %s: %zd", b->what, rc);
			XT_CHECK((rc = fi_recvmsg(x.ep, &m, 0)) == rwant, "fi_recvmsg, %s: %zd", b->what, rc);
			XT_CHECK((rc = fi_trecvv(x.ep, iov, NULL, b->count, self, 1, 0, &ctx)) == rwant, "fi_trecvv, %s: %zd", b->what, rc);
			XT_CHECK((rc = fi_trecvmsg(x.ep, &t, 0)) == rwant, "fi_trecvmsg, %s: %zd", b->what, rc);
		}
		nothing_pending(b->what);
	}
	xt_pass("message calls refuse bad iovec arrays and post nothing");
}

static void rma_calls(void)
{
	static unsigned char buf[64];
	struct iovec iov[64];
	struct fi_rma_iov riov[64];
	int ctx;
	const struct bad_iov cases[] = {
		{"more entries than iov_limit", limit + 1, -FI_EINVAL},
		{"NULL base with a length", 2, -FI_EINVAL},
		{"a sum that wraps size_t", 2, -FI_EINVAL},
		{"a total above max_msg_size", 2, -FI_EMSGSIZE},
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		const struct bad_iov *b = &cases[c];
		fill_bad(iov, b, buf);
		riov[0] = (struct fi_rma_iov){0, 1, rkey};
		struct fi_msg_rma m = {.msg_iov = iov, .iov_count = b->count, .addr = self, .rma_iov = riov,
				       .rma_iov_count = 1, .context = &ctx};
		ssize_t rc;
		XT_CHECK((rc = fi_writev(x.ep, iov, NULL, b->count, self, 0, rkey, &ctx)) == b->want, "fi_writev, %s: %zd", b->what, rc);
		XT_CHECK((rc = fi_writemsg(x.ep, &m, 0)) == b->want, "fi_writemsg, %s: %zd", b->what, rc);
		XT_CHECK((rc = fi_readv(x.ep, iov, NULL, b->count, self, 0, rkey, &ctx)) == b->want, "fi_readv, %s: %zd", b->what, rc);
		XT_CHECK((rc = fi_readmsg(x.ep, &m, 0)) == b->want, "fi_readmsg, %s: %zd", b->what, rc);
		nothing_pending(b->what);
	}
	/* remote ranges: more than rma_iov_limit, and a total that differs from the local one */
	iov[0] = (struct iovec){buf, rma_limit + 1};
	for (size_t i = 0; i <= rma_limit; i++)
		riov[i] = (struct fi_rma_iov){i, 1, rkey};
	struct fi_msg_rma m = {.msg_iov = iov, .iov_count = 1, .addr = self, .rma_iov = riov,
			       .rma_iov_count = rma_limit + 1, .context = &ctx};
	XT_CHECK(fi_writemsg(x.ep, &m, 0) == -FI_EINVAL, "fi_writemsg with more ranges than rma_iov_limit");
	XT_CHECK(fi_readmsg(x.ep, &m, 0) == -FI_EINVAL, "fi_readmsg with more ranges than rma_iov_limit");
	m.rma_iov_count = 2;
	iov[0].iov_len = 3;
	XT_CHECK(fi_writemsg(x.ep, &m, 0) == -FI_EINVAL, "fi_writemsg, 3 local bytes for 2 remote");
	XT_CHECK(fi_readmsg(x.ep, &m, 0) == -FI_EINVAL, "fi_readmsg, 3 local bytes for 2 remote");
	nothing_pending("RMA ranges");
	/* FI_MR_ALLOCATED is not required, so unbacked memory may be registered: NULL with a length
	 * (the whole address space, as MPICH's dynamic windows), and NULL with none */
	XT_CHECK(!(x.info->domain_attr->mr_mode & FI_MR_ALLOCATED), "FI_MR_ALLOCATED required");
	struct fid_mr *unbacked = NULL;
	XT_RC(fi_mr_reg(x.domain, NULL, SIZE_MAX, FI_REMOTE_WRITE, 0, 76, 0, &unbacked, NULL));
	XT_RC(fi_close(&unbacked->fid));
	XT_RC(fi_mr_reg(x.domain, NULL, 0, FI_REMOTE_WRITE, 0, 77, 0, &unbacked, NULL));
	XT_RC(fi_close(&unbacked->fid));
	xt_pass("RMA calls refuse bad iovec and range arrays and post nothing; fi_mr_reg(NULL, len) accepted");
}

/* One completion for every call but the inject ones, whose buffer is reused at once. */
static void inject_completions(void)
{
	unsigned char src[32], dst[8][32];
	int ctx;
	struct iovec iov = {src, sizeof src};
	struct fi_context rctx[8];
	memset(dst, 0, sizeof dst);
	for (int i = 0; i < 4; i++)
		XT_RC(fi_recv(x.ep, dst[i], 32, NULL, self, &rctx[i]));
	for (int i = 4; i < 8; i++)
		XT_RC(fi_trecv(x.ep, dst[i], 32, NULL, self, 7, 0, &rctx[i]));
	struct fi_msg m = {.msg_iov = &iov, .iov_count = 1, .addr = self, .context = &ctx, .data = 5};
	struct fi_msg_tagged t = {.msg_iov = &iov, .iov_count = 1, .addr = self, .tag = 7, .context = &ctx, .data = 5};
	const struct {
		const char *what;
		int completes;
	} calls[] = {
		{"fi_sendmsg(FI_INJECT)", 1},
		{"fi_sendmsg(FI_INJECT | FI_REMOTE_CQ_DATA)", 1},
		{"fi_inject", 0},
		{"fi_injectdata", 0},
		{"fi_tsendmsg(FI_INJECT)", 1},
		{"fi_tsendmsg(FI_INJECT | FI_REMOTE_CQ_DATA)", 1},
		{"fi_tinject", 0},
		{"fi_tinjectdata", 0},
	};
	for (int i = 0; i < 8; i++) {
		memset(src, 0x40 + i, sizeof src);
		switch (i) {
		case 0: XT_POST(x.txcq, fi_sendmsg(x.ep, &m, FI_INJECT)); break;
		case 1: XT_POST(x.txcq, fi_sendmsg(x.ep, &m, FI_INJECT | FI_REMOTE_CQ_DATA)); break;
		case 2: XT_POST(x.txcq, fi_inject(x.ep, src, sizeof src, self)); break;
		case 3: XT_POST(x.txcq, fi_injectdata(x.ep, src, sizeof src, 5, self)); break;
		case 4: XT_POST(x.txcq, fi_tsendmsg(x.ep, &t, FI_INJECT)); break;
		case 5: XT_POST(x.txcq, fi_tsendmsg(x.ep, &t, FI_INJECT | FI_REMOTE_CQ_DATA)); break;
		case 6: XT_POST(x.txcq, fi_tinject(x.ep, src, sizeof src, self, 7)); break;
		case 7: XT_POST(x.txcq, fi_tinjectdata(x.ep, src, sizeof src, 5, self, 7)); break;
		}
		memset(src, 0, sizeof src); /* the buffer is the caller's again */
		const int got = xt_drain(x.txcq);
		XT_CHECK(got == calls[i].completes, "%s: %d completions, want %d", calls[i].what, got, calls[i].completes);
	}
	for (int n = 0; n < 8; n++) {
		struct fi_cq_tagged_entry e;
		XT_CHECK(xt_wait(x.rxcq, &e, NULL, 10) == 1, "receive %d", n);
		const int i = (int)((struct fi_context *)e.op_context - rctx);
		XT_CHECK(i >= 0 && i < 8 && e.len == 32, "receive context or length");
		for (int k = 0; k < 32; k++)
			XT_CHECK(dst[i][k] == 0x40 + i, "%s: the message changed with its buffer", calls[i].what);
	}
	/* RMA: fi_writemsg with FI_INJECT completes, fi_inject_write(data) does not */
	struct fi_rma_iov r = {0, sizeof src, rkey};
	struct fi_msg_rma w = {.msg_iov = &iov, .iov_count = 1, .addr = self, .rma_iov = &r, .rma_iov_count = 1,
			       .context = &ctx, .data = 9};
	XT_POST(x.txcq, fi_writemsg(x.ep, &w, FI_INJECT));
	XT_CHECK(xt_drain(x.txcq) == 1, "fi_writemsg(FI_INJECT): one completion");
	XT_POST(x.txcq, fi_writemsg(x.ep, &w, FI_INJECT | FI_REMOTE_CQ_DATA));
	XT_CHECK(xt_drain(x.txcq) == 1, "fi_writemsg(FI_INJECT | FI_REMOTE_CQ_DATA): one completion");
	XT_POST(x.txcq, fi_inject_write(x.ep, src, sizeof src, self, 0, rkey));
	XT_CHECK(xt_drain(x.txcq) == 0, "fi_inject_write: no completion");
	XT_POST(x.txcq, fi_inject_writedata(x.ep, src, sizeof src, 9, self, 0, rkey));
	XT_CHECK(xt_drain(x.txcq) == 0, "fi_inject_writedata: no completion");
	for (int n = 0; n < 2; n++) {
		struct fi_cq_tagged_entry e;
		XT_CHECK(xt_wait(x.rxcq, &e, NULL, 10) == 1 && (e.flags & FI_REMOTE_WRITE) && e.data == 9,
			 "remote CQ data of write %d", n);
	}
	nothing_pending("inject");
	xt_pass("FI_INJECT on *msg calls completes; the inject calls never do");
}

/* A receive in three buffers with 32-byte gaps, shorter than the message: FI_ETRUNC, olen, the
 * message's first bytes in the buffers, the gaps untouched. */
static void truncation_by_iovec(size_t len)
{
	const size_t a = len / 7, b = len / 3, c = len / 5, cap = a + b + c;
	unsigned char *msg = malloc(len), *rx = malloc(cap + 96);
	XT_CHECK(msg && rx, "out of memory");
	xt_fill(msg, len, 77);
	memset(rx, 0x5a, cap + 96);
	struct iovec iov[3] = {{rx, a}, {rx + a + 32, b}, {rx + a + b + 64, c}};
	struct fi_context rctx, sctx;
	XT_RC(fi_trecvv(x.ep, iov, NULL, 3, self, 3, 0, &rctx));
	XT_POST(x.txcq, fi_tsend(x.ep, msg, len, NULL, self, 3, &sctx));
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err = {0};
	XT_CHECK(xt_wait(x.rxcq, &e, &err, 20) == 0 && err.err == FI_ETRUNC, "%zu bytes into %zu: want FI_ETRUNC, got %d",
		 len, cap, err.err);
	XT_CHECK(err.olen == len - cap && err.len == cap && err.op_context == &rctx, "olen %zu len %zu", err.olen, err.len);
	XT_CHECK(xt_wait(x.txcq, NULL, NULL, 20) == 1, "the truncated send completes");
	XT_CHECK(memcmp(rx, msg, a) == 0 && memcmp(rx + a + 32, msg + a, b) == 0 &&
		 memcmp(rx + a + b + 64, msg + a + b, c) == 0, "the first %zu bytes, in order", cap);
	for (int k = 0; k < 32; k++)
		XT_CHECK(rx[a + k] == 0x5a && rx[a + b + 32 + k] == 0x5a && rx[cap + 64 + k] == 0x5a,
			 "wrote into a gap or past the last buffer");
	free(msg);
	free(rx);
}

int main(void)
{
	xt_init(60);
	struct fi_info *h = xt_hints();
	h->caps |= FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	xt_open(&x, h, 0);
	fi_freeinfo(h);
	limit = x.info->tx_attr->iov_limit;
	rma_limit = x.info->tx_attr->rma_iov_limit;
	XT_CHECK(limit < 64 && rma_limit < 64, "iov limits %zu %zu", limit, rma_limit);
	self = xt_insert(&x, x.name);
	XT_RC(fi_mr_reg(x.domain, region, REGION, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL));
	rkey = fi_mr_key(mr);
	message_calls();
	rma_calls();
	inject_completions();
	truncation_by_iovec(6000);   /* buffered: eager and medium */
	truncation_by_iovec(300000); /* rendezvous, one CTS per buffer */
	xt_pass("a receive in several iovecs shorter than the message: FI_ETRUNC, guards intact");
	XT_RC(fi_close(&mr->fid));
	xt_close(&x);
	return 0;
}
