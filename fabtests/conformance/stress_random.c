/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Randomized differential stress of tag matching and every message protocol: 2 to 4 processes
 * each send to all others and receive from all others at once, with random sizes across every
 * threshold (eager, medium, rendezvous), random tags, random receive shapes (directed or any
 * source, exact or with ignore bits) and random interleavings of posts, sends and progress.
 *
 * Every message is checked against what its sender planned (the plans derive from the seed, so
 * every process knows them): payload, tag, source, length, and exactly-once delivery. Order is
 * checked against the libfabric matching rule itself: of two receives, the one posted first never
 * holds the later-sent of two messages from one sender that both could match it.
 *
 * Random receive shapes can strand a receive (a wildcard took the message an exact receive was
 * meant for). Once everything is sent and nothing has completed for a while, the outstanding
 * receives are cancelled (exercising fi_cancel, also with RTRs out) and catch-all receives, one
 * per message still due and naming its source, take what is left; the order rule still holds
 * across both.
 *
 * Environment: STRESS_SEED (default: from the clock; printed either way), STRESS_PROCS (2..4,
 * default 3), STRESS_MSGS (messages per ordered pair, default 150), STRESS_DIRECTED=1 (every
 * receive names its source).
 *
 * Under FI_EXANET_PROTOCOL=optimistic the test keeps the variant's promises and checks its rule:
 * every receive names its source, and one shaped after a message above the medium limit
 * (FI_EXANET_MEDIUM_MAX) is a long receive, the others are at most that limit; a message matches
 * only receives of its own size class, in the order the matching rule gives within each class.
 */
#include "xt.h"

#include <rdma/fi_ext_exanet.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAXP 4
#define MAXMSG 400
static const size_t sizes[] = {0, 1, 35, 36, 37, 1000, 8192, 16383, 16384, 16385, 65536, 200000};
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define CAP 200000 /* every receive holds the largest message: no truncation here */

static unsigned long long g_seed;
static int g_procs, g_msgs, g_directed, g_optimistic;
static size_t g_medium_max = 16384; /* the provider's default FI_EXANET_MEDIUM_MAX */

static int is_long(size_t len) { return len > g_medium_max; }

/* xorshift64*: the same numbers in every process for the same seed and stream */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

struct msg {
	uint64_t tag;
	size_t len;
};

/* What `from` sends to `to`, in order. */
static void plan(int from, int to, struct msg *m)
{
	uint64_t s = g_seed * 1000003u + (uint64_t)from * 31 + (uint64_t)to + 1;
	for (int k = 0; k < g_msgs; k++) {
		m[k].tag = rnd(&s) % 8;
		m[k].len = sizes[rnd(&s) % NSIZES];
	}
}

static unsigned payload_seed(int from, int to, int k) { return (unsigned)(from * 100000 + to * 10000 + k); }

struct recv_rec {
	int posted_seq;
	int any_source, from;
	int long_class; /* optimistic: capacity above the medium limit, takes only long messages */
	uint64_t tag, ignore;
	int got_from, got_k; /* -1: not (yet) */
	unsigned char *buf;
	int done;
};

static int matches(const struct recv_rec *r, int from, uint64_t tag, size_t len)
{
	if (g_optimistic && r->long_class != is_long(len))
		return 0; /* the optimistic variant's size classes never meet */
	return (r->any_source || r->from == from) && ((r->tag ^ tag) & ~r->ignore) == 0;
}

struct proc {
	int me;
	struct xt_ep x;
	fi_addr_t addr[MAXP];
	struct msg out[MAXP][MAXMSG], in[MAXP][MAXMSG];
	int got[MAXP][MAXMSG]; /* deliveries per message */
	struct recv_rec *recvs;
	int nrecvs, outstanding, received, expected;
	uint64_t rs; /* this process's own random stream: its interleaving and receive shapes */
};

static int rank_of(struct proc *p, fi_addr_t a)
{
	for (int i = 0; i < g_procs; i++)
		if (i != p->me && p->addr[i] == a)
			return i;
	return -1;
}

static void on_recv(struct proc *p, struct fi_cq_tagged_entry *e, fi_addr_t src)
{
	struct recv_rec *r = e->op_context;
	const int from = (int)(e->data >> 32), k = (int)(e->data & 0xffffffff);
	XT_CHECK(from >= 0 && from < g_procs && from != p->me && k >= 0 && k < g_msgs,
		 "seed %llu: bad cq data %#llx", g_seed, (unsigned long long)e->data);
	XT_CHECK(rank_of(p, src) == from, "seed %llu: source %d, cq data says %d", g_seed,
		 rank_of(p, src), from);
	const struct msg *m = &p->in[from][k];
	XT_CHECK(e->tag == m->tag && e->len == m->len, "seed %llu: msg %d->%d #%d tag %llu len %zu, sent %llu %zu",
		 g_seed, from, p->me, k, (unsigned long long)e->tag, e->len, (unsigned long long)m->tag, m->len);
	XT_CHECK(matches(r, from, e->tag, e->len), "seed %llu: receive got a message it does not match",
		 g_seed);
	XT_CHECK(xt_verify(r->buf, m->len, payload_seed(from, p->me, k)), "seed %llu: payload of %d->%d #%d",
		 g_seed, from, p->me, k);
	XT_CHECK(++p->got[from][k] == 1, "seed %llu: %d->%d #%d delivered twice", g_seed, from, p->me, k);
	r->got_from = from;
	r->got_k = k;
	r->done = 1;
	p->outstanding--;
	p->received++;
}

/* Reads receive completions; a cancelled receive is just retired. Returns how many it took. */
static int poll_rx(struct proc *p)
{
	struct fi_cq_tagged_entry e[8];
	fi_addr_t src[8];
	ssize_t n = fi_cq_readfrom(p->x.rxcq, e, 8, src);
	if (n > 0) {
		for (ssize_t i = 0; i < n; i++)
			on_recv(p, &e[i], src[i]);
		return (int)n;
	}
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = {0};
		XT_RC(fi_cq_readerr(p->x.rxcq, &err, 0));
		XT_CHECK(err.err == FI_ECANCELED, "seed %llu: receive error %d (%s)", g_seed, err.err,
			 fi_strerror(err.err));
		((struct recv_rec *)err.op_context)->done = 1;
		p->outstanding--;
		return 1;
	}
	XT_CHECK(n == -FI_EAGAIN, "seed %llu: rx cq %zd", g_seed, n);
	return 0;
}

/* catch_all >= 0: a receive for any tag from that source (of the size class of long_class) */
static void post_recv(struct proc *p, int catch_all, int long_class)
{
	struct recv_rec *r = &p->recvs[p->nrecvs];
	r->posted_seq = p->nrecvs++;
	r->got_from = r->got_k = -1;
	r->buf = malloc(CAP);
	XT_CHECK(r->buf, "out of memory");
	if (catch_all >= 0) {
		r->any_source = 0;
		r->from = catch_all;
		r->ignore = ~0ull;
		r->long_class = long_class;
	} else {
		/* shaped after a message still to come, so most receives have a partner */
		int from, k;
		do {
			from = (int)(rnd(&p->rs) % g_procs);
			k = (int)(rnd(&p->rs) % g_msgs);
		} while (from == p->me || p->got[from][k]);
		static const uint64_t ignores[] = {0, 0, 0, 1, 3, 7};
		r->any_source = !g_directed && rnd(&p->rs) % 3 == 0;
		r->from = from;
		r->ignore = ignores[rnd(&p->rs) % 6];
		r->tag = p->in[from][k].tag & ~r->ignore;
		r->long_class = is_long(p->in[from][k].len);
	}
	const size_t cap = g_optimistic && !r->long_class ? g_medium_max : CAP;
	ssize_t rc;
	while ((rc = fi_trecv(p->x.ep, r->buf, cap, NULL, r->any_source ? FI_ADDR_UNSPEC : p->addr[r->from],
			      r->tag, r->ignore, r)) == -FI_EAGAIN)
		poll_rx(p);
	XT_RC(rc);
	p->outstanding++;
}

/* A hang becomes a failure that says what waited. */
static void stalled(struct proc *p, const char *why)
{
	struct fi_exanet_counters_ops *ops;
	struct fi_exanet_counters c = {0};
	if (fi_open_ops(&p->x.ep->fid, FI_EXANET_COUNTERS_OPS, 0, (void **)&ops, NULL) == 0)
		ops->read(p->x.ep, &c, sizeof c);
	fprintf(stderr, "process %d: %s; received %d of %d, %d receives outstanding; RTS %llu RI %llu "
		"RTRs %llu late %llu stale %llu stored %llu suspensions %llu cancels %llu\n", p->me, why,
		p->received, p->expected, p->outstanding, (unsigned long long)c.rndv_sent,
		(unsigned long long)c.ri_sent, (unsigned long long)c.rtr_sent, (unsigned long long)c.rtr_late,
		(unsigned long long)c.rtr_stale, (unsigned long long)c.rtr_stored,
		(unsigned long long)c.suspensions, (unsigned long long)c.rtr_cancels);
	for (int i = 0; i < p->nrecvs; i++)
		if (!p->recvs[i].done)
			fprintf(stderr, "  receive %d: from %d%s tag %llu ignore %llu\n", i, p->recvs[i].from,
				p->recvs[i].any_source ? " (any)" : "", (unsigned long long)p->recvs[i].tag,
				(unsigned long long)p->recvs[i].ignore);
	for (int from = 0; from < g_procs; from++)
		for (int k = 0; from != p->me && k < g_msgs; k++)
			if (!p->got[from][k])
				fprintf(stderr, "  due: #%d from %d tag %llu len %zu\n", k, from,
					(unsigned long long)p->in[from][k].tag, p->in[from][k].len);
	XT_CHECK(0, "seed %llu: %s", g_seed, why);
}

static int run(int me, int *socks)
{
	struct proc *p = calloc(1, sizeof *p);
	XT_CHECK(p, "out of memory");
	p->me = me;
	p->rs = g_seed * 7919 + (uint64_t)me + 17;
	struct fi_info *h = xt_hints();
	h->caps |= FI_SOURCE;
	xt_open(&p->x, h, 0);
	fi_freeinfo(h);
	/* names: children send theirs to the parent, which sends everybody the full table */
	char names[MAXP][64];
	memcpy(names[me], p->x.name, 64);
	if (me == 0) {
		for (int i = 1; i < g_procs; i++)
			xt_recv_name(socks[i - 1], names[i]);
		for (int i = 1; i < g_procs; i++)
			xt_send_all(socks[i - 1], names, sizeof names);
	} else {
		xt_send_name(socks[0], &p->x);
		xt_recv_all(socks[0], names, sizeof names);
	}
	for (int i = 0; i < g_procs; i++)
		p->addr[i] = i == me ? FI_ADDR_NOTAVAIL : xt_insert(&p->x, names[i]);
	for (int i = 0; i < g_procs; i++) {
		if (i == me)
			continue;
		plan(me, i, p->out[i]);
		plan(i, me, p->in[i]);
		p->expected += g_msgs;
	}
	p->recvs = calloc((size_t)p->expected * 2 + 16, sizeof *p->recvs);
	unsigned char **sbuf = calloc((size_t)g_procs * g_msgs, sizeof *sbuf);
	XT_CHECK(p->recvs && sbuf, "out of memory");

	int next[MAXP] = {0}, sends_left = (g_procs - 1) * g_msgs, sends_open = 0;
	double quiet_since = xt_now_s();
	int cancelled = 0;
	while (sends_left > 0 || sends_open > 0 || p->received < p->expected) {
		const uint64_t dice = rnd(&p->rs) % 8;
		if (dice < 3 && sends_left > 0 && sends_open < 32) {
			int to;
			do
				to = (int)(rnd(&p->rs) % g_procs);
			while (to == me || next[to] == g_msgs);
			const int k = next[to]++;
			const struct msg *m = &p->out[to][k];
			unsigned char *b = sbuf[to * g_msgs + k] = malloc(m->len ? m->len : 1);
			xt_fill(b, m->len, payload_seed(me, to, k));
			ssize_t rc;
			while ((rc = fi_tsenddata(p->x.ep, b, m->len, NULL, ((uint64_t)me << 32) | (uint64_t)k,
						  p->addr[to], m->tag, NULL)) == -FI_EAGAIN) {
				struct fi_cq_tagged_entry e;
				if (fi_cq_read(p->x.txcq, &e, 1) == 1)
					sends_open--;
				poll_rx(p);
			}
			XT_RC(rc);
			sends_left--;
			sends_open++;
		} else if (dice < 6 && !cancelled && p->outstanding < 24 &&
			   p->received + p->outstanding < p->expected) {
			post_recv(p, -1, 0);
		} else {
			struct fi_cq_tagged_entry e[8];
			ssize_t n = fi_cq_read(p->x.txcq, e, 8);
			if (n > 0)
				sends_open -= (int)n;
			else if (n == -FI_EAVAIL) {
				struct fi_cq_err_entry err = {0};
				fi_cq_readerr(p->x.txcq, &err, 0);
				XT_CHECK(0, "seed %llu: send error %d (%s)", g_seed, err.err, fi_strerror(err.err));
			}
			if (poll_rx(p) > 0 || n > 0)
				quiet_since = xt_now_s();
		}
		if (xt_now_s() - quiet_since > 10)
			stalled(p, "no progress for 10 s");
		/* Stranded receives: everything is sent, nothing completes. Cancel them, and let
		 * catch-all receives take what is left (posted later, so the order rule still binds). */
		if (!cancelled && sends_left == 0 && p->received < p->expected &&
		    p->received + p->outstanding >= p->expected && xt_now_s() - quiet_since > 0.3) {
			cancelled = 1;
			for (int i = 0; i < p->nrecvs; i++)
				if (!p->recvs[i].done)
					XT_RC(fi_cancel(&p->x.ep->fid, &p->recvs[i]));
			const double t0 = xt_now_s();
			while (p->outstanding > 0) {
				poll_rx(p);
				if (xt_now_s() - t0 > 10)
					stalled(p, "cancelled receives did not finish in 10 s");
			}
			for (int from = 0; from < g_procs; from++)
				for (int k = 0; from != me && k < g_msgs; k++)
					if (!p->got[from][k])
						post_recv(p, from, is_long(p->in[from][k].len));
		}
	}
	/* Everybody done receiving: progress meanwhile, peers may still need our answers. Two rounds
	 * make it a barrier: nobody closes while another still waits on it (a peer that left fails
	 * the receives that wait on it, as a dead one does). */
	for (int round = 0; round < 2; round++) {
		if (me == 0) {
			for (int i = 1; i < g_procs; i++)
				xt_sync_progress(socks[i - 1], p->x.rxcq);
		} else {
			xt_sync_progress(socks[0], p->x.rxcq);
		}
	}

	for (int from = 0; from < g_procs; from++)
		for (int k = 0; from != me && k < g_msgs; k++)
			XT_CHECK(p->got[from][k] == 1, "seed %llu: %d->%d #%d never delivered", g_seed, from, me, k);
	/* the matching rule: receive i posted before j never holds the later of two messages from
	 * one sender that both match i */
	for (int i = 0; i < p->nrecvs; i++) {
		const struct recv_rec *a = &p->recvs[i];
		if (a->got_from < 0)
			continue;
		for (int j = i + 1; j < p->nrecvs; j++) {
			const struct recv_rec *b = &p->recvs[j];
			if (b->got_from != a->got_from || b->got_k > a->got_k)
				continue;
			const struct msg *earlier = &p->in[b->got_from][b->got_k];
			XT_CHECK(!matches(a, b->got_from, earlier->tag, earlier->len),
				 "seed %llu: order: receive %d got #%d from %d, later receive %d got earlier #%d",
				 g_seed, i, a->got_k, a->got_from, j, b->got_k);
		}
	}
	/* which paths the run took, so a reader can see the rendezvous variety was exercised */
	struct fi_exanet_counters_ops *ops;
	struct fi_exanet_counters c = {0};
	if (fi_open_ops(&p->x.ep->fid, FI_EXANET_COUNTERS_OPS, 0, (void **)&ops, NULL) == 0)
		ops->read(p->x.ep, &c, sizeof c);
	printf("  process %d: %d messages in, %d receives (%s); sent eager %llu medium %llu RTS %llu "
	       "RI %llu concurrent %llu; RTRs %llu late %llu stale %llu; suspensions %llu parked %llu "
	       "cancel handshakes %llu\n",
	       me, p->received, p->nrecvs, cancelled ? "stranded ones cancelled" : "none stranded",
	       (unsigned long long)c.eager_sent, (unsigned long long)c.medium_sent,
	       (unsigned long long)c.rndv_sent, (unsigned long long)c.ri_sent,
	       (unsigned long long)c.concurrent, (unsigned long long)c.rtr_sent,
	       (unsigned long long)c.rtr_late, (unsigned long long)c.rtr_stale,
	       (unsigned long long)c.suspensions, (unsigned long long)c.parked,
	       (unsigned long long)c.rtr_cancels);
	xt_close(&p->x);
	for (int i = 0; i < p->nrecvs; i++)
		free(p->recvs[i].buf);
	for (int i = 0; i < g_procs * g_msgs; i++)
		free(sbuf[i]);
	free(sbuf);
	free(p->recvs);
	free(p);
	return 0;
}

static int child(int i, int sock)
{
	int socks[1] = {sock};
	return run(i + 1, socks);
}

int main(void)
{
	xt_init(300);
	const char *s = getenv("STRESS_SEED");
	g_seed = s && *s ? strtoull(s, NULL, 10) : (unsigned long long)time(NULL) ^ (unsigned long long)getpid();
	g_procs = getenv("STRESS_PROCS") ? atoi(getenv("STRESS_PROCS")) : 3;
	g_msgs = getenv("STRESS_MSGS") ? atoi(getenv("STRESS_MSGS")) : 150;
	g_directed = getenv("STRESS_DIRECTED") && atoi(getenv("STRESS_DIRECTED"));
	XT_CHECK(g_procs >= 2 && g_procs <= MAXP && g_msgs > 0 && g_msgs <= MAXMSG, "bad settings");
	const char *family = getenv("FI_EXANET_PROTOCOL");
	g_optimistic = family && !strcmp(family, "optimistic");
	if (g_optimistic)
		g_directed = 1;
	if (getenv("FI_EXANET_MEDIUM_MAX"))
		g_medium_max = strtoull(getenv("FI_EXANET_MEDIUM_MAX"), NULL, 0);
	printf("seed %llu, %d processes, %d messages per pair, protocol %s%s (reproduce: "
	       "STRESS_SEED=%llu STRESS_PROCS=%d STRESS_MSGS=%d STRESS_DIRECTED=%d)\n",
	       g_seed, g_procs, g_msgs, family ? family : "write", g_directed ? ", directed receives" : "",
	       g_seed, g_procs, g_msgs, g_directed);
	fflush(stdout);
	int socks[MAXP];
	pid_t pids[MAXP];
	xt_spawn(g_procs - 1, child, socks, pids);
	run(0, socks);
	xt_reap(g_procs - 1, pids);
	xt_pass("randomized matching stress");
	return 0;
}
