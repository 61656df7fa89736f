/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Blocking on a wait fd after fi_trywait, under manual progress, between two processes: the
 * receiver makes no libfabric call between fi_trywait's 0 and its poll(2)'s return, as fi_poll(3)
 * allows ("fi_trywait() will return FI_SUCCESS if it is safe to block on the wait object(s)"), so
 * only the arrival itself can wake it. libfabric's fi_rdm_stress server waits like this; before
 * exanet's arrivals readied the fd, its poll(2) never returned.
 *
 *   cq       a CQ's fd (FI_WAIT_FD): the receive is posted, fi_trywait says 0, then the peer sends
 *            (8 B eager, 4 KiB medium, 1 MiB rendezvous); every poll(2) must return within
 *            POLL_MS, and the loop "read; trywait; poll" ends with the message's completion and
 *            its data
 *   cntr     the same on a counter's fd (FI_WAIT_FD, counting receives)
 *   waitset  the same on a wait set's fd, its member a CQ of a second endpoint
 *   each of the three, then: a message that arrives while the receiver watches nothing, taken
 *            in by fi_trywait's own progress (taken_by_trywait): fi_trywait says -FI_EAGAIN,
 *            or 0 with the fd readable
 *   dead     exanet only: the sender starts a 16 MiB rendezvous and is killed while the
 *            receiver, which makes no call meanwhile, has taken in at most the first pieces
 *            (staged writes: the staging area holds 2 MiB); then the receiver blocks, and the
 *            fd turns readable in time for the receive to end in an error
 *            completion within DEAD_S seconds (the periodic look for lost peers needs no call;
 *            over the network backend the peer is lost after FI_EXANET_NETWORK_LOST_AFTER_MS
 *            of silence, which the bound adds and the test sets low)
 *
 * FI_PROVIDER=tcp runs the first three over tcp;ofi_rxm as a reference (shm 1.17 opens no CQ
 * with FI_WAIT_FD).
 */
#include "xt.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <errno.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define POLL_MS 5000
#define DEAD_S 5
#define BIG (16u << 20)
#define TAG 0x77

static const size_t sizes[] = {8, 4096, 1u << 20};

struct cmd {
	char op;   /* 's': send `len` bytes to endpoint `to`; 'a': the same, then say so; 'q': quit */
	char to;   /* 0: the receiver's first endpoint, 1: its second */
	uint32_t len;
	uint32_t seed;
};

/* The sender: sends what it is told, progressing its own CQ until each send completes. */
static int sender(int i, int sock)
{
	(void)i;
	struct xt_ep x;
	xt_open_default(&x, 0);
	fi_addr_t to[2];
	to[0] = xt_exchange(&x, sock, 1, NULL);
	char name[64];
	xt_recv_name(sock, name);
	to[1] = xt_insert(&x, name);
	void *buf = malloc(1u << 20);
	for (;;) {
		struct cmd c;
		xt_recv_all(sock, &c, sizeof c);
		if (c.op == 'q')
			break;
		xt_fill(buf, c.len, c.seed);
		xt_send_one(x.ep, x.txcq, buf, c.len, to[(int)c.to], TAG);
		if (c.op == 'a') {
			char sent = 'a';
			xt_send_all(sock, &sent, 1);
		}
	}
	free(buf);
	xt_close(&x);
	return 0;
}

/* A sender that posts one 16 MiB send and dies at once, without progressing it. */
static int dying_sender(int i, int sock)
{
	(void)i;
	/* Staged: a write the receiver does not drain stops at the staging area's 2 MiB. With
	 * cross-memory attach the whole 16 MiB may land inside fi_tsend, and with a receiver
	 * draining the staging area meanwhile a staged one may too: the receive then rightly ends
	 * in success (CI, 2026-12-04). */
	setenv("FI_EXANET_USE_CMA", "0", 1);
	struct xt_ep x;
	xt_open_default(&x, 0);
	fi_addr_t to = xt_exchange(&x, sock, 1, NULL);
	void *buf = calloc(1, BIG);
	/* Progress until told to go: over the network the receiver's RTR needs our side of the
	 * lower connection. */
	struct pollfd p = {.fd = sock, .events = POLLIN};
	while (poll(&p, 1, 1) == 0)
		fi_cq_read(x.txcq, NULL, 0);
	char go;
	xt_recv_all(sock, &go, 1);
	/* Posted, then killed before any call could progress it: the send itself may start the
	 * write (its RTR is here), but on a fast machine a few progress calls used to finish all
	 * 16 MiB before the kill (the receive then ended in success: CI, 2026-12-02). */
	XT_RC(fi_tsend(x.ep, buf, BIG, NULL, to, TAG, NULL));
	raise(SIGKILL);
	return 1;
}

/* The dying sender is reaped at once, as a launcher would: a zombie still answers kill(pid, 0). */
static pid_t g_dying;
static int g_dying_status;
static void *reaper(void *arg)
{
	(void)arg;
	while (waitpid(g_dying, &g_dying_status, 0) < 0 && errno == EINTR)
		;
	return NULL;
}

/* What the receiver blocks on, and how it learns the message is in. */
struct waiter {
	struct fid *f;         /* passed to fi_trywait */
	int fd;                /* FI_GETWAIT's */
	struct fid_cq *cq;     /* the completions */
	struct fid_cntr *cntr; /* or NULL */
	struct fid_fabric *fabric;
};

/* fi_trywait, reading whatever it says is there: returns once it said 0 (or fails after 5 s). */
static void settle(const struct waiter *w)
{
	struct fi_cq_tagged_entry e;
	for (double until = xt_now_us() + 5e6;;) {
		struct fid *f = w->f;
		int rc = fi_trywait(w->fabric, &f, 1);
		if (rc == 0)
			return;
		XT_CHECK(rc == -FI_EAGAIN, "fi_trywait = %d (%s)", rc, fi_strerror(-rc));
		XT_CHECK(xt_now_us() < until, "fi_trywait never said 0 on an idle object");
		XT_CHECK(fi_cq_read(w->cq, &e, 1) == -FI_EAGAIN, "a completion nobody asked for");
	}
}

/* One read: 1 with e filled, 0 with err filled (an error completion), -1 if nothing yet. */
static int take(const struct waiter *w, struct fi_cq_tagged_entry *e, struct fi_cq_err_entry *err)
{
	ssize_t rc = fi_cq_read(w->cq, e, 1);
	if (rc == 1)
		return 1;
	if (rc == -FI_EAVAIL) {
		memset(err, 0, sizeof *err);
		XT_CHECK(fi_cq_readerr(w->cq, err, 0) == 1, "fi_cq_readerr");
		return 0;
	}
	XT_CHECK(rc == -FI_EAGAIN, "fi_cq_read = %zd", rc);
	return -1;
}

/* Blocks until the message is in: poll(2), then read; trywait (reading what it says is there);
 * poll ... Returns take()'s 1 or 0. Every poll(2) must return within POLL_MS. */
static int block_until_done(const struct waiter *w, struct fi_cq_tagged_entry *e,
			    struct fi_cq_err_entry *err, double limit_s, int *polls)
{
	struct pollfd p = {.fd = w->fd, .events = POLLIN};
	const double until = xt_now_us() + limit_s * 1e6;
	*polls = 0;
	for (;;) {
		int n = poll(&p, 1, POLL_MS);
		++*polls;
		XT_CHECK(n == 1, "poll(2) on the wait fd after fi_trywait said 0: no wake within %d ms "
			 "(poll %d)", POLL_MS, *polls);
		for (;;) {
			int got = take(w, e, err);
			if (got >= 0)
				return got;
			XT_CHECK(xt_now_us() < until, "no completion within %.0f s (%d poll(2) calls)",
				 limit_s, *polls);
			struct fid *f = w->f;
			int t = fi_trywait(w->fabric, &f, 1);
			if (t == 0)
				break;
			XT_CHECK(t == -FI_EAGAIN, "fi_trywait = %d", t);
		}
	}
}

/* One message of each size to endpoint `to`, received while blocking on w. */
static void messages(const struct waiter *w, struct fid_ep *ep, int sock, char to, const char *what)
{
	static unsigned seed = 100;
	void *buf = malloc(1u << 20);
	const uint64_t counted = w->cntr ? fi_cntr_read(w->cntr) : 0;
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; ++k) {
		const size_t len = sizes[k];
		memset(buf, 0, len);
		XT_RC(fi_trecv(ep, buf, len, NULL, FI_ADDR_UNSPEC, TAG, 0, buf));
		settle(w);
		/* From here the receiver calls nothing until poll(2) returns. */
		struct cmd c = {.op = 's', .to = to, .len = (uint32_t)len, .seed = ++seed};
		xt_send_all(sock, &c, sizeof c);
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		int polls = 0;
		XT_CHECK(block_until_done(w, &e, &err, 20, &polls) == 1, "%s %zu B: error completion %d",
			 what, len, err.err);
		XT_CHECK(e.op_context == buf && e.len == len && xt_verify(buf, len, seed),
			 "%s %zu B: the completion or its data", what, len);
		if (w->cntr)
			XT_CHECK(fi_cntr_read(w->cntr) == counted + k + 1, "%s: counter %llu after %zu more "
				 "receives", what, (unsigned long long)fi_cntr_read(w->cntr), k + 1);
		printf("  %s %zu B: in after %d poll(2) call(s)\n", what, len, polls);
	}
	free(buf);
}

/* The arrival is taken inside fi_trywait: the message is sent, and has reached this process,
 * while the receiver made no call and watched nothing (no fi_trywait since it last read). Its
 * fi_trywait's own progress then takes it in, which completes the receive (and counts it). That
 * call must say -FI_EAGAIN, or, if it says 0, the fd must be readable: the completion has come
 * and no later arrival will ready the fd. (A counter's fi_trywait said 0 here with its fd quiet,
 * and the application slept for ever: net.trywait_block in CI, 2026-12-07, where the 1 MiB
 * message's last packet came in this window by chance.) */
static void taken_by_trywait(const struct waiter *w, struct fid_ep *ep, int sock, char to,
			     const char *what)
{
	static unsigned seed = 500;
	char buf[64];
	memset(buf, 0, sizeof buf);
	const uint64_t counted = w->cntr ? fi_cntr_read(w->cntr) : 0;
	XT_RC(fi_trecv(ep, buf, sizeof buf, NULL, FI_ADDR_UNSPEC, TAG, 0, buf));
	struct cmd c = {.op = 'a', .to = to, .len = sizeof buf, .seed = ++seed};
	xt_send_all(sock, &c, sizeof c);
	char sent;
	xt_recv_all(sock, &sent, 1);
	/* The sender's send completed; give the bytes time to cross a network too. */
	usleep(100 * 1000);
	struct fid *f = w->f;
	const int rc = fi_trywait(w->fabric, &f, 1);
	if (rc == 0) {
		struct pollfd p = {.fd = w->fd, .events = POLLIN};
		XT_CHECK(poll(&p, 1, POLL_MS) == 1, "%s: fi_trywait took the arrival in, said 0, and "
			 "its fd stayed quiet for %d ms", what, POLL_MS);
	} else {
		XT_CHECK(rc == -FI_EAGAIN, "%s: fi_trywait = %d", what, rc);
	}
	/* Then read as an application would: what is there, else fi_trywait and block. */
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	int got, polls = 0;
	for (const double until = xt_now_us() + 20e6;;) {
		if ((got = take(w, &e, &err)) >= 0)
			break;
		XT_CHECK(xt_now_us() < until, "%s: no completion within 20 s", what);
		f = w->f;
		const int t = fi_trywait(w->fabric, &f, 1);
		if (t == 0) {
			got = block_until_done(w, &e, &err, 20, &polls);
			break;
		}
		XT_CHECK(t == -FI_EAGAIN, "%s: fi_trywait = %d", what, t);
	}
	XT_CHECK(got == 1, "%s: error completion %d", what, err.err);
	XT_CHECK(e.op_context == buf && xt_verify(buf, sizeof buf, seed), "%s: the completion or "
		 "its data", what);
	if (w->cntr)
		XT_CHECK(fi_cntr_read(w->cntr) == counted + 1, "%s: counter", what);
	printf("  %s, taken in by fi_trywait: it said %s\n", what, rc ? "-FI_EAGAIN" : "0, fd readable");
}

static void open_ep(struct xt_ep *x, struct fi_info *info, struct fi_cq_attr *rx_attr,
		    struct fid_cntr **cntr)
{
	XT_RC(fi_fabric(info->fabric_attr, &x->fabric, NULL));
	XT_RC(fi_domain(x->fabric, info, &x->domain, NULL));
	struct fi_av_attr av = {.type = FI_AV_MAP};
	XT_RC(fi_av_open(x->domain, &av, &x->av, NULL));
	struct fi_cq_attr tx = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
	XT_RC(fi_cq_open(x->domain, &tx, &x->txcq, NULL));
	XT_RC(fi_cq_open(x->domain, rx_attr, &x->rxcq, NULL));
	XT_RC(fi_endpoint(x->domain, info, &x->ep, NULL));
	XT_RC(fi_ep_bind(x->ep, &x->av->fid, 0));
	XT_RC(fi_ep_bind(x->ep, &x->txcq->fid, FI_TRANSMIT));
	XT_RC(fi_ep_bind(x->ep, &x->rxcq->fid, FI_RECV));
	if (cntr) {
		struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_FD};
		XT_RC(fi_cntr_open(x->domain, &ca, cntr, NULL));
		XT_RC(fi_ep_bind(x->ep, &(*cntr)->fid, FI_RECV));
	}
	XT_RC(fi_enable(x->ep));
	x->namelen = sizeof x->name;
	XT_RC(fi_getname(&x->ep->fid, x->name, &x->namelen));
	x->info = info;
}

int main(void)
{
	xt_init(150);
	const char *prov = getenv("FI_PROVIDER");
	const int exanet = !prov || !*prov || !strcmp(prov, "exanet");
	struct fi_info *h = xt_hints();
	h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	h->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	struct fi_info *info;
	XT_RC(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info));

	/* Endpoint 1: its receive CQ and a receive counter wait on fds. Endpoint 2: its receive CQ
	 * belongs to a wait set. */
	struct xt_ep a, b;
	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	struct fi_cq_attr fd_cq = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_FD};
	struct fid_cntr *cntr;
	open_ep(&a, fi_dupinfo(info), &fd_cq, &cntr);
	struct fi_wait_attr wa = {.wait_obj = FI_WAIT_FD};
	struct fid_wait *ws;
	XT_RC(fi_wait_open(a.fabric, &wa, &ws));
	struct fi_cq_attr set_cq = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_SET,
				    .wait_set = ws};
	/* The second endpoint in the first one's fabric (a wait set is a fabric's). */
	b.fabric = a.fabric;
	{
		struct fi_info *i2 = fi_dupinfo(info);
		XT_RC(fi_domain(b.fabric, i2, &b.domain, NULL));
		struct fi_av_attr av = {.type = FI_AV_MAP};
		XT_RC(fi_av_open(b.domain, &av, &b.av, NULL));
		struct fi_cq_attr tx = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
		XT_RC(fi_cq_open(b.domain, &tx, &b.txcq, NULL));
		XT_RC(fi_cq_open(b.domain, &set_cq, &b.rxcq, NULL));
		XT_RC(fi_endpoint(b.domain, i2, &b.ep, NULL));
		XT_RC(fi_ep_bind(b.ep, &b.av->fid, 0));
		XT_RC(fi_ep_bind(b.ep, &b.txcq->fid, FI_TRANSMIT));
		XT_RC(fi_ep_bind(b.ep, &b.rxcq->fid, FI_RECV));
		XT_RC(fi_enable(b.ep));
		b.namelen = sizeof b.name;
		XT_RC(fi_getname(&b.ep->fid, b.name, &b.namelen));
		b.info = i2;
	}

	int sock;
	pid_t pid;
	xt_spawn(1, sender, &sock, &pid);
	xt_exchange(&a, sock, 0, NULL);
	xt_send_name(sock, &b);

	struct waiter w = {.f = &a.rxcq->fid, .cq = a.rxcq, .fabric = a.fabric};
	XT_RC(fi_control(&a.rxcq->fid, FI_GETWAIT, &w.fd));
	messages(&w, a.ep, sock, 0, "cq");
	taken_by_trywait(&w, a.ep, sock, 0, "cq");
	xt_pass("cq: a CQ's wait fd, blocked on after fi_trywait, wakes on each arrival");

	struct waiter wc = {.f = &cntr->fid, .cq = a.rxcq, .cntr = cntr, .fabric = a.fabric};
	int rc = fi_control(&cntr->fid, FI_GETWAIT, &wc.fd);
	if (rc == -FI_ENOSYS && !exanet) { /* tcp;ofi_rxm's counters offer no fd */
		printf("  cntr: FI_GETWAIT on a counter is not offered by %s\n", prov);
	} else {
		XT_CHECK(rc == 0, "FI_GETWAIT on a counter = %d", rc);
		messages(&wc, a.ep, sock, 0, "cntr");
		taken_by_trywait(&wc, a.ep, sock, 0, "cntr");
		xt_pass("cntr: a counter's wait fd, blocked on after fi_trywait, wakes on each arrival");
	}

	struct waiter wsw = {.f = &ws->fid, .cq = b.rxcq, .fabric = a.fabric};
	XT_RC(fi_control(&ws->fid, FI_GETWAIT, &wsw.fd));
	messages(&wsw, b.ep, sock, 1, "waitset");
	taken_by_trywait(&wsw, b.ep, sock, 1, "waitset");
	xt_pass("waitset: a wait set's fd, blocked on after fi_trywait, wakes on an arrival at a member");

	struct cmd q = {.op = 'q'};
	xt_send_all(sock, &q, sizeof q);
	xt_reap(1, &pid);
	close(sock);

	if (exanet) {
		/* A peer dies in the middle of a rendezvous while the receiver blocks on its fd. */
		int dsock;
		pid_t dpid;
		xt_spawn(1, dying_sender, &dsock, &dpid);
		g_dying = dpid;
		pthread_t reap;
		XT_CHECK(pthread_create(&reap, NULL, reaper, NULL) == 0, "pthread_create");
		fi_addr_t from = xt_exchange(&a, dsock, 0, NULL);
		void *big = malloc(BIG);
		XT_RC(fi_trecv(a.ep, big, BIG, NULL, from, TAG, 0, big));
		settle(&w);
		char go = 'g';
		xt_send_all(dsock, &go, 1);
		/* No call of ours until the sender is gone: what it could write without us is all
		 * that arrives. */
		pthread_join(reap, NULL);
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		int polls = 0;
		const double t0 = xt_now_s();
		/* Found within 0.4 s on shared memory (the look for lost peers runs every 200 ms);
		 * over the network after the silence that makes a peer lost. */
		const char *net = getenv("FI_EXANET_NETWORK");
		const double limit = DEAD_S + (net && !strcmp(net, "every_peer")
						 ? xt_env_size("FI_EXANET_NETWORK_LOST_AFTER_MS", 30000) / 1e3
						 : 0);
		const int ok = block_until_done(&w, &e, &err, limit, &polls);
		XT_CHECK(!ok && err.op_context == big && err.err != 0,
			 "dead: the receive from a killed sender ended %s", ok ? "in success" : "in another error");
		printf("  dead: error %d (%s) after %.2f s and %d poll(2) call(s)\n", err.err,
		       fi_strerror(err.err), xt_now_s() - t0, polls);
		XT_CHECK(WIFSIGNALED(g_dying_status), "the dying sender");
		close(dsock);
		free(big);
		if (net && !strcmp(net, "every_peer")) {
			/* A peer reached over the network is not a segment we map, so the killed
			 * sender's own segment on this host is reclaimed by the next endpoint that
			 * opens here (as another job's would on a real host): one opens now, so that
			 * shm_leak_check finds nothing whatever runs after this test. */
			struct fid_ep *next;
			XT_RC(fi_endpoint(a.domain, a.info, &next, NULL));
			XT_RC(fi_ep_bind(next, &a.av->fid, 0));
			XT_RC(fi_ep_bind(next, &a.txcq->fid, FI_TRANSMIT | FI_RECV));
			XT_RC(fi_enable(next));
			XT_RC(fi_close(&next->fid));
		}
		xt_pass("dead: a receiver blocked on its wait fd learns of a killed sender");
	}

	XT_RC(fi_close(&b.ep->fid));
	XT_RC(fi_close(&a.ep->fid));
	XT_RC(fi_close(&b.rxcq->fid));
	XT_RC(fi_close(&b.txcq->fid));
	XT_RC(fi_close(&b.av->fid));
	XT_RC(fi_close(&b.domain->fid));
	XT_RC(fi_close(&ws->fid));
	XT_RC(fi_close(&cntr->fid));
	XT_RC(fi_close(&a.rxcq->fid));
	XT_RC(fi_close(&a.txcq->fid));
	XT_RC(fi_close(&a.av->fid));
	XT_RC(fi_close(&a.domain->fid));
	XT_RC(fi_close(&a.fabric->fid));
	fi_freeinfo(a.info);
	fi_freeinfo(b.info);
	fi_freeinfo(info);
	fi_freeinfo(h);
	return 0;
}
