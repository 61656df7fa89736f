/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The rendezvous races of the write-based protocol (research extract §13.15), one case each, with
 * the ordering forced: a process holds back draining its mailbox (FI_EXANET_TESTING_OPS), or does
 * not progress at all, while the other acts. Each case checks every byte, tag and length, and the
 * counters that show the intended path was taken (receiver-initiated, concurrent, parked,
 * dropped as served, NACKed ...). Two processes per case: the parent receives, the child sends.
 */
#include "xt.h"

#include <rdma/fi_ext_exanet.h>
#include <string.h>

#define BIG (256u << 10) /* above the medium limit: a rendezvous */

struct side {
	struct xt_ep x;
	fi_addr_t peer;
	int sock;
	struct fi_exanet_testing_ops *t;
	struct fi_exanet_counters base;
};

static void open_side(struct side *s, int sock, int first)
{
	xt_open_default(&s->x, 0);
	s->sock = sock;
	s->peer = xt_exchange(&s->x, sock, first, NULL);
	XT_RC(fi_open_ops(&s->x.ep->fid, FI_EXANET_TESTING_OPS, 0, (void **)&s->t, NULL));
	s->base = xt_counters(s->x.ep);
}

/* Counter growth since open_side, by field name. */
#define DELTA(s, field) (xt_counters((s)->x.ep).field - (s)->base.field)

static void hold(struct side *s, int on) { XT_RC(s->t->hold_mailbox(s->x.ep, on)); }

static void post(struct side *s, void *buf, size_t len, uint64_t tag, uint64_t ignore, void *ctx)
{
	XT_RC(fi_trecv(s->x.ep, buf, len, NULL, s->peer, tag, ignore, ctx));
}

static void post_from(struct side *s, fi_addr_t from, void *buf, size_t len, uint64_t tag, void *ctx)
{
	XT_RC(fi_trecv(s->x.ep, buf, len, NULL, from, tag, 0, ctx));
}

static void send_to(struct side *s, fi_addr_t to, const void *buf, size_t len, uint64_t tag)
{
	ssize_t rc;
	while ((rc = fi_tsend(s->x.ep, buf, len, NULL, to, tag, NULL)) == -FI_EAGAIN)
		fi_cq_read(s->x.txcq, NULL, 0);
	XT_RC(rc);
}

static void send_wait(struct side *s, const void *buf, size_t len, uint64_t tag)
{
	send_to(s, s->peer, buf, len, tag);
	XT_CHECK(xt_wait(s->x.txcq, NULL, NULL, 30) == 1, "send of tag %#llx", (unsigned long long)tag);
}

/* Waits for the next receive completion and checks it: context, tag, length, payload seed. */
static void expect(struct side *s, void *ctx, void *buf, uint64_t tag, size_t len, unsigned seed)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err = {0};
	XT_CHECK(xt_wait(s->x.rxcq, &e, &err, 30) == 1, "receive %p failed: %d (%s)", ctx, err.err,
		 fi_strerror(err.err));
	XT_CHECK(e.op_context == ctx, "completion for %p (tag %#llx len %zu), expected %p", e.op_context, (unsigned long long)e.tag, e.len, ctx);
	XT_CHECK(e.tag == tag && e.len == len, "receive %p: tag %#llx len %zu, want %#llx %zu", ctx,
		 (unsigned long long)e.tag, e.len, (unsigned long long)tag, len);
	XT_CHECK(xt_verify(buf, len, seed), "receive %p: payload differs", ctx);
}

/* Completions of different receives may come in any order (only matching is ordered): waits
 * for n and checks each against the receive its context names. */
struct want {
	void *ctx, *buf;
	uint64_t tag;
	size_t len;
	unsigned seed;
};

static void expect_all(struct side *s, struct want *w, int n)
{
	for (int k = 0; k < n; k++) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err = {0};
		XT_CHECK(xt_wait(s->x.rxcq, &e, &err, 30) == 1, "receive failed: %d (%s)", err.err,
			 fi_strerror(err.err));
		int i = 0;
		while (i < n && w[i].ctx != e.op_context)
			i++;
		XT_CHECK(i < n, "completion for an unknown context %p", e.op_context);
		XT_CHECK(e.tag == w[i].tag && e.len == w[i].len, "receive %d: tag %#llx len %zu, want %#llx %zu",
			 i, (unsigned long long)e.tag, e.len, (unsigned long long)w[i].tag, w[i].len);
		XT_CHECK(xt_verify(w[i].buf, w[i].len, w[i].seed), "receive %d: payload differs", i);
		w[i].ctx = NULL; /* twice would now fail as unknown */
	}
}

static void *filled(size_t len, unsigned seed)
{
	void *b = malloc(len);
	XT_CHECK(b, "out of memory");
	xt_fill(b, len, seed);
	return b;
}

static void *zeroed(size_t len)
{
	void *b = calloc(1, len);
	XT_CHECK(b, "out of memory");
	return b;
}

static void run_case(const char *name, xt_child_fn child, void (*parent)(struct side *))
{
	int sock;
	pid_t pid;
	xt_spawn(1, child, &sock, &pid);
	struct side s;
	open_side(&s, sock, 0);
	parent(&s);
	xt_sync_progress(sock, s.x.rxcq);
	xt_close(&s.x);
	xt_reap(1, &pid);
	xt_pass(name);
}

static int child_done(struct side *s)
{
	xt_sync_progress(s->sock, s->x.txcq);
	xt_close(&s->x);
	return 0;
}

/* ---- 1. SI long, RI long, and RTS/RTR crossing: exactly one write each ------------------------ */

static int c1(int i, int sock)
{
	(void)i;
	struct side s;
	open_side(&s, sock, 1);
	void *a = filled(BIG, 1), *b = filled(BIG, 2), *c = filled(BIG, 3);
	xt_sync(sock);                 /* nothing posted at the receiver yet */
	send_to(&s, s.peer, a, BIG, 1); /* an RTS that waits there unexpected */
	xt_sync(sock);                 /* the receive for it is posted now */
	XT_CHECK(xt_wait(s.x.txcq, NULL, NULL, 30) == 1, "SI send");
	xt_sync(sock);                 /* receive 2 is posted: its RTR is in our mailbox */
	send_wait(&s, b, BIG, 2);
	hold(&s, 1);
	xt_sync(sock);                 /* receive 3 is posted; its RTR waits in our held mailbox */
	send_to(&s, s.peer, c, BIG, 3); /* cannot see the RTR: goes out as an RTS */
	hold(&s, 0);
	XT_CHECK(xt_wait(s.x.txcq, NULL, NULL, 30) == 1, "crossing send");
	XT_CHECK(DELTA(&s, ri_sent) == 1 && DELTA(&s, concurrent) == 1 && DELTA(&s, rndv_sent) == 2,
		 "sender: ri %llu concurrent %llu rts %llu", (unsigned long long)DELTA(&s, ri_sent),
		 (unsigned long long)DELTA(&s, concurrent), (unsigned long long)DELTA(&s, rndv_sent));
	return child_done(&s);
}

static void p1(struct side *s)
{
	void *a = zeroed(BIG), *b = zeroed(BIG), *c = zeroed(BIG);
	int ca, cb, cc;
	xt_sync_progress(s->sock, s->x.rxcq);
	xt_sync_progress(s->sock, s->x.rxcq); /* the RTS is sent */
	while (DELTA(s, rndv_recv) == 0)     /* and taken in, unexpected: no RTR for its receive */
		fi_cq_read(s->x.rxcq, NULL, 0);
	post(s, a, BIG, 1, 0, &ca);
	expect(s, &ca, a, 1, BIG, 1);
	post(s, b, BIG, 2, 0, &cb);
	xt_sync(s->sock);
	expect(s, &cb, b, 2, BIG, 2);
	post(s, c, BIG, 3, 0, &cc);
	xt_sync(s->sock);
	expect(s, &cc, c, 3, BIG, 3);
	XT_CHECK(DELTA(s, ri_recv) == 1 && DELTA(s, rtr_sent) == 2,
		 "receiver: ri %llu rtr %llu", (unsigned long long)DELTA(s, ri_recv),
		 (unsigned long long)DELTA(s, rtr_sent));
	XT_CHECK(xt_drain(s->x.rxcq) == 0, "a receive completed twice");
}

/* ---- 2. Suspension: wildcard source, overlapping class, and the lift keeping posting order -- */

static int c2(int i, int sock)
{
	(void)i;
	struct side s;
	open_side(&s, sock, 1);
	void *m[8];
	for (unsigned k = 0; k < 8; k++)
		m[k] = filled(BIG, 20 + k);
	xt_sync_progress(sock, s.x.txcq); /* wildcard W, suspended R1, R2 posted */
	send_wait(&s, m[0], BIG, 10);    /* -> W (no RTR can name it) */
	send_wait(&s, m[1], BIG, 11);    /* -> R2 by its RTR */
	send_wait(&s, m[2], BIG, 10);    /* -> R1 by its late RTR */
	xt_sync_progress(sock, s.x.txcq); /* class C, suspended E, self receive posted */
	send_wait(&s, m[3], BIG, 0x22);  /* -> C */
	send_wait(&s, m[4], BIG, 0x21);  /* -> E after its late RTR */
	xt_sync_progress(sock, s.x.txcq); /* W2 and suspended R3 posted */
	send_wait(&s, m[5], BIG, 30);    /* -> W2; R3 lifts; R4 posted after */
	xt_sync_progress(sock, s.x.txcq);
	send_wait(&s, m[6], BIG, 30);    /* -> R3, posted first */
	send_wait(&s, m[7], BIG, 30);    /* -> R4 */
	return child_done(&s);
}

static void p2(struct side *s)
{
	void *w = zeroed(BIG), *r1 = zeroed(BIG), *r2 = zeroed(BIG);
	int cw, c1_, c2_;
	XT_RC(fi_trecv(s->x.ep, w, BIG, NULL, FI_ADDR_UNSPEC, 10, 0, &cw));
	post(s, r1, BIG, 10, 0, &c1_); /* W could take its message: suspended */
	post(s, r2, BIG, 11, 0, &c2_); /* another class: its RTR goes now */
	XT_CHECK(DELTA(s, suspensions) == 1 && DELTA(s, rtr_sent) == 1, "suspensions %llu rtr %llu",
		 (unsigned long long)DELTA(s, suspensions), (unsigned long long)DELTA(s, rtr_sent));
	xt_sync(s->sock);
	struct want a[] = {{&cw, w, 10, BIG, 20}, {&c2_, r2, 11, BIG, 21}, {&c1_, r1, 10, BIG, 22}};
	expect_all(s, a, 3);
	XT_CHECK(DELTA(s, rtr_late) == 1, "late RTRs %llu", (unsigned long long)DELTA(s, rtr_late));

	/* ignore bits: a class receive C = {0x20..0x2f} suspends an overlapping exact receive from
	 * the same source only; the same exact tag from another source (ourselves) is not held */
	void *c = zeroed(BIG), *e = zeroed(BIG), *self = zeroed(BIG), *mine = filled(BIG, 99);
	int cc, ce, cs;
	post(s, c, BIG, 0x20, 0xf, &cc);
	post(s, e, BIG, 0x21, 0, &ce);
	fi_addr_t me = xt_insert(&s->x, s->x.name);
	post_from(s, me, self, BIG, 0x21, &cs);
	XT_CHECK(DELTA(s, suspensions) == 2, "only the overlapping receive from the same source waits");
	send_to(s, me, mine, BIG, 0x21);
	expect(s, &cs, self, 0x21, BIG, 99);
	XT_CHECK(xt_wait(s->x.txcq, NULL, NULL, 30) == 1, "send to self");
	xt_sync(s->sock);
	struct want b[] = {{&cc, c, 0x22, BIG, 23}, {&ce, e, 0x21, BIG, 24}};
	expect_all(s, b, 2);

	/* extract §12.1: R3 is posted under a wildcard; after the lift, R4 (posted later, same
	 * class) must not take the message R3 is owed */
	void *w2 = zeroed(BIG), *r3 = zeroed(BIG), *r4 = zeroed(BIG);
	int cw2, c3, c4;
	XT_RC(fi_trecv(s->x.ep, w2, BIG, NULL, FI_ADDR_UNSPEC, 30, 0, &cw2));
	post(s, r3, BIG, 30, 0, &c3);
	xt_sync(s->sock);
	expect(s, &cw2, w2, 30, BIG, 25);
	post(s, r4, BIG, 30, 0, &c4);
	xt_sync(s->sock);
	struct want d[] = {{&c3, r3, 30, BIG, 26}, {&c4, r4, 30, BIG, 27}};
	expect_all(s, d, 2);
}

/* ---- 3. An eager send crosses a long receive's RTR; the next long send takes the next one --- */

static int c3(int i, int sock)
{
	(void)i;
	struct side s;
	open_side(&s, sock, 1);
	void *small = filled(16, 30), *big = filled(BIG, 31);
	xt_sync(sock); /* R1 and R2 posted, both with RTRs */
	send_wait(&s, small, 16, 40);
	send_wait(&s, big, BIG, 40);
	XT_CHECK(DELTA(&s, rtr_dropped) == 1 && DELTA(&s, ri_sent) == 1,
		 "RTRs dropped %llu, RI %llu", (unsigned long long)DELTA(&s, rtr_dropped),
		 (unsigned long long)DELTA(&s, ri_sent));
	return child_done(&s);
}

static void p3(struct side *s)
{
	void *r1 = zeroed(BIG), *r2 = zeroed(BIG);
	int c1_, c2_;
	post(s, r1, BIG, 40, 0, &c1_);
	post(s, r2, BIG, 40, 0, &c2_);
	xt_sync(s->sock);
	struct want a[] = {{&c1_, r1, 40, 16, 30}, {&c2_, r2, 40, BIG, 31}};
	expect_all(s, a, 2);
}

/* ---- 4. The write's notification is taken before the RTS it served (Fig. 3.15) --------------- */

static int c4(int i, int sock)
{
	(void)i;
	struct side s;
	open_side(&s, sock, 1);
	void *a = filled(BIG, 40), *b = filled(BIG, 41);
	hold(&s, 1);
	xt_sync(sock); /* the receive is posted, its RTR waits in our held mailbox */
	send_to(&s, s.peer, a, BIG, 50); /* RTS first */
	hold(&s, 0);
	XT_CHECK(xt_wait(s.x.txcq, NULL, NULL, 30) == 1, "send"); /* then the RTR serves it */
	xt_sync(sock);
	xt_sync(sock); /* the next receive is posted */
	send_wait(&s, b, BIG, 50);
	return child_done(&s);
}

static void p4(struct side *s)
{
	void *r = zeroed(BIG), *r2 = zeroed(BIG);
	int cr, cr2;
	post(s, r, BIG, 50, 0, &cr);
	hold(s, 1); /* the RTS will wait in our mailbox */
	xt_sync(s->sock);
	xt_sync(s->sock); /* written: the notification is here, the RTS behind it unread */
	expect(s, &cr, r, 50, BIG, 40);
	hold(s, 0);
	post(s, r2, BIG, 50, 0, &cr2); /* the served RTS must not match this one */
	xt_sync(s->sock);
	expect(s, &cr2, r2, 50, BIG, 41);
	XT_CHECK(DELTA(s, served_drops) == 1, "RTS dropped as served: %llu",
		 (unsigned long long)DELTA(s, served_drops));
}

/* ---- 5. Back to back: a receiver-initiated write, then an eager send of the same class. The
 * eager packet arrives while the write's notification is not taken yet: it is parked (C1). ---- */

static int c5(int i, int sock)
{
	(void)i;
	struct side s;
	open_side(&s, sock, 1);
	void *big = filled(BIG, 50), *small = filled(24, 51);
	xt_sync(sock); /* R1 and R2 posted */
	send_wait(&s, big, BIG, 60);
	send_wait(&s, small, 24, 60);
	xt_sync(sock); /* both are at the receiver before it looks */
	return child_done(&s);
}

static void p5(struct side *s)
{
	void *r1 = zeroed(BIG), *r2 = zeroed(BIG);
	int c1_, c2_;
	post(s, r1, BIG, 60, 0, &c1_);
	post(s, r2, BIG, 60, 0, &c2_);
	hold(s, 1);
	xt_sync(s->sock);
	xt_sync(s->sock);
	hold(s, 0);
	struct want a[] = {{&c1_, r1, 60, BIG, 50}, {&c2_, r2, 60, 24, 51}};
	expect_all(s, a, 2);
	XT_CHECK(DELTA(s, parked) >= 1, "the eager packet was not parked");
}

/* ---- 6. A stale RTR: the sender's log no longer reaches back to the receiver's watermark ----- */

static int c6(int i, int sock)
{
	(void)i;
	struct side s;
	open_side(&s, sock, 1);
	uint64_t v = 7;
	for (unsigned k = 0; k < 100; k++) {
		ssize_t rc;
		while ((rc = fi_tinject(s.x.ep, &v, sizeof v, s.peer, 70)) == -FI_EAGAIN)
			fi_cq_read(s.x.txcq, NULL, 0);
		XT_RC(rc);
	}
	xt_sync(sock); /* the receiver, not reading its mailbox, posts R: RTR after psn 0 */
	xt_sync(sock);
	void *big = filled(BIG, 60);
	send_wait(&s, big, BIG, 71);
	XT_CHECK(DELTA(&s, rtr_stale) == 1 && DELTA(&s, ri_sent) == 0, "stale %llu",
		 (unsigned long long)DELTA(&s, rtr_stale));
	return child_done(&s);
}

static void p6(struct side *s)
{
	void *r = zeroed(BIG);
	int cr;
	hold(s, 1);
	xt_sync(s->sock);
	post(s, r, BIG, 71, 0, &cr);
	xt_sync(s->sock);
	hold(s, 0);
	expect(s, &cr, r, 71, BIG, 60); /* NACKed: sender-initiated after all */
	uint64_t got;
	for (unsigned k = 0; k < 100; k++) {
		post(s, &got, sizeof got, 70, 0, NULL);
		XT_CHECK(xt_wait(s->x.rxcq, NULL, NULL, 30) == 1 && got == 7, "eager %u", k);
	}
}

/* ---- 7. FI_DELIVERY_COMPLETE on a small send: a rendezvous, served by the RTR when present -- */

static int c7(int i, int sock)
{
	(void)i;
	struct side s;
	open_side(&s, sock, 1);
	void *small = filled(32, 70);
	xt_sync(sock);
	struct fi_msg_tagged m = {.msg_iov = &(struct iovec){small, 32}, .iov_count = 1,
				  .addr = s.peer, .tag = 80};
	XT_RC(fi_tsendmsg(s.x.ep, &m, FI_COMPLETION | FI_DELIVERY_COMPLETE));
	XT_CHECK(xt_wait(s.x.txcq, NULL, NULL, 30) == 1, "delivery-complete send");
	m.tag = 81; /* no receive posted for it yet: an RTS, completed after the CTS and write */
	XT_RC(fi_tsendmsg(s.x.ep, &m, FI_COMPLETION | FI_MATCH_COMPLETE));
	xt_sync(sock);
	XT_CHECK(xt_wait(s.x.txcq, NULL, NULL, 30) == 1, "match-complete send");
	XT_CHECK(DELTA(&s, ri_sent) == 1 && DELTA(&s, rndv_sent) == 1, "ri %llu rts %llu",
		 (unsigned long long)DELTA(&s, ri_sent), (unsigned long long)DELTA(&s, rndv_sent));
	return child_done(&s);
}

static void p7(struct side *s)
{
	void *r = zeroed(BIG), *r2 = zeroed(BIG);
	int cr, cr2;
	post(s, r, BIG, 80, 0, &cr);
	xt_sync(s->sock);
	expect(s, &cr, r, 80, 32, 70);
	xt_sync(s->sock);
	post(s, r2, BIG, 81, 0, &cr2);
	expect(s, &cr2, r2, 81, 32, 70);
}

/* ---- 8. Peek never sees a message an RTR already delivered; claim and discard of RTS and Env+D */

static int c8(int i, int sock)
{
	(void)i;
	struct side s;
	open_side(&s, sock, 1);
	void *a = filled(BIG, 80), *b = filled(BIG, 81), *e = filled(8, 82);
	xt_sync(sock);
	send_wait(&s, a, BIG, 90);      /* into the posted receive by its RTR */
	send_to(&s, s.peer, b, BIG, 91); /* no receive: an unexpected RTS */
	send_to(&s, s.peer, e, 8, 92);   /* eager, discarded by the receiver */
	for (int k = 0; k < 2; k++) /* the claimed RTS completes once the receiver claims it */
		XT_CHECK(xt_wait(s.x.txcq, NULL, NULL, 30) == 1, "claimed and discarded sends complete");
	return child_done(&s);
}

static void p8(struct side *s)
{
	void *r = zeroed(BIG), *r2 = zeroed(BIG);
	int cr;
	post(s, r, BIG, 90, 0, &cr);
	xt_sync(s->sock);
	expect(s, &cr, r, 90, BIG, 80);
	struct fi_context ctx;
	struct fi_msg_tagged m = {.msg_iov = &(struct iovec){r2, BIG}, .iov_count = 1, .addr = s->peer,
				  .tag = 90, .context = &ctx};
	XT_RC(fi_trecvmsg(s->x.ep, &m, FI_PEEK));
	struct fi_cq_err_entry err = {0};
	XT_CHECK(xt_wait(s->x.rxcq, NULL, &err, 30) == 0 && err.err == FI_ENOMSG,
		 "peek saw a message its RTR already delivered");
	struct fi_cq_tagged_entry e = {0};
	m.tag = 91;
	do { /* until the RTS has arrived */
		XT_RC(fi_trecvmsg(s->x.ep, &m, FI_PEEK | FI_CLAIM));
		memset(&err, 0, sizeof err);
	} while (xt_wait(s->x.rxcq, &e, &err, 30) == 0 && err.err == FI_ENOMSG);
	XT_CHECK(e.len == BIG && e.tag == 91, "peek: len %zu tag %#llx", e.len, (unsigned long long)e.tag);
	XT_RC(fi_trecvmsg(s->x.ep, &m, FI_CLAIM));
	XT_CHECK(xt_wait(s->x.rxcq, &e, NULL, 30) == 1 && e.len == BIG, "claimed receive");
	XT_CHECK(xt_verify(r2, BIG, 81), "claimed payload");
	m.tag = 92;
	m.msg_iov = NULL;
	m.iov_count = 0;
	do {
		XT_RC(fi_trecvmsg(s->x.ep, &m, FI_PEEK | FI_DISCARD));
		memset(&err, 0, sizeof err);
	} while (xt_wait(s->x.rxcq, &e, &err, 30) == 0 && err.err == FI_ENOMSG);
}

/* ---- 9. Truncation by a receiver-initiated write: nothing past the buffer, FI_ETRUNC -------- */

static int c9(int i, int sock)
{
	(void)i;
	struct side s;
	open_side(&s, sock, 1);
	void *big = filled(2 * BIG, 90);
	xt_sync(sock);
	send_wait(&s, big, 2 * BIG, 100);
	XT_CHECK(DELTA(&s, ri_sent) == 1, "the truncated message was not receiver-initiated");
	return child_done(&s);
}

/* Posts a BIG receive into the first half of a 2 * BIG guard-filled buffer, for a 2 * BIG message
 * (the peer sends it after a sync when `sync`); checks FI_ETRUNC, what fits, and the guard. */
static void truncated_receive(struct side *s, uint64_t tag, unsigned seed, int sync)
{
	unsigned char *r = malloc(2 * BIG);
	memset(r, 0xa5, 2 * BIG);
	int cr;
	post(s, r, BIG, tag, 0, &cr);
	if (sync)
		xt_sync(s->sock);
	struct fi_cq_err_entry err = {0};
	XT_CHECK(xt_wait(s->x.rxcq, NULL, &err, 30) == 0 && err.err == FI_ETRUNC && err.olen == BIG &&
			 err.len == BIG && err.tag == tag && err.op_context == &cr,
		 "truncation: err %d olen %zu len %zu", err.err, err.olen, err.len);
	XT_CHECK(xt_verify(r, BIG, seed), "the part that fits");
	for (size_t k = BIG; k < 2 * BIG; k++)
		XT_CHECK(r[k] == 0xa5, "byte %zu past the receive buffer was written", k);
}

static void p9(struct side *s) { truncated_receive(s, 100, 90, 1); }

/* ---- 10. Cancel: with an RTR out (handshake), lost to a write already done, and without RTR - */

static int c10(int i, int sock)
{
	(void)i;
	struct side s;
	open_side(&s, sock, 1);
	void *a = filled(BIG, 100), *b = filled(BIG, 101);
	xt_sync_progress(sock, s.x.txcq); /* R posted and cancelled: we answer the handshake */
	xt_sync_progress(sock, s.x.txcq);
	send_wait(&s, a, BIG, 110); /* after the cancel: into the next receive, never the cancelled */
	xt_sync(sock);              /* R' posted (RTR here) */
	send_wait(&s, b, BIG, 111); /* written before the receiver cancels */
	xt_sync(sock);
	XT_CHECK(DELTA(&s, ri_sent) == 2, "ri %llu", (unsigned long long)DELTA(&s, ri_sent));
	return child_done(&s);
}

static void p10(struct side *s)
{
	unsigned char *r = malloc(BIG), *late = zeroed(BIG), *r2 = zeroed(BIG);
	memset(r, 0x3c, BIG);
	int cr, clate, cr2, csmall;
	post(s, r, BIG, 110, 0, &cr);
	XT_RC(fi_cancel(&s->x.ep->fid, &cr)); /* its RTR is out: the sender must withdraw it */
	xt_sync(s->sock);
	struct fi_cq_err_entry err = {0};
	XT_CHECK(xt_wait(s->x.rxcq, NULL, &err, 30) == 0 && err.err == FI_ECANCELED &&
			 err.op_context == &cr, "cancel with an RTR out: err %d", err.err);
	XT_CHECK(DELTA(s, rtr_cancels) == 1, "no handshake");
	post(s, late, BIG, 110, 0, &clate); /* its RTR is out before the sender sends */
	xt_sync(s->sock);
	expect(s, &clate, late, 110, BIG, 100);
	for (size_t k = 0; k < BIG; k++)
		XT_CHECK(r[k] == 0x3c, "byte %zu of the cancelled buffer was written", k);

	post(s, r2, BIG, 111, 0, &cr2);
	hold(s, 1);
	xt_sync(s->sock);
	xt_sync(s->sock); /* the write is done (its notification is here) */
	XT_RC(fi_cancel(&s->x.ep->fid, &cr2)); /* loses: the receive completes normally, once */
	hold(s, 0);
	expect(s, &cr2, r2, 111, BIG, 101);
	XT_CHECK(xt_drain(s->x.rxcq) == 0, "a second completion for the receive");
	memset(&err, 0, sizeof err);
	XT_CHECK(fi_cq_readerr(s->x.rxcq, &err, 0) < 0, "an error for the receive that completed");

	uint64_t small; /* no RTR (too small): cancelled at once */
	post(s, &small, sizeof small, 112, 0, &csmall);
	XT_RC(fi_cancel(&s->x.ep->fid, &csmall));
	memset(&err, 0, sizeof err);
	XT_CHECK(xt_wait(s->x.rxcq, NULL, &err, 30) == 0 && err.err == FI_ECANCELED, "small cancel");
}

/* ---- 11. Protocol bits as MPI libraries use them: a receive that ignores a sync bit gets its
 * RTR, and the completion carries the full tag the sender used ---------------------------------- */

#define SYNC_BIT (1ull << 58)

static int c11(int i, int sock)
{
	(void)i;
	struct side s;
	open_side(&s, sock, 1);
	void *a = filled(BIG, 110), *b = filled(BIG, 111);
	xt_sync(sock);
	send_wait(&s, a, BIG, 120 | SYNC_BIT);
	send_wait(&s, b, BIG, 120);
	XT_CHECK(DELTA(&s, ri_sent) == 2, "ri %llu", (unsigned long long)DELTA(&s, ri_sent));
	return child_done(&s);
}

static void p11(struct side *s)
{
	void *r = zeroed(BIG), *r2 = zeroed(BIG);
	int cr, cr2;
	post(s, r, BIG, 120, SYNC_BIT, &cr);
	post(s, r2, BIG, 120, SYNC_BIT, &cr2);
	xt_sync(s->sock);
	struct want a[] = {{&cr, r, 120 | SYNC_BIT, BIG, 110}, {&cr2, r2, 120, BIG, 111}};
	expect_all(s, a, 2);
	XT_CHECK(DELTA(s, rtr_sent) == 2 && DELTA(s, suspensions) == 0, "rtr %llu",
		 (unsigned long long)DELTA(s, rtr_sent));
}

/* ==== The optimistic variant (FI_EXANET_PROTOCOL=optimistic): a message above the medium limit
 * never announces itself; it waits at its sender for an RTR of its tag. Run by the
 * rendezvous_races_optimistic test. ============================================================ */

#define SHORT 1000 /* at or below the medium limit: matched at the receiver as usual */

/* ---- o1. A long send before its receive waits for the RTR; a receive before its send is fast */

static int o1c(int i, int sock)
{
	(void)i;
	struct side s;
	open_side(&s, sock, 1);
	void *a = filled(BIG, 201), *b = filled(BIG, 202);
	send_to(&s, s.peer, a, BIG, 1); /* no receive yet: nothing is sent, the send waits */
	xt_sync(sock);
	XT_CHECK(xt_wait(s.x.txcq, NULL, NULL, 30) == 1, "send before its receive");
	xt_sync(sock); /* receive b is posted: its RTR is in our mailbox */
	send_wait(&s, b, BIG, 2);
	XT_CHECK(DELTA(&s, rndv_sent) == 0 && DELTA(&s, ri_sent) == 2 && DELTA(&s, rtr_stored) == 1,
		 "sender: rts %llu ri %llu stored %llu", (unsigned long long)DELTA(&s, rndv_sent),
		 (unsigned long long)DELTA(&s, ri_sent), (unsigned long long)DELTA(&s, rtr_stored));
	return child_done(&s);
}

static void o1p(struct side *s)
{
	void *a = zeroed(BIG), *b = zeroed(BIG);
	int ca, cb;
	xt_sync(s->sock); /* the send is posted */
	post(s, a, BIG, 1, 0, &ca);
	expect(s, &ca, a, 1, BIG, 201);
	post(s, b, BIG, 2, 0, &cb);
	xt_sync(s->sock);
	expect(s, &cb, b, 2, BIG, 202);
	XT_CHECK(DELTA(s, rtr_sent) == 2 && DELTA(s, ri_recv) == 2 && DELTA(s, fast_recv) == 1 &&
			 DELTA(s, rndv_recv) == 0,
		 "receiver: rtr %llu ri %llu fast %llu rts %llu", (unsigned long long)DELTA(s, rtr_sent),
		 (unsigned long long)DELTA(s, ri_recv), (unsigned long long)DELTA(s, fast_recv),
		 (unsigned long long)DELTA(s, rndv_recv));
}

/* ---- o2. Waiting long sends hold nothing back: both sides send long then short of one tag and
 * receive the short one first (a psn taken by the long send would deadlock this); the size
 * classes never meet, so a long receive posted first leaves the short message alone ---------- */

static void o2_both(struct side *s, unsigned mine, unsigned theirs)
{
	void *l = filled(BIG, mine), *sh = filled(SHORT, mine + 1);
	void *rl = zeroed(BIG), *rs = zeroed(SHORT);
	int cl, cs;
	send_to(s, s->peer, l, BIG, 1);
	send_to(s, s->peer, sh, SHORT, 1);
	post(s, rs, SHORT, 1, 0, &cs);
	expect(s, &cs, rs, 1, SHORT, theirs + 1);
	post(s, rl, BIG, 1, 0, &cl);
	expect(s, &cl, rl, 1, BIG, theirs);
	XT_CHECK(xt_wait(s->x.txcq, NULL, NULL, 30) == 1 && xt_wait(s->x.txcq, NULL, NULL, 30) == 1,
		 "sends");
	/* long receive first, then short, same tag; the peer sends short first */
	void *rl2 = zeroed(BIG), *rs2 = zeroed(SHORT);
	post(s, rl2, BIG, 2, 0, &cl);
	post(s, rs2, SHORT, 2, 0, &cs);
	xt_sync_progress(s->sock, s->x.rxcq);
	send_to(s, s->peer, sh, SHORT, 2);
	send_to(s, s->peer, l, BIG, 2);
	struct want w[] = {{&cs, rs2, 2, SHORT, theirs + 1}, {&cl, rl2, 2, BIG, theirs}};
	expect_all(s, w, 2);
	XT_CHECK(xt_wait(s->x.txcq, NULL, NULL, 30) == 1 && xt_wait(s->x.txcq, NULL, NULL, 30) == 1,
		 "sends");
}

static int o2c(int i, int sock)
{
	(void)i;
	struct side s;
	open_side(&s, sock, 1);
	o2_both(&s, 210, 220);
	return child_done(&s);
}

static void o2p(struct side *s) { o2_both(s, 220, 210); }

/* ---- o3. Matching at the sender keeps the matching rule: per tag in order, and a receive with
 * ignore bits takes the first waiting send it matches; the same with the RTRs there first ---- */

static int o3c(int i, int sock)
{
	(void)i;
	struct side s;
	open_side(&s, sock, 1);
	const uint64_t tags[6] = {5, 6, 5, 6, 5, 5};
	void *m[6];
	for (int k = 0; k < 6; k++)
		m[k] = filled(BIG, 230 + k);
	for (int k = 0; k < 3; k++)
		send_to(&s, s.peer, m[k], BIG, tags[k]); /* all wait: no receive yet */
	xt_sync(sock);
	for (int k = 0; k < 3; k++)
		XT_CHECK(xt_wait(s.x.txcq, NULL, NULL, 30) == 1, "send %d", k);
	xt_sync(sock); /* three RTRs wait in our mailbox */
	for (int k = 3; k < 6; k++)
		send_to(&s, s.peer, m[k], BIG, tags[k]);
	for (int k = 3; k < 6; k++)
		XT_CHECK(xt_wait(s.x.txcq, NULL, NULL, 30) == 1, "send %d", k);
	XT_CHECK(DELTA(&s, rtr_stored) == 3, "stored %llu", (unsigned long long)DELTA(&s, rtr_stored));
	return child_done(&s);
}

static void o3p(struct side *s)
{
	void *r[6];
	int c[6];
	for (int k = 0; k < 6; k++)
		r[k] = zeroed(BIG);
	xt_sync(s->sock);
	post(s, r[0], BIG, 5, 0, &c[0]);
	post(s, r[1], BIG, 0, ~0ull, &c[1]);
	post(s, r[2], BIG, 5, 0, &c[2]);
	struct want first[] = {{&c[0], r[0], 5, BIG, 230}, {&c[1], r[1], 6, BIG, 231},
			       {&c[2], r[2], 5, BIG, 232}};
	expect_all(s, first, 3);
	post(s, r[3], BIG, 5, 0, &c[3]);
	post(s, r[4], BIG, 0, ~0ull, &c[4]);
	post(s, r[5], BIG, 5, 0, &c[5]);
	xt_sync(s->sock); /* then the sender sends tags 6, 5, 5 */
	struct want then[] = {{&c[4], r[4], 6, BIG, 233}, {&c[3], r[3], 5, BIG, 234},
			      {&c[5], r[5], 5, BIG, 235}};
	expect_all(s, then, 3);
}

/* ---- o4. Truncation: nothing past the buffer, FI_ETRUNC with the overflow ------------------ */

static int o4c(int i, int sock)
{
	(void)i;
	struct side s;
	open_side(&s, sock, 1);
	void *big = filled(2 * BIG, 240);
	send_wait(&s, big, 2 * BIG, 7);
	return child_done(&s);
}

static void o4p(struct side *s) { truncated_receive(s, 7, 240, 0); }

/* ---- o5. What the variant refuses, with -FI_EOPNOTSUPP and nothing posted: any-source
 * receives, FI_PEEK, FI_CLAIM. Receives in several buffers work on both sides of the medium
 * limit (a long one lands in a contiguous buffer of the provider's and is scattered) ---------- */

static int o5c(int i, int sock)
{
	(void)i;
	struct side s;
	open_side(&s, sock, 1);
	void *big = filled(BIG, 251);
	void *sh = filled(SHORT, 250);
	xt_sync(sock);
	send_wait(&s, big, BIG, 8);
	send_wait(&s, sh, SHORT, 9);
	return child_done(&s);
}

static void o5p(struct side *s)
{
	unsigned char *b = zeroed(BIG), *l = zeroed(BIG + 64);
	int ctx, lctx;
	XT_CHECK(fi_trecv(s->x.ep, b, SHORT, NULL, FI_ADDR_UNSPEC, 9, 0, &ctx) == -FI_EOPNOTSUPP,
		 "short any-source receive");
	XT_CHECK(fi_trecv(s->x.ep, b, BIG, NULL, FI_ADDR_UNSPEC, 9, 0, &ctx) == -FI_EOPNOTSUPP,
		 "long any-source receive");
	struct iovec iov[2] = {{b, BIG / 2}, {b + BIG / 2, BIG / 2}};
	struct fi_msg_tagged m = {.msg_iov = iov, .iov_count = 1, .addr = s->peer, .tag = 9,
				  .context = &ctx};
	struct fi_context fctx = {{0}}; /* FI_CLAIM keeps its handle in the caller's fi_context */
	m.context = &fctx;
	XT_CHECK(fi_trecvmsg(s->x.ep, &m, FI_PEEK) == -FI_EOPNOTSUPP, "FI_PEEK");
	XT_CHECK(fi_trecvmsg(s->x.ep, &m, FI_CLAIM) == -FI_EOPNOTSUPP, "FI_CLAIM");
	/* a long receive in three uneven buffers, 32 guard bytes between them */
	memset(l, 0x5a, BIG + 64);
	unsigned char *p0 = l, *p1 = l + 1032, *p2 = l + BIG - 3936;
	struct iovec liov[3] = {{p0, 1000}, {p1, BIG - 5000}, {p2, 4000}};
	struct fi_msg_tagged lm = {.msg_iov = liov, .iov_count = 3, .addr = s->peer, .tag = 8,
				   .context = &lctx};
	XT_RC(fi_trecvmsg(s->x.ep, &lm, 0));
	m.context = &ctx;
	m.iov_count = 2;
	iov[0].iov_len = iov[1].iov_len = SHORT / 2;
	iov[1].iov_base = b + SHORT / 2;
	XT_RC(fi_trecvmsg(s->x.ep, &m, 0));
	xt_sync(s->sock);
	/* the two complete in either order: the long one when progress takes its bell */
	for (int n = 0; n < 2; n++) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err = {0};
		XT_CHECK(xt_wait(s->x.rxcq, &e, &err, 30) == 1, "receive failed: %d", err.err);
		if (e.op_context == &ctx) {
			XT_CHECK(e.len == SHORT && e.tag == 9 && xt_verify(b, SHORT, 250), "short two-buffer receive");
			continue;
		}
		XT_CHECK(e.op_context == &lctx && e.len == BIG && e.tag == 8, "long receive in three buffers");
		unsigned char *flat = malloc(BIG);
		XT_CHECK(flat, "out of memory");
		memcpy(flat, p0, 1000);
		memcpy(flat + 1000, p1, BIG - 5000);
		memcpy(flat + BIG - 4000, p2, 4000);
		XT_CHECK(xt_verify(flat, BIG, 251), "payload of the three-buffer receive");
		for (int k = 0; k < 32; k++)
			XT_CHECK(l[1000 + k] == 0x5a && l[BIG - 3968 + k] == 0x5a, "wrote into the gap between buffers");
		free(flat);
	}
	XT_CHECK(xt_drain(s->x.rxcq) == 0, "a refused receive completed");
}

/* ---- o6. Cancel: the RTR is withdrawn by handshake and the send goes to the next receive --- */

static int o6c(int i, int sock)
{
	(void)i;
	struct side s;
	open_side(&s, sock, 1);
	void *a = filled(BIG, 260);
	xt_sync_progress(sock, s.x.txcq); /* R posted and cancelled: we answer the handshake */
	xt_sync(sock);                    /* R' posted */
	send_wait(&s, a, BIG, 11);
	XT_CHECK(DELTA(&s, rtr_stored) == 2 && DELTA(&s, ri_sent) == 1, "stored %llu ri %llu",
		 (unsigned long long)DELTA(&s, rtr_stored), (unsigned long long)DELTA(&s, ri_sent));
	return child_done(&s);
}

static void o6p(struct side *s)
{
	unsigned char *r = malloc(BIG), *r2 = zeroed(BIG);
	memset(r, 0x3c, BIG);
	int cr, cr2;
	post(s, r, BIG, 11, 0, &cr);
	XT_RC(fi_cancel(&s->x.ep->fid, &cr));
	struct fi_cq_err_entry err = {0};
	XT_CHECK(xt_wait(s->x.rxcq, NULL, &err, 30) == 0 && err.err == FI_ECANCELED &&
			 err.op_context == &cr, "cancel with an RTR out: err %d", err.err);
	XT_CHECK(DELTA(s, rtr_cancels) == 1, "no handshake");
	xt_sync_progress(s->sock, s->x.rxcq);
	post(s, r2, BIG, 11, 0, &cr2);
	xt_sync(s->sock);
	expect(s, &cr2, r2, 11, BIG, 260);
	for (size_t k = 0; k < BIG; k++)
		XT_CHECK(r[k] == 0x3c, "byte %zu of the cancelled buffer was written", k);
	XT_RC(fi_cancel(&s->x.ep->fid, &cr2)); /* completed already: nothing to cancel, no error */
	XT_CHECK(xt_drain(s->x.rxcq) == 0, "a completion for a receive that had completed");
}

/* ---- o7. A peer that does not run the variant refuses the RTR: the receive fails, no hang ---- */

static int o7c(int i, int sock)
{
	(void)i;
	setenv("FI_EXANET_PROTOCOL", "write", 1);
	struct side s;
	open_side(&s, sock, 1);
	return child_done(&s);
}

static void o7p(struct side *s)
{
	void *r = zeroed(BIG);
	int cr;
	post(s, r, BIG, 12, 0, &cr);
	struct fi_cq_err_entry err = {0};
	XT_CHECK(xt_wait(s->x.rxcq, NULL, &err, 30) == 0 && err.err == FI_EIO && err.op_context == &cr,
		 "RTR refused by a write-protocol peer: err %d", err.err);
}

struct race {
	const char *name;
	xt_child_fn child;
	void (*parent)(struct side *);
};

static const struct race write_races[] = {
	{"SI, RI and crossing RTS/RTR: one write each", c1, p1},
	{"suspension by wildcard and overlapping class; lift keeps posting order", c2, p2},
	{"eager send crossing a long receive's RTR", c3, p3},
	{"back-to-back write then eager: the packet is parked behind the notification", c5, p5},
	{"stale RTR (log passed): NACK, then sender-initiated", c6, p6},
	{"FI_DELIVERY_COMPLETE / FI_MATCH_COMPLETE small sends", c7, p7},
	{"peek does not see RTR-delivered messages; claim and discard", c8, p8},
	{"truncation by a receiver-initiated write", c9, p9},
	{"cancel: handshake, lost race, no RTR", c10, p10},
	{"protocol bit ignored by the receive (MPI sync sends)", c11, p11},
};

static const struct race optimistic_races[] = {
	{"optimistic: a send waits for its RTR; a receive first is fast", o1c, o1p},
	{"optimistic: waiting long sends hold back nothing, both ways", o2c, o2p},
	{"optimistic: matching at the sender keeps tag order and ignore bits", o3c, o3p},
	{"optimistic: truncation", o4c, o4p},
	{"optimistic: any source, FI_PEEK, FI_CLAIM refused; iovec receives, long and short", o5c, o5p},
	{"optimistic: cancel withdraws the RTR", o6c, o6p},
	{"optimistic: a peer running another variant refuses the RTR", o7c, o7p},
};

#define RUN_ALL(races)                                                        \
	for (size_t k = 0; k < sizeof(races) / sizeof(races[0]); k++)          \
		run_case(races[k].name, races[k].child, races[k].parent)

int main(void)
{
	xt_init(240);
	const char *family = getenv("FI_EXANET_PROTOCOL");
	if (family && !strcmp(family, "optimistic")) {
		RUN_ALL(optimistic_races);
		return 0;
	}
	if (family && strcmp(family, "write")) {
		printf("SKIP: the races of the receiver-initiated rendezvous need FI_EXANET_PROTOCOL=write\n");
		return 0;
	}
	RUN_ALL(write_races);
	/* The notification can overtake the RTS only when the write lands at once (CMA). */
	setenv("FI_EXANET_USE_CMA", "1", 1);
	run_case("notification taken before the RTS it served (CMA)", c4, p4);
	return 0;
}
