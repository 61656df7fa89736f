/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Messages and RMA beyond 2 and 4 GiB (exanet advertises max_msg_size 2^62): a length kept in
 * an int or a 32-bit field anywhere on the way (a packet, a DMA piece, a process_vm_writev
 * call, which the kernel caps at 2 GiB - 4 KiB, a lower provider's message) would cut, wrap or
 * misplace the data. Two processes exchange tagged messages of 2^31 + 7 and 2^32 + 5 bytes,
 * with the receive posted first and after the message arrived, then an RMA write (delivery
 * complete) and read of 2^32 + 5 bytes.
 *
 * Touching 4 GiB of fresh memory takes tens of seconds on a CI virtual machine, so every buffer
 * is virtual: PERIOD bytes of one memfd mapped again and again (PERIOD is not a divisor of
 * 2^32), except the last PERIOD bytes, which have a memfd of their own. The sender's bytes repeat
 * with that period; the receiver's buffer is another such mapping, zeroed, so each of its bytes
 * is written by every copy that lands on it, all with the same value. After a correct transfer
 * both memfds hold the pattern, the last one up to the message's end and zeros after it. A
 * transfer cut short leaves zeros; one whose offsets wrap at 2^31 or 2^32 writes its last bytes
 * where another value belongs (2^32 mod PERIOD is not 0); one that drops or overruns the end
 * shows in the last memfd. The completion's length is checked too.
 */
#define _GNU_SOURCE
#include "xt.h"

#include <rdma/fi_rma.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PERIOD ((size_t)(16 << 20) + 4096)
#define MSG_KEY 0x6c61726765ull

static const size_t sizes[] = {((size_t)1 << 31) + 7, ((size_t)1 << 32) + 5};
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define MAX_LEN (((size_t)1 << 32) + 5)

/* A buffer of len bytes: PERIOD-byte copies of one memfd, and the last copy a memfd of its own. */
struct big {
	unsigned char *base;  /* the first copy: the shared memfd */
	unsigned char *last;  /* the last copy */
	size_t last_len;      /* the buffer's bytes in the last copy */
	size_t len;
};

static int period_fd(void)
{
	int fd = memfd_create("large_messages", 0);
	XT_CHECK(fd >= 0 && ftruncate(fd, (off_t)PERIOD) == 0, "memfd of %zu bytes", PERIOD);
	return fd;
}

static struct big aliased(size_t len)
{
	const size_t copies = (len + PERIOD - 1) / PERIOD;
	const int shared = period_fd(), own = period_fd();
	unsigned char *base = mmap(NULL, copies * PERIOD, PROT_NONE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	XT_CHECK(base != MAP_FAILED, "reserving %zu bytes", copies * PERIOD);
	for (size_t i = 0; i < copies; i++)
		XT_CHECK(mmap(base + i * PERIOD, PERIOD, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
			      i + 1 < copies ? shared : own, 0) == base + i * PERIOD,
			 "mapping copy %zu", i);
	close(shared);
	close(own);
	return (struct big){base, base + (copies - 1) * PERIOD, len - (copies - 1) * PERIOD, len};
}

/* The pattern of seed at every offset (it repeats with PERIOD), or zeros. */
static void fill(const struct big *b, unsigned seed)
{
	xt_fill(b->base, PERIOD, seed);
	xt_fill(b->last, PERIOD, seed);
}
static void clear(const struct big *b)
{
	memset(b->base, 0, PERIOD);
	memset(b->last, 0, PERIOD);
}

/* After a correct transfer of b->len bytes of seed's pattern. */
static void check_pattern(const struct big *b, unsigned seed, const char *what)
{
	XT_CHECK(xt_verify(b->base, PERIOD, seed), "%s of %zu bytes: the data is wrong or missing",
		 what, b->len);
	XT_CHECK(xt_verify(b->last, b->last_len, seed), "%s of %zu bytes: its last %zu bytes are wrong",
		 what, b->len, b->last_len);
	for (size_t i = b->last_len; i < PERIOD; i++)
		XT_CHECK(b->last[i] == 0, "%s of %zu bytes: written past its end", what, b->len);
}

static void messages(struct xt_ep *x, fi_addr_t peer, int sender, int sock)
{
	for (size_t i = 0; i < NSIZES; i++) {
		const size_t len = sizes[i];
		const struct big b = aliased(len);
		unsigned char *buf = b.base;
		for (int unexpected = 0; unexpected < 2; unexpected++) {
			const unsigned seed = (unsigned)(10 + 2 * i + unexpected);
			int ctx;
			const double t0 = xt_now_s();
			if (sender) {
				fill(&b, seed);
				xt_sync(sock); /* the receive is posted, or not */
				XT_POST(x->txcq, fi_tsend(x->ep, buf, len, NULL, peer, seed, &ctx));
				struct fi_cq_tagged_entry e;
				struct fi_cq_err_entry err;
				XT_CHECK(xt_wait(x->txcq, &e, &err, 120) == 1, "send of %zu: error %d", len,
					 err.err);
				XT_CHECK(e.op_context == &ctx, "send context");
				xt_sync(sock);
				continue;
			}
			clear(&b);
			if (!unexpected)
				XT_RC(fi_trecv(x->ep, buf, len, NULL, peer, seed, 0, &ctx));
			xt_sync(sock);
			if (unexpected) {
				/* the message (its rendezvous announcement) arrives first */
				for (int k = 0; k < 20; k++) {
					fi_cq_read(x->rxcq, NULL, 0);
					usleep(10000);
				}
				XT_RC(fi_trecv(x->ep, buf, len, NULL, peer, seed, 0, &ctx));
			}
			struct fi_cq_tagged_entry e;
			struct fi_cq_err_entry err;
			XT_CHECK(xt_wait(x->rxcq, &e, &err, 120) == 1, "receive of %zu: error %d", len,
				 err.err);
			XT_CHECK(e.op_context == &ctx && e.tag == seed, "receive context or tag");
			XT_CHECK(e.len == len, "receive of %zu bytes reports %zu", len, e.len);
			check_pattern(&b, seed, unexpected ? "unexpected message" : "message");
			xt_sync(sock);
			printf("tagged %zu bytes, %s: right (%.1f s)\n", len,
			       unexpected ? "message first" : "receive first", xt_now_s() - t0);
			fflush(stdout);
		}
	}
}

/* An RMA write and a read of MAX_LEN bytes into and out of the peer's registration. */
static void rma(struct xt_ep *x, fi_addr_t peer, int initiator, int sock)
{
	const unsigned write_seed = 30, read_seed = 31;
	const struct big b = aliased(MAX_LEN);
	unsigned char *buf = b.base;
	if (initiator)
		fill(&b, write_seed);
	else
		clear(&b);
	struct fid_mr *mr = xt_mr_reg_bound(x, buf, MAX_LEN, MSG_KEY + (initiator ? 1 : 0));
	uint64_t peer_addr, peer_key;
	xt_exchange_region(x, sock, buf, mr, &peer_addr, &peer_key);
	if (initiator) {
		int ctx;
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		/* Delivery complete: the data is in the target's memory when this completes (a
		 * transmit-complete write may still sit in the target's staging area). */
		void *desc = fi_mr_desc(mr);
		struct iovec iov = {buf, MAX_LEN};
		struct fi_rma_iov remote = {peer_addr, MAX_LEN, peer_key};
		struct fi_msg_rma m = {.msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = peer,
				       .rma_iov = &remote, .rma_iov_count = 1, .context = &ctx};
		XT_POST(x->txcq, fi_writemsg(x->ep, &m, FI_COMPLETION | FI_DELIVERY_COMPLETE));
		XT_CHECK(xt_wait(x->txcq, &e, &err, 120) == 1, "write of %zu: error %d", MAX_LEN,
			 err.err);
		xt_sync(sock); /* written: the target checks, then fills its buffer for the read */
		xt_sync(sock);
		clear(&b);
		XT_POST(x->txcq, fi_read(x->ep, buf, MAX_LEN, fi_mr_desc(mr), peer, peer_addr, peer_key, &ctx));
		XT_CHECK(xt_wait(x->txcq, &e, &err, 120) == 1, "read of %zu: error %d", MAX_LEN,
			 err.err);
		check_pattern(&b, read_seed, "RMA read");
		printf("RMA write and read of %zu bytes: right\n", MAX_LEN);
		fflush(stdout);
		xt_sync(sock);
	} else {
		xt_sync_progress(sock, x->rxcq); /* the write lands (the target copies it out of staging) */
		check_pattern(&b, write_seed, "RMA write");
		fill(&b, read_seed);
		xt_sync(sock);
		xt_sync_progress(sock, x->rxcq); /* the read is served */
	}
	XT_RC(fi_close(&mr->fid));
}

static void run(int sender, int sock)
{
	struct xt_ep x;
	xt_open_rma(&x);
	fi_addr_t peer = xt_exchange(&x, sock, sender, NULL);
	messages(&x, peer, sender, sock);
	rma(&x, peer, sender, sock);
	xt_close(&x);
}

static int child(int index, int sock)
{
	(void)index;
	run(0, sock);
	return 0;
}

int main(void)
{
	xt_init(600);
	int sock;
	pid_t pid;
	xt_spawn(1, child, &sock, &pid);
	run(1, sock);
	xt_reap(1, &pid);
	xt_pass("large_messages");
	return 0;
}
