/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Matching across three processes: FI_ADDR_UNSPEC receives with ignore masks take messages from
 * two senders in per-sender order; senders the receiver has not inserted into its AV are still
 * delivered (FI_SOURCE gives FI_ADDR_NOTAVAIL) and can be answered once inserted; between a
 * directed and a wildcard receive, the one posted first wins.
 */
#include "xt.h"

#include <string.h>

#define PER_SENDER 50

static ssize_t tsend(struct xt_ep *x, const void *buf, size_t len, fi_addr_t to, uint64_t tag, uint64_t data)
{
	ssize_t rc;
	while ((rc = fi_tsenddata(x->ep, buf, len, NULL, data, to, tag, NULL)) == -FI_EAGAIN)
		fi_cq_read(x->txcq, NULL, 0);
	return rc;
}

static int sender(int k, int sock)
{
	struct xt_ep x;
	xt_open_default(&x, 0);
	fi_addr_t recv = xt_exchange(&x, sock, 0, NULL);
	/* A rendezvous send reads its buffer until it completes: one buffer per message. */
	static unsigned char bufs[PER_SENDER][20000];
	for (uint32_t i = 0; i < PER_SENDER; i++) {
		size_t len = i % 2 ? sizeof bufs[i] : 24;  /* eager and rendezvous interleaved */
		memcpy(bufs[i], &i, sizeof i);
		XT_RC(tsend(&x, bufs[i], len, recv, ((uint64_t)(k + 1) << 32) | 0x7000 | i, (uint64_t)k));
	}
	unsigned char *buf = bufs[0];
	xt_sync_progress(sock, x.txcq);
	if (k == 0) {
		/* directed vs wildcard: tags 5 and 6, then a reply from the receiver */
		xt_sync_progress(sock, x.txcq);
		XT_RC(tsend(&x, buf, 8, recv, 5, 0));
		XT_RC(tsend(&x, buf, 8, recv, 6, 0));
		uint32_t reply = 0;
		XT_RC(fi_trecv(x.ep, &reply, sizeof reply, NULL, recv, 99, 0, NULL));
		struct fi_cq_tagged_entry e;
		XT_CHECK(xt_wait(x.rxcq, &e, NULL, 30) == 1 && reply == 0xbeef, "reply from the receiver");
	}
	xt_sync_progress(sock, x.txcq);
	xt_close(&x);
	return 0;
}

int main(void)
{
	xt_init(120);
	int socks[2];
	pid_t pids[2];
	xt_spawn(2, sender, socks, pids);
	struct xt_ep x;
	struct fi_info *h = xt_hints();
	h->caps |= FI_SOURCE;
	xt_open(&x, h, 0);
	fi_freeinfo(h);
	char names[2][64];
	for (int k = 0; k < 2; k++) {
		xt_send_name(socks[k], &x);
		xt_recv_name(socks[k], names[k]);  /* kept, but not inserted yet */
	}

	/* Wildcard source and tag: ignore the sender and sequence bits, keep 0x7000. */
	static unsigned char bufs[2 * PER_SENDER][20000];
	for (int i = 0; i < 2 * PER_SENDER; i++)
		XT_RC(fi_trecv(x.ep, bufs[i], sizeof bufs[i], NULL, FI_ADDR_UNSPEC, 0x7000,
			       0xffffffff00000fffULL, bufs[i]));
	/* Completions may come in any order (a rendezvous completes after a later eager message),
	 * but matching must follow send order per sender: message i of a sender lands in an
	 * earlier-posted receive than its message i+1. */
	int slot_of[2][PER_SENDER];
	memset(slot_of, -1, sizeof slot_of);
	for (int n = 0; n < 2 * PER_SENDER; n++) {
		struct fi_cq_tagged_entry e;
		fi_addr_t src = 0;
		ssize_t r;
		while ((r = fi_cq_readfrom(x.rxcq, &e, 1, &src)) == -FI_EAGAIN)
			;
		XT_CHECK(r == 1, "wildcard receive: %zd", r);
		int k = (int)e.data;
		XT_CHECK(k == 0 || k == 1, "cq data names the sender");
		uint32_t seq;
		memcpy(&seq, e.op_context, sizeof seq);
		XT_CHECK(seq < PER_SENDER && (e.tag >> 32) == (uint64_t)k + 1 && (e.tag & 0xfff) == seq,
			 "sender %d tag 0x%llx payload %u", k, (unsigned long long)e.tag, seq);
		XT_CHECK(slot_of[k][seq] < 0, "sender %d message %u delivered twice", k, seq);
		slot_of[k][seq] = (int)(((unsigned char(*)[20000])e.op_context) - bufs);
		XT_CHECK(src == FI_ADDR_NOTAVAIL, "source of a sender not in the AV must be FI_ADDR_NOTAVAIL");
	}
	for (int k = 0; k < 2; k++)
		for (int i = 1; i < PER_SENDER; i++)
			XT_CHECK(slot_of[k][i] > slot_of[k][i - 1],
				 "sender %d: message %d matched receive %d, before message %d's %d", k, i,
				 slot_of[k][i], i - 1, slot_of[k][i - 1]);
	xt_pass("FI_ADDR_UNSPEC with ignore masks, two senders in order, unknown senders delivered");
	for (int k = 0; k < 2; k++)
		xt_sync_progress(socks[k], x.rxcq);

	/* Now insert sender 0: directed receives and FI_SOURCE name it. */
	fi_addr_t s0 = xt_insert(&x, names[0]);
	uint64_t r1, r2, r3, r4;
	XT_RC(fi_trecv(x.ep, &r1, 8, NULL, s0, 5, 0, &r1));               /* directed, first */
	XT_RC(fi_trecv(x.ep, &r2, 8, NULL, FI_ADDR_UNSPEC, 5, 0, &r2));   /* wildcard, second */
	XT_RC(fi_trecv(x.ep, &r3, 8, NULL, FI_ADDR_UNSPEC, 6, 0, &r3));   /* wildcard, first */
	XT_RC(fi_trecv(x.ep, &r4, 8, NULL, s0, 6, 0, &r4));               /* directed, second */
	xt_sync_progress(socks[0], x.rxcq);
	void *got[2];
	for (int n = 0; n < 2; n++) {
		struct fi_cq_tagged_entry e;
		fi_addr_t src = FI_ADDR_NOTAVAIL;
		ssize_t r;
		while ((r = fi_cq_readfrom(x.rxcq, &e, 1, &src)) == -FI_EAGAIN)
			;
		XT_CHECK(r == 1 && src == s0, "FI_SOURCE after insert");
		got[n] = e.op_context;
	}
	XT_CHECK(got[0] == &r1 && got[1] == &r3, "the earliest posted matching receive must win");
	XT_RC(fi_cancel(&x.ep->fid, &r2));
	XT_RC(fi_cancel(&x.ep->fid, &r4));
	for (int n = 0; n < 2; n++) {
		struct fi_cq_err_entry err;
		XT_CHECK(xt_wait(x.rxcq, NULL, &err, 10) == 0 && err.err == FI_ECANCELED, "cancel");
	}
	uint32_t reply = 0xbeef;
	XT_RC(tsend(&x, &reply, sizeof reply, s0, 99, 0));
	XT_CHECK(xt_wait(x.txcq, NULL, NULL, 30) == 1, "reply sent");
	xt_pass("earliest posted receive wins; reply to a sender inserted late");
	for (int k = 0; k < 2; k++)
		xt_sync_progress(socks[k], x.rxcq);
	xt_close(&x);
	xt_reap(2, pids);
	return 0;
}
