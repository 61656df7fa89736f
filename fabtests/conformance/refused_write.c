/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A write the target cannot take must cost that write alone (fi_rma(3): an access outside a
 * registration completes in error; nothing says the pair's other traffic may suffer).
 *
 * The target registers a buffer under a key, the initiator writes to it (so it learns the
 * registration), then the target closes it and registers another buffer under the same key,
 * and tells the initiator only over the socket, staying away from libfabric for a while. The
 * initiator then writes, in one operation, more than the new registration holds: its write
 * names a range the old one covered. Over exanet's network backend (REFUSED_WRITE_KEY; a key
 * of 2^63 or more, the default, takes a lower key of the backend's own, a smaller one is its
 * own lower key), the write goes out under the closed registration's lower key, and the
 * target's lower provider would refuse it (the range is not the new registration's, or the key
 * is nobody's): tcp closes the connection there. exanet leaves a sink under a closed
 * registration's lower key instead, and the write's check tells the initiator it missed; the
 * initiator asks again and the new registration refuses the range. The write must end in an
 * error completion with FI_EACCES, and neither buffer may change. The emulation refuses it at
 * once. (libfabric's tcp fails this program: its refusal resets the pair's connection.)
 *
 * Then the pair carries on: tagged messages of every protocol's sizes both ways, each verified,
 * and an RMA write into the new registration. A packet lost with the connection would show as
 * a message that never arrives (the program is bounded in time) or wrong data.
 */
#include "xt.h"

#include <poll.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REGION (256u << 10)
#define SMALL (64u << 10) /* the new registration: less than the write */
#define WRITE_LEN (192u << 10)
#define ROUNDS 40

static uint64_t key = 0x8000000000000abcull;

static const size_t sizes[] = {1, 36, 37, 1000, 8192, 8193, 65536, 65537, 300000};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static void send_msg(struct xt_ep *x, fi_addr_t peer, void *buf, size_t len, uint64_t tag)
{
	ssize_t rc;
	const double end = xt_now_s() + 30;
	while ((rc = fi_tsend(x->ep, buf, len, NULL, peer, tag, NULL)) == -FI_EAGAIN) {
		fi_cq_read(x->rxcq, NULL, 0);
		fi_cq_read(x->txcq, NULL, 0);
		XT_CHECK(xt_now_s() < end, "fi_tsend: -FI_EAGAIN for 30 s");
	}
	XT_CHECK(rc == 0, "fi_tsend = %zd", rc);
}

/* ROUNDS rounds of every size both ways; the side that sends first alternates with the round. */
static void exchange(struct xt_ep *x, fi_addr_t peer, int first, unsigned char *sbuf,
		     unsigned char *rbuf)
{
	for (unsigned r = 0; r < ROUNDS; r++) {
		for (size_t i = 0; i < NSIZES; i++) {
			const size_t len = sizes[i];
			const unsigned seed = r * 131 + (unsigned)i * 7 + (unsigned)first;
			const unsigned peer_seed = r * 131 + (unsigned)i * 7 + (unsigned)!first;
			const uint64_t tag = (uint64_t)r << 8 | i;
			XT_RC(fi_trecv(x->ep, rbuf, len, NULL, peer, tag, 0, NULL));
			xt_fill(sbuf, len, seed);
			send_msg(x, peer, sbuf, len, tag);
			/* Both completions, in either order. */
			int got_tx = 0, got_rx = 0;
			const double end = xt_now_s() + 30;
			while (!(got_tx && got_rx)) {
				struct fi_cq_tagged_entry e;
				struct fi_cq_err_entry err = {0};
				ssize_t n = fi_cq_read(x->txcq, &e, 1);
				if (n == -FI_EAVAIL) {
					fi_cq_readerr(x->txcq, &err, 0);
					XT_CHECK(0, "round %u, %zu bytes: send failed: %s", r, len,
						 fi_strerror(err.err));
				}
				got_tx += n == 1;
				n = fi_cq_read(x->rxcq, &e, 1);
				if (n == -FI_EAVAIL) {
					fi_cq_readerr(x->rxcq, &err, 0);
					XT_CHECK(0, "round %u, %zu bytes: receive failed: %s", r, len,
						 fi_strerror(err.err));
				}
				got_rx += n == 1;
				XT_CHECK(xt_now_s() < end, "round %u, %zu bytes: a message lost "
					 "(send %s, receive %s after 30 s)", r, len,
					 got_tx ? "done" : "not done", got_rx ? "done" : "not done");
			}
			XT_CHECK(xt_verify(rbuf, len, peer_seed), "round %u: %zu bytes wrong", r, len);
		}
	}
}

enum { OP_REGISTER_NEW = 1, OP_CHECK = 2, OP_VERIFY_NEW = 3, OP_QUIT = 4 };

static int target(int index, int sock)
{
	(void)index;
	struct xt_ep x;
	xt_open_rma(&x);
	const fi_addr_t peer = xt_exchange(&x, sock, 1, NULL);
	unsigned char *old_buf = aligned_alloc(4096, REGION);
	unsigned char *new_buf = aligned_alloc(4096, REGION);
	unsigned char *sbuf = malloc(sizes[NSIZES - 1]), *rbuf = malloc(sizes[NSIZES - 1]);
	XT_CHECK(old_buf && new_buf && sbuf && rbuf, "out of memory");
	memset(old_buf, 0x11, REGION);
	memset(new_buf, 0x22, REGION);
	struct fid_mr *mr;
	XT_RC(fi_mr_reg(x.domain, old_buf, REGION, FI_REMOTE_WRITE, 0, key, 0, &mr, NULL));
	xt_sync_progress(sock, x.rxcq); /* registered */
	xt_sync_progress(sock, x.rxcq); /* the first write completed (it may need us to land) */
	const double end = xt_now_s() + 10;
	while (!xt_verify(old_buf, WRITE_LEN, 1) && xt_now_s() < end)
		fi_cq_read(x.rxcq, NULL, 0);
	XT_CHECK(xt_verify(old_buf, WRITE_LEN, 1), "the first write did not land");
	memset(old_buf, 0x11, REGION);
	uint64_t before_old = 0, before_new = 0;
	for (;;) {
		struct pollfd p = {.fd = sock, .events = POLLIN};
		if (poll(&p, 1, 0) != 1) {
			fi_cq_read(x.rxcq, NULL, 0);
			continue;
		}
		int op;
		xt_recv_all(sock, &op, sizeof op);
		int64_t answer = 1;
		if (op == OP_REGISTER_NEW) {
			XT_RC(fi_close(&mr->fid));
			XT_RC(fi_mr_reg(x.domain, new_buf, SMALL, FI_REMOTE_WRITE, 0, key, 0, &mr, NULL));
			before_old = xt_checksum(old_buf, REGION);
			before_new = xt_checksum(new_buf, REGION);
			xt_send_all(sock, &answer, sizeof answer);
			/* Away from libfabric: the initiator's write leaves before we could say the
			 * old registration is gone. */
			usleep(200000);
			continue;
		}
		if (op == OP_CHECK) {
			answer = xt_checksum(old_buf, REGION) == before_old &&
				 xt_checksum(new_buf, REGION) == before_new;
		} else if (op == OP_VERIFY_NEW) {
			const double end = xt_now_s() + 10;
			while (!(answer = xt_verify(new_buf, SMALL, 9)) && xt_now_s() < end)
				fi_cq_read(x.rxcq, NULL, 0);
		}
		xt_send_all(sock, &answer, sizeof answer);
		if (op == OP_CHECK)
			exchange(&x, peer, 1, sbuf, rbuf);
		if (op == OP_QUIT)
			break;
	}
	fi_close(&mr->fid);
	xt_close(&x);
	return 0;
}

static int64_t ask(int sock, int op, struct xt_ep *x)
{
	return xt_ask(sock, &op, sizeof op, x->txcq);
}

/* Delivery complete: the target's verdict comes back with the completion over every provider
 * (tcp completes a transmit-complete write before its target has looked at it). */
static int write_once(struct xt_ep *x, fi_addr_t peer, void *buf, size_t len, int *err_out)
{
	ssize_t rc;
	const double end = xt_now_s() + 30;
	struct iovec iov = {buf, len};
	struct fi_rma_iov rma = {0, len, key};
	struct fi_msg_rma m = {.msg_iov = &iov, .iov_count = 1, .addr = peer, .rma_iov = &rma,
			       .rma_iov_count = 1};
	while ((rc = fi_writemsg(x->ep, &m, FI_COMPLETION | FI_DELIVERY_COMPLETE)) == -FI_EAGAIN) {
		fi_cq_read(x->txcq, NULL, 0);
		XT_CHECK(xt_now_s() < end, "fi_write: -FI_EAGAIN for 30 s");
	}
	if (rc != 0) {
		*err_out = (int)-rc;
		return 0;
	}
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err = {0};
	const int n = xt_wait(x->txcq, &e, &err, 30); /* 0: an error completion */
	*err_out = n == 1 ? 0 : err.err;
	return n == 1;
}

int main(void)
{
	xt_init(240);
	const char *k = getenv("REFUSED_WRITE_KEY");
	if (k && *k)
		key = strtoull(k, NULL, 0);
	int sock;
	pid_t pid;
	xt_spawn(1, target, &sock, &pid);
	struct xt_ep x;
	xt_open_rma(&x);
	const fi_addr_t peer = xt_exchange(&x, sock, 0, NULL);
	unsigned char *buf = malloc(WRITE_LEN);
	unsigned char *sbuf = malloc(sizes[NSIZES - 1]), *rbuf = malloc(sizes[NSIZES - 1]);
	XT_CHECK(buf && sbuf && rbuf, "out of memory");

	xt_sync_progress(sock, x.txcq); /* registered */
	int err = 0;
	xt_fill(buf, WRITE_LEN, 1);
	XT_CHECK(write_once(&x, peer, buf, WRITE_LEN, &err), "the first write failed: %s",
		 fi_strerror(err));
	printf("refused_write: the first write completed\n");
	xt_sync_progress(sock, x.txcq);

	XT_CHECK(ask(sock, OP_REGISTER_NEW, &x) == 1, "registering anew");
	xt_fill(buf, WRITE_LEN, 2);
	const int done = write_once(&x, peer, buf, WRITE_LEN, &err);
	XT_CHECK(!done, "a write of %u bytes into a registration of %u completed", WRITE_LEN, SMALL);
	XT_CHECK(err == FI_EACCES, "the write past the new registration failed with %d (%s), not "
		 "FI_EACCES", err, fi_strerror(err));
	printf("refused_write: key 0x%llx, the write past the new registration failed with %d (%s)\n",
	       (unsigned long long)key, err, fi_strerror(err));
	XT_CHECK(ask(sock, OP_CHECK, &x) == 1, "the refused write changed the target's memory");

	exchange(&x, peer, 0, sbuf, rbuf);
	xt_fill(buf, SMALL, 9);
	XT_CHECK(write_once(&x, peer, buf, SMALL, &err), "a write into the new registration failed "
		 "after the refusal: %s", fi_strerror(err));
	XT_CHECK(ask(sock, OP_VERIFY_NEW, &x) == 1, "the write into the new registration");
	ask(sock, OP_QUIT, &x);
	xt_reap(1, &pid);
	xt_close(&x);
	xt_pass("a refused write costs that write alone: the pair's messages and writes carry on");
	return 0;
}
