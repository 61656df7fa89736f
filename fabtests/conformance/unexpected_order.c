/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * 1000 tagged messages (8 B, 2 KiB and 64 KiB: eager, medium and rendezvous) are sent before the
 * receiver posts anything; it then posts in reverse tag order and every message must land in
 * its own buffer intact. Then 1000 messages on one tag must complete in send order (FI_ORDER_SAS),
 * with back-pressure (-FI_EAGAIN) answered by progress, never by loss.
 */
#include "xt.h"

#include <string.h>

#define COUNT 1000

static size_t size_of(int i) { return i % 3 == 0 ? 8 : (i % 3 == 1 ? 2048 : 65536); }

static void post_send(struct xt_ep *x, const void *buf, size_t len, fi_addr_t to, uint64_t tag, void *ctx)
{
	ssize_t rc;
	while ((rc = fi_tsend(x->ep, buf, len, NULL, to, tag, ctx)) == -FI_EAGAIN)
		fi_cq_read(x->txcq, NULL, 0);
	XT_RC(rc);
}

static int sender(int index, int sock)
{
	(void)index;
	struct xt_ep x;
	xt_open_default(&x, 0);
	fi_addr_t peer = xt_exchange(&x, sock, 1, NULL);

	/* Phase 1: all sends posted before the receiver posts anything. The rendezvous sends only
	 * complete once matched, so their buffers stay alive until the end. */
	unsigned char **bufs = calloc(COUNT, sizeof *bufs);
	for (int i = 0; i < COUNT; i++) {
		bufs[i] = malloc(size_of(i));
		xt_fill(bufs[i], size_of(i), (unsigned)i);
		post_send(&x, bufs[i], size_of(i), peer, 1000 + (uint64_t)i, NULL);
	}
	xt_sync_progress(sock, x.txcq); /* receiver starts posting now */
	int done = 0;
	while (done < COUNT) {
		struct fi_cq_tagged_entry e;
		XT_CHECK(xt_wait(x.txcq, &e, NULL, 60) == 1, "send failed");
		done++;
	}
	for (int i = 0; i < COUNT; i++)
		free(bufs[i]);
	free(bufs);

	/* Phase 2: one tag, sequence numbers in the payload. */
	xt_sync_progress(sock, x.txcq);
	static uint32_t seq[COUNT];
	for (uint32_t i = 0; i < COUNT; i++) {
		seq[i] = i;
		post_send(&x, &seq[i], sizeof seq[i], peer, 7, NULL);
	}
	for (done = 0; done < COUNT; done++)
		XT_CHECK(xt_wait(x.txcq, NULL, NULL, 60) == 1, "send failed");
	xt_sync(sock);
	xt_close(&x);
	return 0;
}

int main(void)
{
	xt_init(150);
	int sock;
	pid_t pid;
	xt_spawn(1, sender, &sock, &pid);

	struct xt_ep x;
	xt_open_default(&x, 0);
	fi_addr_t peer = xt_exchange(&x, sock, 0, NULL);

	/* Progress, with no receive posted, until the sender has posted all 1000: everything
	 * arrives unexpected. */
	xt_sync_progress(sock, x.rxcq);
	unsigned char **bufs = calloc(COUNT, sizeof *bufs);
	for (int i = COUNT - 1; i >= 0; i--) {
		bufs[i] = malloc(size_of(i));
		XT_RC(fi_trecv(x.ep, bufs[i], size_of(i), NULL, peer, 1000 + (uint64_t)i, 0, bufs[i]));
	}
	for (int n = 0; n < COUNT; n++) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		XT_CHECK(xt_wait(x.rxcq, &e, &err, 60) == 1, "receive error %d", err.err);
		int i = (int)(e.tag - 1000);
		XT_CHECK(i >= 0 && i < COUNT && e.op_context == bufs[i], "wrong context for tag %llu",
			 (unsigned long long)e.tag);
		XT_CHECK(e.len == size_of(i), "len");
		XT_CHECK(xt_verify(bufs[i], size_of(i), (unsigned)i), "payload of message %d", i);
	}
	for (int i = 0; i < COUNT; i++)
		free(bufs[i]);
	free(bufs);
	xt_pass("1000 unexpected messages matched in reverse order");

	xt_sync_progress(sock, x.rxcq);
	for (uint32_t i = 0; i < COUNT; i++) {
		uint32_t got = ~0u;
		XT_RC(fi_trecv(x.ep, &got, sizeof got, NULL, peer, 7, 0, NULL));
		struct fi_cq_tagged_entry e;
		XT_CHECK(xt_wait(x.rxcq, &e, NULL, 60) == 1, "receive");
		XT_CHECK(got == i, "message %u arrived as number %u: order broken", got, i);
	}
	xt_pass("1000 messages on one tag complete in send order");
	xt_sync(sock);
	xt_close(&x);
	xt_reap(1, &pid);
	return 0;
}
