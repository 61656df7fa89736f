/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * FI_RMA between two processes, in the memory-registration modes clients use: 0 (user keys,
 * offsets into the region), FI_MR_BASIC-style virtual addresses with provider keys, and MPICH's
 * set with FI_MR_ENDPOINT (bind, then enable). The parent initiates; a forked child is the target
 * and answers commands over a socket while it progresses its endpoint.
 *
 * Checked: fi_write/writev/writemsg/inject_write/writedata/inject_writedata and fi_read/readv/
 * readmsg from 1 byte to 16 MiB with the data verified at the target; remote CQ data and the
 * FI_RMA_EVENT counters at the target (endpoint and MR-bound); local counters, fi_cntr_wait with a
 * timeout; FI_DELIVERY_COMPLETE; and every refused access (unknown, revoked key, range outside the
 * registration, missing right, another PDID) as an FI_EACCES error with the target's memory
 * unchanged. Run with the default staged writes (reads answered by the target, events by packet)
 * and again with FI_EXANET_USE_CMA=1 (process_vm_writev and process_vm_readv).
 */
#include "xt.h"

#include <poll.h>
#include <stdlib.h>
#include <rdma/fi_rma.h>
#include <string.h>
#include <unistd.h>

#define BIG (16u << 20)
#define SMALL (64u << 10)

struct rma_ep {
	struct xt_ep x;
	struct fid_cntr *wcntr, *rcntr, *rwcntr, *rrcntr;
	uint64_t mr_mode;
};

struct region {
	struct fid_mr *mr;
	void *buf;
	size_t len;
};

/* What the target tells the initiator about its memory. */
struct target_desc {
	uint64_t rw_key, rw_base; /* FI_REMOTE_READ | FI_REMOTE_WRITE, BIG bytes */
	uint64_t ro_key, ro_base; /* FI_REMOTE_READ only */
	uint64_t wo_key, wo_base; /* FI_REMOTE_WRITE only */
	uint64_t revoked_key, revoked_base;
};

/* Commands the initiator sends; the target answers each with one int64. */
struct command {
	char op;        /* V verify now, W wait for, F fill, H checksums, E events, C wait on the
			   MR counter alone, Q quit */
	unsigned seed;
	uint64_t off, len;
};

struct events {
	uint64_t cq_entries, last_data, last_flags, last_len;
	uint64_t remote_writes, remote_reads, mr_writes;
};

static const uint64_t modes[] = {
	0,
	FI_MR_BASIC, /* API 1.4: virtual addresses and provider keys */
	FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED | FI_MR_ENDPOINT, /* MPICH's offer */
};
static uint64_t g_mode;

static struct fid_cntr *open_cntr(struct xt_ep *x, enum fi_wait_obj w)
{
	struct fi_cntr_attr a = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = w};
	struct fid_cntr *c;
	XT_RC(fi_cntr_open(x->domain, &a, &c, NULL));
	return c;
}

static void open_rma(struct rma_ep *r, uint64_t mr_mode)
{
	struct xt_ep *x = &r->x;
	memset(r, 0, sizeof *r);
	struct fi_info *h = xt_hints();
	h->caps = FI_TAGGED | FI_MSG | FI_RMA | FI_RMA_EVENT | FI_READ | FI_WRITE | FI_REMOTE_READ |
		  FI_REMOTE_WRITE;
	h->domain_attr->mr_mode = (int)mr_mode;
	/* MPICH asks for FI_MR_ENDPOINT and puts FI_DELIVERY_COMPLETE in the default op flags */
	if (mr_mode & FI_MR_ENDPOINT)
		h->tx_attr->op_flags = FI_COMPLETION | FI_DELIVERY_COMPLETE;
	xt_api_version = mr_mode == FI_MR_BASIC ? FI_VERSION(1, 4) : FI_VERSION(1, 17);
	xt_open_disabled(x, h, 0);
	fi_freeinfo(h);
	/* exanet imposes no registration restriction: an offer comes back as 0, and only the
	 * pre-1.5 FI_MR_BASIC is honoured as asked (fi_mr(3)) */
	const uint64_t got = (uint64_t)x->info->domain_attr->mr_mode;
	XT_CHECK(mr_mode == FI_MR_BASIC ? got == FI_MR_BASIC : got == 0, "mr_mode 0x%llx came back 0x%llx",
		 (unsigned long long)mr_mode, (unsigned long long)got);
	r->mr_mode = got == FI_MR_BASIC ? (FI_MR_VIRT_ADDR | FI_MR_PROV_KEY) : got;
	XT_CHECK((x->info->caps & (FI_RMA | FI_RMA_EVENT)) == (FI_RMA | FI_RMA_EVENT), "RMA caps");
	r->wcntr = open_cntr(x, FI_WAIT_UNSPEC);
	r->rcntr = open_cntr(x, FI_WAIT_FD);
	r->rwcntr = open_cntr(x, FI_WAIT_NONE);
	r->rrcntr = open_cntr(x, FI_WAIT_NONE);
	XT_RC(fi_ep_bind(x->ep, &r->wcntr->fid, FI_WRITE));
	XT_RC(fi_ep_bind(x->ep, &r->rcntr->fid, FI_READ));
	XT_RC(fi_ep_bind(x->ep, &r->rwcntr->fid, FI_REMOTE_WRITE));
	XT_RC(fi_ep_bind(x->ep, &r->rrcntr->fid, FI_REMOTE_READ));
	xt_enable(x);
}

static void close_rma(struct rma_ep *r)
{
	xt_close_ep(&r->x);
	XT_RC(fi_close(&r->wcntr->fid));
	XT_RC(fi_close(&r->rcntr->fid));
	XT_RC(fi_close(&r->rwcntr->fid));
	XT_RC(fi_close(&r->rrcntr->fid));
	xt_close(&r->x);
}

/* Registers len bytes; returns the remote address of byte 0 for this MR mode. */
static uint64_t reg(struct rma_ep *r, struct region *g, size_t len, uint64_t access, uint64_t key)
{
	g->len = len;
	g->buf = aligned_alloc(4096, len);
	XT_CHECK(g->buf, "out of memory");
	memset(g->buf, 0x5a, len);
	XT_RC(fi_mr_reg(r->x.domain, g->buf, len, access, 0, key, 0, &g->mr, NULL));
	if (r->mr_mode & FI_MR_ENDPOINT) {
		XT_RC(fi_mr_bind(g->mr, &r->x.ep->fid, 0));
		XT_RC(fi_mr_enable(g->mr));
	}
	return (r->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)g->buf : 0;
}

/* ---- target ---------------------------------------------------------------------------- */

static int target(int index, int sock)
{
	(void)index;
	struct rma_ep r;
	open_rma(&r, g_mode);
	struct region rw, ro, wo, gone;
	struct target_desc d;
	d.rw_base = reg(&r, &rw, BIG, FI_REMOTE_READ | FI_REMOTE_WRITE, 0x1000);
	d.ro_base = reg(&r, &ro, SMALL, FI_REMOTE_READ, 0x2000);
	d.wo_base = reg(&r, &wo, SMALL, FI_REMOTE_WRITE, 0x3000);
	d.revoked_base = reg(&r, &gone, SMALL, FI_REMOTE_READ | FI_REMOTE_WRITE, 0x4000);
	d.rw_key = fi_mr_key(rw.mr);
	d.ro_key = fi_mr_key(ro.mr);
	d.wo_key = fi_mr_key(wo.mr);
	d.revoked_key = fi_mr_key(gone.mr);
	XT_RC(fi_close(&gone.mr->fid)); /* revoked before anyone could use it */
	/* An MR-bound counter sees the remote writes into rw. */
	struct fid_cntr *mrcntr = open_cntr(&r.x, FI_WAIT_UNSPEC);
	XT_RC(fi_mr_bind(rw.mr, &mrcntr->fid, FI_REMOTE_WRITE));

	xt_exchange(&r.x, sock, 1, NULL);
	xt_send_all(sock, &d, sizeof d);

	struct events ev = {0};
	for (;;) {
		struct fi_cq_tagged_entry e;
		ssize_t n = fi_cq_read(r.x.rxcq, &e, 1);
		if (n == 1) {
			ev.cq_entries++;
			ev.last_data = e.data;
			ev.last_flags = e.flags;
			ev.last_len = e.len;
		}
		struct pollfd p = {.fd = sock, .events = POLLIN};
		if (poll(&p, 1, 0) != 1)
			continue;
		struct command c;
		xt_recv_all(sock, &c, sizeof c);
		int64_t answer = 0;
		unsigned char *at = (unsigned char *)rw.buf + c.off;
		switch (c.op) {
		case 'V':
			answer = xt_verify(at, c.len, c.seed);
			break;
		case 'W': /* the data must arrive while we progress (bounded by the alarm) */
			while (!(answer = xt_verify(at, c.len, c.seed)))
				fi_cq_read(r.x.rxcq, NULL, 0);
			break;
		case 'F':
			xt_fill(at, c.len, c.seed);
			answer = 1;
			break;
		case 'H':
			answer = (int64_t)(xt_checksum(rw.buf, SMALL) ^ xt_checksum(ro.buf, SMALL) * 3 ^
					   xt_checksum(wo.buf, SMALL) * 7 ^
					   xt_checksum((char *)rw.buf + BIG - SMALL, SMALL) * 11);
			break;
		case 'E':
			ev.remote_writes = fi_cntr_read(r.rwcntr);
			ev.remote_reads = fi_cntr_read(r.rrcntr);
			ev.mr_writes = fi_cntr_read(mrcntr);
			xt_send_all(sock, &ev, sizeof ev);
			continue;
		case 'C': /* only the MR-bound counter progresses the endpoint here */
			answer = fi_cntr_wait(mrcntr, c.len, 10000) == 0;
			break;
		case 'Q':
			answer = fi_close(&mrcntr->fid) == -FI_EBUSY ? 0 : -1; /* bound: stays open */
			XT_RC(fi_close(&rw.mr->fid));
			XT_RC(fi_close(&ro.mr->fid));
			XT_RC(fi_close(&wo.mr->fid));
			XT_RC(fi_close(&mrcntr->fid));
			close_rma(&r);
			xt_send_all(sock, &answer, sizeof answer);
			return answer == 0 ? 0 : 1;
		}
		xt_send_all(sock, &answer, sizeof answer);
	}
}

/* ---- initiator ------------------------------------------------------------------------- */

static int64_t ask(int sock, char op, unsigned seed, uint64_t off, uint64_t len)
{
	struct command c = {.op = op, .seed = seed, .off = off, .len = len};
	int64_t answer;
	xt_send_all(sock, &c, sizeof c);
	xt_recv_all(sock, &answer, sizeof answer);
	return answer;
}

static struct events ask_events(int sock)
{
	struct command c = {.op = 'E'};
	struct events ev;
	xt_send_all(sock, &c, sizeof c);
	xt_recv_all(sock, &ev, sizeof ev);
	return ev;
}

static void expect_ok(struct rma_ep *r, void *ctx, uint64_t kind)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err = {0};
	XT_CHECK(xt_wait(r->x.txcq, &e, &err, 20) == 1, "RMA failed: %d (%s)", err.err,
		 fi_strerror(err.err));
	XT_CHECK(e.op_context == ctx && (e.flags & (FI_RMA | kind)) == (FI_RMA | kind),
		 "completion flags 0x%llx", (unsigned long long)e.flags);
}

/* A post's result once it is not -FI_EAGAIN, which a post may return at any time (over the
 * network, the first use of a key waits for the owner's answer about it). */
#define POSTED(r, call)                                                    \
	({                                                                 \
		ssize_t posted_rc_;                                        \
		while ((posted_rc_ = (call)) == -FI_EAGAIN)                \
			(void)fi_cq_read((r)->x.txcq, NULL, 0);            \
		posted_rc_;                                                \
	})

static void expect_eacces(struct rma_ep *r, ssize_t rc, void *ctx, const char *what)
{
	if (rc == -FI_EACCES)
		return; /* refused at post: equally acceptable */
	XT_CHECK(rc == 0, "%s: post returned %zd", what, rc);
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err = {0};
	XT_CHECK(xt_wait(r->x.txcq, &e, &err, 20) == 0, "%s must fail", what);
	XT_CHECK(err.err == FI_EACCES && err.op_context == ctx, "%s: err %d (%s)", what, err.err,
		 fi_strerror(err.err));
}

static void run_mode(uint64_t mode)
{
	g_mode = mode;
	int sock;
	pid_t pid;
	xt_spawn(1, target, &sock, &pid);
	struct rma_ep r;
	open_rma(&r, mode);
	char target_name[64];
	fi_addr_t peer = xt_exchange(&r.x, sock, 0, target_name);
	struct target_desc d;
	xt_recv_all(sock, &d, sizeof d);
	unsigned char *src = malloc(BIG), *dst = malloc(BIG);
	XT_CHECK(src && dst, "out of memory");
	int ctx;
	uint64_t writes = 0, reads = 0;

	/* sizes across every threshold, at unaligned offsets */
	const size_t sizes[] = {1, 7, 64, 4095, 4096, 65537, 1u << 20, BIG - 4096};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		const size_t len = sizes[i], off = (i * 97) % 4096;
		xt_fill(src, len, (unsigned)(i + 1));
		if (i == 0) {
			/* The first RMA with a key, on an idle endpoint, is accepted at once: over the
			 * network the owner is asked about the key and the write waits for the answer
			 * itself (upstream fi_rdm_rma_event posts once and fails on -FI_EAGAIN). */
			ssize_t rc = fi_write(r.x.ep, src, len, NULL, peer, d.rw_base + off, d.rw_key, &ctx);
			XT_CHECK(rc == 0, "the first fi_write with a key returned %zd (%s)", rc,
				 fi_strerror((int)-rc));
		} else {
			XT_POST(r.x.txcq,
				fi_write(r.x.ep, src, len, NULL, peer, d.rw_base + off, d.rw_key, &ctx));
		}
		expect_ok(&r, &ctx, FI_WRITE);
		writes++;
		/* with FI_DELIVERY_COMPLETE by default the data must be there without target progress */
		const char check = (mode & FI_MR_ENDPOINT) ? 'V' : 'W';
		XT_CHECK(ask(sock, check, (unsigned)(i + 1), off, len) == 1, "write of %zu bytes", len);
		XT_CHECK(ask(sock, 'F', (unsigned)(i + 100), off, len) == 1, "fill");
		memset(dst, 0, len);
		XT_POST(r.x.txcq, fi_read(r.x.ep, dst, len, NULL, peer, d.rw_base + off, d.rw_key, &ctx));
		expect_ok(&r, &ctx, FI_READ);
		reads++;
		XT_CHECK(xt_verify(dst, len, (unsigned)(i + 100)), "read of %zu bytes", len);
	}
	XT_CHECK(fi_cntr_wait(r.rcntr, reads, 1000) == 0, "fi_cntr_wait on an FI_WAIT_FD counter");
	XT_CHECK(fi_cntr_read(r.wcntr) == writes && fi_cntr_read(r.rcntr) == reads,
		 "local counters %llu/%llu", (unsigned long long)fi_cntr_read(r.wcntr),
		 (unsigned long long)fi_cntr_read(r.rcntr));
	xt_pass("write and read, 1 B to 16 MiB, verified at the target; FI_WRITE/FI_READ counters");

	/* vectors: three local pieces into two remote ranges, and back */
	{
		xt_fill(src, 30000, 7);
		struct iovec iov[3] = {{src, 1000}, {src + 1000, 20000}, {src + 21000, 9000}};
		struct fi_rma_iov rma[2] = {{d.rw_base + 8192, 12000, d.rw_key},
					    {d.rw_base + 8192 + 12000, 18000, d.rw_key}};
		struct fi_msg_rma m = {.msg_iov = iov, .iov_count = 3, .addr = peer, .rma_iov = rma,
				       .rma_iov_count = 2, .context = &ctx};
		XT_POST(r.x.txcq, fi_writemsg(r.x.ep, &m, FI_COMPLETION | FI_DELIVERY_COMPLETE));
		expect_ok(&r, &ctx, FI_WRITE);
		writes++;
		/* delivery complete: visible without the target progressing first */
		XT_CHECK(ask(sock, 'V', 7, 8192, 30000) == 1, "FI_DELIVERY_COMPLETE writemsg");
		memset(dst, 0, 30000);
		struct iovec back[2] = {{dst, 17}, {dst + 17, 30000 - 17}};
		XT_POST(r.x.txcq, fi_readv(r.x.ep, back, NULL, 2, peer, d.rw_base + 8192, d.rw_key, &ctx));
		expect_ok(&r, &ctx, FI_READ);
		reads++;
		XT_CHECK(xt_verify(dst, 30000, 7), "readv");
		struct fi_msg_rma rm = {.msg_iov = back, .iov_count = 2, .addr = peer, .rma_iov = rma,
					.rma_iov_count = 2, .context = &ctx};
		memset(dst, 0, 30000);
		XT_POST(r.x.txcq, fi_readmsg(r.x.ep, &rm, FI_COMPLETION));
		expect_ok(&r, &ctx, FI_READ);
		reads++;
		XT_CHECK(xt_verify(dst, 30000, 7), "readmsg over two remote ranges");
		struct iovec wv[2] = {{src, 5000}, {src + 5000, 5000}};
		xt_fill(src, 10000, 8);
		XT_POST(r.x.txcq, fi_writev(r.x.ep, wv, NULL, 2, peer, d.rw_base + 100000, d.rw_key, &ctx));
		expect_ok(&r, &ctx, FI_WRITE);
		writes++;
		XT_CHECK(ask(sock, 'W', 8, 100000, 10000) == 1, "writev");
	}
	xt_pass("writev, writemsg over two remote ranges, readv, readmsg; FI_DELIVERY_COMPLETE");

	/* inject: the buffer is reusable at return; counters still count it */
	{
		xt_fill(src, 512, 9);
		XT_POST(r.x.txcq, fi_inject_write(r.x.ep, src, 512, peer, d.rw_base + 200000, d.rw_key));
		memset(src, 0, 512);
		writes++;
		XT_CHECK(fi_cntr_wait(r.wcntr, writes, 10000) == 0, "fi_cntr_wait after inject_write");
		XT_CHECK(ask(sock, 'W', 9, 200000, 512) == 1, "inject_write data");
		XT_CHECK(fi_cntr_wait(r.wcntr, writes + 1, 50) == -FI_ETIMEDOUT, "cntr_wait timeout");
	}
	xt_pass("inject_write; fi_cntr_wait and its timeout");

	/* remote completion: CQ data and FI_RMA_EVENT counters at the target */
	{
		xt_fill(src, 3000, 10);
		XT_POST(r.x.txcq, fi_writedata(r.x.ep, src, 3000, NULL, 0xfeedfacecafe0001ull, peer,
				   d.rw_base + 300000, d.rw_key, &ctx));
		expect_ok(&r, &ctx, FI_WRITE);
		writes++;
		XT_CHECK(ask(sock, 'W', 10, 300000, 3000) == 1, "writedata data");
		struct events ev;
		do
			ev = ask_events(sock);
		while (ev.cq_entries < 1);
		XT_CHECK(ev.last_data == 0xfeedfacecafe0001ull && ev.last_len == 3000 &&
			 (ev.last_flags & (FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA)) ==
				 (FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA),
			 "target CQ data 0x%llx len %llu flags 0x%llx",
			 (unsigned long long)ev.last_data, (unsigned long long)ev.last_len,
			 (unsigned long long)ev.last_flags);
		xt_fill(src, 8, 11);
		XT_POST(r.x.txcq, fi_inject_writedata(r.x.ep, src, 8, 42, peer, d.rw_base + 400000, d.rw_key));
		writes++;
		do
			ev = ask_events(sock);
		while (ev.cq_entries < 2);
		XT_CHECK(ev.last_data == 42 && ev.last_len == 8, "inject_writedata CQ data");
		do
			ev = ask_events(sock);
		while (ev.remote_writes < writes || ev.remote_reads < reads);
		XT_CHECK(ev.remote_writes == writes && ev.remote_reads == reads && ev.mr_writes == writes,
			 "target counters: writes %llu (mr %llu) of %llu, reads %llu of %llu",
			 (unsigned long long)ev.remote_writes, (unsigned long long)ev.mr_writes,
			 (unsigned long long)writes, (unsigned long long)ev.remote_reads,
			 (unsigned long long)reads);
		XT_CHECK(ev.cq_entries == 2, "only CQ-data writes make target completions");
		/* a target waiting on nothing but its MR counter still sees the next write */
		struct command c = {.op = 'C', .len = writes + 1};
		xt_send_all(sock, &c, sizeof c);
		xt_fill(src, 100000, 14);
		XT_POST(r.x.txcq, fi_write(r.x.ep, src, 100000, NULL, peer, d.rw_base + 500000, d.rw_key, &ctx));
		expect_ok(&r, &ctx, FI_WRITE);
		writes++;
		int64_t answer;
		xt_recv_all(sock, &answer, sizeof answer);
		XT_CHECK(answer == 1, "fi_cntr_wait on the MR counter");
	}
	xt_pass("writedata/inject_writedata: target CQ data; FI_REMOTE_WRITE/READ and MR counters");

	/* refused accesses: error completions, and not a byte changes at the target */
	{
		const int64_t before = ask(sock, 'H', 0, 0, 0);
		const uint64_t werr = fi_cntr_readerr(r.wcntr);
		xt_fill(src, SMALL, 12);
		ssize_t rc;
		rc = POSTED(&r, fi_write(r.x.ep, src, 64, NULL, peer, d.rw_base, d.rw_key ^ 0x5555, &ctx));
		expect_eacces(&r, rc, &ctx, "unknown key");
		rc = POSTED(&r, fi_write(r.x.ep, src, 64, NULL, peer, d.rw_base, d.revoked_key, &ctx));
		expect_eacces(&r, rc, &ctx, "revoked key");
		rc = POSTED(&r, fi_write(r.x.ep, src, 64, NULL, peer, d.revoked_base, d.revoked_key, &ctx));
		expect_eacces(&r, rc, &ctx, "revoked key at its own base");
		rc = POSTED(&r, fi_write(r.x.ep, src, 64, NULL, peer, d.rw_base + BIG - 32, d.rw_key, &ctx));
		expect_eacces(&r, rc, &ctx, "range past the end");
		rc = POSTED(&r, fi_write(r.x.ep, src, 64, NULL, peer, d.rw_base - 16, d.rw_key, &ctx));
		expect_eacces(&r, rc, &ctx, "range before the start");
		rc = POSTED(&r, fi_write(r.x.ep, src, 64, NULL, peer, d.ro_base, d.ro_key, &ctx));
		expect_eacces(&r, rc, &ctx, "write into a read-only region");
		rc = POSTED(&r, fi_inject_write(r.x.ep, src, 64, peer, d.ro_base, d.ro_key));
		expect_eacces(&r, rc, NULL, "inject_write into a read-only region");
		rc = POSTED(&r, fi_writedata(r.x.ep, src, 64, NULL, 1, peer, d.ro_base, d.ro_key, &ctx));
		expect_eacces(&r, rc, &ctx, "writedata into a read-only region");
		/* a vector where only the second range is bad moves nothing */
		struct iovec iov[1] = {{src, 128}};
		struct fi_rma_iov rma[2] = {{d.rw_base + 4096, 64, d.rw_key}, {d.ro_base, 64, d.ro_key}};
		struct fi_msg_rma m = {.msg_iov = iov, .iov_count = 1, .addr = peer, .rma_iov = rma,
				       .rma_iov_count = 2, .context = &ctx};
		rc = POSTED(&r, fi_writemsg(r.x.ep, &m, FI_COMPLETION));
		expect_eacces(&r, rc, &ctx, "writemsg with one bad range");
		memset(dst, 0x77, 64);
		rc = POSTED(&r, fi_read(r.x.ep, dst, 64, NULL, peer, d.wo_base, d.wo_key, &ctx));
		expect_eacces(&r, rc, &ctx, "read from a write-only region");
		rc = POSTED(&r, fi_read(r.x.ep, dst, 64, NULL, peer, d.rw_base, 0xdeadbeef, &ctx));
		expect_eacces(&r, rc, &ctx, "read with an unknown key");
		for (int i = 0; i < 64; i++)
			XT_CHECK(dst[i] == 0x77, "a refused read wrote into the local buffer");
		XT_CHECK(fi_cntr_readerr(r.wcntr) == werr + 9, "write error count %llu",
			 (unsigned long long)(fi_cntr_readerr(r.wcntr) - werr));
		XT_CHECK(ask(sock, 'H', 0, 0, 0) == before, "a refused access changed target memory");
		/* the checksum does see a change: one good write into the checked range */
		rc = POSTED(&r, fi_write(r.x.ep, src, 64, NULL, peer, d.rw_base + 64, d.rw_key, &ctx));
		XT_CHECK(rc == 0, "control write");
		expect_ok(&r, &ctx, FI_WRITE);
		writes++;
		XT_CHECK(ask(sock, 'W', 12, 64, 64) == 1 && ask(sock, 'H', 0, 0, 0) != before,
			 "control write not seen");
	}
	xt_pass("unknown, revoked, out-of-range and unpermitted accesses: FI_EACCES");

	/* another job (PDID) cannot touch the memory at all, even with the right key */
	if (mode == 0) {
		const int64_t before = ask(sock, 'H', 0, 0, 0);
		setenv("FI_EXANET_PDID", "4242", 1);
		struct rma_ep foreign;
		open_rma(&foreign, mode);
		unsetenv("FI_EXANET_PDID");
		fi_addr_t t = FI_ADDR_NOTAVAIL;
		if (fi_av_insert(foreign.x.av, target_name, 1, &t, 0, NULL) == 1) {
			xt_fill(src, 64, 13);
			ssize_t rc = POSTED(&foreign, fi_write(foreign.x.ep, src, 64, NULL, t, d.rw_base, d.rw_key, &ctx));
			expect_eacces(&foreign, rc, &ctx, "write from another PDID");
			rc = POSTED(&foreign, fi_read(foreign.x.ep, dst, 64, NULL, t, d.rw_base, d.rw_key, &ctx));
			expect_eacces(&foreign, rc, &ctx, "read from another PDID");
		}
		close_rma(&foreign);
		XT_CHECK(ask(sock, 'H', 0, 0, 0) == before, "another PDID changed target memory");
		xt_pass("another PDID: refused with FI_EACCES, memory unchanged");
	}

	XT_CHECK(ask(sock, 'Q', 0, 0, 0) == 0, "a counter bound to a region must refuse to close");
	xt_reap(1, &pid);
	close_rma(&r);
	free(src);
	free(dst);
}

int main(void)
{
	xt_init(170);
	for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
		printf("mr_mode 0x%llx\n", (unsigned long long)modes[i]);
		run_mode(modes[i]);
	}
	return 0;
}
