/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A send that the provider keeps for "the next poll" must not wait for a poll that no thread
 * will make. Over exanet's network backend the first packet to a peer is the device's hello,
 * and a reported packet (its completion is read later, through a poll that sends it first)
 * right behind another lower message to the same peer waits in a bundle for that poll
 * (dev::net::device::send_or_queue). upstream fi_rdm_stress's server met that case: the peer's
 * message came first (its lower connection), and the server's answer left with its hello.
 * Each case below answers a fresh peer so, and then calls nothing of libfabric's in the
 * answering thread:
 *
 *  1. manual progress, FI_THREAD_SAFE, a receive CQ with a wait object: a second thread already
 *     sleeps in fi_cq_sread for the peer's next message (a progress thread of the kind runtimes
 *     keep); the answer's send completion goes to another CQ, which nobody reads meanwhile.
 *     The main thread answers and waits on a socket until the peer says the answer arrived,
 *     5 s at most;
 *  2. FI_PROGRESS_AUTO: the main thread answers and waits on the socket the same way; exanet's
 *     own progress thread has to send it.
 *
 * The peer (a child process) then sends its last message, which case 1's sleeper must get.
 * It passed when it was written (2026-12-07: the answer went into the bundle and left it 0.05 ms
 * later, in a device trace); it keeps that so. Over shared memory nothing waits for a poll
 * (conformance.first_send_sleeper); net.first_send_sleeper runs it over the network backend,
 * conformance.first_send_sleeper_tcp over libfabric's tcp as the reference.
 */
#include "xt.h"

#include <poll.h>
#include <pthread.h>
#include <rdma/fi_tagged.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TAG 0x5e5dULL
#define LEN 8 /* one packet: the one a bundle keeps for the next poll */
#define ARRIVAL_MS 5000

static int peer(int index, int sock)
{
	(void)index;
	struct xt_ep x;
	xt_open_default(&x, 0);
	const fi_addr_t to = xt_exchange(&x, sock, 1, NULL);
	unsigned char ping[LEN], buf[LEN], last[LEN];
	xt_fill(ping, sizeof ping, 6);
	xt_send_one(x.ep, x.txcq, ping, sizeof ping, to, TAG); /* the connection is ours */
	XT_RC(fi_trecv(x.ep, buf, sizeof buf, NULL, FI_ADDR_UNSPEC, TAG + 1, 0, NULL));
	XT_CHECK(xt_wait(x.rxcq, NULL, NULL, 10) == 1, "the answer never came");
	XT_CHECK(xt_verify(buf, sizeof buf, 7), "the answer's bytes differ");
	const char got = 'G';
	xt_send_all(sock, &got, 1);
	xt_fill(last, sizeof last, 8);
	xt_send_one(x.ep, x.txcq, last, sizeof last, to, TAG + 2);
	char done;
	xt_recv_all(sock, &done, 1); /* the initiator has the last message (or gave up) */
	xt_close(&x);
	return 0;
}

/* Case 1's sleeper: waits in fi_cq_sread on the receive CQ, where the only receive posted is
 * the one for the peer's last message (the answer's send completion goes to the send CQ). */
struct sleeper {
	struct fid_cq *cq;
	int got; /* 1: the last message's completion came */
};

static void *sleep_for_last(void *arg)
{
	struct sleeper *s = arg;
	struct fi_cq_tagged_entry e;
	s->got = fi_cq_sread(s->cq, &e, 1, NULL, 8000) == 1; /* else a timeout or an error */
	return NULL;
}

/* Waits on the socket alone (no libfabric call) for the peer's word that the message arrived. */
static int arrived_within(int sock, int ms)
{
	struct pollfd p = {.fd = sock, .events = POLLIN};
	if (poll(&p, 1, ms) != 1)
		return 0;
	char got;
	xt_recv_all(sock, &got, 1);
	return got == 'G';
}

static void run(int auto_progress)
{
	int sock;
	pid_t pid;
	xt_spawn(1, peer, &sock, &pid);
	struct fi_info *h = xt_hints();
	h->domain_attr->threading = FI_THREAD_SAFE;
	if (auto_progress) {
		h->domain_attr->data_progress = FI_PROGRESS_AUTO;
		h->domain_attr->control_progress = FI_PROGRESS_AUTO;
	}
	struct fi_info *info = NULL;
	XT_RC(fi_getinfo(xt_api_version, NULL, NULL, 0, h, &info));
	fi_freeinfo(h);
	struct xt_ep x;
	xt_open_info_wait(&x, info, 0, FI_WAIT_UNSPEC);
	xt_enable(&x);
	struct fid_ep *ep = x.ep;
	struct fid_cq *cq = x.rxcq, *txcq = x.txcq;
	const fi_addr_t to = xt_exchange(&x, sock, 0, NULL);

	/* The peer's message first: the lower connection is its, and the device's hello to it goes
	 * out at once with our answer, which it may keep for the next poll. */
	unsigned char ping[LEN], answer[LEN], last[LEN];
	XT_RC(fi_trecv(ep, ping, sizeof ping, NULL, to, TAG, 0, NULL));
	XT_CHECK(xt_wait(cq, NULL, NULL, 10) == 1, "the peer's first message never came");
	XT_CHECK(xt_verify(ping, sizeof ping, 6), "the peer's first message differs");
	XT_RC(fi_trecv(ep, last, sizeof last, NULL, to, TAG + 2, 0, NULL));
	struct sleeper s = {.cq = cq};
	pthread_t th;
	if (!auto_progress) {
		XT_CHECK(pthread_create(&th, NULL, sleep_for_last, &s) == 0, "pthread_create");
		usleep(200 * 1000); /* it has spun its polls and sleeps by now */
	}
	xt_fill(answer, sizeof answer, 7);
	ssize_t rc;
	while ((rc = fi_tsend(ep, answer, sizeof answer, NULL, to, TAG + 1, NULL)) == -FI_EAGAIN) {
		/* the lower provider is busy: a retry is the application's call, as over tcp */
	}
	XT_RC(rc);
	const int arrived = arrived_within(sock, ARRIVAL_MS);
	XT_CHECK(arrived, "%s: the answer to the peer had not arrived after %d ms while the "
		 "sending thread called nothing (it waited for a poll)",
		 auto_progress ? "FI_PROGRESS_AUTO" : "manual progress, a thread asleep in fi_cq_sread",
		 ARRIVAL_MS);
	if (!auto_progress) {
		XT_CHECK(pthread_join(th, NULL) == 0, "pthread_join");
		XT_CHECK(s.got, "the sleeping thread never got the peer's last message");
	} else {
		XT_CHECK(xt_wait(cq, NULL, NULL, 10) == 1, "the peer's last message never came");
	}
	XT_CHECK(xt_verify(last, sizeof last, 8), "the peer's last message differs");
	XT_CHECK(xt_wait(txcq, NULL, NULL, 10) == 1, "the answer's send completion");
	const char done = 'D';
	xt_send_all(sock, &done, 1);
	xt_reap(1, &pid);
	xt_close(&x);
	close(sock);
	xt_pass(auto_progress ? "FI_PROGRESS_AUTO: the first message to a peer leaves while the "
				"application calls nothing"
			      : "manual progress: the first message to a peer leaves while another "
				"thread sleeps in fi_cq_sread");
}

int main(void)
{
	xt_init(120);
	run(0);
	run(1);
	return 0;
}
