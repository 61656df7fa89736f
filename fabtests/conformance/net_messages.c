/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Lower messages per exanet message. Over the network backend (net.net_messages) every exanet
 * message of 8 B to 8 KiB must leave as ONE message of the lower provider, as tcp;ofi_rxm sends
 * one: an eager message (one packet), an eager train (its packets and its envelope) and a
 * medium message (its bounce-ring bytes and the packet naming them) alike. Before dev/net's
 * bundles, a train or a medium message was two lower messages, which halved the message rate
 * and cost 5 us of latency at 64 B. The sender's counters say it: network_messages_sent grows
 * by one per message (a little slack for a device packet such as a credit), and
 * eager_sent/train_sent/medium_sent say which protocol carried each size, so every path is
 * covered. The receiver checks every byte and tag. Over shared memory (conformance.net_messages)
 * the same exchange must hand nothing to a lower provider.
 *
 * Atomics too: one lower message per atomic request, whether its operands travel in the packet
 * or in the bounce ring; and, with an 8 KiB ring (net.net_messages_small_ring,
 * FI_EXANET_BOUNCE_RING_BYTES=8192), when two 4 KiB messages the receiver has not read yet fill
 * it, an atomic's 64 operand bytes go as a train of two atomic_operands packets ahead of its
 * request: still one lower message (before the bundle flag on those packets: three). The target
 * checks the sums. With the small ring, messages above 4 KiB, and those that find it full, go by
 * rendezvous (more lower messages by design): medium sizes are not checked there.
 *
 * Bursts. N messages posted back to back, with no read between them, leave in far fewer lower
 * messages (dev/net keeps a reported packet to a peer it sent to since its last poll for that
 * poll): at most N / 2 here, for eager, train and medium sizes, every byte checked. What may be
 * kept is bounded by what the application will do next, and two cases check it, each failing
 * by a hang (the receiver's wait, 30 s) if a packet stays behind:
 *  - with completions: the sender gets all N with fi_cq_read calls (the first read finds them
 *    all, and a read that finds entries may skip progress), then calls nothing until the
 *    receiver says, over the socket, that it has all N: the read that handed out the
 *    completions must have sent what was kept;
 *  - fi_tinject (no completion, no counter): the sender calls nothing after its N calls, so
 *    none of them may be kept.
 * Medium bursts of 8 KiB and 16 KiB (96 KiB each, at placements that differ per message): the
 * bytes of one message fill the lower message of the one before, so at most one lower message
 * per 16000 bytes (default buffers) and two more (before: one per 8 KiB message, two per 16 KiB one).
 *
 * Lower message size. A 16 KiB medium message to a receive posted first is ONE lower message
 * with the buffer size exanet chooses for tcp;ofi_rxm when the process sets none (34816, set
 * when the provider loads, before rxm reads it; checked here after the open), and two with
 * rxm's 16 KiB when the user asks for it (net.net_messages_rxm_16k: its bytes, then the rest
 * with its packet, as 16384 B and our header do not fit 16384): dev/net follows rxm's buffer
 * size rather than assuming one.
 * Over libfabric's `net` provider (net_native.net_messages), whose RDM endpoints send every
 * message whole, lower messages carry up to 64 KiB.
 *
 * RTR window: 16 receives of 192 KiB posted back to back send 16 RTRs in at most 4 lower
 * messages (an RTR is a reported packet: its receive completes only through a later read, which
 * polls first); the sender waits until it has every RTR, then each send is written straight into
 * its receive (ri_sent), every byte checked. Over shared memory: no lower message.
 *
 * Longer than one lower message carries: a 16 KiB message (FI_EXANET_MEDIUM_MAX's default) is
 * still a medium message over the network, its leading bytes in a lower message of their own
 * (two in all). And above what the network's bounce path takes (a quarter of a receive buffer,
 * 64 KiB; net.net_messages_medium_max raises FI_EXANET_MEDIUM_MAX to 128 KiB) a 96 KiB message
 * whose receive was posted first goes by the receiver's RTR (ri_sent), not by the RTS the
 * sender took when the medium path found no room at send time (a round trip more); over shared
 * memory it is medium.
 */
#include "xt.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_ext_exanet.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define N 16 /* per size: 16 x 8 KiB is half the default bounce ring, so no send lacks credit */

enum carrier { EAGER, TRAIN, MEDIUM };
static const struct {
	size_t len;
	enum carrier by; /* with the default limits: one packet up to 36 B, a train up to 84 B */
} sizes[] = {{8, EAGER},     {36, EAGER},    {37, TRAIN},    {64, TRAIN},     {84, TRAIN},
	     {85, MEDIUM},   {1024, MEDIUM}, {4096, MEDIUM}, {8192, MEDIUM}};
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define BIG 8192

static fi_addr_t peer;
static int g_small_ring; /* FI_EXANET_BOUNCE_RING_BYTES=8192: atomics meet a full ring */
#define FILL 4096	 /* the largest message that fills the small ring */

/* Atomic operand sizes: one uint64 (in the packet), 64 and 256 bytes (the bounce ring). */
static const size_t atomic_counts[] = {1, 8, 32};
#define NATOMIC (sizeof atomic_counts / sizeof atomic_counts[0])
#define ATOMIC_ELEMS 32

static void learn_lower_bytes(void);

static void open_atomic_ep(struct xt_ep *x)
{
	struct fi_info *h = xt_hints();
	h->caps |= FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	xt_open(x, h, 0);
	fi_freeinfo(h);
	learn_lower_bytes(); /* exanet is loaded now */
}

/* eager, train, medium; then medium messages of 8 and 16 KiB, whose bytes fill lower messages
 * across messages (16 KiB is more than one lower message carries beside a packet). */
static const size_t burst_sizes[] = {8, 64, 1024, 8192, 16384};
#define NBURST (sizeof burst_sizes / sizeof burst_sizes[0])
enum { BURST_TSEND, BURST_TINJECT, BURST_WAYS };
#define BURST_STRIDE (16384 + 128)
#define INJECT_MAX 4096 /* the default FI_EXANET_INJECT_SIZE */
/* What one lower message may be: tcp;ofi_rxm's buffer, 16384 unless FI_OFI_RXM_BUFFER_SIZE
 * says otherwise (dev/net follows it, fi_exanet(7)), and at most a quarter of dev/net's
 * 256 KiB receive buffer; LOWER_CARRY is the ring bytes one carries beside its header and a
 * few packets. */
static size_t g_lower_bytes = 16384;
#define LOWER_CARRY (g_lower_bytes - 384)
static int g_rxm_buffer_given; /* FI_OFI_RXM_BUFFER_SIZE was set before exanet loaded */

/* Once exanet is loaded: with the network on over tcp;ofi_rxm and no buffer size of the
 * user's, exanet must have chosen 34816 for rxm (fi_exanet(7), OTHER HOSTS). */
static void learn_lower_bytes(void)
{
	const char *rxm_buffer = getenv("FI_OFI_RXM_BUFFER_SIZE"),
		   *lower = getenv("FI_EXANET_NETWORK_PROVIDER"), *net = getenv("FI_EXANET_NETWORK");
	if (lower && !strcmp(lower, "net")) {
		g_lower_bytes = 65536; /* RDM of its own over a stream: every message whole */
		return;
	}
	if (net && strcmp(net, "off") && !g_rxm_buffer_given)
		XT_CHECK(rxm_buffer && !strcmp(rxm_buffer, "34816"),
			 "FI_OFI_RXM_BUFFER_SIZE is %s once exanet loaded with the network on (want 34816, "
			 "chosen at load)", rxm_buffer ? rxm_buffer : "unset");
	g_lower_bytes = rxm_buffer && atol(rxm_buffer) >= 4096 ? (size_t)atol(rxm_buffer) : 16384;
	if (g_lower_bytes > 65536)
		g_lower_bytes = 65536;
}

/* Messages per burst: N, or 96 KiB of medium bytes (with the previous burst's, less than the
 * default 256 KiB ring even if its credit is late, so none falls back to rendezvous). */
static int burst_count(size_t len)
{
	return len > 4096 ? (int)(96 * 1024 / len) : N;
}

/* Where message k of a burst lies in its buffer: placements differ from message to message, in
 * the user's buffer and (by the sizes before it) in the ring. */
static size_t burst_offset(int k, int receiver)
{
	return (size_t)k * BURST_STRIDE + (size_t)((k * 24 + (receiver ? 40 : 8)) % 64);
}

/* Reads count completions of successful sends, as many at a time as come. */
static void take_completions(struct fid_cq *cq, int count, const char *what)
{
	struct fi_cq_tagged_entry e[32];
	for (int got = 0; got < count;) {
		const ssize_t n = fi_cq_read(cq, e, 32);
		XT_CHECK(n > 0 || n == -FI_EAGAIN, "%s: fi_cq_read: %zd", what, n);
		if (n > 0)
			got += (int)n;
	}
}

/* Sender: N messages of each burst size back to back, each way; then no call into libfabric
 * (after the completions, for fi_tsend) until the receiver has them all. */
static void send_bursts(struct xt_ep *x, int sock, int network)
{
	unsigned char *b = malloc((size_t)N * BURST_STRIDE);
	XT_CHECK(b, "out of memory");
	for (int way = 0; way < BURST_WAYS; way++)
		for (size_t s = 0; s < NBURST; s++) {
			const size_t len = burst_sizes[s];
			const int count = burst_count(len);
			if (way == BURST_TINJECT && len > INJECT_MAX)
				continue;
			const uint64_t tag0 = 900000 + (uint64_t)way * 1000000 + len * 10;
			xt_sync_progress(sock, x->txcq); /* the receiver posted its receives */
			const struct fi_exanet_counters before = xt_counters(x->ep);
			for (int k = 0; k < count; k++) {
				unsigned char *m = b + burst_offset(k, 0);
				xt_fill(m, len, (unsigned)(tag0 + k));
				ssize_t rc;
				while ((rc = way == BURST_TSEND
						     ? fi_tsend(x->ep, m, len, NULL, peer, tag0 + k, m)
						     : fi_tinject(x->ep, m, len, peer, tag0 + k)) ==
				       -FI_EAGAIN)
					fi_cq_read(x->txcq, NULL, 0);
				XT_RC(rc);
			}
			const struct fi_exanet_counters sent = xt_counters(x->ep);
			if (way == BURST_TSEND)
				take_completions(x->txcq, count, "burst");
			char done = 0; /* nothing of ours runs until the receiver has them all */
			xt_recv_all(sock, &done, 1);
			XT_CHECK(done == 1, "burst: the receiver failed");
			const struct fi_exanet_counters after = xt_counters(x->ep);
			const unsigned long long in_calls =
				sent.network_messages_sent - before.network_messages_sent;
			const unsigned long long msgs =
				after.network_messages_sent - before.network_messages_sent;
			const unsigned long long medium = after.medium_sent - before.medium_sent;
			const char *how = way == BURST_TSEND ? "fi_tsend" : "fi_tinject";
			/* Medium bytes fill lower messages across messages: about one per 16 KiB of
			 * bytes (and one more each for the first message, which leaves at once, and
			 * the last, which leaves at the poll), not one per message (8 KiB) or two
			 * (16 KiB). */
			const unsigned long long want =
				len > 4096 ? ((unsigned long long)count * len + LOWER_CARRY - 1) /
							 LOWER_CARRY +
						 2
					   : N / 2;
			if (!network)
				XT_CHECK(msgs == 0, "burst over shared memory: %llu lower messages", msgs);
			else if (way == BURST_TSEND && !(g_small_ring && len > 64)) { /* see the top */
				XT_CHECK(len <= 1024 || medium == (unsigned long long)count,
					 "%zu B burst: %llu of %d went medium (want all)", len, medium,
					 count);
				XT_CHECK(msgs <= want,
					 "%zu B burst of %d fi_tsend took %llu lower messages (want at most "
					 "%llu)",
					 len, count, msgs, want);
			} else
				XT_CHECK(in_calls >= 1,
					 "%zu B burst of %d %s: nothing left during the calls", len, count,
					 how);
			printf("%zu B burst of %d %s: %llu lower messages (%llu during the calls)\n",
			       len, count, how, msgs, in_calls);
		}
	xt_sync_progress(sock, x->txcq);
	free(b);
}

/* Receiver of send_bursts: posts, lets the sender go, checks every message, says so. */
static void receive_bursts(struct xt_ep *x, int sock)
{
	unsigned char *b = malloc((size_t)N * BURST_STRIDE);
	XT_CHECK(b, "out of memory");
	for (int way = 0; way < BURST_WAYS; way++)
		for (size_t s = 0; s < NBURST; s++) {
			const size_t len = burst_sizes[s];
			const int count = burst_count(len);
			if (way == BURST_TINJECT && len > INJECT_MAX)
				continue;
			/* At most medium_max: a longer receive would send an RTR. */
			const size_t room = len > BIG ? len : BIG;
			const uint64_t tag0 = 900000 + (uint64_t)way * 1000000 + len * 10;
			memset(b, 0, (size_t)N * BURST_STRIDE);
			for (int k = 0; k < count; k++)
				XT_RC(fi_trecv(x->ep, b + burst_offset(k, 1), room, NULL, peer, tag0 + k,
					       0, (void *)(uintptr_t)(k + 1)));
			xt_sync_progress(sock, x->rxcq);
			for (int k = 0; k < count; k++) {
				struct fi_cq_tagged_entry e;
				struct fi_cq_err_entry err = {0};
				XT_CHECK(xt_wait(x->rxcq, &e, &err, 30) == 1,
					 "%zu B burst (%s): message %d of %d never came (a packet "
					 "kept by the sender?): %d",
					 len, way == BURST_TSEND ? "fi_tsend" : "fi_tinject", k, count,
					 err.err);
				const size_t at = (size_t)(uintptr_t)e.op_context - 1;
				XT_CHECK(at < (size_t)count && e.tag == tag0 + at && e.len == len &&
						 xt_verify(b + burst_offset((int)at, 1), len,
							   (unsigned)(tag0 + at)),
					 "%zu B burst: message %zu wrong (tag %llu, len %zu)", len, at,
					 (unsigned long long)e.tag, e.len);
			}
			const char done = 1;
			xt_send_all(sock, &done, 1);
		}
	xt_sync_progress(sock, x->rxcq);
	free(b);
}

/* The ring's window over the network: 20 messages of 16 KiB (320 KiB, more than the
 * shared-memory ring's 256 KiB) posted while the receiver makes no call, so no byte is consumed
 * and no credit comes back, all go medium: the ring a network peer gets
 * (FI_EXANET_NETWORK_RING_BYTES, 512 KiB) holds them, even with the up to a quarter ring the
 * receiver consumed earlier but has not credited yet (credit goes back per quarter). With the
 * shared-memory ring's size 12 of 24 went medium and the rest took the rendezvous (RTS, CTS,
 * write: a round trip more each), and streaming 16 KiB ran at 0.85 of today's rate. Every byte
 * is checked. */
#define WINDOW_COUNT 20
#define WINDOW_LEN 16384
#define WINDOW_STRIDE (WINDOW_LEN + 64)
/* Then WINDOW_EXTRA more (36 in all, 576 KiB: more than the ring) while the receiver still
 * makes no call. A send that finds the ring short of credit that is still to come back waits
 * for it (fi_tsend says -FI_EAGAIN: in a stream the credit is on its way, and the RTS costs a
 * round trip and an RMA write) for about a millisecond, no longer: the receiver may not be
 * progressing, as here, and the send then goes by rendezvous. So at least 4 of the extra go by
 * RTS, one of them after -FI_EAGAIN for at least CREDIT_WAIT_MIN_US, none after more than
 * CREDIT_WAIT_MAX_S (an unbounded wait would hang here: the receiver calls nothing). */
#define WINDOW_EXTRA 16
#define CREDIT_WAIT_MIN_US 500.0
#define CREDIT_WAIT_MAX_S 5.0

static void send_ring_window(struct xt_ep *x, int sock)
{
	unsigned char *b = malloc((size_t)(WINDOW_COUNT + WINDOW_EXTRA) * WINDOW_STRIDE);
	XT_CHECK(b, "out of memory");
	char posted = 0; /* the receiver posted its receives; it calls nothing until we say so */
	xt_recv_all(sock, &posted, 1);
	XT_CHECK(posted == 1, "ring window: the receiver failed");
	const struct fi_exanet_counters before = xt_counters(x->ep);
	for (int k = 0; k < WINDOW_COUNT; k++) {
		unsigned char *m = b + (size_t)k * WINDOW_STRIDE + (size_t)(k * 8 % 64);
		xt_fill(m, WINDOW_LEN, (unsigned)(77000 + k));
		ssize_t rc;
		while ((rc = fi_tsend(x->ep, m, WINDOW_LEN, NULL, peer, 77000 + k, m)) == -FI_EAGAIN)
			fi_cq_read(x->txcq, NULL, 0);
		XT_RC(rc);
	}
	const struct fi_exanet_counters after = xt_counters(x->ep);
	double longest_wait_us = 0;
	for (int k = WINDOW_COUNT; k < WINDOW_COUNT + WINDOW_EXTRA; k++) {
		unsigned char *m = b + (size_t)k * WINDOW_STRIDE + (size_t)(k * 8 % 64);
		xt_fill(m, WINDOW_LEN, (unsigned)(77000 + k));
		const double t0 = xt_now_us();
		ssize_t rc;
		while ((rc = fi_tsend(x->ep, m, WINDOW_LEN, NULL, peer, 77000 + k, m)) == -FI_EAGAIN) {
			fi_cq_read(x->txcq, NULL, 0);
			XT_CHECK(xt_now_us() - t0 < CREDIT_WAIT_MAX_S * 1e6, "ring window: a send "
				 "waited more than %.0f s for ring credit from a receiver that calls "
				 "nothing", CREDIT_WAIT_MAX_S);
		}
		XT_RC(rc);
		if (xt_now_us() - t0 > longest_wait_us)
			longest_wait_us = xt_now_us() - t0;
	}
	const struct fi_exanet_counters extra = xt_counters(x->ep);
	const char sent = 1;
	xt_send_all(sock, &sent, 1);
	const unsigned long long medium = after.medium_sent - before.medium_sent,
				 rts = after.rndv_sent - before.rndv_sent,
				 extra_rts = extra.rndv_sent - after.rndv_sent,
				 extra_medium = extra.medium_sent - after.medium_sent;
	printf("ring window: %d x %d B to a receiver that consumed none: %llu medium, %llu by "
	       "RTS\n",
	       WINDOW_COUNT, WINDOW_LEN, medium, rts);
	XT_CHECK(medium == WINDOW_COUNT && rts == 0,
		 "ring window: %llu of %d 16 KiB messages went medium, %llu by RTS (want all "
		 "medium: a network peer's ring holds 320 KiB)",
		 medium, WINDOW_COUNT, rts);
	printf("ring window: %d more: %llu medium, %llu by RTS; the longest send waited %.2f ms "
	       "for credit\n",
	       WINDOW_EXTRA, extra_medium, extra_rts, longest_wait_us / 1e3);
	XT_CHECK(extra_medium + extra_rts == WINDOW_EXTRA && extra_rts >= 4,
		 "ring window: of %d more 16 KiB messages than the ring holds %llu went medium and "
		 "%llu by RTS (want at least 4 by RTS)", WINDOW_EXTRA, extra_medium, extra_rts);
	XT_CHECK(longest_wait_us >= CREDIT_WAIT_MIN_US, "ring window: no send waited for ring "
		 "credit (longest %.3f ms): the RTS came at once", longest_wait_us / 1e3);
	take_completions(x->txcq, WINDOW_COUNT + WINDOW_EXTRA, "ring window");
	xt_sync_progress(sock, x->txcq);
	free(b);
}

static void receive_ring_window(struct xt_ep *x, int sock)
{
	unsigned char *b = calloc(WINDOW_COUNT + WINDOW_EXTRA, WINDOW_STRIDE);
	XT_CHECK(b, "out of memory");
	for (int k = 0; k < WINDOW_COUNT + WINDOW_EXTRA; k++)
		XT_RC(fi_trecv(x->ep, b + (size_t)k * WINDOW_STRIDE + 24, WINDOW_LEN, NULL, peer,
			       77000 + k, 0, (void *)(uintptr_t)(k + 1)));
	const char posted = 1;
	xt_send_all(sock, &posted, 1);
	char sent = 0; /* no call into libfabric until the sender posted all */
	xt_recv_all(sock, &sent, 1);
	XT_CHECK(sent == 1, "ring window: the sender failed");
	for (int k = 0; k < WINDOW_COUNT + WINDOW_EXTRA; k++) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err = {0};
		XT_CHECK(xt_wait(x->rxcq, &e, &err, 30) == 1, "ring window: receive %d failed: %d",
			 k, err.err);
		const size_t at = (size_t)(uintptr_t)e.op_context - 1;
		XT_CHECK(at < WINDOW_COUNT + WINDOW_EXTRA && e.tag == 77000 + at && e.len == WINDOW_LEN &&
				 xt_verify(b + at * WINDOW_STRIDE + 24, WINDOW_LEN, (unsigned)(77000 + at)),
			 "ring window: message %zu wrong", at);
	}
	xt_sync_progress(sock, x->rxcq);
	free(b);
}

/* A window of receives posted first, each above medium_max: each sends its RTR when posted,
 * and over the network they leave in few lower messages (dev/net keeps an RTR, a reported
 * packet, for its next poll once a lower message went to that peer since the last one). The
 * receiver counts its own lower messages from before the posts until the sender has every RTR
 * (rtr_stored); then the sender writes each message straight into its receive (ri_sent), every
 * byte checked, at placements that differ per message. */
#define RTR_WINDOW 16
#define RTR_LEN 196608 /* above medium_max, also net.net_messages_medium_max's 128 KiB */
#define RTR_STRIDE (RTR_LEN + 128)

static void send_rtr_window(struct xt_ep *x, int sock)
{
	unsigned char *b = malloc((size_t)RTR_WINDOW * RTR_STRIDE);
	XT_CHECK(b, "out of memory");
	const struct fi_exanet_counters before = xt_counters(x->ep);
	xt_sync_progress(sock, x->txcq); /* the receiver posted */
	const time_t until = time(NULL) + 30;
	while (xt_counters(x->ep).rtr_stored - before.rtr_stored < RTR_WINDOW) {
		XT_CHECK(time(NULL) < until, "RTR window: %llu of %d RTRs came",
			 (unsigned long long)(xt_counters(x->ep).rtr_stored - before.rtr_stored),
			 RTR_WINDOW);
		fi_cq_read(x->txcq, NULL, 0);
	}
	xt_sync_progress(sock, x->txcq); /* the receiver counts its lower messages */
	for (int k = 0; k < RTR_WINDOW; k++) {
		unsigned char *m = b + (size_t)k * RTR_STRIDE + (size_t)(k * 8 % 64);
		xt_fill(m, RTR_LEN, (unsigned)(7700 + k));
		xt_send_one(x->ep, x->txcq, m, RTR_LEN, peer, 7700 + k);
	}
	const struct fi_exanet_counters after = xt_counters(x->ep);
	const unsigned long long ri = after.ri_sent - before.ri_sent;
	XT_CHECK(ri == RTR_WINDOW, "RTR window: %llu of %d sends by the receiver's RTR", ri,
		 RTR_WINDOW);
	printf("RTR window of %d x %d B: every send by its RTR\n", RTR_WINDOW, RTR_LEN);
	xt_sync_progress(sock, x->txcq);
	free(b);
}

static void receive_rtr_window(struct xt_ep *x, int sock, int network)
{
	unsigned char *b = calloc(RTR_WINDOW, RTR_STRIDE);
	XT_CHECK(b, "out of memory");
	const struct fi_exanet_counters before = xt_counters(x->ep);
	for (int k = 0; k < RTR_WINDOW; k++)
		XT_RC(fi_trecv(x->ep, b + (size_t)k * RTR_STRIDE + (size_t)((k * 8 + 16) % 64),
			       RTR_LEN, NULL, peer, 7700 + k, 0, (void *)(uintptr_t)(k + 1)));
	xt_sync_progress(sock, x->rxcq);
	xt_sync_progress(sock, x->rxcq); /* the sender has every RTR */
	const struct fi_exanet_counters posted = xt_counters(x->ep);
	const unsigned long long rtrs = posted.rtr_sent - before.rtr_sent,
				 msgs = posted.network_messages_sent - before.network_messages_sent;
	XT_CHECK(rtrs == RTR_WINDOW, "RTR window: %llu RTRs sent (want %d)", rtrs, RTR_WINDOW);
	if (network)
		XT_CHECK(msgs <= RTR_WINDOW / 4,
			 "RTR window: %d RTRs took %llu lower messages (want at most %d)", RTR_WINDOW,
			 msgs, RTR_WINDOW / 4);
	else
		XT_CHECK(msgs == 0, "RTR window over shared memory: %llu lower messages", msgs);
	printf("RTR window: %d RTRs in %llu lower messages\n", RTR_WINDOW, msgs);
	for (int k = 0; k < RTR_WINDOW; k++) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err = {0};
		XT_CHECK(xt_wait(x->rxcq, &e, &err, 30) == 1, "RTR window: receive failed: %d",
			 err.err);
		const size_t at = (size_t)(uintptr_t)e.op_context - 1;
		XT_CHECK(at < RTR_WINDOW && e.tag == 7700 + at && e.len == RTR_LEN &&
				 xt_verify(b + at * RTR_STRIDE + (at * 8 + 16) % 64, RTR_LEN,
					   (unsigned)(7700 + at)),
			 "RTR window: message %zu wrong (tag %llu, len %zu)", at,
			 (unsigned long long)e.tag, e.len);
	}
	xt_sync_progress(sock, x->rxcq);
	free(b);
}

#define LONG_MEDIUM 16384	/* one piece and the rest with its packet over the network */
#define ABOVE_BOUNCE 98304	/* above the network's bounce path, below a 128 KiB medium_max */
static int g_big_medium;	/* FI_EXANET_MEDIUM_MAX=131072 */

/* Sender: one len-byte message to a receive posted first (its RTR, if any, is here by the sync);
 * checks which protocol carried it and, over the network, in how many lower messages. */
static void send_long(struct xt_ep *x, int sock, int network, unsigned char *b, size_t len)
{
	xt_fill(b, len, (unsigned)len);
	xt_sync_progress(sock, x->txcq);
	const struct fi_exanet_counters before = xt_counters(x->ep);
	xt_send_one(x->ep, x->txcq, b, len, peer, len);
	const struct fi_exanet_counters after = xt_counters(x->ep);
	const unsigned long long ri = after.ri_sent - before.ri_sent,
				 rts = after.rndv_sent - before.rndv_sent,
				 medium = after.medium_sent - before.medium_sent,
				 msgs = after.network_messages_sent - before.network_messages_sent;
	if (network && len > LONG_MEDIUM)
		XT_CHECK(ri == 1 && rts == 0,
			 "%zu B, receive posted first, over the network: %llu by RTR, %llu by RTS, "
			 "%llu medium (want by RTR)",
			 len, ri, rts, medium);
	else if (network && len + 256 <= g_lower_bytes) /* it fits one lower message */
		XT_CHECK(medium == 1 && msgs == 1,
			 "%zu B: %llu medium (want 1), %llu lower messages (want 1 over the network, "
			 "whose messages take %zu B whole)",
			 len, medium, msgs, g_lower_bytes);
	else
		XT_CHECK(medium == 1 && (!network || (msgs >= 2 && msgs <= 3)),
			 "%zu B: %llu medium (want 1), %llu lower messages (want 2 over the network)",
			 len, medium, msgs);
	printf("%zu B, receive posted first: %s, %llu lower messages\n", len,
	       ri ? "by the receiver's RTR" : medium ? "medium" : "by RTS", msgs);
	xt_sync_progress(sock, x->txcq);
}

static void receive_long(struct xt_ep *x, int sock, unsigned char *b, size_t len)
{
	XT_RC(fi_trecv(x->ep, b, len, NULL, peer, len, 0, b));
	xt_sync_progress(sock, x->rxcq);
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err = {0};
	XT_CHECK(xt_wait(x->rxcq, &e, &err, 30) == 1, "%zu B: receive failed: %d", len, err.err);
	XT_CHECK(e.len == len && xt_verify(b, len, (unsigned)len), "%zu B: payload differs", len);
	xt_sync_progress(sock, x->rxcq);
}

static void warm_up(struct xt_ep *x, int first)
{
	char one = 1, got = 0;
	for (int turn = 0; turn < 2; turn++) {
		if ((turn == 0) == first) {
			xt_send_one(x->ep, x->txcq, &one, 1, peer, 7);
		} else {
			XT_RC(fi_trecv(x->ep, &got, 1, NULL, peer, 7, 0, NULL));
			XT_CHECK(xt_wait(x->rxcq, NULL, NULL, 30) == 1 && got == 1, "warm-up message");
		}
	}
}

/* The small ring filled with messages the receiver has not read (it waits on the socket, without
 * progress): sizes halving from 4 KiB to 128 B, each as long as it still goes through the ring
 * (the first that does not goes by rendezvous, waiting for the receiver), leave less room than
 * the next atomic's 256 operand bytes need. They go by train (5 atomic_operands packets), which
 * must leave with the request as one lower message. Then the receiver reads the fills. */
static void train_atomic(struct xt_ep *x, int sock, uint64_t raddr, uint64_t rkey, uint64_t *ones)
{
	unsigned char *b = malloc((size_t)N * FILL); /* each fill's own: rendezvous ones wait */
	XT_CHECK(b, "out of memory");
	uint32_t fills = 0;
	for (size_t len = FILL; len >= 128; len /= 2) {
		for (int went_medium = 1; went_medium;) {
			const uint64_t medium = xt_counters(x->ep).medium_sent;
			xt_fill(b + (size_t)fills * FILL, len, (unsigned)len);
			/* A send short of ring credit waits for it a while ("again"), then goes
			 * by rendezvous: the receiver calls nothing here. */
			XT_POST(x->txcq, fi_tsend(x->ep, b + (size_t)fills * FILL, len, NULL, peer,
						  7000, NULL));
			XT_CHECK(++fills < N, "the ring never filled");
			went_medium = xt_counters(x->ep).medium_sent > medium;
		}
	}
	const struct fi_exanet_counters before = xt_counters(x->ep);
	XT_POST(x->txcq, fi_atomic(x->ep, ones, 32, NULL, peer, raddr, rkey, FI_UINT64, FI_SUM, NULL));
	const struct fi_exanet_counters after = xt_counters(x->ep);
	const unsigned long long msgs = after.network_messages_sent - before.network_messages_sent;
	XT_CHECK(
		msgs == 1,
		"an atomic whose 256 operand bytes went by train took %llu lower messages (want 1)",
		msgs);
	printf("256-byte atomic operands by train (ring full after %u messages): %llu lower "
	       "message\n",
	       fills, msgs);
	xt_send_all(sock, &fills, sizeof fills); /* the receiver may read now */
	for (uint32_t k = 0; k <= fills; k++) {	 /* the fills and the atomic */
		struct fi_cq_err_entry err = {0};
		XT_CHECK(xt_wait(x->txcq, NULL, &err, 30) == 1,
			 "fill or atomic by train failed: %d (%s)", err.err, fi_strerror(err.err));
	}
	xt_sync_progress(sock, x->txcq);
	free(b);
}

static int sender(int i, int sock)
{
	(void)i;
	struct xt_ep x;
	open_atomic_ep(&x);
	peer = xt_exchange(&x, sock, 1, NULL);
	warm_up(&x, 1);
	const int network = xt_counters(x.ep).peers_network > 0;
	unsigned char *b = malloc(BIG);
	XT_CHECK(b, "out of memory");
	for (size_t s = 0; s < NSIZES; s++) {
		const size_t len = sizes[s].len;
		xt_sync(sock); /* the receiver posted its receives */
		const struct fi_exanet_counters before = xt_counters(x.ep);
		for (int k = 0; k < N; k++) {
			xt_fill(b, len, (unsigned)(len * 100 + k));
			xt_send_one(x.ep, x.txcq, b, len, peer, len * 100 + k);
		}
		const struct fi_exanet_counters after = xt_counters(x.ep);
		const unsigned long long msgs = after.network_messages_sent - before.network_messages_sent,
					 eager = after.eager_sent - before.eager_sent,
					 train = after.train_sent - before.train_sent,
					 medium = after.medium_sent - before.medium_sent;
		const unsigned long long by[] = {eager, train, medium};
		if (g_small_ring && sizes[s].by == MEDIUM) { /* partly rendezvous: not counted */
			xt_sync_progress(sock, x.txcq);
			continue;
		}
		XT_CHECK(by[sizes[s].by] == N && eager + train + medium == N,
			 "%zu B: %d messages went eager %llu, train %llu, medium %llu times (want all %s)",
			 len, N, eager, train, medium,
			 sizes[s].by == EAGER ? "eager" : sizes[s].by == TRAIN ? "train" : "medium");
		if (network)
			XT_CHECK(msgs >= N && msgs <= N + 2,
				 "%zu B: %d exanet messages took %llu lower messages (want one each)", len, N,
				 msgs);
		else
			XT_CHECK(msgs == 0, "%zu B over shared memory: %llu lower messages", len, msgs);
		printf("%zu B: %d messages (%s), %llu lower messages\n", len, N,
		       sizes[s].by == EAGER ? "eager" : sizes[s].by == TRAIN ? "train" : "medium", msgs);
		xt_sync_progress(sock, x.txcq); /* the receiver has them all; its ring credit comes back */
	}
	xt_sync_progress(sock, x.txcq);
	send_bursts(&x, sock, network);
	send_rtr_window(&x, sock);
	if (network && !g_small_ring)
		send_ring_window(&x, sock);
	unsigned char *big = malloc(ABOVE_BOUNCE);
	XT_CHECK(big, "out of memory");
	if (!g_small_ring) /* there the ring's half, 4 KiB, bounds medium messages everywhere */
		send_long(&x, sock, network, big, LONG_MEDIUM);
	if (g_big_medium)
		send_long(&x, sock, network, big, ABOVE_BOUNCE);
	free(big);

	/* Atomics: N sums of each size into the receiver's region, each waited for. */
	uint64_t raddr = 0, rkey = 0, ones[ATOMIC_ELEMS];
	for (int i = 0; i < ATOMIC_ELEMS; i++)
		ones[i] = 1;
	struct fid_mr *mr = xt_mr_reg_bound(&x, ones, sizeof ones, 2);
	xt_exchange_region(&x, sock, ones, mr, &raddr, &rkey);
	for (size_t s = 0; s < NATOMIC; s++) {
		const size_t count = atomic_counts[s];
		const struct fi_exanet_counters before = xt_counters(x.ep);
		for (int k = 0; k < N; k++) {
			ssize_t rc;
			while ((rc = fi_atomic(x.ep, ones, count, NULL, peer, raddr, rkey,
					       FI_UINT64, FI_SUM, NULL)) == -FI_EAGAIN)
				fi_cq_read(x.txcq, NULL, 0);
			XT_RC(rc);
			struct fi_cq_err_entry err = {0};
			XT_CHECK(xt_wait(x.txcq, NULL, &err, 30) == 1,
				 "%zu-byte atomic failed: %d (%s)", count * 8, err.err,
				 fi_strerror(err.err));
		}
		const struct fi_exanet_counters after = xt_counters(x.ep);
		const unsigned long long msgs =
			after.network_messages_sent - before.network_messages_sent;
		if (network)
			XT_CHECK(msgs >= N && msgs <= N + 2,
				 "%zu-byte atomic operands: %d atomics took %llu lower messages "
				 "(want one each)",
				 count * 8, N, msgs);
		else
			XT_CHECK(msgs == 0, "atomics over shared memory: %llu lower messages",
				 msgs);
		printf("%zu-byte atomic operands: %d atomics, %llu lower messages\n", count * 8, N,
		       msgs);
	}
	xt_sync_progress(sock, x.txcq);
	if (g_small_ring && network)
		train_atomic(&x, sock, raddr, rkey, ones);
	fi_close(&mr->fid);
	xt_close(&x);
	free(b);
	return 0;
}

int main(void)
{
	xt_init(120);
	const char *eager_max = getenv("FI_EXANET_EAGER_MAX"), *medium_max = getenv("FI_EXANET_MEDIUM_MAX");
	g_big_medium = medium_max && !strcmp(medium_max, "131072");
	if (eager_max || (medium_max && !g_big_medium)) {
		printf("SKIP: the sizes here assume the default FI_EXANET_EAGER_MAX and MEDIUM_MAX\n");
		return 0;
	}
	const char *ring = getenv("FI_EXANET_BOUNCE_RING_BYTES");
	g_small_ring = ring && !strcmp(ring, "8192");
	g_rxm_buffer_given = getenv("FI_OFI_RXM_BUFFER_SIZE") != NULL;
	int sock;
	pid_t pid;
	xt_spawn(1, sender, &sock, &pid);
	struct xt_ep x;
	open_atomic_ep(&x);
	peer = xt_exchange(&x, sock, 0, NULL);
	warm_up(&x, 0);
	unsigned char *b = malloc((size_t)N * BIG);
	XT_CHECK(b, "out of memory");
	for (size_t s = 0; s < NSIZES; s++) {
		const size_t len = sizes[s].len;
		memset(b, 0, (size_t)N * BIG);
		for (int k = 0; k < N; k++)
			XT_RC(fi_trecv(x.ep, b + (size_t)k * BIG, BIG, NULL, peer, len * 100 + k, 0,
				       b + (size_t)k * BIG));
		xt_sync(sock);
		for (int k = 0; k < N; k++) {
			struct fi_cq_tagged_entry e;
			struct fi_cq_err_entry err = {0};
			XT_CHECK(xt_wait(x.rxcq, &e, &err, 30) == 1, "%zu B: receive failed: %d (%s)", len,
				 err.err, fi_strerror(err.err));
			const size_t at = (size_t)((unsigned char *)e.op_context - b) / BIG;
			XT_CHECK(at < N && e.tag == len * 100 + at && e.len == len,
				 "%zu B: receive %zu: tag %llu len %zu", len, at, (unsigned long long)e.tag,
				 e.len);
			XT_CHECK(xt_verify(b + at * BIG, len, (unsigned)(len * 100 + at)),
				 "%zu B: receive %zu: payload differs", len, at);
		}
		xt_sync_progress(sock, x.rxcq);
	}
	xt_sync_progress(sock, x.rxcq);
	receive_bursts(&x, sock);
	receive_rtr_window(&x, sock, xt_counters(x.ep).peers_network > 0);
	if (xt_counters(x.ep).peers_network > 0 && !g_small_ring)
		receive_ring_window(&x, sock);
	if (!g_small_ring)
		receive_long(&x, sock, b, LONG_MEDIUM);
	if (g_big_medium)
		receive_long(&x, sock, b, ABOVE_BOUNCE);
	/* The atomics' target: every element summed once per size that covers it. */
	uint64_t *region = calloc(ATOMIC_ELEMS, sizeof *region);
	XT_CHECK(region, "out of memory");
	uint64_t raddr = 0, rkey = 0;
	struct fid_mr *mr = xt_mr_reg_bound(&x, region, ATOMIC_ELEMS * sizeof *region, 1);
	xt_exchange_region(&x, sock, region, mr, &raddr, &rkey);
	xt_sync_progress(sock, x.rxcq);
	const int net_now = xt_counters(x.ep).peers_network > 0;
	if (g_small_ring && net_now) {
		uint32_t fills =
			0; /* no progress until the sender filled the ring and posted its atomic */
		xt_recv_all(sock, &fills, sizeof fills);
		for (uint32_t k = 0; k < fills; k++)
			XT_RC(fi_trecv(x.ep, b + (size_t)k * BIG, BIG, NULL, peer, 7000, 0,
				       b + (size_t)k * BIG));
		for (uint32_t k = 0; k < fills; k++) { /* the rendezvous ones complete last */
			struct fi_cq_tagged_entry e;
			XT_CHECK(xt_wait(x.rxcq, &e, NULL, 30) == 1, "ring fill %u not received",
				 k);
			XT_CHECK(xt_verify(e.op_context, e.len, (unsigned)e.len),
				 "ring fill of %zu B: payload differs", e.len);
		}
		xt_sync_progress(sock, x.rxcq);
	}
	for (size_t i = 0; i < ATOMIC_ELEMS; i++) {
		uint64_t want = g_small_ring && net_now ? 1 : 0; /* the atomic by train */
		for (size_t s = 0; s < NATOMIC; s++)
			want += i < atomic_counts[s] ? N : 0;
		XT_CHECK(region[i] == want, "atomic target element %zu: %llu, want %llu", i,
			 (unsigned long long)region[i], (unsigned long long)want);
	}
	fi_close(&mr->fid);
	free(region);
	const int network = xt_counters(x.ep).peers_network > 0;
	xt_close(&x);
	xt_reap(1, &pid);
	free(b);
	xt_pass(network ? (g_small_ring ? "one lower message per exanet message and atomic (also "
					  "by train)"
					: "one lower message per exanet message and atomic, 8 B to "
					  "8 KiB, every byte checked")
			: "over shared memory: no lower message, every byte checked");
	return 0;
}
