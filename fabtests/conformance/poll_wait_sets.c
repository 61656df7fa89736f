/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Poll sets and wait sets (fi_poll(3)), between two processes: a sender that sends when told,
 * and a receiver that waits through the sets.
 *
 *   poll_set   fi_poll returns the context of every member with events: a CQ while it holds
 *              entries, a counter once per change (not after fi_cntr_add moved it, not again
 *              when unchanged); with room for one context the other member waits for the next
 *              call; a member cannot close, nor the set while it has members; bad input fails
 *   wait_set   fi_wait times out while nothing comes (bounded), returns once a message came to a
 *              CQ or counter of the set, and not again for the same event; with FI_WAIT_FD,
 *              fi_trywait says "block" on an idle set and "again" once an entry is there, and the
 *              set's fd is readable after an event that follows fi_trywait; the set cannot
 *              close before its members
 *
 * Run over another provider (POLL_REFERENCE=shm) as a reference, the same program checks the
 * behaviour both share. Three things are checked for exanet only, where libfabric's util code
 * that shm uses departs from fi_poll(3): exact error codes (fi_poll(3) names none); fi_cntr_add
 * moving the counter's checkpoint ("changed since the last time fi_poll, fi_cntr_set, or
 * fi_cntr_add were called"; util reports the add); a member past the array's room keeping its
 * event for the next call (util takes a counter's change even when it has no room to report it);
 * and -FI_EBUSY on closing a set's member or a set with members.
 */
#include "xt.h"

#include <poll.h>
#include <string.h>

static int strict; /* exanet: exact error codes */

#define SEND_ONE 'm'
#define SEND_EP2 'w'
#define QUIT 'q'

/* The sender: one 8-byte message per command byte, to the receiver's first or second endpoint. */
static int sender(int i, int sock)
{
	(void)i;
	struct xt_ep x;
	xt_open_default(&x, 0);
	fi_addr_t to = xt_exchange(&x, sock, 1, NULL), to2 = FI_ADDR_NOTAVAIL;
	uint64_t v = 7;
	for (;;) {
		char cmd;
		xt_recv_all(sock, &cmd, 1);
		if (cmd == QUIT)
			break;
		if (cmd == 'n') { /* the receiver's second endpoint */
			char name[64];
			xt_recv_name(sock, name);
			to2 = xt_insert(&x, name);
			continue;
		}
		xt_send_one(x.ep, x.txcq, &v, sizeof v, cmd == SEND_EP2 ? to2 : to, 1);
		xt_sync(sock);
	}
	xt_close(&x);
	return 0;
}

/* The receiver's transmit CQ: reading it progresses the endpoint without touching what the sets
 * look at (the receive CQ's entries, the counters). */
static struct fid_cq *g_progress_cq;

static void tell(int sock, char cmd)
{
	xt_send_all(sock, &cmd, 1);
	if (cmd == SEND_ONE || cmd == SEND_EP2) {
		/* sent and complete at the sender; meanwhile this endpoint progresses, as an MPI
		 * rank's would (shm's sender may need it) */
		xt_sync_progress(sock, g_progress_cq);
	}
}

/* fi_poll until it returns something (at most 5 s); returns the count. */
static int poll_some(struct fid_poll *ps, void **ctx, int count)
{
	for (double until = xt_now_us() + 5e6; xt_now_us() < until;) {
		int n = fi_poll(ps, ctx, count);
		XT_CHECK(n >= 0, "fi_poll = %d (%s)", n, fi_strerror(-n));
		if (n > 0)
			return n;
	}
	return 0;
}

/* fi_poll returns nothing for a while (every member progressed many times). */
static void poll_quiet(struct fid_poll *ps, const char *why)
{
	void *ctx[4];
	for (int k = 0; k < 2000; k++) {
		int n = fi_poll(ps, ctx, 4);
		XT_CHECK(n == 0, "%s: fi_poll returned %d", why, n);
	}
}

static void expect_err(int rc, int code, const char *what)
{
	if (strict)
		XT_CHECK(rc == -code, "%s = %d (%s), expected %s", what, rc, fi_strerror(-rc), fi_strerror(code));
	else
		XT_CHECK(rc < 0, "%s = %d, expected a failure", what, rc);
}

static int rxcq_ctx, rxcntr_ctx, spare_ctx, ws_cq_ctx, ws_cntr_ctx;

static void poll_set(struct xt_ep *x, struct fid_cntr *rxcntr, int sock)
{
	struct fid_poll *ps;
	struct fi_poll_attr pa = {.flags = 1};
	expect_err(fi_poll_open(x->domain, &pa, &ps), FI_EBADFLAGS, "fi_poll_open with flags");
	pa.flags = 0;
	XT_RC(fi_poll_open(x->domain, &pa, &ps));
	XT_RC(fi_poll_add(ps, &x->rxcq->fid, 0));
	XT_RC(fi_poll_add(ps, &rxcntr->fid, 0));
	if (strict) {
		expect_err(fi_poll_add(ps, &x->rxcq->fid, 0), FI_EALREADY, "adding a member twice");
		expect_err(fi_poll_add(ps, &x->av->fid, 0), FI_EINVAL, "adding an AV");
		expect_err(fi_poll_del(ps, &x->txcq->fid, 0), FI_ENOENT, "deleting a non-member");
		void *one[1];
		expect_err(fi_poll(ps, one, 0), FI_EINVAL, "fi_poll with room for nothing");
	}
	poll_quiet(ps, "nothing sent");

	/* One message: the CQ has an entry and the counter changed; both are reported. */
	uint64_t got = 0;
	XT_RC(fi_trecv(x->ep, &got, sizeof got, NULL, FI_ADDR_UNSPEC, 1, 0, NULL));
	tell(sock, SEND_ONE);
	int saw_cq = 0, saw_cntr = 0;
	while (!(saw_cq && saw_cntr)) {
		void *ctx[4];
		int n = poll_some(ps, ctx, 4);
		XT_CHECK(n > 0, "fi_poll never reported the message");
		for (int k = 0; k < n; k++) {
			XT_CHECK(ctx[k] == &rxcq_ctx || ctx[k] == &rxcntr_ctx, "an unknown context %p", ctx[k]);
			for (int j = 0; j < k; j++)
				XT_CHECK(ctx[j] != ctx[k], "one fi_poll returned a member twice");
			saw_cq |= ctx[k] == &rxcq_ctx;
			saw_cntr |= ctx[k] == &rxcntr_ctx;
		}
	}
	XT_CHECK(fi_cntr_read(rxcntr) == 1, "the counter reads %llu", (unsigned long long)fi_cntr_read(rxcntr));
	struct fi_cq_tagged_entry e;
	XT_CHECK(fi_cq_read(x->rxcq, &e, 1) == 1 && got == 7, "the entry fi_poll announced");
	poll_quiet(ps, "CQ drained, counter unchanged");

	/* fi_cntr_add moves the checkpoint: not an event for fi_poll. */
	XT_RC(fi_cntr_add(rxcntr, 5));
	if (strict)
		poll_quiet(ps, "after fi_cntr_add");
	else
		poll_some(ps, (void *[4]){0}, 4); /* util reports the add once */

	/* Room for one context: one now, the other at the next call. */
	XT_RC(fi_trecv(x->ep, &got, sizeof got, NULL, FI_ADDR_UNSPEC, 1, 0, NULL));
	tell(sock, SEND_ONE);
	if (strict) {
		void *first[1], *second[1];
		XT_CHECK(poll_some(ps, first, 1) == 1, "the first of two members");
		void *other = first[0] == &rxcq_ctx ? (void *)&rxcntr_ctx : (void *)&rxcq_ctx;
		for (double until = xt_now_us() + 5e6;;) {
			XT_CHECK(xt_now_us() < until, "the second member was never reported");
			if (poll_some(ps, second, 1) == 1 && second[0] == other)
				break;
		}
	} else {
		XT_CHECK(poll_some(ps, (void *[4]){0}, 4) > 0, "the second message");
	}
	XT_CHECK(fi_cq_read(x->rxcq, &e, 1) == 1, "the second message's entry");
	XT_CHECK(fi_cntr_read(rxcntr) == 7, "counter after add: %llu", (unsigned long long)fi_cntr_read(rxcntr));

	/* A member cannot close; the set cannot close while it has members. */
	if (strict) {
		struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
		struct fid_cq *spare;
		XT_RC(fi_cq_open(x->domain, &ca, &spare, &spare_ctx));
		XT_RC(fi_poll_add(ps, &spare->fid, 0));
		expect_err(fi_close(&spare->fid), FI_EBUSY, "closing a CQ in a poll set");
		expect_err(fi_close(&ps->fid), FI_EBUSY, "closing a poll set with members");
		XT_RC(fi_poll_del(ps, &spare->fid, 0));
		XT_RC(fi_close(&spare->fid));
	}
	XT_RC(fi_poll_del(ps, &x->rxcq->fid, 0));
	XT_RC(fi_poll_del(ps, &rxcntr->fid, 0));
	XT_RC(fi_close(&ps->fid));
}

/* Returns 0 where the reference provider has no such wait set (nothing checked), 1 otherwise. */
static int wait_set(struct xt_ep *x, int sock, enum fi_wait_obj obj)
{
	struct fi_wait_attr wa = {.wait_obj = obj, .flags = 1};
	struct fid_wait *ws;
	expect_err(fi_wait_open(x->fabric, &wa, &ws), FI_EBADFLAGS, "fi_wait_open with flags");
	wa.flags = 0;
	int rc = fi_wait_open(x->fabric, &wa, &ws);
	if (rc == -FI_ENOSYS && !strict) {
		printf("  (the reference has no wait set of this kind)\n");
		return 0;
	}
	XT_RC(rc);
	/* A second endpoint whose CQ and receive counter belong to the set. */
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_SET, .wait_set = NULL};
	struct fid_cq *cq;
	if (strict)
		expect_err(fi_cq_open(x->domain, &ca, &cq, NULL), FI_EINVAL, "FI_WAIT_SET without a set");
	ca.wait_set = ws;
	rc = fi_cq_open(x->domain, &ca, &cq, &ws_cq_ctx);
	if (rc == -FI_ENOSYS && !strict) { /* shm 1.17: wait sets open, but no CQ joins one */
		printf("  (the reference has no CQs in wait sets)\n");
		XT_RC(fi_close(&ws->fid));
		return 0;
	}
	XT_RC(rc);
	struct fi_cntr_attr na = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_SET, .wait_set = ws};
	struct fid_cntr *cntr;
	XT_RC(fi_cntr_open(x->domain, &na, &cntr, &ws_cntr_ctx));
	struct fid_ep *ep;
	XT_RC(fi_endpoint(x->domain, x->info, &ep, NULL));
	XT_RC(fi_ep_bind(ep, &x->av->fid, 0));
	XT_RC(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	XT_RC(fi_ep_bind(ep, &cntr->fid, FI_RECV));
	XT_RC(fi_enable(ep));
	struct xt_ep named = {0};
	named.namelen = sizeof named.name;
	XT_RC(fi_getname(&ep->fid, named.name, &named.namelen));
	char cmd = 'n';
	xt_send_all(sock, &cmd, 1);
	xt_send_name(sock, &named);

	/* Nothing yet: the wait times out, after about its timeout. */
	double t0 = xt_now_us();
	rc = fi_wait(ws, 50);
	XT_CHECK(rc == -FI_ETIMEDOUT || (!strict && rc == -FI_EAGAIN), "an idle wait returned %d", rc);
	XT_CHECK(xt_now_us() - t0 >= 40e3, "an idle 50 ms wait returned after %.1f ms", (xt_now_us() - t0) / 1e3);

	/* A message: the wait returns, and the entry is there. */
	uint64_t got = 0;
	XT_RC(fi_trecv(ep, &got, sizeof got, NULL, FI_ADDR_UNSPEC, 1, 0, NULL));
	tell(sock, SEND_EP2);
	rc = fi_wait(ws, 5000);
	XT_CHECK(rc == 0, "fi_wait after a message = %d (%s)", rc, fi_strerror(-rc));
	struct fi_cq_tagged_entry e;
	for (double until = xt_now_us() + 5e6; fi_cq_read(cq, &e, 1) != 1;)
		XT_CHECK(xt_now_us() < until, "the entry fi_wait announced");
	XT_CHECK(got == 7 && fi_cntr_read(cntr) == 1, "message %llu, counter %llu", (unsigned long long)got,
		 (unsigned long long)fi_cntr_read(cntr));

	if (obj == FI_WAIT_FD) {
		int fd = -1;
		XT_RC(fi_control(&ws->fid, FI_GETWAIT, &fd));
		XT_CHECK(fd >= 0, "FI_GETWAIT gave fd %d", fd);
		/* Idle: the caller may block. Then a message, and progress (a read of the CQ) takes it
		 * in: the fd becomes readable, and trywait says "again". */
		struct fid *f = &ws->fid;
		for (double until = xt_now_us() + 5e6; (rc = fi_trywait(x->fabric, &f, 1)) != 0;)
			XT_CHECK(xt_now_us() < until, "fi_trywait on an idle wait set = %d", rc);
		XT_RC(fi_trecv(ep, &got, sizeof got, NULL, FI_ADDR_UNSPEC, 1, 0, NULL));
		tell(sock, SEND_EP2);
		struct pollfd p = {.fd = fd, .events = POLLIN};
		for (double until = xt_now_us() + 5e6; poll(&p, 1, 0) != 1;) {
			XT_CHECK(xt_now_us() < until, "the wait set's fd never became readable");
			fi_cq_read(cq, NULL, 0); /* progress (manual): the entry is written, the fd signalled */
		}
		XT_CHECK(fi_trywait(x->fabric, &f, 1) == -FI_EAGAIN, "fi_trywait with an entry waiting");
		XT_CHECK(fi_cq_read(cq, &e, 1) == 1, "the entry behind the signal");
	}

	if (strict)
		expect_err(fi_close(&ws->fid), FI_EBUSY, "closing a wait set with members");
	XT_RC(fi_close(&ep->fid));
	XT_RC(fi_close(&cq->fid));
	XT_RC(fi_close(&cntr->fid));
	XT_RC(fi_close(&ws->fid));
	return 1;
}

int main(void)
{
	xt_init(120);
	const char *ref = getenv("POLL_REFERENCE");
	if (ref && *ref)
		setenv("FI_PROVIDER", ref, 1);
	const char *prov = getenv("FI_PROVIDER");
	strict = !prov || !*prov || !strcmp(prov, "exanet");
	int sock;
	pid_t pid;
	xt_spawn(1, sender, &sock, &pid);

	struct fi_info *h = xt_hints();
	h->caps = FI_TAGGED | FI_MSG; /* fi_poll's own example: no directed receives */
	struct xt_ep x;
	xt_open_disabled(&x, h, 0);
	fi_freeinfo(h);
	/* xt_open_disabled's CQs have no context; this one's is what fi_poll returns. */
	x.rxcq->fid.context = &rxcq_ctx;
	struct fi_cntr_attr na = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_NONE};
	struct fid_cntr *rxcntr;
	XT_RC(fi_cntr_open(x.domain, &na, &rxcntr, &rxcntr_ctx));
	XT_RC(fi_ep_bind(x.ep, &rxcntr->fid, FI_RECV));
	xt_enable(&x);
	xt_exchange(&x, sock, 0, NULL);
	g_progress_cq = x.txcq;

	poll_set(&x, rxcntr, sock);
	xt_pass("poll_set: CQs while they hold entries, counters once per change, one context at a time");
	if (wait_set(&x, sock, FI_WAIT_UNSPEC))
		xt_pass("wait_set (FI_WAIT_UNSPEC): times out idle, returns on a message");
	if (wait_set(&x, sock, FI_WAIT_FD))
		xt_pass("wait_set (FI_WAIT_FD): trywait, the fd, and close order");

	tell(sock, QUIT);
	xt_close_ep(&x);
	XT_RC(fi_close(&rxcntr->fid));
	xt_close(&x);
	xt_reap(1, &pid);
	return 0;
}
