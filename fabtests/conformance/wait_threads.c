/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Wait objects across threads (FI_THREAD_SAFE): one thread asks a counter, CQ or EQ for its wait
 * fd (FI_GETWAIT, which opens the fd on first use) and then blocks in fi_cntr_wait, fi_cq_sread
 * or fi_eq_sread, while a second thread keeps adding to the counter, signalling the CQ or writing
 * events to the EQ, all at once. Every wait ends with what the other thread did, and the fd is
 * usable afterwards. The TSan stage of ci/test.sh runs it (label threads): a wait fd that one
 * thread opens while another signals through it must be published safely.
 */
#include "xt.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>

#define ADDS 20000

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

	xt_close(&x);
	return 0;
}
