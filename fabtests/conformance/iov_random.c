/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Differential randomized test of vectored messages and RMA, against a reference provider.
 *
 * The parent runs the same seeded cases twice, each time in a fresh pair of processes: once over
 * the reference provider (IOV_REFERENCE, default libfabric's shm) and once over exanet. Each run
 * checks itself (every received byte against what its sender meant, every byte around the
 * buffers against the guard pattern, the send buffers unchanged) and writes a transcript of what
 * the application saw: per message the completion's error, length, olen, flags, tag and remote
 * CQ data and a checksum of the bytes received; per RMA the target's memory and the initiator's.
 * The two transcripts must be identical.
 *
 * What is randomized is what a user could vary:
 *   - iovec layouts on both sides, chosen independently: counts 1 to the provider's iov_limit
 *     (rma_iov_limit for the remote side of RMA), even, position-weighted, reversed, random and
 *     1-byte splits, zero-length entries (some with a NULL base), every buffer at a random offset
 *     within a cache line and a random gap from the next;
 *   - sizes around every threshold of exanet and shm (eager, inject, medium, staging chunk,
 *     rendezvous) and random ones, up to 2 MiB;
 *   - receive capacities: exact, larger, and shorter than the message (truncation by iovec);
 *   - calls: fi_send/sendv/sendmsg/senddata/inject (and their tagged forms) with FI_INJECT,
 *     FI_REMOTE_CQ_DATA and FI_COMPLETION on the *msg calls; fi_recv/recvv/recvmsg;
 *     fi_write/writev/writemsg/writedata/inject_write, fi_read/readv/readmsg;
 *   - ordering: batches of 1 to 3 messages with their receives posted before the sends, after
 *     them (unexpected), or mixed; directed and any-source receives, tags with ignore bits.
 *
 * Under FI_EXANET_PROTOCOL=optimistic the generator keeps that variant's documented rules (every
 * receive names its source; a receive is long exactly when its message is, by
 * FI_EXANET_MEDIUM_MAX), and the reference run gets the same cases.
 *
 * Environment: IOV_SEED (first seed; default from the clock, printed either way), IOV_SEEDS
 * (seeds to run, default 20), IOV_CASES (cases per seed, default 12), IOV_SIZES (LO..HI, every
 * message and RMA size drawn from LO..HI), IOV_PART (msg, rma or all,
 * default all), IOV_REFERENCE (shm by default; "none" runs exanet alone), IOV_KEEP=1 keeps the
 * transcripts (printed paths).
 */
#include "xt.h"

#include <rdma/fi_rma.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXIOV 16
#define MAXBATCH 3
#define MAXLEN ((2u << 20) + 4096)
#define SLOT (MAXLEN + MAXIOV * 128 + 256) /* one message's share of an arena */
#define GUARD_SEND 0xc3
#define GUARD_RECV 0x5a
#define RMA_REGION (4u << 20)

static unsigned long long g_seed0;
static int g_seeds = 20, g_cases = 12, g_do_msg = 1, g_do_rma = 1;
static int g_optimistic;
static size_t g_trunc_max = SIZE_MAX; /* truncate only messages up to this long */
static int g_ignore_bits = 1;           /* receives with ignore bits */
static int g_rma_empty = 1;             /* RMA operations of 0 bytes */
static size_t INJECT_MAX = 4096; /* inject calls only at or below this: the smaller inject_size */
static size_t g_medium_max = 16384; /* the provider's default FI_EXANET_MEDIUM_MAX */
static const char *g_prov;    /* the provider of this run (set before the run's processes fork) */
static char g_dir[256];       /* where the transcripts go */

/* ---- deterministic randomness ------------------------------------------------------------ */

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}
static uint64_t rnd(uint64_t *s) { return mix(++*s * 0x2545f4914f6cdd1dull); }
static uint64_t below(uint64_t *s, uint64_t n) { return n ? rnd(s) % n : 0; }
static uint64_t stream(unsigned long long seed, int c, int k, int which)
{
	return mix(mix(mix(seed) ^ (uint64_t)c) ^ ((uint64_t)k << 8 | (uint64_t)which));
}

static unsigned char pattern(uint64_t salt, size_t i)
{
	return (unsigned char)(mix(salt + (i >> 3)) >> ((i & 7) * 8));
}
/* Bytes start .. start + len - 1 of pattern(salt) into p. A word of mix() per 8 bytes where the
 * byte order allows (the test's own time is mostly these fills and the checks against them). */
static void fill_pattern_at(unsigned char *p, size_t len, uint64_t salt, size_t start)
{
	size_t i = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	for (; i < len && ((start + i) & 7); i++)
		p[i] = pattern(salt, start + i);
	for (; i + 8 <= len; i += 8) {
		const uint64_t w = mix(salt + ((start + i) >> 3));
		memcpy(p + i, &w, sizeof w);
	}
#endif
	for (; i < len; i++)
		p[i] = pattern(salt, start + i);
}
static void fill_pattern(unsigned char *p, size_t len, uint64_t salt)
{
	fill_pattern_at(p, len, salt, 0);
}

/* Sizes on both sides of every threshold: eager (36 B), the packets of an eager train (36 + 48k B:
 * 84, FI_EXANET_EAGER_MAX's default, 132, ... 276, the largest), inject and shm's inline
 * limits, medium (16 KiB), exanet's staging chunk (64 KiB) and RMA inline limit, and large
 * rendezvous. IOV_SIZES=LO..HI draws every size from LO..HI instead: half of them next to the
 * thresholds inside that range, the rest uniformly. */
static size_t g_size_lo, g_size_hi; /* IOV_SIZES; hi 0: not set */
static const size_t edges[] = {0, 1, 2, 7, 8, 35, 36, 37, 63, 64, 65, 84, 85, 132, 133, 255, 256, 257,
			       276, 277, 1024, 4095, 4096,
			       4097, 8191, 8192, 8193, 16383, 16384, 16385, 65535, 65536, 65537, 131072, 262144, 1048576,
			       (2u << 20)};
#define NEDGES (sizeof edges / sizeof edges[0])

static size_t pick_size(uint64_t *s)
{
	size_t n;
	if (g_size_hi) {
		/* Half the draws next to a threshold inside the range, so a narrow range still
		 * lands on each edge (and one byte either side) often. */
		if (below(s, 2)) {
			const size_t e = edges[below(s, NEDGES)];
			const long d = (long)below(s, 7) - 3;
			n = (long)e + d < 0 ? 0 : (size_t)((long)e + d);
			if (n >= g_size_lo && n <= g_size_hi)
				return n;
		}
		return g_size_lo + below(s, g_size_hi - g_size_lo + 1);
	}
	switch (below(s, 6)) {
	case 0: n = below(s, 300); break;
	case 1: n = below(s, 20000); break;
	case 2: n = below(s, 300000); break;
	default: {
		const size_t e = edges[below(s, NEDGES)];
		const long d = (long)below(s, 7) - 3;
		n = (long)e + d < 0 ? 0 : (size_t)((long)e + d);
	}
	}
	if (n > (2u << 20) && below(s, 2))
		n = 300000 + below(s, 1000); /* keep 2 MiB messages rare: they cost time */
	return n > MAXLEN ? MAXLEN : n;
}

/* ---- iovec layouts ------------------------------------------------------------------------ */

struct layout {
	size_t count;
	size_t len[MAXIOV];
	size_t off[MAXIOV]; /* offset of entry i within the arena slot */
	int null_base[MAXIOV];
};

/* Splits total into a random number (1..limit) of entries in one of several shapes, and places
 * them in a slot at random offsets within a cache line, with random gaps. */
static void make_layout(uint64_t s, size_t total, size_t limit, struct layout *l)
{
	memset(l, 0, sizeof *l);
	if (limit > MAXIOV)
		limit = MAXIOV;
	/* limit 1: a contiguous call (fi_send, fi_write, ...), planned as such in every run */
	size_t n = 1 + below(&s, limit);
	l->count = n;
	size_t left = total;
	const int shape = (int)below(&s, 6);
	for (size_t i = 0; i < n; i++) {
		size_t take;
		const size_t rest = n - i;
		if (rest == 1) {
			take = left;
		} else {
			switch (shape) {
			case 0: take = left / rest; break;                                 /* even */
			case 1: take = left * (i + 1) / (rest * (i + 2)); break;           /* growing */
			case 2: take = left * (rest - 1) / (rest + 1); break;              /* shrinking */
			case 3: take = below(&s, 3) ? (left ? 1 : 0) : below(&s, left + 1); break; /* 1 B */
			case 4: take = below(&s, 3) ? 0 : below(&s, left + 1); break;      /* zeros */
			default: take = below(&s, left + 1); break;                        /* random */
			}
		}
		if (take > left)
			take = left;
		l->len[i] = take;
		left -= take;
	}
	size_t pos = below(&s, 64);
	for (size_t i = 0; i < n; i++) {
		l->off[i] = pos;
		l->null_base[i] = l->len[i] == 0 && below(&s, 2);
		pos += l->len[i] + below(&s, 64) + (below(&s, 4) == 0 ? 64 : 0);
	}
}

static size_t layout_extent(const struct layout *l)
{
	return l->count ? l->off[l->count - 1] + l->len[l->count - 1] + 64 : 64;
}

static void to_iov(const struct layout *l, unsigned char *slot, struct iovec *iov)
{
	for (size_t i = 0; i < l->count; i++) {
		iov[i].iov_base = l->null_base[i] ? NULL : slot + l->off[i];
		iov[i].iov_len = l->len[i];
	}
}

/* Writes len bytes of pattern(salt) through the layout into slot (the sender's data, or the
 * receiver's picture of what must have arrived). */
static void scatter_pattern(const struct layout *l, unsigned char *slot, size_t len, uint64_t salt)
{
	size_t done = 0;
	for (size_t i = 0; i < l->count && done < len; i++) {
		size_t n = l->len[i] < len - done ? l->len[i] : len - done;
		fill_pattern_at(slot + l->off[i], n, salt, done);
		done += n;
	}
}

static uint64_t gather_hash(const struct layout *l, const unsigned char *slot, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t done = 0;
	for (size_t i = 0; i < l->count && done < len; i++) {
		size_t n = l->len[i] < len - done ? l->len[i] : len - done;
		for (size_t j = 0; j < n; j++)
			h = (h ^ slot[l->off[i] + j]) * 0x100000001b3ull;
		done += n;
	}
	return h;
}

/* ---- the run's endpoint -------------------------------------------------------------------- */

struct run {
	struct xt_ep x;
	fi_addr_t peer;
	int sock;
	FILE *out;
	size_t iov_limit, rma_iov_limit;
	uint64_t mr_mode;
	unsigned char *arena, *shadow; /* MAXBATCH slots each */
	unsigned char *region;         /* the RMA target's registered memory */
	unsigned char *expect;         /* what the region must hold after a case */
	struct fid_mr *mr;
	uint64_t rkey, rbase;
};

static void open_run(struct run *r, int sock, int first)
{
	memset(r, 0, sizeof *r);
	/* exanet over its network backend needs the lower provider (tcp) that FI_PROVIDER would
	 * hide from it: select it by the hints instead. */
	const char *net = getenv("FI_EXANET_NETWORK");
	const int by_hints = !strcmp(g_prov, "exanet") && net && *net && strcmp(net, "off");
	if (by_hints)
		unsetenv("FI_PROVIDER");
	else
		setenv("FI_PROVIDER", g_prov, 1);
	struct fi_info *h = xt_hints();
	if (by_hints) {
		free(h->fabric_attr->prov_name);
		h->fabric_attr->prov_name = strdup("exanet");
	}
	h->caps |= FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
	xt_open_disabled(&r->x, h, 0);
	fi_freeinfo(h);
	r->iov_limit = r->x.info->tx_attr->iov_limit < r->x.info->rx_attr->iov_limit
			       ? r->x.info->tx_attr->iov_limit : r->x.info->rx_attr->iov_limit;
	r->rma_iov_limit = r->x.info->tx_attr->rma_iov_limit;
	r->mr_mode = r->x.info->domain_attr->mr_mode;
	XT_CHECK(r->iov_limit >= 1 && r->rma_iov_limit >= 1, "iov limits %zu %zu", r->iov_limit, r->rma_iov_limit);
	XT_CHECK(r->x.info->tx_attr->inject_size >= INJECT_MAX, "inject_size %zu", r->x.info->tx_attr->inject_size);
	XT_CHECK(!(r->mr_mode & FI_MR_LOCAL), "FI_MR_LOCAL was not offered");
	xt_enable(&r->x);
	r->sock = sock;
	r->peer = xt_exchange(&r->x, sock, first, NULL);
	r->arena = malloc((size_t)MAXBATCH * SLOT);
	r->shadow = malloc((size_t)MAXBATCH * SLOT);
	r->region = aligned_alloc(4096, RMA_REGION);
	r->expect = malloc(RMA_REGION);
	XT_CHECK(r->arena && r->shadow && r->region && r->expect, "malloc");
	XT_RC(fi_mr_reg(r->x.domain, r->region, RMA_REGION, FI_REMOTE_READ | FI_REMOTE_WRITE, 0,
			first ? 1 : 2, 0, &r->mr, NULL));
	if (r->mr_mode & FI_MR_ENDPOINT) {
		XT_RC(fi_mr_bind(r->mr, &r->x.ep->fid, 0));
		XT_RC(fi_mr_enable(r->mr));
	}
	uint64_t mine[2] = {fi_mr_key(r->mr), (r->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)r->region : 0};
	uint64_t theirs[2];
	xt_send_all(sock, mine, sizeof mine);
	xt_recv_all(sock, theirs, sizeof theirs);
	r->rkey = theirs[0];
	r->rbase = theirs[1];
}

static void close_run(struct run *r)
{
	xt_sync_progress(r->sock, r->x.rxcq);
	xt_close_ep(&r->x);
	XT_RC(fi_close(&r->mr->fid));
	xt_close(&r->x);
	free(r->arena);
	free(r->shadow);
	free(r->region);
	free(r->expect);
}

static void progress(struct run *r)
{
	fi_cq_read(r->x.txcq, NULL, 0);
	fi_cq_read(r->x.rxcq, NULL, 0);
	xt_idle(); /* called only while waiting */
}

/* Posts one call, progressing while the provider answers -FI_EAGAIN. */
#define POST(r, call) \
	do { ssize_t rc_; const time_t end_ = time(NULL) + 20; \
	     while ((rc_ = (call)) == -FI_EAGAIN) { \
		     XT_CHECK(time(NULL) < end_, "%s: -FI_EAGAIN for 20 s", #call); progress(r); } \
	     XT_CHECK(rc_ == 0, "%s = %zd (%s)", #call, rc_, fi_strerror((int)-rc_)); } while (0)

/* Waits for the completion of one of n contexts; returns its index, fills e or err. */
static int wait_ctx(struct run *r, struct fid_cq *cq, void *ctxs, size_t stride, int n,
		    struct fi_cq_tagged_entry *e, struct fi_cq_err_entry *err, int *ok)
{
	memset(err, 0, sizeof *err);
	*ok = xt_wait(cq, e, err, 60);
	void *c = *ok ? e->op_context : err->op_context;
	for (int i = 0; i < n; i++)
		if ((char *)ctxs + (size_t)i * stride == c)
			return i;
	xt_fail(__FILE__, __LINE__, "completion with unknown context %p (ok %d err %d)", c, *ok, err->err);
	(void)r;
}

/* ---- messages ------------------------------------------------------------------------------ */

enum send_call { S_PLAIN, S_V, S_MSG, S_DATA, S_INJECT, S_INJECTDATA };
enum recv_call { R_PLAIN, R_V, R_MSG };

struct message {
	int tagged, early, directed;
	size_t len, cap;
	uint64_t tag, ignore, rtag, data;
	enum send_call scall;
	uint64_t msg_flags; /* S_MSG: the flags of fi_(t)sendmsg */
	enum recv_call rcall;
	uint64_t salt;
};

struct batch {
	int n;
	struct message m[MAXBATCH];
};

static int is_long(size_t n) { return n > g_medium_max; }

/* The same plan in both processes and in both providers' runs: it depends on the seed alone. */
static void plan_batch(unsigned long long seed, int c, struct batch *b)
{
	uint64_t s = stream(seed, c, 0, 1);
	b->n = 1 + (int)below(&s, MAXBATCH);
	const int order = (int)below(&s, 3); /* 0 all early, 1 all late, 2 mixed (tagged only) */
	for (int k = 0; k < b->n; k++) {
		struct message *m = &b->m[k];
		memset(m, 0, sizeof *m);
		m->tagged = (int)below(&s, 3) != 0;
		m->len = pick_size(&s);
		const int shape = (int)below(&s, 8);
		if (shape < 5 || m->len == 0)
			m->cap = m->len;
		else if (shape < 7)
			m->cap = m->len + 1 + below(&s, m->len / 2 + 4096);
		else if (m->len <= g_trunc_max)
			m->cap = below(&s, m->len); /* truncation */
		else
			m->cap = m->len;
		if (g_optimistic && is_long(m->len) != is_long(m->cap))
			m->cap = m->len; /* the variant matches a message only with receives of its class */
		if (m->cap > MAXLEN)
			m->cap = MAXLEN;
		/* bits 8..15 tell the batch's messages apart; ignore bits only below them */
		m->tag = (rnd(&s) & ~0xff00ull) | ((uint64_t)k << 8);
		m->ignore = below(&s, 3) == 0 ? (rnd(&s) & 0xff) : 0;
		if (!g_ignore_bits)
			m->ignore = 0;
		m->rtag = m->tag ^ (rnd(&s) & m->ignore);
		m->directed = g_optimistic || below(&s, 2);
		m->early = order == 0 || (order == 2 && (!m->tagged || below(&s, 2)));
		m->data = rnd(&s);
		m->scall = (enum send_call)below(&s, 6);
		if ((m->scall == S_INJECT || m->scall == S_INJECTDATA) && m->len > INJECT_MAX)
			m->scall = S_MSG;
		m->msg_flags = 0;
		if (m->scall == S_MSG) {
			if (below(&s, 2))
				m->msg_flags |= FI_REMOTE_CQ_DATA;
			if (m->len <= INJECT_MAX && below(&s, 2))
				m->msg_flags |= FI_INJECT; /* still completes: only fi_inject does not */
			if (below(&s, 2))
				m->msg_flags |= FI_COMPLETION;
		}
		m->rcall = (enum recv_call)below(&s, 3);
		m->salt = stream(seed, c, k, 2);
	}
	if (order == 1)
		for (int k = 0; k < b->n; k++)
			b->m[k].early = 0;

}

static int has_data(const struct message *m)
{
	return m->scall == S_DATA || m->scall == S_INJECTDATA || (m->msg_flags & FI_REMOTE_CQ_DATA);
}
static int send_contiguous(const struct message *m)
{
	return m->scall != S_V && m->scall != S_MSG;
}
static int completes(const struct message *m)
{
	return m->scall != S_INJECT && m->scall != S_INJECTDATA;
}

static void post_send(struct run *r, const struct message *m, const struct layout *l,
		      unsigned char *slot, struct fi_context *ctx)
{
	struct iovec iov[MAXIOV];
	to_iov(l, slot, iov);
	const void *buf0 = iov[0].iov_base;
	size_t len0 = iov[0].iov_len;
	const enum send_call call = m->scall;
	struct fid_ep *ep = r->x.ep;
	if (m->tagged) {
		switch (call) {
		case S_PLAIN: POST(r, fi_tsend(ep, buf0, len0, NULL, r->peer, m->tag, ctx)); break;
		case S_V: POST(r, fi_tsendv(ep, iov, NULL, l->count, r->peer, m->tag, ctx)); break;
		case S_DATA: POST(r, fi_tsenddata(ep, buf0, len0, NULL, m->data, r->peer, m->tag, ctx)); break;
		case S_INJECT: POST(r, fi_tinject(ep, buf0, len0, r->peer, m->tag)); break;
		case S_INJECTDATA: POST(r, fi_tinjectdata(ep, buf0, len0, m->data, r->peer, m->tag)); break;
		case S_MSG: {
			struct fi_msg_tagged msg = {.msg_iov = iov, .iov_count = l->count, .addr = r->peer,
						    .tag = m->tag, .context = ctx, .data = m->data};
			POST(r, fi_tsendmsg(ep, &msg, m->msg_flags));
			break;
		}
		}
	} else {
		switch (call) {
		case S_PLAIN: POST(r, fi_send(ep, buf0, len0, NULL, r->peer, ctx)); break;
		case S_V: POST(r, fi_sendv(ep, iov, NULL, l->count, r->peer, ctx)); break;
		case S_DATA: POST(r, fi_senddata(ep, buf0, len0, NULL, m->data, r->peer, ctx)); break;
		case S_INJECT: POST(r, fi_inject(ep, buf0, len0, r->peer)); break;
		case S_INJECTDATA: POST(r, fi_injectdata(ep, buf0, len0, m->data, r->peer)); break;
		case S_MSG: {
			struct fi_msg msg = {.msg_iov = iov, .iov_count = l->count, .addr = r->peer,
					     .context = ctx, .data = m->data};
			POST(r, fi_sendmsg(ep, &msg, m->msg_flags));
			break;
		}
		}
	}
	if (m->scall == S_INJECT || m->scall == S_INJECTDATA || (m->msg_flags & FI_INJECT))
		memset(slot, 0xee, layout_extent(l)); /* the buffer is the caller's again */
}

static void post_recv(struct run *r, const struct message *m, const struct layout *l,
		      unsigned char *slot, struct fi_context *ctx)
{
	struct iovec iov[MAXIOV];
	to_iov(l, slot, iov);
	const fi_addr_t src = m->directed ? r->peer : FI_ADDR_UNSPEC;
	const enum recv_call call = m->rcall;
	struct fid_ep *ep = r->x.ep;
	if (m->tagged) {
		if (call == R_PLAIN)
			POST(r, fi_trecv(ep, iov[0].iov_base, iov[0].iov_len, NULL, src, m->rtag, m->ignore, ctx));
		else if (call == R_V)
			POST(r, fi_trecvv(ep, iov, NULL, l->count, src, m->rtag, m->ignore, ctx));
		else {
			struct fi_msg_tagged msg = {.msg_iov = iov, .iov_count = l->count, .addr = src,
						    .tag = m->rtag, .ignore = m->ignore, .context = ctx};
			POST(r, fi_trecvmsg(ep, &msg, FI_COMPLETION));
		}
	} else {
		if (call == R_PLAIN)
			POST(r, fi_recv(ep, iov[0].iov_base, iov[0].iov_len, NULL, src, ctx));
		else if (call == R_V)
			POST(r, fi_recvv(ep, iov, NULL, l->count, src, ctx));
		else {
			struct fi_msg msg = {.msg_iov = iov, .iov_count = l->count, .addr = src, .context = ctx};
			POST(r, fi_recvmsg(ep, &msg, FI_COMPLETION));
		}
	}
}

static int g_verbose;

static void msg_sender(struct run *r, unsigned long long seed, int c)
{
	struct batch b;
	plan_batch(seed, c, &b);
	for (int k = 0; k < b.n && g_verbose; k++)
		fprintf(stderr, "%s %llu.%d.%d %s len %zu cap %zu early %d directed %d scall %d flags 0x%llx rcall %d ignore 0x%llx\n",
			g_prov, seed, c, k, b.m[k].tagged ? "tagged" : "msg", b.m[k].len, b.m[k].cap, b.m[k].early,
			b.m[k].directed, b.m[k].scall, (unsigned long long)b.m[k].msg_flags, b.m[k].rcall,
			(unsigned long long)b.m[k].ignore);
	struct layout l[MAXBATCH];
	struct fi_context ctx[MAXBATCH];
	int want = 0;
	for (int k = 0; k < b.n; k++) {
		unsigned char *slot = r->arena + (size_t)k * SLOT;
		make_layout(stream(seed, c, k, 3), b.m[k].len, send_contiguous(&b.m[k]) ? 1 : r->iov_limit, &l[k]);
		const size_t ext = layout_extent(&l[k]);
		memset(slot, GUARD_SEND, ext);
		scatter_pattern(&l[k], slot, b.m[k].len, b.m[k].salt);
		memcpy(r->shadow + (size_t)k * SLOT, slot, ext);
		want += completes(&b.m[k]);
	}
	xt_sync_progress(r->sock, r->x.txcq); /* the early receives are posted */
	for (int k = 0; k < b.n; k++)
		post_send(r, &b.m[k], &l[k], r->arena + (size_t)k * SLOT, &ctx[k]);
	xt_sync_progress(r->sock, r->x.txcq); /* the late receives may go now */
	int done[MAXBATCH] = {0};
	uint64_t flags[MAXBATCH];
	for (int i = 0; i < want; i++) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		int ok;
		const int k = wait_ctx(r, r->x.txcq, ctx, sizeof ctx[0], b.n, &e, &err, &ok);
		XT_CHECK(ok, "seed %llu case %d msg %d: send failed: %s", seed, c, k, fi_strerror(err.err));
		XT_CHECK(completes(&b.m[k]) && !done[k], "seed %llu case %d msg %d: completion not asked for (flags 0x%llx len %zu)",
			 seed, c, k, (unsigned long long)e.flags, e.len);
		done[k] = 1;
		flags[k] = e.flags;
	}
	for (int k = 0; k < b.n; k++) /* in message order: completion order is the provider's */
		if (done[k])
			fprintf(r->out, "%llu.%d.%d send flags=0x%llx\n", seed, c, k, (unsigned long long)flags[k]);
	for (int k = 0; k < b.n; k++) {
		const int inj = b.m[k].scall == S_INJECT || b.m[k].scall == S_INJECTDATA || (b.m[k].msg_flags & FI_INJECT);
		if (!inj)
			XT_CHECK(memcmp(r->arena + (size_t)k * SLOT, r->shadow + (size_t)k * SLOT,
					layout_extent(&l[k])) == 0,
				 "seed %llu case %d msg %d: the provider wrote into a send buffer", seed, c, k);
	}
	xt_sync_progress(r->sock, r->x.txcq);
	struct fi_cq_tagged_entry extra;
	XT_CHECK(fi_cq_read(r->x.txcq, &extra, 1) == -FI_EAGAIN, "seed %llu case %d: a send completion too many",
		 seed, c);
}

static void msg_receiver(struct run *r, unsigned long long seed, int c)
{
	struct batch b;
	plan_batch(seed, c, &b);
	struct layout l[MAXBATCH];
	struct fi_context ctx[MAXBATCH];
	for (int k = 0; k < b.n; k++) {
		make_layout(stream(seed, c, k, 4), b.m[k].cap, b.m[k].rcall == R_PLAIN ? 1 : r->iov_limit, &l[k]);
		memset(r->arena + (size_t)k * SLOT, GUARD_RECV, layout_extent(&l[k]));
	}
	for (int k = 0; k < b.n; k++)
		if (b.m[k].early)
			post_recv(r, &b.m[k], &l[k], r->arena + (size_t)k * SLOT, &ctx[k]);
	xt_sync_progress(r->sock, r->x.rxcq);
	xt_sync_progress(r->sock, r->x.rxcq); /* the sends are posted */
	for (int i = 0; i < 200; i++)
		fi_cq_read(r->x.rxcq, NULL, 0); /* let them arrive unexpected */
	for (int k = 0; k < b.n; k++)
		if (!b.m[k].early)
			post_recv(r, &b.m[k], &l[k], r->arena + (size_t)k * SLOT, &ctx[k]);
	int done[MAXBATCH] = {0};
	char line[MAXBATCH][256];
	for (int i = 0; i < b.n; i++) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		int ok;
		const int k = wait_ctx(r, r->x.rxcq, ctx, sizeof ctx[0], b.n, &e, &err, &ok);
		const struct message *m = &b.m[k];
		XT_CHECK(!done[k], "seed %llu case %d msg %d: two completions", seed, c, k);
		done[k] = 1;
		const size_t got = m->len < m->cap ? m->len : m->cap;
		unsigned char *slot = r->arena + (size_t)k * SLOT;
		unsigned char *want = r->shadow + (size_t)k * SLOT;
		memset(want, GUARD_RECV, layout_extent(&l[k]));
		scatter_pattern(&l[k], want, got, m->salt);
		if (memcmp(slot, want, layout_extent(&l[k])) != 0) {
			size_t bad = 0;
			while (slot[bad] == want[bad])
				bad++;
			xt_fail(__FILE__, __LINE__,
				"seed %llu case %d msg %d (%s len %zu cap %zu, %zu send / %zu recv iovecs): "
				"byte %zu of the receive slot is 0x%02x, want 0x%02x",
				seed, c, k, m->tagged ? "tagged" : "msg", m->len, m->cap, (size_t)0, l[k].count, bad,
				slot[bad], want[bad]);
		}
		const uint64_t h = gather_hash(&l[k], slot, got);
		if (ok) {
			XT_CHECK(m->len <= m->cap, "seed %llu case %d msg %d: %zu bytes into %zu without FI_ETRUNC",
				 seed, c, k, m->len, m->cap);
			snprintf(line[k], sizeof line[k], "%llu.%d.%d recv ok len=%zu flags=0x%llx tag=0x%llx data=0x%llx hash=%016llx\n",
				seed, c, k, e.len, (unsigned long long)e.flags,
				(unsigned long long)(m->tagged ? e.tag : 0),
				(unsigned long long)((e.flags & FI_REMOTE_CQ_DATA) ? e.data : 0), (unsigned long long)h);
			XT_CHECK(e.len == m->len, "seed %llu case %d msg %d: len %zu, want %zu", seed, c, k, e.len, m->len);
			XT_CHECK(!m->tagged || e.tag == m->tag, "seed %llu case %d msg %d: tag", seed, c, k);
			XT_CHECK(!!(e.flags & FI_REMOTE_CQ_DATA) == has_data(m) && (!has_data(m) || e.data == m->data),
				 "seed %llu case %d msg %d: remote CQ data (flags 0x%llx)", seed, c, k,
				 (unsigned long long)e.flags);
		} else {
			snprintf(line[k], sizeof line[k],
				"%llu.%d.%d recv err=%d len=%zu olen=%zu flags=0x%llx tag=0x%llx data=0x%llx hash=%016llx\n",
				seed, c, k, err.err, err.len, err.olen, (unsigned long long)err.flags,
				(unsigned long long)(m->tagged ? err.tag : 0),
				(unsigned long long)((err.flags & FI_REMOTE_CQ_DATA) ? err.data : 0),
				(unsigned long long)h);
			XT_CHECK(err.err == FI_ETRUNC && m->len > m->cap,
				 "seed %llu case %d msg %d (len %zu cap %zu): error %d (%s)", seed, c, k, m->len,
				 m->cap, err.err, fi_strerror(err.err));
			XT_CHECK(err.olen == m->len - m->cap, "seed %llu case %d msg %d: olen %zu, want %zu", seed, c,
				 k, err.olen, m->len - m->cap);
		}
	}
	for (int k = 0; k < b.n; k++)
		fputs(line[k], r->out);
	struct fi_cq_tagged_entry extra;
	XT_CHECK(fi_cq_read(r->x.rxcq, &extra, 1) == -FI_EAGAIN, "seed %llu case %d: a receive completion too many",
		 seed, c);
	xt_sync_progress(r->sock, r->x.rxcq);
}

/* ---- RMA ------------------------------------------------------------------------------------ */

enum rma_call { W_PLAIN, W_V, W_MSG, W_DATA, W_INJECT, R_RPLAIN, R_RV, R_RMSG };

struct rma_case {
	enum rma_call call;
	size_t len;
	uint64_t msg_flags, data, salt_target, salt_local;
};

static int rma_is_read(enum rma_call c) { return c >= R_RPLAIN; }

static void plan_rma(unsigned long long seed, int c, struct rma_case *p)
{
	uint64_t s = stream(seed, c, 0, 5);
	p->call = (enum rma_call)below(&s, 8);
	p->len = pick_size(&s);
	if (p->len > RMA_REGION / 2)
		p->len = RMA_REGION / 2;
	if (p->len == 0 && !g_rma_empty)
		p->len = 1;
	if (p->call == W_INJECT && p->len > INJECT_MAX)
		p->call = W_MSG;
	p->msg_flags = 0;
	if (p->call == W_MSG) {
		if (below(&s, 2))
			p->msg_flags |= FI_REMOTE_CQ_DATA;
		if (p->len <= INJECT_MAX && below(&s, 2))
			p->msg_flags |= FI_INJECT;
		if (below(&s, 3) == 0)
			p->msg_flags |= FI_DELIVERY_COMPLETE;
		if (below(&s, 2))
			p->msg_flags |= FI_COMPLETION;
	}
	if (p->call == R_RMSG && below(&s, 2))
		p->msg_flags |= FI_COMPLETION;
	p->data = rnd(&s);
	p->salt_target = stream(seed, c, 0, 6);
	p->salt_local = stream(seed, c, 0, 7);
}

/* The contiguous calls take one buffer on each side, the v calls one remote range. */
static size_t rma_local_limit(const struct rma_case *p, size_t limit)
{
	return p->call == W_PLAIN || p->call == W_DATA || p->call == W_INJECT || p->call == R_RPLAIN ? 1 : limit;
}
static size_t rma_remote_limit(const struct rma_case *p, size_t limit)
{
	return p->call == W_MSG || p->call == R_RMSG ? limit : 1;
}

/* The remote ranges: a layout over the target's region (gaps between entries, in order). */
static void rma_remote_layout(unsigned long long seed, int c, size_t len, size_t limit, struct layout *l)
{
	make_layout(stream(seed, c, 0, 8), len, limit, l);
	uint64_t s = stream(seed, c, 0, 9);
	const size_t shift = below(&s, RMA_REGION - layout_extent(l));
	for (size_t i = 0; i < l->count; i++) {
		l->off[i] += shift;
		l->null_base[i] = 0;
	}
}

static void rma_layouts(const struct run *r, unsigned long long seed, int c, const struct rma_case *p,
			struct layout *local, struct layout *remote)
{
	make_layout(stream(seed, c, 0, 10), p->len, rma_local_limit(p, r->iov_limit), local);
	rma_remote_layout(seed, c, p->len, rma_remote_limit(p, r->rma_iov_limit), remote);
}

static void rma_initiator(struct run *r, unsigned long long seed, int c)
{
	struct rma_case p;
	plan_rma(seed, c, &p);
	struct layout local, remote;
	rma_layouts(r, seed, c, &p, &local, &remote);
	if (g_verbose)
		fprintf(stderr, "%s %llu.%d rma call %d len %zu flags 0x%llx local %zu remote %zu\n", g_prov, seed, c,
			p.call, p.len, (unsigned long long)p.msg_flags, local.count, remote.count);
	unsigned char *slot = r->arena;
	const size_t ext = layout_extent(&local);
	const int rd = rma_is_read(p.call);
	memset(slot, rd ? GUARD_RECV : GUARD_SEND, ext);
	if (!rd)
		scatter_pattern(&local, slot, p.len, p.salt_local);
	memcpy(r->shadow, slot, ext);
	struct iovec iov[MAXIOV];
	to_iov(&local, slot, iov);
	struct fi_rma_iov riov[MAXIOV];
	for (size_t i = 0; i < remote.count; i++)
		riov[i] = (struct fi_rma_iov){r->rbase + remote.off[i], remote.len[i], r->rkey};
	const enum rma_call call = p.call;
	const uint64_t flags = p.msg_flags;
	xt_sync_progress(r->sock, r->x.txcq); /* the target's region is filled */
	struct fi_context ctx;
	struct fid_ep *ep = r->x.ep;
	switch (call) {
	case W_PLAIN: POST(r, fi_write(ep, iov[0].iov_base, iov[0].iov_len, NULL, r->peer, riov[0].addr, r->rkey, &ctx)); break;
	case W_V: POST(r, fi_writev(ep, iov, NULL, local.count, r->peer, riov[0].addr, r->rkey, &ctx)); break;
	case W_DATA: POST(r, fi_writedata(ep, iov[0].iov_base, iov[0].iov_len, NULL, p.data, r->peer, riov[0].addr, r->rkey, &ctx)); break;
	case W_INJECT: POST(r, fi_inject_write(ep, iov[0].iov_base, iov[0].iov_len, r->peer, riov[0].addr, r->rkey)); break;
	case W_MSG: {
		struct fi_msg_rma m = {.msg_iov = iov, .iov_count = local.count, .addr = r->peer,
				       .rma_iov = riov, .rma_iov_count = remote.count, .context = &ctx, .data = p.data};
		POST(r, fi_writemsg(ep, &m, flags));
		break;
	}
	case R_RPLAIN: POST(r, fi_read(ep, iov[0].iov_base, iov[0].iov_len, NULL, r->peer, riov[0].addr, r->rkey, &ctx)); break;
	case R_RV: POST(r, fi_readv(ep, iov, NULL, local.count, r->peer, riov[0].addr, r->rkey, &ctx)); break;
	case R_RMSG: {
		struct fi_msg_rma m = {.msg_iov = iov, .iov_count = local.count, .addr = r->peer,
				       .rma_iov = riov, .rma_iov_count = remote.count, .context = &ctx};
		POST(r, fi_readmsg(ep, &m, flags));
		break;
	}
	}
	const int inject = call == W_INJECT || (flags & FI_INJECT);
	if (inject)
		memset(slot, 0xee, ext);
	if (call != W_INJECT) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		int ok;
		(void)wait_ctx(r, r->x.txcq, &ctx, sizeof ctx, 1, &e, &err, &ok);
		XT_CHECK(ok, "seed %llu case %d: RMA failed: %s", seed, c, fi_strerror(err.err));
		fprintf(r->out, "%llu.%d rma flags=0x%llx\n", seed, c, (unsigned long long)e.flags);
	}
	if (rd) {
		/* what must have arrived: the target's pattern at each remote range, in order */
		size_t ri = 0, rj = 0;
		memset(r->shadow, GUARD_RECV, ext);
		for (size_t i = 0; i < local.count; i++)
			for (size_t j = 0; j < local.len[i];) {
				while (rj == remote.len[ri]) {
					ri++;
					rj = 0;
				}
				const size_t left = local.len[i] - j, there = remote.len[ri] - rj;
				const size_t n = left < there ? left : there;
				fill_pattern_at(r->shadow + local.off[i] + j, n, p.salt_target, remote.off[ri] + rj);
				j += n;
				rj += n;
			}
		if (memcmp(slot, r->shadow, ext) != 0) {
			size_t bad = 0;
			while (slot[bad] == r->shadow[bad])
				bad++;
			xt_fail(__FILE__, __LINE__, "seed %llu case %d: read (%zu B, %zu local / %zu remote iovecs): "
				"byte %zu is 0x%02x, want 0x%02x", seed, c, p.len, local.count, remote.count, bad,
				slot[bad], r->shadow[bad]);
		}
		fprintf(r->out, "%llu.%d read ok\n", seed, c); /* which bytes depends on the layouts */
	} else if (!inject) {
		XT_CHECK(memcmp(slot, r->shadow, ext) == 0, "seed %llu case %d: the provider wrote into a write's source",
			 seed, c);
	}
	xt_sync_progress(r->sock, r->x.txcq); /* the operation completed here */
	xt_sync_progress(r->sock, r->x.txcq); /* the target checked its memory */
}

/* What the target's region must hold after the case: the fill everywhere, and after a write the
 * message in the remote ranges. */
static void region_expect(struct run *r, const struct rma_case *p, const struct layout *remote, int rd)
{
	fill_pattern(r->expect, RMA_REGION, p->salt_target);
	size_t done = 0;
	for (size_t i = 0; !rd && i < remote->count; i++) {
		fill_pattern_at(r->expect + remote->off[i], remote->len[i], p->salt_local, done);
		done += remote->len[i];
	}
}

/* The first byte of the region that differs from r->expect (SIZE_MAX when none). */
static size_t region_mismatch(const struct run *r)
{
	if (memcmp(r->region, r->expect, RMA_REGION) == 0)
		return SIZE_MAX;
	size_t at = 0;
	while (r->region[at] == r->expect[at])
		at++;
	return at;
}

static void rma_target(struct run *r, unsigned long long seed, int c)
{
	struct rma_case p;
	plan_rma(seed, c, &p);
	struct layout local, remote;
	rma_layouts(r, seed, c, &p, &local, &remote);
	fill_pattern(r->region, RMA_REGION, p.salt_target);
	xt_sync_progress(r->sock, r->x.rxcq);
	xt_sync_progress(r->sock, r->x.rxcq); /* the initiator's operation completed */
	const int rd = rma_is_read(p.call);
	const int data = !rd && (p.call == W_DATA || (p.msg_flags & FI_REMOTE_CQ_DATA));
	if (data) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		XT_CHECK(xt_wait(r->x.rxcq, &e, &err, 60) == 1, "seed %llu case %d: remote CQ data: error %d", seed, c,
			 err.err);
		/* fi_cq(3) lets FI_RMA come with FI_REMOTE_WRITE or not, and pins no len here */
		fprintf(r->out, "%llu.%d target flags=0x%llx data=0x%llx\n", seed, c,
			(unsigned long long)(e.flags & ~(uint64_t)FI_RMA), (unsigned long long)e.data);
		XT_CHECK((e.flags & (FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA)) == (FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA),
			 "seed %llu case %d: target flags 0x%llx", seed, c, (unsigned long long)e.flags);
		XT_CHECK(e.data == p.data, "seed %llu case %d: remote CQ data", seed, c);
	}
	/* A write's completion at the initiator need not mean the bytes are visible here yet (and an
	 * inject write has none): wait, progressing, until the region holds what it must. */
	const double end = (double)time(NULL) + 30;
	region_expect(r, &p, &remote, rd);
	size_t bad;
	while ((bad = region_mismatch(r)) != SIZE_MAX) {
		if ((double)time(NULL) > end)
			xt_fail(__FILE__, __LINE__,
				"seed %llu case %d: %s (%zu B, %zu local / %zu remote iovecs): region byte %zu is 0x%02x "
				"after 30 s", seed, c, rd ? "read" : "write", p.len, local.count, remote.count, bad,
				r->region[bad]);
		progress(r);
	}
	fprintf(r->out, "%llu.%d region ok\n", seed, c);
	struct fi_cq_tagged_entry extra;
	XT_CHECK(fi_cq_read(r->x.rxcq, &extra, 1) == -FI_EAGAIN, "seed %llu case %d: a target completion too many",
		 seed, c);
	xt_sync_progress(r->sock, r->x.rxcq); /* checked */
}

/* ---- one provider's run -------------------------------------------------------------------- */

/* The two processes of a run play the same cases from opposite ends. */
struct role {
	const char *transcript; /* file name suffix */
	int first;              /* sends its endpoint name first */
	void (*msg)(struct run *, unsigned long long, int);
	void (*rma)(struct run *, unsigned long long, int);
};
static const struct role initiator = {"a", 1, msg_sender, rma_initiator};
static const struct role target = {"b", 0, msg_receiver, rma_target};

static void play(const struct role *role, int sock)
{
	struct run r;
	char path[300];
	snprintf(path, sizeof path, "%s/%s.%s", g_dir, g_prov, role->transcript);
	open_run(&r, sock, role->first);
	r.out = fopen(path, "w");
	XT_CHECK(r.out, "open %s", path);
	for (int s = 0; s < g_seeds; s++)
		for (int c = 0; c < g_cases; c++) {
			if (g_do_msg)
				role->msg(&r, g_seed0 + (unsigned long long)s, c);
			if (g_do_rma)
				role->rma(&r, g_seed0 + (unsigned long long)s, c);
		}
	fclose(r.out);
	close_run(&r);
}

static int peer_main(int index, int sock)
{
	(void)index;
	xt_init(1500);
	play(&target, sock);
	return 0;
}

static int run_main(int index, int sock)
{
	(void)index;
	(void)sock;
	xt_init(1500);
	int psock;
	pid_t pid;
	xt_spawn(1, peer_main, &psock, &pid);
	play(&initiator, psock);
	xt_reap(1, &pid);
	return 0;
}

static void run_provider(const char *prov)
{
	g_prov = prov;
	int sock;
	pid_t pid;
	xt_spawn(1, run_main, &sock, &pid);
	xt_reap(1, &pid);
	close(sock);
}

/* Compares the two runs' transcripts line by line; reports the first difference. */
static void compare(const char *ref, const char *side)
{
	char pa[300], pb[300];
	snprintf(pa, sizeof pa, "%s/%s.%s", g_dir, ref, side);
	snprintf(pb, sizeof pb, "%s/exanet.%s", g_dir, side);
	FILE *a = fopen(pa, "r"), *b = fopen(pb, "r");
	XT_CHECK(a && b, "transcripts %s %s", pa, pb);
	char la[512], lb[512];
	long n = 0;
	for (;;) {
		char *ra = fgets(la, sizeof la, a), *rb = fgets(lb, sizeof lb, b);
		if (!ra && !rb)
			break;
		n++;
		XT_CHECK(ra && rb && strcmp(la, lb) == 0, "transcripts differ at line %ld of %s:\n  %s: %s  exanet: %s",
			 n, side, ref, ra ? la : "(end)\n", rb ? lb : "(end)\n");
	}
	fclose(a);
	fclose(b);
	printf("transcripts agree: %ld lines (%s)\n", n, side);
}

int main(void)
{
	xt_init(1700);
	const char *e = getenv("IOV_SEED");
	g_seed0 = e && *e ? strtoull(e, NULL, 0) : (unsigned long long)time(NULL);
	if ((e = getenv("IOV_SEEDS")) && *e)
		g_seeds = atoi(e);
	if ((e = getenv("IOV_CASES")) && *e)
		g_cases = atoi(e);
	if ((e = getenv("IOV_PART")) && *e) {
		g_do_msg = !strcmp(e, "msg") || !strcmp(e, "all");
		g_do_rma = !strcmp(e, "rma") || !strcmp(e, "all");
	}
	g_verbose = (e = getenv("IOV_VERBOSE")) && *e == '1';
	const char *proto = getenv("FI_EXANET_PROTOCOL");
	g_optimistic = proto && !strcmp(proto, "optimistic");
	if ((e = getenv("FI_EXANET_MEDIUM_MAX")) && *e)
		g_medium_max = strtoull(e, NULL, 0);
	const char *ref = getenv("IOV_REFERENCE");
	if (!ref || !*ref)
		ref = "shm";
	/* What each reference provider of libfabric 1.17 gets wrong or cannot do, found by this test;
	 * the cases it cannot serve are left out of every run of the comparison (exanet runs the same
	 * plan), and the exanet-only run (IOV_REFERENCE=none) covers them against the man pages:
	 *   shm: an unexpected tagged message is never matched by a receive with ignore bits (the
	 *        receive waits for ever), the sender of a truncated large message never completes,
	 *        and a 0-byte fi_writemsg with remote CQ data over several ranges never completes;
	 *   tcp;ofi_rxm: inject_size is 64, and a truncated receive gets no bytes at all. */
	if (!strcmp(ref, "shm")) {
		g_ignore_bits = 0;
		g_trunc_max = 0;
		g_rma_empty = 0;
	} else if (!strcmp(ref, "tcp;ofi_rxm") || !strcmp(ref, "tcp")) {
		INJECT_MAX = 64;
		g_trunc_max = 0;
	}
	if ((e = getenv("IOV_TRUNC_MAX")) && *e)
		g_trunc_max = strtoull(e, NULL, 0);
	if ((e = getenv("IOV_INJECT_MAX")) && *e)
		INJECT_MAX = strtoull(e, NULL, 0);
	if ((e = getenv("IOV_IGNORE_BITS")) && *e)
		g_ignore_bits = atoi(e);
	if ((e = getenv("IOV_SIZES")) && *e) {
		unsigned long long lo = 0, hi = 0;
		if (sscanf(e, "%llu..%llu", &lo, &hi) != 2 || lo > hi || hi > MAXLEN) {
			fprintf(stderr, "IOV_SIZES=%s: want LO..HI, at most %u\n", e, MAXLEN);
			return 2;
		}
		g_size_lo = (size_t)lo;
		g_size_hi = (size_t)hi;
	}
	const int with_ref = strcmp(ref, "none") != 0;
	snprintf(g_dir, sizeof g_dir, "/tmp/exanet-iov-XXXXXX");
	XT_CHECK(mkdtemp(g_dir), "mkdtemp");
	printf("iov_random: IOV_SEED=%llu IOV_SEEDS=%d IOV_CASES=%d part=%s%s reference=%s protocol=%s "
	       "inject<=%zu truncation<=%zu ignore-bits=%d empty-rma=%d\n",
	       g_seed0, g_seeds, g_cases, g_do_msg ? "msg" : "", g_do_rma ? "rma" : "", ref, proto ? proto : "write",
	       INJECT_MAX, g_trunc_max, g_ignore_bits, g_rma_empty);
	if (with_ref)
		run_provider(ref);
	run_provider("exanet");
	if (with_ref) {
		compare(ref, "a");
		compare(ref, "b");
	}
	char path[300];
	const int keep = (e = getenv("IOV_KEEP")) && *e == '1';
	for (int i = 0; i < 4 && !keep; i++) {
		snprintf(path, sizeof path, "%s/%s.%s", g_dir, i < 2 ? ref : "exanet", i % 2 ? "b" : "a");
		unlink(path);
	}
	if (keep)
		printf("transcripts kept in %s\n", g_dir);
	else
		rmdir(g_dir);
	printf("%d seeds x %d cases passed\n", g_seeds, g_cases);
	xt_pass("iov_random");
	return 0;
}
