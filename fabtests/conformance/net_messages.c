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
 */
#include "xt.h"

#include <rdma/fi_ext_exanet.h>
#include <string.h>

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

static int sender(int i, int sock)
{
	(void)i;
	struct xt_ep x;
	xt_open_default(&x, 0);
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
	xt_close(&x);
	free(b);
	return 0;
}

int main(void)
{
	xt_init(120);
	const char *eager_max = getenv("FI_EXANET_EAGER_MAX"), *medium_max = getenv("FI_EXANET_MEDIUM_MAX");
	if (eager_max || medium_max) {
		printf("SKIP: the sizes here assume the default FI_EXANET_EAGER_MAX and MEDIUM_MAX\n");
		return 0;
	}
	int sock;
	pid_t pid;
	xt_spawn(1, sender, &sock, &pid);
	struct xt_ep x;
	xt_open_default(&x, 0);
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
	const int network = xt_counters(x.ep).peers_network > 0;
	xt_close(&x);
	xt_reap(1, &pid);
	free(b);
	xt_pass(network ? "one lower message per exanet message, 8 B to 8 KiB, every byte checked"
			: "over shared memory: no lower message, every byte checked");
	return 0;
}
