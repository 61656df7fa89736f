/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A completed send or RMA write needs nothing more of its initiator (fi_cq(3): a transmit
 * completion means the operation no longer depends on local resources). Under manual progress an
 * application may stop calling the provider once it holds the completion and wait for its peer
 * by other means (here a socket; elsewhere a PMI barrier or a file). The peer, progressing all
 * along, must then receive what was completed.
 *
 * Each round, the initiator first posts a large RMA write (CTB_BIG bytes, default 32 MiB) and
 * does not wait for it: over a network transport it fills the socket, and the rest waits in the
 * transport's own queue. Then it posts one small operation with a completion, waits for that
 * completion only, and asks the target over the socket (blocking, without progress) whether the
 * operation's data arrived; the target progresses meanwhile and answers within 10 s. The small
 * operations: tagged sends of 8 B (eager), 64 B (train), 16 KiB (medium) and 256 KiB
 * (rendezvous, receive posted first), RMA writes of 4 KiB (inline over the network) and
 * 256 KiB (DMA), and a tagged inject of 8 B waited for on a send counter (a counter is a
 * completion too). CTB_ONLY=1..7 runs one of them alone.
 *
 * Over the emulation a completion always follows the data into the peer's memory. As
 * net.complete_then_block every peer goes through the network backend: before exanet held such
 * reports until its lower sends had completed (dev::device::sent_out), the small operations
 * completed with their bytes behind the big write in tcp's queue, and never arrived.
 */
#include "xt.h"

#include <poll.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <stdlib.h>
#include <string.h>

#define KEY 0xc0feULL
#define SMALL_AREA (1u << 20) /* after the big write's bytes: where the small writes go */

struct command {
	char op; /* P post a receive, C check (up to 10 s), Q quit */
	int is_send; /* 0: an RMA write; 1: a tagged send; 2: a tagged inject, counted */
	uint64_t len;
	uint64_t tag;
	unsigned seed;
};

static size_t big_len(void)
{
	return xt_env_size("CTB_BIG", 32u << 20);
}

/* ---- target ---------------------------------------------------------------------------- */

static int target(int index, int sock)
{
	(void)index;
	struct xt_ep x;
	xt_open_rma(&x);
	const fi_addr_t peer = xt_exchange(&x, sock, 1, NULL);
	const size_t region_len = big_len() + SMALL_AREA;
	unsigned char *region = aligned_alloc(4096, region_len);
	unsigned char *rbuf = aligned_alloc(4096, SMALL_AREA);
	XT_CHECK(region && rbuf, "out of memory");
	memset(region, 0, region_len);
	struct fid_mr *mr = xt_mr_reg_bound(&x, region, region_len, KEY);
	uint64_t peer_addr, peer_key;
	xt_exchange_region(&x, sock, region, mr, &peer_addr, &peer_key);
	(void)peer;
	int posted = 0;
	for (;;) {
		struct pollfd p = {.fd = sock, .events = POLLIN};
		if (poll(&p, 1, 0) != 1) {
			fi_cq_read(x.rxcq, NULL, 0); /* manual progress: the initiator's data needs us */
			xt_idle();
			continue;
		}
		struct command c;
		xt_recv_all(sock, &c, sizeof c);
		int64_t answer = 1;
		if (c.op == 'Q') {
			xt_send_all(sock, &answer, sizeof answer);
			break;
		}
		if (c.op == 'P') {
			memset(rbuf, 0, c.len);
			XT_RC(fi_trecv(x.ep, rbuf, c.len, NULL, FI_ADDR_UNSPEC, c.tag, 0, rbuf));
			posted = 1;
		} else if (c.op == 'C') {
			const double end = xt_now_s() + 10;
			answer = 0;
			while (!answer && xt_now_s() < end) {
				if (c.is_send) {
					struct fi_cq_tagged_entry e;
					const ssize_t n = fi_cq_read(x.rxcq, &e, 1);
					XT_CHECK(n == 1 || n == -FI_EAGAIN, "target: fi_cq_read = %zd", n);
					if (n == 1) {
						XT_CHECK(posted && e.op_context == rbuf && e.tag == c.tag &&
								 e.len == c.len,
							 "target: another completion (tag 0x%llx, %zu bytes)",
							 (unsigned long long)e.tag, e.len);
						XT_CHECK(xt_verify(rbuf, c.len, c.seed),
							 "target: the message of %llu bytes has other bytes",
							 (unsigned long long)c.len);
						posted = 0;
						answer = 1;
					}
				} else {
					fi_cq_read(x.rxcq, NULL, 0);
					answer = xt_verify(region + big_len(), c.len, c.seed);
				}
				if (!answer)
					xt_idle();
			}
		}
		xt_send_all(sock, &answer, sizeof answer);
	}
	fi_close(&mr->fid);
	xt_close(&x);
	return 0;
}

/* ---- initiator ------------------------------------------------------------------------- */

static int64_t ask(int sock, struct command c, struct fid_cq *progress)
{
	return xt_ask(sock, &c, sizeof c, progress);
}

/* Reads x's transmit CQ until `want` completes; notes the big write's completion on the way. */
static void wait_for(struct xt_ep *x, void *want, void *big, int *big_done, const char *what)
{
	const double end = xt_now_s() + 30;
	for (;;) {
		struct fi_cq_tagged_entry e;
		const ssize_t n = fi_cq_read(x->txcq, &e, 1);
		if (n == 1) {
			if (e.op_context == big)
				*big_done = 1;
			if (e.op_context == want)
				return;
			continue;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			fi_cq_readerr(x->txcq, &err, 0);
			XT_CHECK(0, "%s: error completion %d (%s)", what, err.err, fi_strerror(err.err));
		}
		XT_CHECK(n == -FI_EAGAIN, "%s: fi_cq_read = %zd", what, n);
		XT_CHECK(xt_now_s() < end, "%s: no completion in 30 s", what);
		xt_idle();
	}
}

#define RETRY(call, x, what)                                                                    \
	do {                                                                                    \
		const double end_ = xt_now_s() + 30;                                            \
		ssize_t rc_;                                                                    \
		while ((rc_ = (call)) == -FI_EAGAIN) {                                          \
			fi_cq_read((x)->txcq, NULL, 0);                                         \
			XT_CHECK(xt_now_s() < end_, "%s: -FI_EAGAIN for 30 s", what);         \
		}                                                                               \
		XT_CHECK(rc_ == 0, "%s = %zd (%s)", what, rc_, fi_strerror((int)-rc_));       \
	} while (0)

int main(void)
{
	xt_init(240);
	struct {
		const char *name;
		int is_send; /* as struct command's */
		uint64_t len;
	} kinds[] = {
		{"tagged send of 8 B (eager)", 1, 8},
		{"tagged send of 64 B (train)", 1, 64},
		{"tagged send of 16 KiB (medium)", 1, 16384},
		{"tagged send of 256 KiB (rendezvous, receive posted first)", 1, 256 << 10},
		{"RMA write of 4 KiB (inline over the network)", 0, 4096},
		{"RMA write of 256 KiB (DMA)", 0, 256 << 10},
		{"tagged inject of 8 B, waited for on a send counter", 2, 8},
	};
	const size_t big = big_len();
	int sock;
	pid_t pid;
	xt_spawn(1, target, &sock, &pid);
	/* xt_open_rma's endpoint, with a send counter bound before it is enabled. */
	struct xt_ep x;
	struct fi_info *h = xt_hints();
	h->caps = FI_TAGGED | FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	h->domain_attr->mr_mode = 0;
	xt_open_disabled(&x, h, 0);
	fi_freeinfo(h);
	XT_CHECK(!(x.info->domain_attr->mr_mode & (FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_LOCAL)),
		 "mr_mode 0x%x", x.info->domain_attr->mr_mode);
	struct fi_cntr_attr cattr = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_NONE};
	struct fid_cntr *sent;
	XT_RC(fi_cntr_open(x.domain, &cattr, &sent, NULL));
	XT_RC(fi_ep_bind(x.ep, &sent->fid, FI_SEND));
	xt_enable(&x);
	const fi_addr_t peer = xt_exchange(&x, sock, 0, NULL);
	unsigned char *big_buf = aligned_alloc(4096, big);
	unsigned char *small = aligned_alloc(4096, SMALL_AREA);
	XT_CHECK(big_buf && small, "out of memory");
	memset(big_buf, 0xb1, big);
	struct fid_mr *mr = xt_mr_reg_bound(&x, small, SMALL_AREA, KEY + 1);
	uint64_t addr, key;
	xt_exchange_region(&x, sock, small, mr, &addr, &key);

	/* The target's answer about its key comes first: the big write then goes at once. */
	int ctx_warm, ctx_big, ctx_small, big_done = 0;
	RETRY(fi_write(x.ep, small, 64, NULL, peer, addr, key, &ctx_warm), &x, "warm-up fi_write");
	wait_for(&x, &ctx_warm, NULL, &big_done, "the warm-up write");

	const size_t only = xt_env_size("CTB_ONLY", 0); /* 1..6: that kind alone */
	for (unsigned k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
		if (only && only != k + 1)
			continue;
		const uint64_t len = kinds[k].len;
		const unsigned seed = 0x5100 + k;
		const uint64_t tag = 0x7000 + k;
		if (kinds[k].is_send)
			XT_CHECK(ask(sock, (struct command){.op = 'P', .is_send = kinds[k].is_send, .len = len, .tag = tag},
				     x.txcq) == 1, "post");
		big_done = 0;
		RETRY(fi_write(x.ep, big_buf, big, NULL, peer, addr, key, &ctx_big), &x, "the big fi_write");
		xt_fill(small, len, seed);
		const uint64_t sent_before = fi_cntr_read(sent);
		if (kinds[k].is_send == 2) {
			RETRY(fi_tinject(x.ep, small, len, peer, tag), &x, "fi_tinject");
			const double end = xt_now_s() + 30;
			while (fi_cntr_read(sent) < sent_before + 1) {
				struct fi_cq_tagged_entry e;
				if (fi_cq_read(x.txcq, &e, 1) == 1 && e.op_context == &ctx_big)
					big_done = 1;
				XT_CHECK(xt_now_s() < end, "%s: not counted in 30 s", kinds[k].name);
				xt_idle();
			}
		} else if (kinds[k].is_send) {
			RETRY(fi_tsend(x.ep, small, len, NULL, peer, tag, &ctx_small), &x, "fi_tsend");
		} else {
			RETRY(fi_write(x.ep, small, len, NULL, peer, addr + big, key, &ctx_small), &x,
			      "fi_write");
		}
		if (kinds[k].is_send != 2)
			wait_for(&x, &ctx_small, &ctx_big, &big_done, kinds[k].name);
		/* Completed: from here on the initiator makes no call until the target answers. */
		XT_CHECK(ask(sock, (struct command){.op = 'C', .is_send = kinds[k].is_send, .len = len,
						     .tag = tag, .seed = seed}, NULL) == 1,
			 "%s: completed at the initiator (the big write %s), not at the target 10 s "
			 "later with the initiator waiting",
			 kinds[k].name, big_done ? "completed too" : "still in flight");
		if (!big_done)
			wait_for(&x, &ctx_big, &ctx_big, &big_done, "the big write");
		printf("  %s: arrived\n", kinds[k].name);
	}
	XT_CHECK(ask(sock, (struct command){.op = 'Q'}, NULL) == 1, "quit");
	xt_reap(1, &pid);
	fi_close(&mr->fid);
	xt_close_ep(&x); /* the counter after its endpoint, before its domain */
	XT_RC(fi_close(&sent->fid));
	xt_close(&x);
	xt_pass("what completed at the initiator arrives while it waits without progress");
	return 0;
}
