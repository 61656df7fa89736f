/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Whether the network backend's lower CQ gets a wait fd. An fd costs the lower tcp provider
 * work on every arrival (its sockets sit in an epoll set whose callback takes a lock with
 * interrupts off: 0.7-1.3 us of an 8 B one-way latency of 7-10 us across two namespaces,
 * BENCHMARKS.md), so fi_enable gives the lower CQ one only where something may sleep on the
 * endpoint: a CQ with a wait object (fi_cq_sread, fi_trywait, a wait set), any counter
 * (fi_cntr_wait sleeps whatever its wait object), or FI_PROGRESS_AUTO's thread. The counter
 * network_sleepable (fi_ext_exanet.h) says which was chosen; with the network off it is 0.
 *
 * Over the network backend (net.lower_wait, FI_EXANET_NETWORK=every_peer), one process, two
 * endpoints per case that reach each other over the lower provider:
 *  - CQs with FI_WAIT_NONE, manual progress, no counter: 0; and messages (8 B and 4 KiB, both
 *    ways) still arrive, polled, every byte checked;
 *  - a CQ with FI_WAIT_FD, FI_WAIT_UNSPEC, FI_WAIT_YIELD or on a wait set: 1; with FI_WAIT_FD
 *    the receiver then blocks in fi_cq_sread (5 s bound) for a message another thread sends
 *    300 ms later: the lower fd must wake it;
 *  - FI_WAIT_NONE CQs with a counter bound (FI_WAIT_NONE too): 1;
 *  - FI_WAIT_NONE CQs under FI_PROGRESS_AUTO: 1.
 * Over shared memory (conformance.lower_wait) every case reads 0 and the messages arrive.
 * A provider that always opened the lower CQ with an fd fails the first case; one that never
 * did fails the others.
 */
#include "xt.h"

#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_network; /* FI_EXANET_NETWORK names a network use other than off */

struct pair {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_wait *ws;
	struct {
		struct fid_av *av;
		struct fid_cq *cq;
		struct fid_cntr *cntr;
		struct fid_ep *ep;
		fi_addr_t peer;
	} e[2];
};

static void pair_open(struct pair *p, enum fi_wait_obj wait, int counter, enum fi_progress prog)
{
	memset(p, 0, sizeof *p);
	struct fi_info *h = xt_hints();
	h->domain_attr->data_progress = prog;
	h->domain_attr->control_progress = prog;
	h->domain_attr->threading = FI_THREAD_SAFE; /* a thread sends while another sleeps */
	XT_RC(fi_getinfo(xt_api_version, NULL, NULL, 0, h, &p->info));
	fi_freeinfo(h);
	XT_RC(fi_fabric(p->info->fabric_attr, &p->fabric, NULL));
	XT_RC(fi_domain(p->fabric, p->info, &p->domain, NULL));
	if (wait == FI_WAIT_SET) {
		struct fi_wait_attr wa = {.wait_obj = FI_WAIT_UNSPEC};
		XT_RC(fi_wait_open(p->fabric, &wa, &p->ws));
	}
	char names[2][64];
	for (int i = 0; i < 2; i++) {
		struct fi_av_attr av = {.type = FI_AV_MAP};
		XT_RC(fi_av_open(p->domain, &av, &p->e[i].av, NULL));
		struct fi_cq_attr cq = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = wait,
					.wait_set = p->ws};
		XT_RC(fi_cq_open(p->domain, &cq, &p->e[i].cq, NULL));
		XT_RC(fi_endpoint(p->domain, p->info, &p->e[i].ep, NULL));
		XT_RC(fi_ep_bind(p->e[i].ep, &p->e[i].av->fid, 0));
		XT_RC(fi_ep_bind(p->e[i].ep, &p->e[i].cq->fid, FI_TRANSMIT | FI_RECV));
		if (counter) {
			struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_NONE};
			XT_RC(fi_cntr_open(p->domain, &ca, &p->e[i].cntr, NULL));
			XT_RC(fi_ep_bind(p->e[i].ep, &p->e[i].cntr->fid, FI_RECV));
		}
		XT_RC(fi_enable(p->e[i].ep));
		size_t len = sizeof names[i];
		XT_RC(fi_getname(&p->e[i].ep->fid, names[i], &len));
	}
	for (int i = 0; i < 2; i++)
		XT_CHECK(fi_av_insert(p->e[i].av, names[1 - i], 1, &p->e[i].peer, 0, NULL) == 1,
			 "fi_av_insert");
}

static void pair_close(struct pair *p)
{
	for (int i = 0; i < 2; i++) {
		XT_RC(fi_close(&p->e[i].ep->fid));
		if (p->e[i].cntr)
			XT_RC(fi_close(&p->e[i].cntr->fid));
		XT_RC(fi_close(&p->e[i].cq->fid));
		XT_RC(fi_close(&p->e[i].av->fid));
	}
	if (p->ws)
		XT_RC(fi_close(&p->ws->fid));
	XT_RC(fi_close(&p->domain->fid));
	XT_RC(fi_close(&p->fabric->fid));
	fi_freeinfo(p->info);
}

/* A posting call retried while it says -FI_EAGAIN, with both endpoints' progress: they are in
 * one process, and over the network each needs the other's progress to connect (a receive
 * directed at its peer sends that peer an RTR). */
#define POST_BOTH(p, call) \
	do { long rc_; const double end_ = xt_now_s() + 20; \
	     while ((rc_ = (long)(call)) == -FI_EAGAIN) { \
		     XT_CHECK(xt_now_s() < end_, "%s: -FI_EAGAIN for 20 s", #call); \
		     (void)fi_cq_read((p)->e[0].cq, NULL, 0); (void)fi_cq_read((p)->e[1].cq, NULL, 0); } \
	     XT_CHECK(rc_ >= 0, "%s = %ld (%s)", #call, rc_, fi_strerror((int)-rc_)); } while (0)

/* One message from endpoint `from` to the other, received by polling both CQs; bytes checked. */
static void exchange(struct pair *p, int from, size_t len, unsigned seed)
{
	static char out[4096], in[4096];
	const int to = 1 - from;
	xt_fill(out, len, seed);
	memset(in, 0, sizeof in);
	POST_BOTH(p, fi_trecv(p->e[to].ep, in, len, NULL, p->e[to].peer, 7, 0, NULL));
	POST_BOTH(p, fi_tsend(p->e[from].ep, out, len, NULL, p->e[from].peer, 7, NULL));
	int sent = 0, got = 0;
	const double end = xt_now_s() + 20;
	struct fi_cq_tagged_entry e;
	while (!(sent && got)) {
		XT_CHECK(xt_now_s() < end, "%zu B from endpoint %d: no completion within 20 s "
			 "(sent %d, received %d)", len, from, sent, got);
		ssize_t r = fi_cq_read(p->e[from].cq, &e, 1);
		XT_CHECK(r == 1 || r == -FI_EAGAIN, "fi_cq_read (sender) = %zd", r);
		sent += r == 1;
		r = fi_cq_read(p->e[to].cq, &e, 1);
		XT_CHECK(r == 1 || r == -FI_EAGAIN, "fi_cq_read (receiver) = %zd", r);
		if (r == 1) {
			XT_CHECK(e.len == len && e.tag == 7, "received %zu B tag %llu", e.len,
				 (unsigned long long)e.tag);
			got = 1;
		}
	}
	XT_CHECK(xt_verify(in, len, seed), "%zu B from endpoint %d: wrong bytes", len, from);
}

static const char late_message[8] = "asleep?";

static void *late_sender(void *arg)
{
	struct pair *p = arg;
	usleep(300 * 1000);
	POST_BOTH(p, fi_tinject(p->e[0].ep, late_message, sizeof late_message, p->e[0].peer, 9));
	return NULL;
}

static void expect_sleepable(struct pair *p, uint64_t want, const char *what)
{
	for (int i = 0; i < 2; i++) {
		const struct fi_exanet_counters c = xt_counters(p->e[i].ep);
		XT_CHECK(c.network_sleepable == want, "%s: endpoint %d network_sleepable %llu, "
			 "expected %llu", what, i, (unsigned long long)c.network_sleepable,
			 (unsigned long long)want);
	}
}

int main(void)
{
	xt_init(150);
	const char *net = getenv("FI_EXANET_NETWORK");
	g_network = net && *net && strcmp(net, "off") != 0;
	const uint64_t yes = g_network ? 1 : 0;
	struct pair p;

	pair_open(&p, FI_WAIT_NONE, 0, FI_PROGRESS_MANUAL);
	expect_sleepable(&p, 0, "FI_WAIT_NONE CQs, manual progress");
	for (int from = 0; from < 2; from++) {
		exchange(&p, from, 8, 11u + from);
		exchange(&p, from, 4096, 21u + from);
	}
	pair_close(&p);
	xt_pass("FI_WAIT_NONE CQs: no wait fd below, messages arrive");

	pair_open(&p, FI_WAIT_FD, 0, FI_PROGRESS_MANUAL);
	expect_sleepable(&p, yes, "FI_WAIT_FD CQs");
	exchange(&p, 0, 8, 31u); /* connected both ways: the next message needs no handshake */
	{
		static char in[8];
		POST_BOTH(&p, fi_trecv(p.e[1].ep, in, sizeof in, NULL, p.e[1].peer, 9, 0, NULL));
		/* The message leaves 300 ms after the receiver went to sleep in fi_cq_sread: only
		 * the lower CQ's fd can wake it then (fi_tinject hands 8 B to the lower provider at
		 * once; a send with a completion may wait for its sender's next poll, a burst). */
		pthread_t t;
		XT_CHECK(pthread_create(&t, NULL, late_sender, &p) == 0, "pthread_create");
		struct fi_cq_tagged_entry e;
		const double t0 = xt_now_s();
		const ssize_t r = fi_cq_sread(p.e[1].cq, &e, 1, NULL, 5000);
		const double took = xt_now_s() - t0;
		XT_CHECK(pthread_join(t, NULL) == 0, "pthread_join");
		XT_CHECK(r == 1, "fi_cq_sread on the receiver = %zd after %.2f s", r, took);
		XT_CHECK(took >= 0.25, "fi_cq_sread returned after %.3f s, before the message left", took);
		XT_CHECK(e.len == sizeof late_message && memcmp(in, late_message, sizeof in) == 0,
			 "fi_cq_sread's data");
	}
	pair_close(&p);
	xt_pass("FI_WAIT_FD CQs: a wait fd below, fi_cq_sread wakes");

	const enum fi_wait_obj others[] = {FI_WAIT_UNSPEC, FI_WAIT_YIELD, FI_WAIT_SET};
	const char *other_names[] = {"FI_WAIT_UNSPEC", "FI_WAIT_YIELD", "FI_WAIT_SET"};
	for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
		pair_open(&p, others[i], 0, FI_PROGRESS_MANUAL);
		expect_sleepable(&p, yes, other_names[i]);
		exchange(&p, 1, 8, 41u + (unsigned)i);
		pair_close(&p);
	}
	xt_pass("CQs with any other wait object: a wait fd below");

	pair_open(&p, FI_WAIT_NONE, 1, FI_PROGRESS_MANUAL);
	expect_sleepable(&p, yes, "FI_WAIT_NONE CQs with a counter");
	exchange(&p, 0, 8, 51u);
	pair_close(&p);
	xt_pass("a counter bound: a wait fd below");

	pair_open(&p, FI_WAIT_NONE, 0, FI_PROGRESS_AUTO);
	expect_sleepable(&p, yes, "FI_WAIT_NONE CQs under FI_PROGRESS_AUTO");
	exchange(&p, 1, 4096, 61u);
	pair_close(&p);
	xt_pass("FI_PROGRESS_AUTO: a wait fd below");
	return 0;
}
