/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A sender that completes its sends, closes its endpoint and exits before the receiver has
 * looked at anything: every message it sent is still received, whole, by receives that name it
 * (FI_DIRECTED_RECV) and by receives from any source. A send that completed is not lost because
 * its sender left (fi_msg(3): completion means the buffer may be reused, not that the message
 * may vanish). MPICH's test suite found it (pt2pt/bsend5 under ch4:ofi): a rank sent to another
 * it had never talked to, finalized, and the receiver, mapping the sender's shared memory on
 * its first packet, found it gone, dropped the packets and refused the receive naming it
 * (-FI_EHOSTUNREACH).
 *
 * Senders in turn, so the receiver meets departed senders it has and has not inserted into its
 * AV before they left, and that it has and has not heard from before. Sizes cover eager, eager
 * train and (exanet) medium messages; a rendezvous cannot complete without the receiver, so no
 * sender leaves one behind.
 *
 * Differential: run with FI_PROVIDER=shm (ctest's conformance.sender_departed_shm) the same
 * program checks libfabric's shm. shm's first send to a peer waits for the receiver to take its
 * connection request, so there only the senders that warm up run (one message received while
 * both live, then the rest sent without the receiver); and only the sizes whose sends shm
 * completes into the receiver's queue (up to 4 KiB): the exanet-only sizes (medium, up to
 * 16000 B) are left out.
 */
#include "xt.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Per sender: inserted into the receiver's AV before it leaves; one message received while both
 * live (warm-up); its messages received by naming it (else from any source). */
static const struct {
	int insert_early, warmup, directed;
} senders[] = {{1, 0, 1}, {0, 0, 1}, {0, 0, 0}, {1, 1, 1}, {0, 1, 0}};
#define SENDERS ((int)(sizeof senders / sizeof senders[0]))
#define WARMUP_TAG 0xfffful
static int current; /* the sender being run: set before the fork, so the child sees it too */

static const size_t shared_sizes[] = {0, 1, 8, 36, 37, 84, 85, 200, 276, 277, 1000, 4096};
static const size_t exanet_sizes[] = {8191, 16000};
#define NSHARED (sizeof shared_sizes / sizeof shared_sizes[0])
#define NEXANET (sizeof exanet_sizes / sizeof exanet_sizes[0])

static int is_exanet(void)
{
	const char *p = getenv("FI_PROVIDER");
	return !p || !*p || strcmp(p, "exanet") == 0;
}

static size_t message_count(void) { return NSHARED + (is_exanet() ? NEXANET : 0); }

static size_t size_of(size_t i) { return i < NSHARED ? shared_sizes[i] : exanet_sizes[i - NSHARED]; }

/* Tag: sender in the high bits, message index below; the seed of its bytes likewise. */
static uint64_t tag_of(int sender, size_t i) { return ((uint64_t)sender << 16) | i; }
static unsigned seed_of(int sender, size_t i) { return (unsigned)(sender * 1000 + i + 1); }

/* Sender `current` (xt_spawn's index is always 0 here: one child at a time): learns the
 * receiver's name, sends every message (each send completed, half of them by fi_tinject), then
 * closes its endpoint and exits. */
static int sender(int index, int sock)
{
	(void)index;
	const int s = current;
	struct xt_ep x;
	xt_open_default(&x, 0);
	char name[64];
	xt_recv_name(sock, name);
	xt_send_name(sock, &x);
	fi_addr_t to = xt_insert(&x, name);
	if (senders[current].warmup) {
		xt_send_one(x.ep, x.txcq, "warm", 4, to, tag_of(s, WARMUP_TAG));
		xt_sync(sock); /* the receiver has it; from here on it does not progress */
	}
	size_t n = message_count();
	for (size_t i = 0; i < n; i++) {
		size_t len = size_of(i);
		char *buf = malloc(len ? len : 1);
		xt_fill(buf, len, seed_of(s, i));
		if (i % 2 && len <= x.info->tx_attr->inject_size) {
			ssize_t rc;
			while ((rc = fi_tinject(x.ep, buf, len, to, tag_of(s, i))) == -FI_EAGAIN)
				fi_cq_read(x.txcq, NULL, 0);
			XT_RC(rc);
		} else {
			xt_send_one(x.ep, x.txcq, buf, len, to, tag_of(s, i));
		}
		free(buf);
	}
	xt_close(&x);
	return 0;
}

/* Receives message i of sender s, from `from` (FI_ADDR_UNSPEC: any source), and checks it. */
static void receive(struct xt_ep *x, fi_addr_t from, int s, size_t i)
{
	size_t len = i == WARMUP_TAG ? 4 : size_of(i);
	char *buf = malloc(len + 64);
	memset(buf, 0xee, len + 64);
	ssize_t rc;
	while ((rc = fi_trecv(x->ep, buf, len + 64, NULL, from, tag_of(s, i), 0, NULL)) == -FI_EAGAIN)
		fi_cq_read(x->rxcq, NULL, 0);
	XT_CHECK(rc == 0, "sender %d, message %zu (%zu B): fi_trecv from %s: %zd (%s)", s, i, len,
		 from == FI_ADDR_UNSPEC ? "any source" : "the departed sender", rc, fi_strerror((int)-rc));
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err = {0};
	XT_CHECK(xt_wait(x->rxcq, &e, &err, 20) == 1, "sender %d, message %zu (%zu B): error %d (%s)", s,
		 i, len, err.err, fi_strerror(err.err));
	XT_CHECK(e.len == len && e.tag == tag_of(s, i), "sender %d, message %zu: len %zu tag %#llx", s,
		 i, e.len, (unsigned long long)e.tag);
	XT_CHECK(i == WARMUP_TAG ? memcmp(buf, "warm", 4) == 0 : xt_verify(buf, len, seed_of(s, i)),
		 "sender %d, message %zu (%zu B): wrong bytes", s, i, len);
	free(buf);
}

int main(void)
{
	xt_init(150);
	struct xt_ep x;
	xt_open_default(&x, 0);
	size_t n = message_count();
	int ran = 0;
	for (current = 0; current < SENDERS; current++) {
		if (!is_exanet() && !senders[current].warmup)
			continue;
		int sock;
		pid_t pid;
		xt_spawn(1, sender, &sock, &pid);
		char name[64];
		xt_send_name(sock, &x);
		xt_recv_name(sock, name);
		fi_addr_t from = senders[current].insert_early ? xt_insert(&x, name) : FI_ADDR_UNSPEC;
		if (senders[current].warmup) {
			receive(&x, from, current, WARMUP_TAG);
			xt_sync(sock);
		}
		/* Nothing here progresses the endpoint until the sender has closed and exited. */
		xt_reap(1, &pid);
		close(sock);
		if (!senders[current].insert_early)
			from = xt_insert(&x, name);
		/* Highest index first, so each match searches what is queued. */
		for (size_t k = 0; k < n; k++)
			receive(&x, senders[current].directed ? from : FI_ADDR_UNSPEC, current, n - 1 - k);
		ran++;
	}
	XT_CHECK(ran > 0, "no sender ran");
	xt_pass("messages of senders that closed before the receiver looked are all received");
	xt_close(&x);
	return 0;
}
