/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The endpoint counters of <rdma/fi_ext_exanet.h> (FI_EXANET_COUNTERS_OPS), checked against a
 * traffic pattern whose protocol choices are known: eager, medium and rendezvous messages into
 * pre-posted receives (fast receives), one message that arrives before its receive (unexpected,
 * not fast), and an RMA write and read. Also: unknown ops names are refused, and a short size
 * reads a prefix. Under FI_EXANET_PROTOCOL=read the rendezvous is acknowledged.
 */
#include "xt.h"

#include <rdma/fi_ext_exanet.h>
#include <rdma/fi_rma.h>
#include <string.h>

static struct fi_exanet_counters read_counters(struct xt_ep *x)
{
	struct fi_exanet_counters_ops *ops = NULL;
	XT_RC(fi_open_ops(&x->ep->fid, FI_EXANET_COUNTERS_OPS, 0, (void **)&ops, NULL));
	XT_CHECK(ops && ops->size >= sizeof *ops && ops->read, "counters ops");
	struct fi_exanet_counters c;
	memset(&c, 0xff, sizeof c);
	XT_RC(ops->read(x->ep, &c, sizeof c));
	return c;
}

static int is_read_family(void)
{
	const char *family = getenv("FI_EXANET_PROTOCOL");
	return family && !strcmp(family, "read");
}

static const size_t sizes[] = {8, 8, 8, 1000, 1000, 100000};
#define NMSG (sizeof sizes / sizeof sizes[0])

/* The payload bytes of the traffic: the six messages and the late 8-byte one. */
static uint64_t message_bytes(void)
{
	uint64_t n = 8;
	for (size_t k = 0; k < NMSG; k++)
		n += sizes[k];
	return n;
}

static int receiver(int i, int sock)
{
	(void)i;
	struct xt_ep x;
	xt_open_default(&x, 0);
	fi_addr_t peer = xt_exchange(&x, sock, 1, NULL);
	static char buf[NMSG][100000];
	for (size_t k = 0; k < NMSG; k++)
		XT_RC(fi_trecv(x.ep, buf[k], sizeof buf[k], NULL, peer, k, 0, NULL));
	xt_sync(sock); /* receives posted: the sender may go */
	for (size_t k = 0; k < NMSG; k++)
		XT_CHECK(xt_wait(x.rxcq, NULL, NULL, 20) == 1, "message %zu", k);
	xt_sync_progress(sock, x.rxcq); /* the late message has been sent */
	while (read_counters(&x).unexpected_max == 0)
		fi_cq_read(x.rxcq, NULL, 0);
	XT_RC(fi_trecv(x.ep, buf[0], 8, NULL, peer, 99, 0, NULL));
	XT_CHECK(xt_wait(x.rxcq, NULL, NULL, 20) == 1, "the late message");
	struct fi_exanet_counters c = read_counters(&x);
	/* Every receive was posted first with room above the medium limit, so each sent an RTR
	 * (write family). Only the large message used it: a receiver-initiated write, no RTS. The
	 * read family sends no RTR and announces the large message with an RTS. */
	const int ri = !is_read_family();
	XT_CHECK(c.eager_recv == 4 && c.medium_recv == 2 && c.rndv_recv == (uint64_t)!ri &&
			 c.ri_recv == (uint64_t)ri && c.rtr_sent == (ri ? NMSG : 0),
		 "receiver: eager %llu medium %llu rndv %llu ri %llu rtr %llu",
		 (unsigned long long)c.eager_recv, (unsigned long long)c.medium_recv,
		 (unsigned long long)c.rndv_recv, (unsigned long long)c.ri_recv,
		 (unsigned long long)c.rtr_sent);
	XT_CHECK(c.fast_recv == NMSG, "fast receives %llu, want %zu (the late one is not)",
		 (unsigned long long)c.fast_recv, NMSG);
	XT_CHECK(c.unexpected_max == 1 && c.eager_sent == 0, "unexpected high-water %llu",
		 (unsigned long long)c.unexpected_max);
	XT_CHECK(c.bytes_recv == message_bytes() && c.bytes_sent == 0,
		 "receiver bytes: received %llu, want %llu; sent %llu, want 0",
		 (unsigned long long)c.bytes_recv, (unsigned long long)message_bytes(),
		 (unsigned long long)c.bytes_sent);
	xt_sync_progress(sock, x.rxcq);
	xt_close(&x);
	return 0;
}

int main(void)
{
	xt_init(60);
	int sock;
	pid_t pid;
	xt_spawn(1, receiver, &sock, &pid);
	struct xt_ep x;
	struct fi_info *h = xt_hints();
	h->caps |= FI_RMA;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY;
	xt_open(&x, h, 0);
	fi_freeinfo(h);
	fi_addr_t peer = xt_exchange(&x, sock, 0, NULL);

	void *ops = NULL;
	XT_CHECK(fi_open_ops(&x.ep->fid, "no_such_ops", 0, &ops, NULL) == -FI_ENOSYS, "unknown ops name");
	struct fi_exanet_counters zero = read_counters(&x);
	XT_CHECK(zero.eager_sent == 0 && zero.rma_writes == 0, "a fresh endpoint counts nothing");

	static char src[100000];
	xt_sync(sock);
	for (size_t k = 0; k < NMSG; k++) {
		XT_RC(fi_tsend(x.ep, src, sizes[k], NULL, peer, k, NULL));
		XT_CHECK(xt_wait(x.txcq, NULL, NULL, 20) == 1, "send %zu", k);
	}
	XT_RC(fi_tsend(x.ep, src, 8, NULL, peer, 99, NULL)); /* before its receive exists */
	XT_CHECK(xt_wait(x.txcq, NULL, NULL, 20) == 1, "late send");
	xt_sync_progress(sock, x.txcq);

	/* RMA into our own registered memory, through our own address */
	static char target[4096], back[4096];
	struct fid_mr *mr;
	XT_RC(fi_mr_reg(x.domain, target, sizeof target, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL));
	fi_addr_t self = xt_insert(&x, x.name);
	/* the returned mr_mode says how to address it (exanet: offsets, whatever was offered) */
	const uint64_t base = (x.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)target : 0;
	XT_POST(x.txcq, fi_write(x.ep, src, 100, NULL, self, base, fi_mr_key(mr), NULL));
	XT_CHECK(xt_wait(x.txcq, NULL, NULL, 20) == 1, "write");
	XT_POST(x.txcq, fi_read(x.ep, back, 100, NULL, self, base, fi_mr_key(mr), NULL));
	XT_CHECK(xt_wait(x.txcq, NULL, NULL, 20) == 1, "read");

	struct fi_exanet_counters c = read_counters(&x);
	const int ri = !is_read_family();
	XT_CHECK(c.eager_sent == 4 && c.medium_sent == 2 && c.rndv_sent == (uint64_t)!ri &&
			 c.ri_sent == (uint64_t)ri && c.eager_recv == 0,
		 "sender: eager %llu medium %llu rndv %llu ri %llu", (unsigned long long)c.eager_sent,
		 (unsigned long long)c.medium_sent, (unsigned long long)c.rndv_sent,
		 (unsigned long long)c.ri_sent);
	/* the five RTRs whose sends went eager or medium are dropped, whenever they arrived */
	XT_CHECK(c.rtr_dropped == (ri ? NMSG - 1 : 0) && c.rtr_stale == 0,
		 "RTRs dropped %llu stale %llu", (unsigned long long)c.rtr_dropped,
		 (unsigned long long)c.rtr_stale);
	/* FI_EXANET_PROTOCOL=read: the receiver acknowledges the one rendezvous; write: nobody does */
	const uint64_t acked = ri ? 0 : 1;
	XT_CHECK(c.rndv_acked == acked, "rendezvous acks %llu, want %llu",
		 (unsigned long long)c.rndv_acked, (unsigned long long)acked);
	XT_CHECK(c.rma_writes == 1 && c.rma_inline_writes == 1 && c.rma_reads == 1,
		 "rma: writes %llu inline %llu reads %llu", (unsigned long long)c.rma_writes,
		 (unsigned long long)c.rma_inline_writes, (unsigned long long)c.rma_reads);
	/* every protocol's payload counted once; RMA is not message traffic */
	XT_CHECK(c.bytes_sent == message_bytes() && c.bytes_recv == 0,
		 "sender bytes: sent %llu, want %llu; received %llu, want 0",
		 (unsigned long long)c.bytes_sent, (unsigned long long)message_bytes(),
		 (unsigned long long)c.bytes_recv);
	/* a reader built against a shorter struct gets the prefix and nothing past it */
	struct fi_exanet_counters_ops *cops;
	XT_RC(fi_open_ops(&x.ep->fid, FI_EXANET_COUNTERS_OPS, 0, (void **)&cops, NULL));
	uint64_t two[3] = {0, 0, 0xabcdef};
	XT_RC(cops->read(x.ep, (struct fi_exanet_counters *)two, 2 * sizeof(uint64_t)));
	XT_CHECK(two[0] == 4 && two[1] == 0 && two[2] == 0xabcdef, "prefix read");
	xt_pass("counters: eager, medium, rendezvous, fast and unexpected receives, RMA");

	XT_RC(fi_close(&mr->fid));
	xt_sync_progress(sock, x.txcq);
	xt_close(&x);
	xt_reap(1, &pid);
	return 0;
}
