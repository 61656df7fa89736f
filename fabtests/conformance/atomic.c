/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * FI_ATOMIC (fi_atomic(3)) between real processes: one target and three initiators, over exanet
 * and over a reference provider (ATOMIC_REFERENCE, default libfabric's shm; "none" runs exanet
 * alone), with the results compared.
 *
 * Differential part (both providers, same seeded cases): every op of the three families on every
 * datatype both providers perform (fi_query_atomic says which; the answers must agree, and so must
 * the counts), random counts (1 to 40 elements, and each family's maximum), random target offsets
 * (aligned to the element), operands split into 1-2 iocs, 1-2 remote iocs through the *msg calls,
 * fi_inject_atomic, batches of operations in flight at once. Each initiator works on its own
 * quarter of the target's region; the fourth quarter is shared, and all three initiators add
 * into the same words there at once (FI_SUM, fetching) and set bits in others (FI_BOR). The
 * transcript (every fetched value in order, each initiator's quarter afterwards, the shared
 * quarter) must be identical; in each run the values fetched from one shared counter must be all
 * different (atomicity: no two additions saw the same value).
 *
 * exanet alone, checked against the man pages:
 *   - the types shm 1.17 does not perform (long double, complex double and long double, 128-bit
 *     integers) against a model of fi_atomic(3) computed here;
 *   - order (FI_ORDER_ATOMIC_*, which exanet advertises): fetch-adds posted back to back on one
 *     word return increasing values in post order while the other initiators add too;
 *   - FI_RMA_EVENT counters at the target count atomics (remote write: base; remote read: fetch,
 *     compare), the initiator's FI_WRITE / FI_READ counters count them, and fi_atomicmsg with
 *     FI_REMOTE_CQ_DATA gives the target a completion with the data and FI_ATOMIC;
 *   - bad input, each with the right error and the target's memory unchanged: an unsupported op
 *     and datatype pair (-FI_EOPNOTSUPP at post), a count over the limit (-FI_EINVAL), a
 *     misaligned target address (FI_EINVAL error completion), a key without remote write (and one
 *     without remote read for a fetch), an unknown key and a range outside the registration
 *     (FI_EACCES error completions).
 *
 * Environment: ATOMIC_SEED (default from the clock, printed), ATOMIC_CASES (per initiator,
 * default 300), ATOMIC_REFERENCE.
 */
#include "xt.h"

#include <complex.h>
#include <poll.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NINIT 3
#define QUARTER (64u << 10)
#define REGION (4 * QUARTER)
#define SHARED_WORDS 8   /* uint64 counters at the start of the shared quarter */
#define SHARED_ADDS 200  /* fetch-adds per initiator per run */
#define ORDER_RUN 32     /* fetch-adds posted back to back */
#define SMALL 4096
#define MAXRES (1u << 22)

static unsigned g_seed;
static int g_cases = 300;
static const char *g_prov;
static int g_exanet; /* this run is over exanet: the exanet-only checks run too */

struct target_desc {
	uint64_t key, base;        /* FI_REMOTE_READ | FI_REMOTE_WRITE, REGION bytes */
	uint64_t ro_key, ro_base;  /* FI_REMOTE_READ only, SMALL bytes */
	uint64_t wo_key, wo_base;  /* FI_REMOTE_WRITE only, SMALL bytes */
	char name[64];
};

/* ---- endpoints --------------------------------------------------------------------------------- */

struct aep {
	struct xt_ep x;
	struct fid_cntr *wcntr, *rcntr;     /* initiator: FI_WRITE, FI_READ */
	struct fid_cntr *rwcntr, *rrcntr;   /* target: FI_REMOTE_WRITE, FI_REMOTE_READ */
	uint64_t mr_mode;
};

static void open_aep(struct aep *a, int target)
{
	memset(a, 0, sizeof *a);
	setenv("FI_PROVIDER", g_prov, 1);
	struct fi_info *h = xt_hints();
	h->caps |= FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	if (g_exanet)
		h->caps |= FI_RMA_EVENT;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	xt_open_disabled(&a->x, h, 0);
	fi_freeinfo(h);
	a->mr_mode = a->x.info->domain_attr->mr_mode;
	XT_CHECK(!(a->mr_mode & FI_MR_LOCAL), "FI_MR_LOCAL was not offered");
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	if (g_exanet) {
		if (target) {
			XT_RC(fi_cntr_open(a->x.domain, &ca, &a->rwcntr, NULL));
			XT_RC(fi_cntr_open(a->x.domain, &ca, &a->rrcntr, NULL));
			XT_RC(fi_ep_bind(a->x.ep, &a->rwcntr->fid, FI_REMOTE_WRITE));
			XT_RC(fi_ep_bind(a->x.ep, &a->rrcntr->fid, FI_REMOTE_READ));
		} else {
			XT_RC(fi_cntr_open(a->x.domain, &ca, &a->wcntr, NULL));
			XT_RC(fi_cntr_open(a->x.domain, &ca, &a->rcntr, NULL));
			XT_RC(fi_ep_bind(a->x.ep, &a->wcntr->fid, FI_WRITE));
			XT_RC(fi_ep_bind(a->x.ep, &a->rcntr->fid, FI_READ));
		}
	}
	xt_enable(&a->x);
}

static void close_aep(struct aep *a)
{
	xt_close_ep(&a->x);
	struct fid_cntr *c[4] = {a->wcntr, a->rcntr, a->rwcntr, a->rrcntr};
	for (int i = 0; i < 4; i++)
		if (c[i])
			XT_RC(fi_close(&c[i]->fid));
	xt_close(&a->x);
}

static struct fid_mr *reg(struct aep *a, void *buf, size_t len, uint64_t access, uint64_t key,
			  uint64_t *rkey, uint64_t *rbase)
{
	struct fid_mr *mr;
	XT_RC(fi_mr_reg(a->x.domain, buf, len, access, 0, key, 0, &mr, NULL));
	*rkey = fi_mr_key(mr);
	*rbase = (a->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)buf : 0;
	return mr;
}

/* ---- the target -------------------------------------------------------------------------------- */

/* Commands from the parent: 'd' dump the region, 'c' report counters and the CQ data seen,
 * 'q' quit. */
static int target_main(int index, int sock)
{
	(void)index;
	struct aep a;
	open_aep(&a, 1);
	unsigned char *region = aligned_alloc(4096, REGION);
	unsigned char *ro = aligned_alloc(4096, SMALL), *wo = aligned_alloc(4096, SMALL);
	XT_CHECK(region && ro && wo, "malloc");
	xt_fill(region, REGION, g_seed);
	memset(region + 3 * QUARTER, 0, QUARTER); /* the shared counters and bit words start at 0 */
	memset(ro, 0x11, SMALL);
	memset(wo, 0x22, SMALL);
	struct target_desc d;
	memset(&d, 0, sizeof d);
	struct fid_mr *mr = reg(&a, region, REGION, FI_REMOTE_READ | FI_REMOTE_WRITE, 1, &d.key, &d.base);
	struct fid_mr *mro = reg(&a, ro, SMALL, FI_REMOTE_READ, 2, &d.ro_key, &d.ro_base);
	struct fid_mr *mwo = reg(&a, wo, SMALL, FI_REMOTE_WRITE, 3, &d.wo_key, &d.wo_base);
	memcpy(d.name, a.x.name, a.x.namelen);
	xt_send_all(sock, &d, sizeof d);
	for (int i = 0; i < NINIT; i++) {
		char name[64];
		xt_recv_name(sock, name);
		(void)xt_insert(&a.x, name);
	}
	uint64_t cq_entries = 0, cq_data = 0, cq_flags = 0;
	for (;;) {
		struct fi_cq_tagged_entry e;
		ssize_t n = fi_cq_read(a.x.rxcq, &e, 1);
		if (n == 1) {
			cq_entries++;
			cq_data = e.data;
			cq_flags = e.flags;
		}
		struct pollfd p = {sock, POLLIN, 0};
		if (poll(&p, 1, 0) != 1)
			continue;
		char c;
		xt_recv_all(sock, &c, 1);
		if (c == 'd') {
			xt_send_all(sock, region, REGION);
			xt_send_all(sock, ro, SMALL);
			xt_send_all(sock, wo, SMALL);
		} else if (c == 'c') {
			uint64_t r[5] = {cq_entries, cq_data, cq_flags,
					 a.rwcntr ? fi_cntr_read(a.rwcntr) : 0,
					 a.rrcntr ? fi_cntr_read(a.rrcntr) : 0};
			xt_send_all(sock, r, sizeof r);
		} else {
			break;
		}
	}
	XT_RC(fi_close(&mr->fid));
	XT_RC(fi_close(&mro->fid));
	XT_RC(fi_close(&mwo->fid));
	close_aep(&a);
	return 0;
}

/* ---- operations --------------------------------------------------------------------------------- */

enum fam { BASE, FETCH, COMPARE };

struct init {
	struct aep a;
	fi_addr_t peer;
	struct target_desc t;
	unsigned char *res; /* the transcript: every fetched value in order */
	size_t nres;
};

static size_t dt_size(int dt)
{
	static const size_t s[] = {1, 1, 2, 2, 4, 4, 8, 8, 4, 8, 8, 16, sizeof(long double),
				   2 * sizeof(long double), 16, 16};
	return s[dt];
}

static size_t max_count(struct init *in, int dt, int op, enum fam f)
{
	struct fi_atomic_attr attr;
	uint64_t flags = f == FETCH ? FI_FETCH_ATOMIC : f == COMPARE ? FI_COMPARE_ATOMIC : 0;
	if (fi_query_atomic(in->a.x.domain, dt, op, &attr, flags) != 0)
		return 0;
	XT_CHECK(attr.size == dt_size(dt), "query size %zu for type %d", attr.size, dt);
	return attr.count;
}

/* Waits for n completions; returns the number that failed, with the last error in *err. */
static int wait_n(struct init *in, int n, int *err)
{
	int failed = 0;
	for (int i = 0; i < n; i++) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry ee;
		if (!xt_wait(in->a.x.txcq, &e, &ee, 30)) {
			failed++;
			if (err)
				*err = ee.err;
		} else {
			XT_CHECK(e.flags & FI_ATOMIC, "completion flags 0x%llx lack FI_ATOMIC",
				 (unsigned long long)e.flags);
		}
	}
	return failed;
}

#define RETRY(call)                                                                   \
	do {                                                                          \
		ssize_t rc_;                                                          \
		while ((rc_ = (call)) == -FI_EAGAIN)                                  \
			(void)fi_cq_read(in->a.x.txcq, NULL, 0);                      \
		XT_CHECK(rc_ == 0, "%s = %zd (%s)", #call, rc_, fi_strerror((int)-rc_)); \
	} while (0)

/* One operation: count elements at target offset off (from the region's start), with operands
 * buf/cmp and results into res. how: 0 plain call, 1 vector call (2 iocs when count > 1), 2 msg
 * call (2 remote iocs when count > 1), 3 inject (base only). */
static int post_op(struct init *in, int dt, int op, enum fam f, size_t count, size_t off,
		    void *buf, void *cmp, void *res, int how)
{
	const size_t sz = dt_size(dt);
	const uint64_t addr = in->t.base + off;
	const size_t h = count > 1 ? count / 2 : count;
	struct fi_ioc iov[2] = {{buf, h}, {(char *)buf + h * sz, count - h}};
	struct fi_ioc civ[2] = {{cmp, h}, {(char *)cmp + h * sz, count - h}};
	struct fi_ioc riv[2] = {{res, h}, {(char *)res + h * sz, count - h}};
	const size_t niov = count > 1 ? 2 : 1;
	struct fi_rma_ioc rio[2] = {{addr, h, in->t.key}, {addr + h * sz, count - h, in->t.key}};
	struct fi_msg_atomic m = {.msg_iov = iov, .iov_count = niov, .addr = in->peer,
				  .rma_iov = rio, .rma_iov_count = niov, .datatype = dt, .op = op,
				  .context = in};
	if (f == BASE) {
		if (how == 3) {
			RETRY(fi_inject_atomic(in->a.x.ep, buf, count, in->peer, addr, in->t.key, dt, op));
			return 0; /* no completion */
		} else if (how == 2)
			RETRY(fi_atomicmsg(in->a.x.ep, &m, 0));
		else if (how == 1)
			RETRY(fi_atomicv(in->a.x.ep, iov, NULL, niov, in->peer, addr, in->t.key, dt, op, in));
		else
			RETRY(fi_atomic(in->a.x.ep, buf, count, NULL, in->peer, addr, in->t.key, dt, op, in));
	} else if (f == FETCH) {
		if (how == 2)
			RETRY(fi_fetch_atomicmsg(in->a.x.ep, &m, riv, NULL, niov, 0));
		else if (how == 1)
			RETRY(fi_fetch_atomicv(in->a.x.ep, iov, NULL, niov, riv, NULL, niov, in->peer, addr,
					       in->t.key, dt, op, in));
		else
			RETRY(fi_fetch_atomic(in->a.x.ep, buf, count, NULL, res, NULL, in->peer, addr,
					      in->t.key, dt, op, in));
	} else {
		if (how == 2)
			RETRY(fi_compare_atomicmsg(in->a.x.ep, &m, civ, NULL, niov, riv, NULL, niov, 0));
		else if (how == 1)
			RETRY(fi_compare_atomicv(in->a.x.ep, iov, NULL, niov, civ, NULL, niov, riv, NULL,
						 niov, in->peer, addr, in->t.key, dt, op, in));
		else
			RETRY(fi_compare_atomic(in->a.x.ep, buf, count, NULL, cmp, NULL, res, NULL, in->peer,
						addr, in->t.key, dt, op, in));
	}
	return 1;
}

/* Small values that mean the same in every datatype: integers 0..7 (and -3..-1 where signed),
 * as the type's own representation. Complex values get the same integer in both parts. */
static void small_value(int dt, unsigned v, void *out)
{
	const int sv = (int)(v % 11) - 3; /* -3..7 */
	const unsigned uv = v % 8;
	switch (dt) {
	case FI_INT8: *(int8_t *)out = (int8_t)sv; break;
	case FI_UINT8: *(uint8_t *)out = (uint8_t)uv; break;
	case FI_INT16: *(int16_t *)out = (int16_t)sv; break;
	case FI_UINT16: *(uint16_t *)out = (uint16_t)uv; break;
	case FI_INT32: *(int32_t *)out = sv; break;
	case FI_UINT32: *(uint32_t *)out = uv; break;
	case FI_INT64: *(int64_t *)out = sv; break;
	case FI_UINT64: *(uint64_t *)out = uv; break;
	case FI_FLOAT: *(float *)out = (float)sv; break;
	case FI_DOUBLE: *(double *)out = sv; break;
	case FI_FLOAT_COMPLEX: *(float complex *)out = (float)sv + (float)(v % 3) * I; break;
	case FI_DOUBLE_COMPLEX: *(double complex *)out = sv + (double)(v % 3) * I; break;
	case FI_LONG_DOUBLE: memset(out, 0, sizeof(long double)); *(long double *)out = sv; break;
	case FI_LONG_DOUBLE_COMPLEX:
		memset(out, 0, 2 * sizeof(long double));
		*(long double complex *)out = sv + (long double)(v % 3) * I;
		break;
	case FI_INT128: *(__int128 *)out = sv; break;
	case FI_UINT128: *(unsigned __int128 *)out = uv; break;
	}
}

static unsigned rnd(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return (*s >> 8) & 0xffffff;
}

static void record(struct init *in, const void *p, size_t len)
{
	XT_CHECK(in->nres + len <= MAXRES, "transcript full");
	memcpy(in->res + in->nres, p, len);
	in->nres += len;
}

/* ---- the model of fi_atomic(3) for the exanet-only types ------------------------------------------ */

#define MODEL_ORDERED(T)                                                              \
	case FI_MIN: return o < old ? o : old;                                        \
	case FI_MAX: return o > old ? o : old;                                        \
	case FI_CSWAP_LE: return c <= old ? o : old;                                  \
	case FI_CSWAP_LT: return c < old ? o : old;                                   \
	case FI_CSWAP_GE: return c >= old ? o : old;                                  \
	case FI_CSWAP_GT: return c > old ? o : old;
#define MODEL_COMMON(T)                                                               \
	case FI_SUM: return old + o;                                                  \
	case FI_PROD: return old * o;                                                 \
	case FI_LOR: return (T)((old != 0) || (o != 0));                              \
	case FI_LAND: return (T)((old != 0) && (o != 0));                             \
	case FI_LXOR: return (T)((old != 0) != (o != 0));                             \
	case FI_ATOMIC_WRITE: return o;                                               \
	case FI_CSWAP: return c == old ? o : old;                                     \
	case FI_CSWAP_NE: return c != old ? o : old;

static long double model_ld(int op, long double old, long double o, long double c)
{
	switch (op) { MODEL_COMMON(long double) MODEL_ORDERED(long double) default: return old; }
}
static double complex model_dc(int op, double complex old, double complex o, double complex c)
{
	switch (op) { MODEL_COMMON(double complex) default: return old; }
}
static long double complex model_ldc(int op, long double complex old, long double complex o,
				     long double complex c)
{
	switch (op) { MODEL_COMMON(long double complex) default: return old; }
}
static __int128 model_i128(int op, __int128 old, __int128 o, __int128 c)
{
	switch (op) {
	MODEL_COMMON(__int128) MODEL_ORDERED(__int128)
	case FI_BOR: return old | o;
	case FI_BAND: return old & o;
	case FI_BXOR: return old ^ o;
	case FI_MSWAP: return (o & c) | (old & ~c);
	default: return old;
	}
}

/* Applies the model to one element at t (new value in place); returns nothing: the caller keeps
 * the old value. Values compare by value (long double has padding bytes). */
static void model_apply(int dt, int op, void *t, const void *o, const void *c)
{
	switch (dt) {
	case FI_LONG_DOUBLE: {
		long double v = model_ld(op, *(long double *)t, *(const long double *)o,
					 c ? *(const long double *)c : 0);
		*(long double *)t = v;
		break;
	}
	case FI_DOUBLE_COMPLEX:
		*(double complex *)t = model_dc(op, *(double complex *)t, *(const double complex *)o,
					       c ? *(const double complex *)c : 0);
		break;
	case FI_LONG_DOUBLE_COMPLEX:
		*(long double complex *)t = model_ldc(op, *(long double complex *)t,
						      *(const long double complex *)o,
						      c ? *(const long double complex *)c : 0);
		break;
	case FI_INT128: case FI_UINT128:
		*(__int128 *)t = model_i128(op, *(__int128 *)t, *(const __int128 *)o,
					    c ? *(const __int128 *)c : 0);
		break;
	}
}

static int same_value(int dt, const void *a, const void *b)
{
	switch (dt) {
	case FI_LONG_DOUBLE: return *(const long double *)a == *(const long double *)b;
	case FI_LONG_DOUBLE_COMPLEX:
		return *(const long double complex *)a == *(const long double complex *)b;
	default: return memcmp(a, b, dt_size(dt)) == 0;
	}
}

/* ---- the initiator ------------------------------------------------------------------------------- */

#define MAXC 40

struct pending {
	int dt, op;
	enum fam f;
	size_t count, off;
	unsigned char buf[MAXC * 32], cmp[MAXC * 32], res[MAXC * 32];
};

/* The differential cases: in this initiator's quarter, batches of 1-4 operations at disjoint
 * places, each batch set to known values first (FI_ATOMIC_WRITE), then operated on, then read
 * back (FI_ATOMIC_READ); fetched values and read-backs go into the transcript. */
static void run_cases(struct init *in, int index, int big_types)
{
	unsigned s = g_seed * 7919u + (unsigned)index * 104729u + (unsigned)big_types;
	static struct pending p[4];
	const size_t quarter = (size_t)(index - 1) * QUARTER;
	int done = 0;
	while (done < g_cases) {
		const int batch = 1 + (int)(rnd(&s) % 4);
		for (int b = 0; b < batch; b++) {
			struct pending *q = &p[b];
			for (;;) {
				q->dt = big_types ? (int)(FI_DOUBLE_COMPLEX + rnd(&s) % 5)
						  : (int)(rnd(&s) % (FI_FLOAT_COMPLEX + 1));
				q->op = (int)(rnd(&s) % FI_ATOMIC_OP_LAST);
				q->f = q->op >= FI_CSWAP ? COMPARE : q->op == FI_ATOMIC_READ ? FETCH
								    : (enum fam)(rnd(&s) % 2);
				if (max_count(in, q->dt, q->op, q->f))
					break;
			}
			const size_t sz = dt_size(q->dt);
			q->count = 1 + rnd(&s) % MAXC;
			/* each batch member in its own 16 KiB of the quarter, at a random aligned place */
			q->off = quarter + (size_t)b * (16u << 10) + (rnd(&s) % 256) * 32;
			q->off -= q->off % sz;
			for (size_t i = 0; i < q->count; i++) {
				small_value(q->dt, rnd(&s), q->buf + i * sz);
				small_value(q->dt, rnd(&s), q->cmp + i * sz);
			}
		}
		/* known values first */
		unsigned char init_vals[4][MAXC * 32];
		int expect = 0;
		for (int b = 0; b < batch; b++) {
			const size_t sz = dt_size(p[b].dt);
			for (size_t i = 0; i < p[b].count; i++)
				small_value(p[b].dt, rnd(&s), init_vals[b] + i * sz);
			expect += post_op(in, p[b].dt, FI_ATOMIC_WRITE, BASE, p[b].count, p[b].off,
					  init_vals[b], NULL, NULL, (int)(rnd(&s) % 4));
		}
		XT_CHECK(wait_n(in, expect, NULL) == 0, "an atomic write failed");
		expect = 0;
		/* the operation, all of the batch in flight at once */
		for (int b = 0; b < batch; b++) {
			const int how = p[b].f == BASE ? (int)(rnd(&s) % 4) : (int)(rnd(&s) % 3);
			memset(p[b].res, 0xee, sizeof p[b].res);
			expect += post_op(in, p[b].dt, p[b].op, p[b].f, p[b].count, p[b].off, p[b].buf,
					  p[b].cmp, p[b].res, how);
		}
		/* fi_inject_atomic gives no completion: the read-backs below come after it in order */
		XT_CHECK(wait_n(in, expect, NULL) == 0, "an atomic failed");
		/* read back */
		unsigned char back[4][MAXC * 32];
		for (int b = 0; b < batch; b++)
			post_op(in, p[b].dt, FI_ATOMIC_READ, FETCH, p[b].count, p[b].off, p[b].buf, NULL,
				back[b], (int)(rnd(&s) % 3));
		XT_CHECK(wait_n(in, batch, NULL) == 0, "an atomic read failed");
		for (int b = 0; b < batch; b++) {
			const size_t sz = dt_size(p[b].dt), len = p[b].count * sz;
			if (p[b].f != BASE)
				record(in, p[b].res, len);
			record(in, back[b], len);
			if (!big_types)
				continue;
			/* exanet alone: against the model */
			for (size_t i = 0; i < p[b].count; i++) {
				unsigned char t[32];
				memcpy(t, init_vals[b] + i * sz, sz);
				if (p[b].f != BASE)
					XT_CHECK(same_value(p[b].dt, p[b].res + i * sz, t),
						 "type %d op %d element %zu: fetched value differs from the "
						 "initial one", p[b].dt, p[b].op, i);
				if (p[b].op != FI_ATOMIC_READ)
					model_apply(p[b].dt, p[b].op, t, p[b].buf + i * sz,
						    p[b].f == COMPARE ? p[b].cmp + i * sz : NULL);
				XT_CHECK(same_value(p[b].dt, back[b] + i * sz, t),
					 "type %d op %d element %zu: target value differs from the model",
					 p[b].dt, p[b].op, i);
			}
		}
		done += batch;
	}
}

/* Adds into the shared words with the other initiators at once; with `ordered`, posts runs of
 * fetch-adds without waiting and checks they return increasing values (exanet's
 * FI_ORDER_ATOMIC_RAW/WAW). Sends what it fetched to the parent (atomicity check there). */
static void run_shared(struct init *in, int index, int sock, int ordered)
{
	const uint64_t shared = in->t.base + 3 * QUARTER;
	uint64_t *fetched = calloc(SHARED_ADDS, sizeof *fetched);
	XT_CHECK(fetched, "malloc");
	uint64_t one = 1, bit = 1ull << index;
	unsigned s = g_seed + (unsigned)index;
	int n = 0;
	while (n < SHARED_ADDS) {
		const int run = ordered ? ORDER_RUN : 1 + (int)(rnd(&s) % 8);
		const int word = (int)(rnd(&s) % SHARED_WORDS);
		const int k = run < SHARED_ADDS - n ? run : SHARED_ADDS - n;
		for (int i = 0; i < k; i++)
			RETRY(fi_fetch_atomic(in->a.x.ep, &one, 1, NULL, &fetched[n + i], NULL, in->peer,
					      shared + (uint64_t)word * 8, in->t.key, FI_UINT64, FI_SUM,
					      in));
		if (!ordered) /* the bit words are compared with the reference: one round sets them */
			RETRY(fi_atomic(in->a.x.ep, &bit, 1, NULL, in->peer,
					shared + SHARED_WORDS * 8 + (uint64_t)word * 8, in->t.key, FI_UINT64,
					FI_BOR, in));
		XT_CHECK(wait_n(in, k + !ordered, NULL) == 0, "a shared atomic failed");
		if (ordered)
			for (int i = 1; i < k; i++)
				XT_CHECK(fetched[n + i] > fetched[n + i - 1],
					 "fetch-adds posted in order returned %llu then %llu",
					 (unsigned long long)fetched[n + i - 1],
					 (unsigned long long)fetched[n + i]);
		for (int i = 0; i < k; i++)
			fetched[n + i] |= (uint64_t)word << 56; /* which counter it came from */
		n += k;
	}
	xt_send_all(sock, fetched, SHARED_ADDS * sizeof *fetched);
	free(fetched);
}

/* exanet alone: counters, remote CQ data, and every refusal. */
static void run_exanet_only(struct init *in, int sock)
{
	const uint64_t w0 = fi_cntr_read(in->a.wcntr), r0 = fi_cntr_read(in->a.rcntr);
	const uint64_t we0 = fi_cntr_readerr(in->a.wcntr), re0 = fi_cntr_readerr(in->a.rcntr);
	/* Target counters and CQ data before. */
	uint64_t before[5], after[5];
	xt_send_all(sock, "c", 1);
	xt_recv_all(sock, before, sizeof before);

	uint32_t v = 5, got = 0, cmpv = 0;
	const uint64_t a = in->t.base + 2 * 8; /* quarter 0 belongs to initiator 1 (this one) */
	RETRY(fi_atomic(in->a.x.ep, &v, 1, NULL, in->peer, a, in->t.key, FI_UINT32, FI_SUM, in));
	RETRY(fi_fetch_atomic(in->a.x.ep, &v, 1, NULL, &got, NULL, in->peer, a, in->t.key, FI_UINT32,
			      FI_SUM, in));
	RETRY(fi_compare_atomic(in->a.x.ep, &v, 1, NULL, &cmpv, NULL, &got, NULL, in->peer, a,
				in->t.key, FI_UINT32, FI_CSWAP, in));
	struct fi_ioc iov = {&v, 1};
	struct fi_rma_ioc rio = {a, 1, in->t.key};
	struct fi_msg_atomic m = {.msg_iov = &iov, .iov_count = 1, .addr = in->peer, .rma_iov = &rio,
				  .rma_iov_count = 1, .datatype = FI_UINT32, .op = FI_SUM,
				  .context = in, .data = 0xabcdef12345ull};
	RETRY(fi_atomicmsg(in->a.x.ep, &m, FI_REMOTE_CQ_DATA | FI_DELIVERY_COMPLETE));
	XT_CHECK(wait_n(in, 4, NULL) == 0, "an atomic failed");
	XT_CHECK(fi_cntr_read(in->a.wcntr) - w0 == 2 && fi_cntr_read(in->a.rcntr) - r0 == 2,
		 "initiator counters: %llu writes, %llu reads (2 and 2 expected)",
		 (unsigned long long)(fi_cntr_read(in->a.wcntr) - w0),
		 (unsigned long long)(fi_cntr_read(in->a.rcntr) - r0));
	/* FI_DELIVERY_COMPLETE: the CQ data is at the target by now; it is read there. */
	for (int tries = 0;; tries++) {
		xt_send_all(sock, "c", 1);
		xt_recv_all(sock, after, sizeof after);
		if (after[0] > before[0] || tries > 200)
			break;
		usleep(10000);
	}
	XT_CHECK(after[0] == before[0] + 1 && after[1] == 0xabcdef12345ull &&
			 (after[2] & FI_ATOMIC) && (after[2] & FI_REMOTE_CQ_DATA),
		 "target CQ: %llu entries, data 0x%llx, flags 0x%llx",
		 (unsigned long long)(after[0] - before[0]), (unsigned long long)after[1],
		 (unsigned long long)after[2]);
	XT_CHECK(after[3] - before[3] == 2 && after[4] - before[4] == 2,
		 "target FI_RMA_EVENT counters: %llu remote writes, %llu remote reads (2 and 2 expected)",
		 (unsigned long long)(after[3] - before[3]), (unsigned long long)(after[4] - before[4]));
	xt_pass("atomic counters and remote CQ data");

	/* Refusals: memory before and after, from the parent's dump. */
	const uint64_t big = in->t.base;
	int err = 0;
	/* unsupported pair, and count over the limit: refused at post */
	float complex fc = 1;
	ssize_t rc = fi_atomic(in->a.x.ep, &fc, 1, NULL, in->peer, big, in->t.key, FI_FLOAT_COMPLEX,
			       FI_MIN, in);
	XT_CHECK(rc == -FI_EOPNOTSUPP, "FI_MIN on FI_FLOAT_COMPLEX: %zd", rc);
	struct fi_atomic_attr attr;
	XT_CHECK(fi_query_atomic(in->a.x.domain, FI_FLOAT_COMPLEX, FI_MIN, &attr, 0) == -FI_EOPNOTSUPP,
		 "fi_query_atomic said FI_MIN on complex is supported");
	XT_CHECK(fi_query_atomic(in->a.x.domain, FI_UINT64, FI_CSWAP, &attr, 0) == -FI_EOPNOTSUPP &&
			 fi_query_atomic(in->a.x.domain, FI_UINT64, FI_SUM, &attr, FI_COMPARE_ATOMIC) ==
				 -FI_EOPNOTSUPP &&
			 fi_query_atomic(in->a.x.domain, FI_UINT64, FI_ATOMIC_READ, &attr, 0) ==
				 -FI_EOPNOTSUPP,
		 "fi_query_atomic accepted an op outside its family");
	XT_RC(fi_query_atomic(in->a.x.domain, FI_UINT8, FI_SUM, &attr, 0));
	static uint8_t many[8192];
	rc = fi_atomic(in->a.x.ep, many, attr.count + 1, NULL, in->peer, big, in->t.key, FI_UINT8,
		       FI_SUM, in);
	XT_CHECK(rc == -FI_EINVAL, "count %zu over the limit %zu: %zd", attr.count + 1, attr.count, rc);
	rc = fi_atomic(in->a.x.ep, many, 0, NULL, in->peer, big, in->t.key, FI_UINT8, FI_SUM, in);
	XT_CHECK(rc == -FI_EINVAL, "count 0: %zd", rc);
	struct fi_ioc two = {many, 2};
	struct fi_rma_ioc halves[2] = {{big, 2, in->t.key}, {big + 2, 0, in->t.key}};
	struct fi_msg_atomic empty_half = {.msg_iov = &two, .iov_count = 1, .addr = in->peer,
					   .rma_iov = halves, .rma_iov_count = 2, .datatype = FI_UINT8,
					   .op = FI_SUM, .context = in};
	rc = fi_atomicmsg(in->a.x.ep, &empty_half, 0);
	XT_CHECK(rc == -FI_EINVAL, "a remote ioc of 0 elements: %zd", rc);
	struct fi_rma_ioc split[2] = {{big, 1, in->t.key}, {big + 1, 2, in->t.key}};
	struct fi_msg_atomic disagree = empty_half;
	disagree.rma_iov = split;
	rc = fi_atomicmsg(in->a.x.ep, &disagree, 0);
	XT_CHECK(rc == -FI_EINVAL, "3 remote elements for 2 local ones: %zd", rc);
	/* refused at the target: error completions */
	uint64_t one = 1, res = 0;
	struct {
		const char *what;
		uint64_t addr, key;
		int dt, fetch, want;
	} cases[] = {
		{"misaligned target", big + 4, in->t.key, FI_UINT64, 0, FI_EINVAL},
		{"misaligned target (fetch)", big + 2, in->t.key, FI_UINT32, 1, FI_EINVAL},
		{"key without remote write", in->t.ro_base, in->t.ro_key, FI_UINT64, 0, FI_EACCES},
		{"key without remote write (fetch)", in->t.ro_base, in->t.ro_key, FI_UINT64, 1, FI_EACCES},
		{"key without remote read (fetch)", in->t.wo_base, in->t.wo_key, FI_UINT64, 1, FI_EACCES},
		{"unknown key", big, in->t.key + 1000, FI_UINT64, 0, FI_EACCES},
		{"range outside the registration", big + REGION, in->t.key, FI_UINT64, 1, FI_EACCES},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		if (cases[i].fetch)
			RETRY(fi_fetch_atomic(in->a.x.ep, &one, 1, NULL, &res, NULL, in->peer, cases[i].addr,
					      cases[i].key, cases[i].dt, FI_SUM, in));
		else
			RETRY(fi_atomic(in->a.x.ep, &one, 1, NULL, in->peer, cases[i].addr, cases[i].key,
					cases[i].dt, FI_SUM, in));
		err = 0;
		XT_CHECK(wait_n(in, 1, &err) == 1 && err == cases[i].want, "%s: error %d, %d expected",
			 cases[i].what, err, cases[i].want);
	}
	XT_CHECK(fi_cntr_readerr(in->a.wcntr) - we0 == 3 && fi_cntr_readerr(in->a.rcntr) - re0 == 4,
		 "error counters: %llu writes, %llu reads (3 and 4 expected)",
		 (unsigned long long)(fi_cntr_readerr(in->a.wcntr) - we0),
		 (unsigned long long)(fi_cntr_readerr(in->a.rcntr) - re0));
	xt_pass("atomic bad input: errors");
}

static int initiator_main(int index, int sock)
{
	struct init in;
	memset(&in, 0, sizeof in);
	open_aep(&in.a, 0);
	xt_send_name(sock, &in.a.x);
	xt_recv_all(sock, &in.t, sizeof in.t);
	in.peer = xt_insert(&in.a.x, in.t.name);
	in.res = malloc(MAXRES);
	XT_CHECK(in.res, "malloc");
	xt_sync(sock);
	run_cases(&in, index, 0);
	xt_sync(sock);
	run_shared(&in, index, sock, 0);
	xt_sync(sock);
	if (g_exanet) {
		run_shared(&in, index, sock, 1);
		xt_sync(sock);
		run_cases(&in, index, 1);
		xt_sync(sock);
		if (index == 1)
			run_exanet_only(&in, sock);
		xt_sync(sock);
	}
	xt_send_all(sock, &in.nres, sizeof in.nres);
	xt_send_all(sock, in.res, in.nres);
	char q;
	xt_recv_all(sock, &q, 1);
	free(in.res);
	close_aep(&in.a);
	return 0;
}

static int child_main(int index, int sock)
{
	return index == 0 ? target_main(index, sock) : initiator_main(index, sock);
}

/* ---- the parent --------------------------------------------------------------------------------- */

struct transcript {
	unsigned char *res[NINIT + 1];
	size_t nres[NINIT + 1];
	unsigned char *region; /* REGION + 2 * SMALL */
};

static int cmp_u64(const void *a, const void *b)
{
	const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Every value fetched from one shared counter is different, and the counter ends at the number
 * of additions made to it. */
static void check_shared(uint64_t *all, size_t n, const unsigned char *region, int rounds)
{
	qsort(all, n, sizeof *all, cmp_u64);
	for (size_t i = 1; i < n; i++)
		XT_CHECK(all[i] != all[i - 1], "two fetch-adds saw the same value %llu of counter %llu",
			 (unsigned long long)(all[i] & ((1ull << 56) - 1)),
			 (unsigned long long)(all[i] >> 56));
	uint64_t counts[SHARED_WORDS] = {0};
	for (size_t i = 0; i < n; i++)
		counts[all[i] >> 56]++;
	const uint64_t *words = (const uint64_t *)(region + 3 * QUARTER);
	for (int w = 0; w < SHARED_WORDS; w++)
		XT_CHECK(words[w] == counts[w], "shared counter %d: %llu, %llu additions made (%d rounds)",
			 w, (unsigned long long)words[w], (unsigned long long)counts[w], rounds);
}

static void run(const char *prov, struct transcript *t)
{
	g_prov = prov;
	g_exanet = strcmp(prov, "exanet") == 0;
	int socks[NINIT + 1];
	pid_t pids[NINIT + 1];
	xt_spawn(NINIT + 1, child_main, socks, pids);
	struct target_desc d;
	xt_recv_all(socks[0], &d, sizeof d);
	for (int i = 1; i <= NINIT; i++) {
		char name[64];
		xt_recv_name(socks[i], name);
		/* relay: the target inserts each initiator, each initiator the target */
		uint32_t len = 64;
		xt_send_all(socks[0], &len, sizeof len);
		xt_send_all(socks[0], name, 64);
		xt_send_all(socks[i], &d, sizeof d);
	}
	const int rounds = g_exanet ? 2 : 1;
	const size_t nfetch = (size_t)NINIT * SHARED_ADDS * rounds;
	uint64_t *all = calloc(nfetch, sizeof *all);
	XT_CHECK(all, "malloc");
	for (int i = 1; i <= NINIT; i++)
		xt_sync(socks[i]); /* start */
	for (int i = 1; i <= NINIT; i++)
		xt_sync(socks[i]); /* own quarters done */
	for (int r = 0; r < rounds; r++) {
		for (int i = 1; i <= NINIT; i++)
			xt_recv_all(socks[i], all + ((size_t)r * NINIT + (size_t)(i - 1)) * SHARED_ADDS,
				    SHARED_ADDS * sizeof *all);
		for (int i = 1; i <= NINIT; i++)
			xt_sync(socks[i]);
	}
	if (g_exanet) {
		for (int i = 1; i <= NINIT; i++)
			xt_sync(socks[i]); /* the model's types */
		/* initiator 1 runs the exanet-only checks; it asks the target through us */
		static unsigned char snap[REGION + 2 * SMALL];
		xt_send_all(socks[0], "d", 1);
		xt_recv_all(socks[0], snap, sizeof snap);
		for (;;) {
			struct pollfd p = {socks[1], POLLIN, 0};
			XT_CHECK(poll(&p, 1, 60000) == 1, "initiator 1 is silent");
			char c;
			xt_recv_all(socks[1], &c, 1);
			if (c != 'c')
				break; /* the sync byte that ends its checks */
			uint64_t r[5];
			xt_send_all(socks[0], "c", 1);
			xt_recv_all(socks[0], r, sizeof r);
			xt_send_all(socks[1], r, sizeof r);
		}
		xt_send_all(socks[1], "s", 1); /* answers its sync */
		for (int i = 2; i <= NINIT; i++)
			xt_sync(socks[i]);
		/* the refusals left the target's memory as it was, except the four words initiator 1
		 * added to on purpose (offset 8 of its quarter) */
		static unsigned char now[REGION + 2 * SMALL];
		xt_send_all(socks[0], "d", 1);
		xt_recv_all(socks[0], now, sizeof now);
		memcpy(now + 2 * 8, snap + 2 * 8, 4);
		XT_CHECK(memcmp(now, snap, sizeof now) == 0, "a refused atomic changed the target's memory");
		xt_pass("atomic bad input: target memory unchanged");
	}
	for (int i = 1; i <= NINIT; i++) {
		XT_CHECK(t->nres[i] == 0, "transcript reused");
		xt_recv_all(socks[i], &t->nres[i], sizeof t->nres[i]);
		t->res[i] = malloc(t->nres[i] + 1);
		XT_CHECK(t->res[i], "malloc");
		xt_recv_all(socks[i], t->res[i], t->nres[i]);
	}
	t->region = malloc(REGION + 2 * SMALL);
	XT_CHECK(t->region, "malloc");
	xt_send_all(socks[0], "d", 1);
	xt_recv_all(socks[0], t->region, REGION + 2 * SMALL);
	check_shared(all, nfetch, t->region, rounds);
	free(all);
	for (int i = 0; i <= NINIT; i++)
		xt_send_all(socks[i], "q", 1);
	xt_reap(NINIT + 1, pids);
	printf("%s: %d initiators x %d cases, %zu shared fetch-adds, transcript %zu bytes\n", prov,
	       NINIT, g_cases, nfetch, t->nres[1] + t->nres[2] + t->nres[3]);
}

/* fi_query_atomic over both providers: the same pairs, the same counts, for the types both have.
 * Each provider answers in a process of its own (FI_PROVIDER is read once per process). */
#define NQUERY (3 * FI_ATOMIC_OP_LAST * (FI_FLOAT_COMPLEX + 1))
struct query_answer {
	int rc;
	size_t count, size;
};

static int query_main(int index, int sock)
{
	(void)index;
	setenv("FI_PROVIDER", g_prov, 1);
	struct fi_info *h = xt_hints();
	h->caps |= FI_ATOMIC;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	struct xt_ep x;
	xt_open(&x, h, 0);
	fi_freeinfo(h);
	static struct query_answer ans[NQUERY];
	const uint64_t flags[3] = {0, FI_FETCH_ATOMIC, FI_COMPARE_ATOMIC};
	int k = 0;
	for (int f = 0; f < 3; f++)
		for (int op = 0; op < FI_ATOMIC_OP_LAST; op++)
			for (int dt = 0; dt <= FI_FLOAT_COMPLEX; dt++, k++) {
				struct fi_atomic_attr a = {0, 0};
				ans[k].rc = fi_query_atomic(x.domain, dt, op, &a, flags[f]);
				ans[k].count = a.count;
				ans[k].size = a.size;
			}
	xt_send_all(sock, ans, sizeof ans);
	xt_close(&x);
	return 0;
}

static void compare_queries(const char *ref)
{
	static struct query_answer ans[2][NQUERY];
	const char *provs[2] = {ref, "exanet"};
	for (int p = 0; p < 2; p++) {
		int sock;
		pid_t pid;
		g_prov = provs[p];
		xt_spawn(1, query_main, &sock, &pid);
		xt_recv_all(sock, ans[p], sizeof ans[p]);
		xt_reap(1, &pid);
	}
	int valid = 0;
	for (int k = 0; k < NQUERY; k++) {
		const int dt = k % (FI_FLOAT_COMPLEX + 1), op = k / (FI_FLOAT_COMPLEX + 1) % FI_ATOMIC_OP_LAST;
		const int f = k / ((FI_FLOAT_COMPLEX + 1) * FI_ATOMIC_OP_LAST);
		XT_CHECK(ans[0][k].rc == ans[1][k].rc && ans[0][k].count == ans[1][k].count &&
				 ans[0][k].size == ans[1][k].size,
			 "fi_query_atomic(type %d, op %d, family %d): %s %d count %zu, exanet %d count %zu",
			 dt, op, f, ref, ans[0][k].rc, ans[0][k].count, ans[1][k].rc, ans[1][k].count);
		valid += ans[1][k].rc == 0;
	}
	printf("fi_query_atomic: %d valid pairs, answers identical to %s\n", valid, ref);
	xt_pass("atomic query against the reference");
}

int main(void)
{
	xt_init(300);
	const char *e = getenv("ATOMIC_SEED");
	g_seed = e && *e ? (unsigned)strtoul(e, NULL, 0) : (unsigned)time(NULL);
	if ((e = getenv("ATOMIC_CASES")) && *e)
		g_cases = atoi(e);
	const char *ref = getenv("ATOMIC_REFERENCE");
	if (!ref || !*ref)
		ref = "shm";
	const int with_ref = strcmp(ref, "none") != 0;
	printf("seed %u (ATOMIC_SEED=%u reproduces), reference %s\n", g_seed, g_seed, ref);
	static struct transcript tr[2];
	if (with_ref) {
		compare_queries(ref);
		run(ref, &tr[0]);
	}
	run("exanet", &tr[1]);
	if (with_ref) {
		/* exanet's transcripts hold the exanet-only model cases after the shared ones */
		for (int i = 1; i <= NINIT; i++) {
			XT_CHECK(tr[1].nres[i] >= tr[0].nres[i], "initiator %d: transcript lengths %zu, %zu",
				 i, tr[0].nres[i], tr[1].nres[i]);
			for (size_t k = 0; k < tr[0].nres[i]; k++)
				XT_CHECK(tr[0].res[i][k] == tr[1].res[i][k],
					 "initiator %d: fetched values differ from %s at byte %zu", i, ref, k);
		}
		/* each initiator's quarter after the differential cases was read back above; the shared
		 * quarter's counters and bit words must agree (exanet ran a second, ordered round) */
		const uint64_t *bits[2] = {(const uint64_t *)(tr[0].region + 3 * QUARTER + SHARED_WORDS * 8),
					   (const uint64_t *)(tr[1].region + 3 * QUARTER + SHARED_WORDS * 8)};
		for (int w = 0; w < SHARED_WORDS; w++)
			XT_CHECK(bits[0][w] == bits[1][w], "shared bit word %d: %s 0x%llx, exanet 0x%llx", w,
				 ref, (unsigned long long)bits[0][w], (unsigned long long)bits[1][w]);
		xt_pass("atomic differential against the reference");
	}
	xt_pass("atomic");
	return 0;
}
