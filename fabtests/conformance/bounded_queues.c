/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Issue 12 part 5: a real sender floods a receiver with 1000 unexpected 256 KiB medium messages
 * that the receiver does not post receives for. The receiver's memory must stay under the bound
 * its attributes give (rx_attr->size = 64: 64 x 256 KiB of unexpected payload, fi_exanet(7)
 * RESOURCE MANAGEMENT), the sender must meet back-pressure (-FI_EAGAIN) instead, and once the
 * receiver posts its receives every message arrives intact, in order: nothing is lost.
 * Before the bound, the receiver copied every message out: about 260 MB of RSS.
 */
#include "xt.h"

#include <poll.h>
#include <rdma/fi_ext_exanet.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define COUNT 1000
#define LEN (256 * 1024)
#define RX_SIZE 64
#define SEEDS 8

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;
	XT_CHECK(f != NULL, "cannot read /proc/self/status");
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static int sender(int index, int sock)
{
	(void)index;
	struct xt_ep x;
	xt_open_default(&x, 0);
	fi_addr_t peer = xt_exchange(&x, sock, 1, NULL);
	/* Rendezvous sends (when the ring has no credit) read their buffer until they complete:
	 * message i reads buffer i % SEEDS, which never changes. */
	static unsigned char bufs[SEEDS][LEN];
	for (int s = 0; s < SEEDS; s++)
		xt_fill(bufs[s], LEN, (unsigned)s);
	int sent = 0, reported = 0;
	double stuck_since = 0;
	while (sent < COUNT) {
		ssize_t rc = fi_tsend(x.ep, bufs[sent % SEEDS], LEN, NULL, peer, (uint64_t)sent, NULL);
		if (rc == 0) {
			sent++;
			stuck_since = 0;
			/* Paced like a sender that waits for ring credit, so its messages go medium
			 * (copied at the receiver) rather than rendezvous (only an envelope). */
			usleep(300);
			continue;
		}
		XT_CHECK(rc == -FI_EAGAIN, "fi_tsend: %s", fi_strerror((int)-rc));
		fi_cq_read(x.txcq, NULL, 0);
		if (stuck_since == 0)
			stuck_since = xt_now_us();
		if (!reported && xt_now_us() - stuck_since > 2e6) {
			/* Blocked for 2 s: tell the receiver how far we got. */
			xt_send_all(sock, &sent, sizeof sent);
			reported = 1;
		}
	}
	if (!reported)
		xt_send_all(sock, &sent, sizeof sent);
	for (int done = 0; done < COUNT; done++)
		XT_CHECK(xt_wait(x.txcq, NULL, NULL, 60) == 1, "send %d failed", done);
	xt_sync(sock);
	xt_close(&x);
	return 0;
}

int main(void)
{
	xt_init(150);
	/* Medium messages up to 256 KiB: a bounce ring of 512 KiB per sender (both processes). */
	setenv("FI_EXANET_BOUNCE_RING_BYTES", "524288", 1);
	setenv("FI_EXANET_MEDIUM_MAX", "262144", 1);
	/* A small mailbox (and held queue, as large) so the sender meets -FI_EAGAIN well before
	 * its 1000th message. */
	setenv("FI_EXANET_MAILBOX_SLOTS", "128", 1);
	/* The default staged DMA engine: its writes travel through the receiver's mailbox, and
	 * must not wait behind the flood (senders stop sending message packets while a receiver
	 * holds). BOUNDED_QUEUES_CMA=1 runs the same with cross-memory attach. */
	if (getenv("BOUNDED_QUEUES_CMA") && atoi(getenv("BOUNDED_QUEUES_CMA")) == 1)
		setenv("FI_EXANET_USE_CMA", "1", 1);
	/* fi_getinfo grants at least the provider's default queue size; this lowers it. */
	setenv("FI_EXANET_RX_SIZE", "64", 1);
	int sock;
	pid_t pid;
	xt_spawn(1, sender, &sock, &pid);

	struct fi_info *hints = xt_hints();
	hints->rx_attr->size = RX_SIZE;
	struct xt_ep x;
	xt_open(&x, hints, 0);
	fi_freeinfo(hints);
	fi_addr_t peer = xt_exchange(&x, sock, 0, NULL);
	static unsigned char out[LEN];
	memset(out, 0, sizeof out); /* its pages count in the baseline */
	const long before = rss_kib();

	/* Progress with no receive posted until the sender reports where it stopped. */
	int sent = -1;
	while (sent < 0) {
		fi_cq_read(x.rxcq, NULL, 0);
		struct pollfd p = {.fd = sock, .events = POLLIN};
		if (poll(&p, 1, 0) == 1)
			xt_recv_all(sock, &sent, sizeof sent);
	}
	for (int i = 0; i < 1000; i++)
		fi_cq_read(x.rxcq, NULL, 0);
	const long after = rss_kib();
	struct fi_exanet_counters c;
	memset(&c, 0, sizeof c);
	struct fi_exanet_counters_ops *ops = NULL;
	if (fi_open_ops(&x.ep->fid, FI_EXANET_COUNTERS_OPS, 0, (void **)&ops, NULL) == 0)
		ops->read(x.ep, &c, sizeof c);
	/* The bound from the granted attributes: rx_size x medium_max of payload (at most 64 MiB),
	 * 16 x rx_size records (a few hundred bytes each), the sender's 512 KiB ring; 8 MiB for the
	 * allocator. */
	const long rx = (long)x.info->rx_attr->size;
	XT_CHECK(rx == RX_SIZE, "granted rx size %ld", rx);
	long payload_kib = rx * (LEN / 1024);
	if (payload_kib > 64 * 1024)
		payload_kib = 64 * 1024;
	const long bound_kib = payload_kib + 16 * rx / 2 + 512 + 8 * 1024;
	printf("receiver RSS: %ld KiB before, %ld KiB after the flood (+%ld KiB, bound %ld KiB); "
	       "sender stopped after %d of %d; medium %llu, rendezvous %llu, unexpected_max %llu, "
	       "intake_held %llu\n",
	       before, after, after - before, bound_kib, sent, COUNT,
	       (unsigned long long)c.medium_recv, (unsigned long long)c.rndv_recv,
	       (unsigned long long)c.unexpected_max, (unsigned long long)c.intake_held);
	XT_CHECK(after - before <= bound_kib, "RSS grew by %ld KiB, above the bound %ld KiB",
		 after - before, bound_kib);
	XT_CHECK(sent < COUNT, "the sender never met back-pressure");
	xt_pass("an unexpected medium flood stays within the bound");

	/* Now receive everything, in send order: every message intact. */
	for (int i = 0; i < COUNT; i++) {
		XT_RC(fi_trecv(x.ep, out, LEN, NULL, peer, (uint64_t)i, 0, NULL));
		struct fi_cq_tagged_entry e;
		XT_CHECK(xt_wait(x.rxcq, &e, NULL, 60) == 1, "receive %d failed", i);
		XT_CHECK(e.len == LEN && e.tag == (uint64_t)i, "receive %d: len %zu tag %llu", i,
			 e.len, (unsigned long long)e.tag);
		XT_CHECK(xt_verify(out, LEN, (unsigned)(i % SEEDS)), "message %d corrupted", i);
	}
	xt_pass("every held message is delivered once the receives are posted");
	xt_sync_progress(sock, x.rxcq);
	xt_reap(1, &pid);
	xt_close(&x);
	return 0;
}
