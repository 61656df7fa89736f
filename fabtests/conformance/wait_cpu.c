/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Blocking waits block (fi_cq(3), fi_cntr(3), fi_domain(3) on FI_PROGRESS_AUTO): a thread in
 * fi_cq_sread, fi_cntr_wait or poll(2) on a CQ's wait fd, and an idle FI_PROGRESS_AUTO
 * progress thread, leave the core alone. Under each progress model, one process with two
 * endpoints (a receive posted on one, so its progress has a peer to watch):
 *
 *   - fi_cq_sread for 1 s with nothing coming, fi_cntr_wait for 1 s with nothing coming, and
 *     (auto) a 1 s sleep beside the idle progress thread each cost at most WAIT_CPU_MAX_S of CPU
 *     time for the whole process (getrusage: every thread counts). A wait that spins costs about
 *     1 s; the bound is generous for a loaded machine;
 *   - auto: a message sent to the other endpoint, then fi_trywait and poll(2) on the receive
 *     CQ's wait fd: the progress thread writes the completion and the fd wakes the poll, with
 *     no call into the provider (under manual progress nothing would: fi_exanet(7), PROGRESS);
 *   - fi_cq_sread that blocks before a message comes (sent by a thread 200 ms later) still
 *     returns it (a sleep that missed its wake would time out after 5 s), within LATE_MAX_MS
 *     of the send, having used at most LATE_CPU_SHARE of the wait's wall time.
 *   - fi_cq_sread and fi_cntr_wait are bounded in wake-ups too (WAKEUPS_MAX), and so are the
 *     idle progress threads (auto).
 *   - auto: the progress thread adds no sleeps to the waiting thread's own: in fi_cq_sread's
 *     and fi_cntr_wait's second it sleeps at most OWN_SLEEPS_EXTRA times more than in the
 *     same wait under manual progress (once per 20 ms slice over shared memory and tcp, never
 *     on the endpoint's lock). An fi_cq_sread that began while the progress thread was still
 *     busy with the warm-up's traffic took the lock in turn with it and slept on it each time
 *     it met it: 75-111 sleeps against 51, and 430 process wake-ups in its second under TSan.
 *
 * Run again as net.wait_cpu with every peer over the network backend (FI_EXANET_NETWORK=
 * every_peer: the endpoints talk through libfabric's tcp on this host), where a sleep must wake
 * on the lower provider's fd, which no futex word of ours follows. Both endpoints first trade a
 * message each way (both progressed), as the lower connections need both ends to form.
 *   - fi_wait on a wait set (b's transmit CQ) and fi_eq_sread on an EQ, 1 s each with nothing
 *     coming, are bounded the same way, and also in wake-ups: at most WAKEUPS_MAX voluntary
 *     context switches for the process (a wait that naps 100 us at a time makes thousands; one
 *     that sleeps until an event or its 20 ms bound, about 50). Each is then woken by an event
 *     written 200 ms later by another thread (a message to b, fi_eq_write).
 */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include "xt.h"

#include <poll.h>
#include <pthread.h>
#include <rdma/fi_domain.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define WAIT_CPU_MAX_S 0.25
#define WAKEUPS_MAX 400
/* How many more times the waiting thread itself may sleep in a 1 s wait under auto progress
 * than in the same wait under manual progress (TSan's own locks sleep now and then). */
#define OWN_SLEEPS_EXTRA 10
#define LATE_MAX_MS 100.0
#define LATE_CPU_SHARE 0.2

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static long wakeups(void)
{
	struct rusage r;
	getrusage(RUSAGE_SELF, &r);
	return r.ru_nvcsw;
}

/* The calling thread's voluntary context switches: its sleeps. */
static long thread_sleeps(void)
{
	struct rusage r;
	getrusage(RUSAGE_THREAD, &r);
	return r.ru_nvcsw;
}

static double cpu_s(void)
{
	struct rusage r;
	getrusage(RUSAGE_SELF, &r);
	return (double)r.ru_utime.tv_sec + r.ru_utime.tv_usec * 1e-6 + (double)r.ru_stime.tv_sec +
	       r.ru_stime.tv_usec * 1e-6;
}

struct pair {
	struct xt_ep a, b; /* a sends to b; b's rx CQ has an fd wait object */
	struct fid_cntr *cntr;
	struct fid_wait *waitset; /* b's transmit CQ */
	struct fid_eq *eq;
	fi_addr_t a_to_b, b_to_a;
	double late_sent_ms; /* when send_later's message went */
};

static void open_one(struct xt_ep *x, enum fi_progress mode, int with_cntr, struct fid_cntr **cntr,
		     struct fid_wait **waitset)
{
	struct fi_info *h = xt_hints();
	h->domain_attr->data_progress = mode;
	h->domain_attr->threading = FI_THREAD_SAFE;
	struct fi_info *info = NULL;
	XT_RC(fi_getinfo(xt_api_version, NULL, NULL, 0, h, &info));
	fi_freeinfo(h);
	XT_CHECK(info->domain_attr->data_progress == mode, "progress %d granted as %d", mode,
		 info->domain_attr->data_progress);
	memset(x, 0, sizeof *x);
	x->info = info;
	XT_RC(fi_fabric(info->fabric_attr, &x->fabric, NULL));
	XT_RC(fi_domain(x->fabric, info, &x->domain, NULL));
	struct fi_av_attr aa = {.type = FI_AV_MAP};
	XT_RC(fi_av_open(x->domain, &aa, &x->av, NULL));
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_FD, .size = 64};
	if (waitset) {  /* the transmit CQ on a wait set of its own */
		struct fi_wait_attr wa = {.wait_obj = FI_WAIT_UNSPEC};
		XT_RC(fi_wait_open(x->fabric, &wa, waitset));
		struct fi_cq_attr wca = ca;
		wca.wait_obj = FI_WAIT_SET;
		wca.wait_set = *waitset;
		XT_RC(fi_cq_open(x->domain, &wca, &x->txcq, NULL));
	} else {
		XT_RC(fi_cq_open(x->domain, &ca, &x->txcq, NULL));
	}
	XT_RC(fi_cq_open(x->domain, &ca, &x->rxcq, NULL));
	XT_RC(fi_endpoint(x->domain, info, &x->ep, NULL));
	XT_RC(fi_ep_bind(x->ep, &x->av->fid, 0));
	XT_RC(fi_ep_bind(x->ep, &x->txcq->fid, FI_TRANSMIT));
	XT_RC(fi_ep_bind(x->ep, &x->rxcq->fid, FI_RECV));
	if (with_cntr) {
		struct fi_cntr_attr cta = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC};
		XT_RC(fi_cntr_open(x->domain, &cta, cntr, NULL));
		XT_RC(fi_ep_bind(x->ep, &(*cntr)->fid, FI_RECV));
	}
	XT_RC(fi_enable(x->ep));
	x->namelen = sizeof x->name;
	XT_RC(fi_getname(&x->ep->fid, x->name, &x->namelen));
}

static void *send_later(void *arg)
{
	struct pair *p = arg;
	static const char msg[] = "late";
	struct timespec t = {0, 200 * 1000 * 1000};
	nanosleep(&t, NULL);
	ssize_t rc;
	p->late_sent_ms = now_ms();
	while ((rc = fi_tinject(p->a.ep, msg, sizeof msg, p->a_to_b, 9)) == -FI_EAGAIN)
		fi_cq_read(p->a.txcq, NULL, 0);
	XT_CHECK(rc == 0, "fi_tinject = %zd", rc);
	return NULL;
}

/* One message each way, both endpoints progressed: over the network backend the lower
 * connections form only while both ends are driven (manual progress drives neither otherwise).
 * Leaves no completion behind. */
static void warm_up(struct pair *p)
{
	char ra[16], rb[16];
	static const char msg[] = "hi";
	XT_RC(fi_trecv(p->a.ep, ra, sizeof ra, NULL, FI_ADDR_UNSPEC, 1, 0, ra));
	XT_RC(fi_trecv(p->b.ep, rb, sizeof rb, NULL, FI_ADDR_UNSPEC, 1, 0, rb));
	ssize_t rc;
	while ((rc = fi_tsend(p->a.ep, msg, sizeof msg, NULL, p->a_to_b, 1, NULL)) == -FI_EAGAIN)
		(void)fi_cq_read(p->b.rxcq, NULL, 0);
	XT_CHECK(rc == 0, "warm-up fi_tsend a = %zd", rc);
	while ((rc = fi_tsend(p->b.ep, msg, sizeof msg, NULL, p->b_to_a, 1, NULL)) == -FI_EAGAIN)
		(void)fi_cq_read(p->a.rxcq, NULL, 0);
	XT_CHECK(rc == 0, "warm-up fi_tsend b = %zd", rc);
	int got = 0; /* a's rx, b's rx, a's tx, b's tx */
	const double end = now_ms() + 20000;
	struct fi_cq_tagged_entry e;
	while (got != 15 && now_ms() < end) {
		if (fi_cq_read(p->a.rxcq, &e, 1) == 1) got |= 1;
		if (fi_cq_read(p->b.rxcq, &e, 1) == 1) got |= 2;
		if (fi_cq_read(p->a.txcq, &e, 1) == 1) got |= 4;
		if (fi_cq_read(p->b.txcq, &e, 1) == 1) got |= 8;
	}
	XT_CHECK(got == 15, "warm-up exchange incomplete (%#x)", got);
}

static void *send_b_later(void *arg)
{
	struct pair *p = arg;
	static const char msg[] = "from b";
	struct timespec t = {0, 200 * 1000 * 1000};
	nanosleep(&t, NULL);
	ssize_t rc;
	while ((rc = fi_tsend(p->b.ep, msg, sizeof msg, NULL, p->b_to_a, 3, NULL)) == -FI_EAGAIN)
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	XT_CHECK(rc == 0, "fi_tsend = %zd", rc);
	return NULL;
}

static void *eq_write_later(void *arg)
{
	struct fid_eq *eq = arg;
	struct timespec t = {0, 200 * 1000 * 1000};
	nanosleep(&t, NULL);
	struct fi_eq_entry ee = {.context = eq};
	XT_CHECK(fi_eq_write(eq, FI_NOTIFY, &ee, sizeof ee, 0) == sizeof ee, "fi_eq_write");
	return NULL;
}

/* The waiting thread's own sleeps in the 1 s waits under manual progress: auto's reference. */
static long manual_own_sread, manual_own_cntr;

/* A 1 s wait with nothing coming: its process's CPU and wake-ups, and under auto progress the
 * waiting thread's own sleeps against the same wait's under manual progress (*manual_own). */
static void judge_wait(enum fi_progress mode, const char *call, double used, long woke, long own,
		       long *manual_own)
{
	const char *name = mode == FI_PROGRESS_AUTO ? "auto" : "manual";
	printf("  %s: %s 1 s: %.3f s CPU, %ld wake-ups (%ld its own)\n", name, call, used, woke, own);
	XT_CHECK(used <= WAIT_CPU_MAX_S && woke <= WAKEUPS_MAX, "%s: %s used %.3f s of CPU and woke %ld times in 1 s",
		 name, call, used, woke);
	if (mode == FI_PROGRESS_MANUAL)
		*manual_own = own;
	else
		XT_CHECK(own <= *manual_own + OWN_SLEEPS_EXTRA,
			 "auto: %s's thread slept %ld times in 1 s, against %ld under manual progress", call, own,
			 *manual_own);
}

static void run(enum fi_progress mode)
{
	const char *name = mode == FI_PROGRESS_AUTO ? "auto" : "manual";
	struct pair p;
	memset(&p, 0, sizeof p);
	open_one(&p.a, mode, 0, NULL, NULL);
	open_one(&p.b, mode, 1, &p.cntr, &p.waitset);
	p.a_to_b = xt_insert(&p.a, p.b.name);
	p.b_to_a = xt_insert(&p.b, p.a.name);
	warm_up(&p);
	const uint64_t cntr_base = fi_cntr_read(p.cntr); /* the warm-up's receive counted */
	char buf[64];
	XT_RC(fi_trecv(p.b.ep, buf, sizeof buf, NULL, FI_ADDR_UNSPEC, 9, 0, buf));

	struct fi_cq_tagged_entry e;
	long w0 = wakeups(), s0 = thread_sleeps();
	double c0 = cpu_s();
	ssize_t r = fi_cq_sread(p.b.rxcq, &e, 1, NULL, 1000);
	double used = cpu_s() - c0;
	long woke = wakeups() - w0, own = thread_sleeps() - s0;
	XT_CHECK(r == -FI_EAGAIN, "%s: fi_cq_sread with nothing coming = %zd", name, r);
	judge_wait(mode, "fi_cq_sread", used, woke, own, &manual_own_sread);

	w0 = wakeups();
	s0 = thread_sleeps();
	c0 = cpu_s();
	int rc = fi_cntr_wait(p.cntr, cntr_base + 1, 1000);
	used = cpu_s() - c0;
	woke = wakeups() - w0;
	own = thread_sleeps() - s0;
	XT_CHECK(rc == -FI_ETIMEDOUT, "%s: fi_cntr_wait with nothing coming = %d", name, rc);
	judge_wait(mode, "fi_cntr_wait", used, woke, own, &manual_own_cntr);

	if (mode == FI_PROGRESS_AUTO) {
		w0 = wakeups();
		c0 = cpu_s();
		struct timespec t = {1, 0};
		nanosleep(&t, NULL);
		used = cpu_s() - c0;
		woke = wakeups() - w0;
		printf("  auto: idle progress threads, 1 s: %.3f s CPU, %ld wake-ups\n", used, woke);
		XT_CHECK(used <= WAIT_CPU_MAX_S && woke <= WAKEUPS_MAX,
			 "auto: idle progress threads used %.3f s of CPU and woke %ld times in 1 s", used, woke);

		/* The wait fd under automatic progress: nothing but poll(2) after the send. */
		int fd = -1;
		XT_RC(fi_control(&p.b.rxcq->fid, FI_GETWAIT, &fd));
		struct fid *f = &p.b.rxcq->fid;
		XT_CHECK(fi_trywait(p.b.fabric, &f, 1) == 0, "fi_trywait on an empty CQ");
		static const char msg[] = "wake";
		XT_POST(p.a.txcq, fi_tinject(p.a.ep, msg, sizeof msg, p.a_to_b, 9));
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		XT_CHECK(poll(&pfd, 1, 10000) == 1, "auto: the wait fd did not wake within 10 s");
		XT_CHECK(fi_cq_read(p.b.rxcq, &e, 1) == 1 && e.op_context == buf && !strcmp(buf, "wake"),
			 "auto: the completion behind the wait fd");
		XT_RC(fi_trecv(p.b.ep, buf, sizeof buf, NULL, FI_ADDR_UNSPEC, 9, 0, buf));
		xt_pass("auto: the progress thread wakes a poll(2) on the CQ's wait fd");
	}

	/* fi_wait on a wait set, and fi_eq_sread: CPU and wake-ups while idle, then woken. */
	w0 = wakeups();
	c0 = cpu_s();
	rc = fi_wait(p.waitset, 1000);
	used = cpu_s() - c0;
	woke = wakeups() - w0;
	XT_CHECK(rc == -FI_ETIMEDOUT, "%s: fi_wait with nothing coming = %d", name, rc);
	printf("  %s: fi_wait 1 s: %.3f s CPU, %ld wake-ups\n", name, used, woke);
	XT_CHECK(used <= WAIT_CPU_MAX_S && woke <= WAKEUPS_MAX, "%s: fi_wait used %.3f s of CPU and woke %ld times in 1 s",
		 name, used, woke);
	pthread_t t;
	XT_CHECK(pthread_create(&t, NULL, send_b_later, &p) == 0, "pthread_create");
	XT_CHECK(fi_wait(p.waitset, 5000) == 0, "%s: fi_wait missed b's send completion", name);
	pthread_join(t, NULL);
	XT_CHECK(fi_cq_read(p.b.txcq, &e, 1) == 1, "%s: the completion behind fi_wait", name);

	struct fi_eq_attr ea = {.wait_obj = FI_WAIT_UNSPEC, .size = 8};
	XT_RC(fi_eq_open(p.b.fabric, &ea, &p.eq, NULL));
	uint32_t ev;
	struct fi_eq_entry ee;
	w0 = wakeups();
	c0 = cpu_s();
	r = fi_eq_sread(p.eq, &ev, &ee, sizeof ee, 1000, 0);
	used = cpu_s() - c0;
	woke = wakeups() - w0;
	XT_CHECK(r == -FI_EAGAIN, "%s: fi_eq_sread with nothing coming = %zd", name, r);
	printf("  %s: fi_eq_sread 1 s: %.3f s CPU, %ld wake-ups\n", name, used, woke);
	XT_CHECK(used <= WAIT_CPU_MAX_S && woke <= WAKEUPS_MAX,
		 "%s: fi_eq_sread used %.3f s of CPU and woke %ld times in 1 s", name, used, woke);
	XT_CHECK(pthread_create(&t, NULL, eq_write_later, p.eq) == 0, "pthread_create");
	r = fi_eq_sread(p.eq, &ev, &ee, sizeof ee, 5000, 0);
	XT_CHECK(r == sizeof ee && ev == FI_NOTIFY && ee.context == p.eq, "%s: fi_eq_sread missed an event (%zd)",
		 name, r);
	pthread_join(t, NULL);
	XT_RC(fi_close(&p.eq->fid));

	/* A wait that sleeps before the message comes is woken by it. */
	XT_CHECK(pthread_create(&t, NULL, send_later, &p) == 0, "pthread_create");
	const double t0 = now_ms();
	c0 = cpu_s();
	r = fi_cq_sread(p.b.rxcq, &e, 1, NULL, 5000);
	const double t1 = now_ms();
	used = cpu_s() - c0;
	XT_CHECK(r == 1 && e.op_context == buf && !strcmp(buf, "late"), "%s: fi_cq_sread missed a message (%zd)",
		 name, r);
	pthread_join(t, NULL);
	const double late = t1 - p.late_sent_ms, share = used * 1e3 / (t1 - t0);
	printf("  %s: fi_cq_sread for a message sent 200 ms later: returned %.2f ms after the send, "
	       "%.1f%% CPU\n", name, late, share * 100);
	XT_CHECK(late <= LATE_MAX_MS && share <= LATE_CPU_SHARE,
		 "%s: the late message came %.2f ms after its send, with %.1f%% CPU", name, late, share * 100);
	XT_CHECK(fi_cntr_read(p.cntr) >= cntr_base + 1, "the receive counter");

	xt_close_ep(&p.a);
	xt_close_ep(&p.b);
	XT_RC(fi_close(&p.cntr->fid));
	XT_RC(fi_close(&p.b.txcq->fid));
	p.b.txcq = NULL;
	XT_RC(fi_close(&p.waitset->fid));
	xt_close(&p.a);
	xt_close(&p.b);
	printf("PASS: %s: blocking waits use at most %.2f s of CPU per second\n", name, WAIT_CPU_MAX_S);
}

int main(void)
{
	xt_init(120);
	run(FI_PROGRESS_MANUAL);
	run(FI_PROGRESS_AUTO);
	return 0;
}
