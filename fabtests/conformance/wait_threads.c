/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Wait objects across threads (FI_THREAD_SAFE): one thread asks a counter, CQ or EQ for its wait
 * fd (FI_GETWAIT, which opens the fd on first use) and then blocks in fi_cntr_wait, fi_cq_sread
 * or fi_eq_sread, while a second thread keeps adding to the counter, signalling the CQ or writing
 * events to the EQ, all at once. Every wait ends with what the other thread did, and the fd is
 * usable afterwards. The TSan stage of ci/test.sh runs it (label threads): a wait fd that one
 * thread opens while another signals through it must be published safely.
 *
 * Then completions that another thread writes: a second endpoint's transmit CQ (FI_WAIT_UNSPEC)
 * receives the completion of each eager send when the sending thread posts it, so nothing
 * arrives at an endpoint the waiter watches and only the CQ itself can wake it.
 *   - fi_cq_sread asleep on it is woken by the push: the median delay from the send call to the
 *     sread's return, over SREAD_ROUNDS rounds that each send a few ms after the waiter went to
 *     sleep, stays under WAKE_MEDIAN_MS. A lost wake shows as a sleeper that only finds the entry
 *     on its next periodic look (every 20 ms: a median near 10 ms).
 *   - after fi_trywait said 0 (block), the CQ's wait fd becomes readable with the next push:
 *     poll(2) on it returns the fd readable well within its 10 s timeout, and the entry is
 *     there. Without the signal the poll times out.
 *   - a wait set that holds such a CQ (a third endpoint's): fi_wait is woken by the push (the
 *     median delay as for sread), and after fi_trywait on the set said 0 the set's own wait fd
 *     becomes readable with the next push.
 */
#include "xt.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define ADDS 20000
#define SREAD_ROUNDS 30
#define FD_ROUNDS 10
#define SET_ROUNDS 10 /* of fi_wait, then as many with the set's fd */
#define ALL_ROUNDS (SREAD_ROUNDS + FD_ROUNDS + 2 * SET_ROUNDS)
#define WAKE_MEDIAN_MS 5.0
#define SEND_AFTER_US 4000 /* the waiter has spun its rounds and sleeps by then */

static atomic_int go;

static void *add_counter(void *c)
{
	while (!atomic_load(&go))
		;
	for (int i = 0; i < ADDS; i++)
		XT_RC(fi_cntr_add(c, 1));
	return NULL;
}

static atomic_int stop_signals;

static void *signal_cq(void *cq)
{
	while (!atomic_load(&go))
		;
	while (!atomic_load(&stop_signals))
		XT_RC(fi_cq_signal(cq));
	return NULL;
}

static void *write_eq(void *eq)
{
	while (!atomic_load(&go))
		;
	for (uint64_t i = 0; i < 200; i++) {
		struct fi_eq_entry e = {.data = i};
		ssize_t rc;
		while ((rc = fi_eq_write(eq, FI_NOTIFY, &e, sizeof e, 0)) == -FI_EAGAIN)
			;
		XT_CHECK(rc == sizeof e, "fi_eq_write %zd", rc);
	}
	return NULL;
}

/* The sending thread of the completion rounds: waits for the waiter to announce round i, lets it
 * fall asleep, notes the time and sends (an eager 8 B tagged send, completed at the post). */
struct sender {
	struct fid_ep *ep, *set_ep; /* set_ep from round SREAD_ROUNDS + FD_ROUNDS on */
	fi_addr_t to;
	atomic_int waiting_round;   /* the waiter's: it waits for round i's completion */
	_Atomic double sent_us[ALL_ROUNDS];
	uint64_t payload;
};

static void *send_rounds(void *arg)
{
	struct sender *s = arg;
	for (int i = 0; i < ALL_ROUNDS; i++) {
		struct fid_ep *ep = i < SREAD_ROUNDS + FD_ROUNDS ? s->ep : s->set_ep;
		while (atomic_load(&s->waiting_round) != i + 1)
			usleep(50); /* not a spin: the woken waiter needs a core at once */
		usleep(SEND_AFTER_US);
		atomic_store(&s->sent_us[i], xt_now_us());
		ssize_t rc;
		while ((rc = fi_tsend(ep, &s->payload, sizeof s->payload, NULL, s->to, 0x5e0 + i,
				      (void *)(uintptr_t)(i + 1))) == -FI_EAGAIN)
			usleep(100);
		XT_CHECK(rc == 0, "fi_tsend round %d: %zd", i, rc);
	}
	return NULL;
}

/* Another endpoint in x's domain and AV whose sends complete into a new CQ of attributes a. */
static struct fid_ep *sending_ep(struct xt_ep *x, struct fi_cq_attr *a, struct fid_cq **cq)
{
	struct fid_ep *ep;
	XT_RC(fi_cq_open(x->domain, a, cq, NULL));
	XT_RC(fi_endpoint(x->domain, x->info, &ep, NULL));
	XT_RC(fi_ep_bind(ep, &x->av->fid, 0));
	XT_RC(fi_ep_bind(ep, &(*cq)->fid, FI_TRANSMIT));
	XT_RC(fi_ep_bind(ep, &x->rxcq->fid, FI_RECV));
	XT_RC(fi_enable(ep));
	return ep;
}

/* The fd answered by FI_GETWAIT is a real, readable-when-signalled descriptor. */
static void check_fd(int fd, const char *what)
{
	XT_CHECK(fd >= 0, "%s wait fd", what);
	struct pollfd p = {.fd = fd, .events = POLLIN};
	XT_CHECK(poll(&p, 1, 0) >= 0, "poll on the %s wait fd", what);
}

int main(void)
{
	xt_init(120);
	struct xt_ep x;
	struct fi_info *h = xt_hints();
	h->domain_attr->threading = FI_THREAD_SAFE;
	xt_open(&x, h, 0);
	fi_freeinfo(h);
	pthread_t th;

	/* counter: adds from one thread, FI_GETWAIT then fi_cntr_wait in another */
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC};
	struct fid_cntr *c;
	XT_RC(fi_cntr_open(x.domain, &ca, &c, NULL));
	pthread_create(&th, NULL, add_counter, c);
	atomic_store(&go, 1);
	int fd = -1;
	XT_RC(fi_control(&c->fid, FI_GETWAIT, &fd));
	check_fd(fd, "counter");
	XT_RC(fi_cntr_wait(c, ADDS, 30000));
	pthread_join(th, NULL);
	XT_CHECK(fi_cntr_read(c) == ADDS, "counter %lu", (unsigned long)fi_cntr_read(c));
	XT_RC(fi_close(&c->fid));
	xt_pass("fi_cntr_wait with FI_GETWAIT while another thread adds");

	/* CQ: signals from one thread, FI_GETWAIT then fi_cq_sread in another */
	atomic_store(&go, 0);
	struct fi_cq_attr qa = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_UNSPEC, .size = 16};
	struct fid_cq *cq;
	XT_RC(fi_cq_open(x.domain, &qa, &cq, NULL));
	pthread_create(&th, NULL, signal_cq, cq);
	atomic_store(&go, 1);
	fd = -1;
	XT_RC(fi_control(&cq->fid, FI_GETWAIT, &fd));
	check_fd(fd, "CQ");
	struct fi_cq_tagged_entry e;
	XT_CHECK(fi_cq_sread(cq, &e, 1, NULL, 30000) == -FI_EAGAIN, "signalled sread");
	atomic_store(&stop_signals, 1);
	pthread_join(th, NULL);
	XT_RC(fi_close(&cq->fid));
	xt_pass("fi_cq_sread with FI_GETWAIT while another thread signals");

	/* EQ: events from one thread, FI_GETWAIT then fi_eq_sread in another */
	atomic_store(&go, 0);
	struct fi_eq_attr eqa = {.size = 16, .wait_obj = FI_WAIT_UNSPEC};
	struct fid_eq *eq;
	XT_RC(fi_eq_open(x.fabric, &eqa, &eq, NULL));
	pthread_create(&th, NULL, write_eq, eq);
	atomic_store(&go, 1);
	fd = -1;
	XT_RC(fi_control(&eq->fid, FI_GETWAIT, &fd));
	check_fd(fd, "EQ");
	for (uint64_t i = 0; i < 200; i++) {
		uint32_t ev = 0;
		struct fi_eq_entry out = {0};
		ssize_t n = fi_eq_sread(eq, &ev, &out, sizeof out, 30000, 0);
		XT_CHECK(n == sizeof out && ev == FI_NOTIFY && out.data == i, "event %lu: %zd",
			 (unsigned long)i, n);
	}
	pthread_join(th, NULL);
	XT_RC(fi_close(&eq->fid));
	xt_pass("fi_eq_sread with FI_GETWAIT while another thread writes events");

	/* Completions another thread writes: sread woken by the push, the trywait fd signalled. */
	struct fi_cq_attr wa = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_UNSPEC, .size = 16};
	struct fid_cq *wq;
	struct fid_ep *sep = sending_ep(&x, &wa, &wq);
	struct fi_wait_attr wsa = {.wait_obj = FI_WAIT_UNSPEC};
	struct fid_wait *ws;
	XT_RC(fi_wait_open(x.fabric, &wsa, &ws));
	struct fi_cq_attr sa = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_SET, .wait_set = ws,
				.size = 16};
	struct fid_cq *sq;
	struct fid_ep *set_ep = sending_ep(&x, &sa, &sq);
	static struct sender snd;
	snd.ep = sep;
	snd.set_ep = set_ep;
	snd.to = xt_insert(&x, x.name);
	snd.payload = 0x1122334455667788ull;
	pthread_create(&th, NULL, send_rounds, &snd);
	double delay_ms[SREAD_ROUNDS];
	for (int i = 0; i < SREAD_ROUNDS; i++) {
		atomic_store(&snd.waiting_round, i + 1);
		struct fi_cq_tagged_entry got;
		const ssize_t n = fi_cq_sread(wq, &got, 1, NULL, 10000);
		const double now = xt_now_us();
		XT_CHECK(n == 1 && got.op_context == (void *)(uintptr_t)(i + 1) && (got.flags & FI_SEND),
			 "round %d: sread %zd, context %p", i, n, got.op_context);
		delay_ms[i] = (now - atomic_load(&snd.sent_us[i])) / 1000.0;
	}
	qsort(delay_ms, SREAD_ROUNDS, sizeof delay_ms[0], xt_cmp_double);
	const double median = delay_ms[SREAD_ROUNDS / 2];
	printf("sread woken by another thread's completion: median %.3f ms, max %.3f ms (%d rounds)\n",
	       median, delay_ms[SREAD_ROUNDS - 1], SREAD_ROUNDS);
	XT_CHECK(median < WAKE_MEDIAN_MS, "median wake %.3f ms: the push does not wake the sleeper",
		 median);
	xt_pass("fi_cq_sread woken by a completion another thread writes");

	fd = -1;
	XT_RC(fi_control(&wq->fid, FI_GETWAIT, &fd));
	for (int i = SREAD_ROUNDS; i < SREAD_ROUNDS + FD_ROUNDS; i++) {
		struct fid *f = &wq->fid;
		XT_CHECK(fi_trywait(x.fabric, &f, 1) == 0, "round %d: fi_trywait on an empty CQ", i);
		atomic_store(&snd.waiting_round, i + 1);
		struct pollfd p = {.fd = fd, .events = POLLIN};
		const int rc = poll(&p, 1, 10000);
		XT_CHECK(rc == 1 && (p.revents & POLLIN), "round %d: the wait fd after a push: poll %d", i,
			 rc);
		struct fi_cq_tagged_entry got;
		ssize_t n;
		const double end = xt_now_s() + 10;
		while ((n = fi_cq_read(wq, &got, 1)) == -FI_EAGAIN && xt_now_s() < end)
			;
		XT_CHECK(n == 1 && got.op_context == (void *)(uintptr_t)(i + 1), "round %d: read %zd", i, n);
	}
	xt_pass("the wait fd fi_trywait armed is signalled by a completion another thread writes");

	double set_ms[SET_ROUNDS];
	for (int i = SREAD_ROUNDS + FD_ROUNDS; i < SREAD_ROUNDS + FD_ROUNDS + SET_ROUNDS; i++) {
		atomic_store(&snd.waiting_round, i + 1);
		struct fi_cq_tagged_entry got;
		ssize_t n = -FI_EAGAIN;
		const double end = xt_now_s() + 10;
		while (xt_now_s() < end) {
			const int rc = fi_wait(ws, 10000);
			XT_CHECK(rc == 0 || rc == -FI_ETIMEDOUT || rc == -FI_EAGAIN, "fi_wait %d", rc);
			if ((n = fi_cq_read(sq, &got, 1)) != -FI_EAGAIN)
				break;
		}
		const double now = xt_now_us();
		XT_CHECK(n == 1 && got.op_context == (void *)(uintptr_t)(i + 1), "round %d: read %zd", i, n);
		set_ms[i - SREAD_ROUNDS - FD_ROUNDS] = (now - atomic_load(&snd.sent_us[i])) / 1000.0;
	}
	qsort(set_ms, SET_ROUNDS, sizeof set_ms[0], xt_cmp_double);
	printf("fi_wait woken by another thread's completion: median %.3f ms, max %.3f ms (%d rounds)\n",
	       set_ms[SET_ROUNDS / 2], set_ms[SET_ROUNDS - 1], SET_ROUNDS);
	XT_CHECK(set_ms[SET_ROUNDS / 2] < WAKE_MEDIAN_MS,
		 "median wake %.3f ms: the push does not signal the wait set", set_ms[SET_ROUNDS / 2]);
	xt_pass("fi_wait on a wait set woken by a completion another thread writes");

	fd = -1;
	XT_RC(fi_control(&ws->fid, FI_GETWAIT, &fd));
	for (int i = SREAD_ROUNDS + FD_ROUNDS + SET_ROUNDS; i < ALL_ROUNDS; i++) {
		struct fid *f = &ws->fid;
		XT_CHECK(fi_trywait(x.fabric, &f, 1) == 0, "round %d: fi_trywait on an empty set", i);
		atomic_store(&snd.waiting_round, i + 1);
		struct pollfd p = {.fd = fd, .events = POLLIN};
		const int rc = poll(&p, 1, 10000);
		XT_CHECK(rc == 1 && (p.revents & POLLIN), "round %d: the set's fd after a push: poll %d",
			 i, rc);
		struct fi_cq_tagged_entry got;
		ssize_t n;
		const double end = xt_now_s() + 10;
		while ((n = fi_cq_read(sq, &got, 1)) == -FI_EAGAIN && xt_now_s() < end)
			;
		XT_CHECK(n == 1 && got.op_context == (void *)(uintptr_t)(i + 1), "round %d: read %zd", i, n);
	}
	pthread_join(th, NULL);
	xt_pass("a wait set's fd, armed by fi_trywait, signalled by a completion another thread writes");

	/* The messages themselves, in order. */
	for (int i = 0; i < ALL_ROUNDS; i++) {
		uint64_t in = 0;
		XT_RC(fi_trecv(x.ep, &in, sizeof in, NULL, FI_ADDR_UNSPEC, 0x5e0 + i, 0, NULL));
		struct fi_cq_tagged_entry got;
		XT_CHECK(xt_wait(x.rxcq, &got, NULL, 10) == 1 && got.tag == 0x5e0u + (unsigned)i &&
				 in == snd.payload,
			 "message %d", i);
	}
	XT_RC(fi_close(&sep->fid));
	XT_RC(fi_close(&wq->fid));
	XT_RC(fi_close(&set_ep->fid));
	XT_RC(fi_close(&sq->fid));
	XT_RC(fi_close(&ws->fid));

	xt_close(&x);
	return 0;
}
