/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Tagged and untagged messages of every size from 0 B (NULL buffer) to 16 MiB between two
 * processes, with the data, length, tag, context, flags and remote CQ data of every completion
 * checked. Covers the eager, medium and rendezvous paths, iovecs on both sides, and *msg calls.
 */
#include "xt.h"

#include <string.h>
#include <unistd.h>

static const size_t sizes[] = {0, 1, 7, 40, 41, 63, 64, 255, 1024, 4096, 8192, 8193, 16384,
			       65536, 1 << 20, (4 << 20) + 3, 16 << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define GUARD 64

static void send_one(struct xt_ep *x, fi_addr_t peer, int tagged, size_t len, unsigned seed, int with_data)
{
	void *buf = len ? malloc(len) : NULL;
	int ctx;
	if (len)
		xt_fill(buf, len, seed);
	ssize_t rc;
	do {
		if (tagged)
			rc = with_data ? fi_tsenddata(x->ep, buf, len, NULL, 0xabc0000 + seed, peer, seed, &ctx)
				       : fi_tsend(x->ep, buf, len, NULL, peer, seed, &ctx);
		else
			rc = with_data ? fi_senddata(x->ep, buf, len, NULL, 0xabc0000 + seed, peer, &ctx)
				       : fi_send(x->ep, buf, len, NULL, peer, &ctx);
		if (rc == -FI_EAGAIN)
			fi_cq_read(x->txcq, NULL, 0);
	} while (rc == -FI_EAGAIN);
	XT_RC(rc);
	struct fi_cq_tagged_entry e;
	XT_CHECK(xt_wait(x->txcq, &e, NULL, 30) == 1, "send of %zu failed", len);
	XT_CHECK(e.op_context == &ctx, "send context");
	XT_CHECK(e.flags & FI_SEND, "send flags 0x%llx", (unsigned long long)e.flags);
	XT_CHECK(e.flags & (tagged ? FI_TAGGED : FI_MSG), "send kind flag");
	free(buf);
}

static void recv_one(struct xt_ep *x, fi_addr_t peer, int tagged, size_t len, unsigned seed,
		     int with_data, int sock)
{
	unsigned char *buf = malloc(len + GUARD);
	memset(buf + len, 0x5a, GUARD);
	int ctx;
	void *target = len ? buf : NULL;
	if (tagged)
		XT_RC(fi_trecv(x->ep, target, len, NULL, peer, seed, 0, &ctx));
	else
		XT_RC(fi_recv(x->ep, target, len, NULL, peer, &ctx));
	xt_sync(sock); /* the receive is posted before the send starts: the expected path */
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	XT_CHECK(xt_wait(x->rxcq, &e, &err, 30) == 1, "receive of %zu: error %d", len, err.err);
	XT_CHECK(e.op_context == &ctx, "recv context");
	XT_CHECK(e.len == len, "recv len %zu, want %zu", e.len, len);
	XT_CHECK(e.flags & FI_RECV, "recv flags");
	XT_CHECK(e.flags & (tagged ? FI_TAGGED : FI_MSG), "recv kind flag 0x%llx", (unsigned long long)e.flags);
	if (tagged)
		XT_CHECK(e.tag == seed, "tag %llu, want %u", (unsigned long long)e.tag, seed);
	if (with_data) {
		XT_CHECK(e.flags & FI_REMOTE_CQ_DATA, "FI_REMOTE_CQ_DATA missing");
		XT_CHECK(e.data == 0xabc0000 + seed, "cq data 0x%llx", (unsigned long long)e.data);
	} else {
		XT_CHECK(!(e.flags & FI_REMOTE_CQ_DATA), "unexpected FI_REMOTE_CQ_DATA");
	}
	XT_CHECK(xt_verify(buf, len, seed), "payload of %zu bytes corrupted", len);
	for (int i = 0; i < GUARD; i++)
		XT_CHECK(buf[len + i] == 0x5a, "wrote past the buffer");
	free(buf);
}

static void iov_case(struct xt_ep *x, fi_addr_t peer, int sender, int sock)
{
	/* 3 segments of unequal size on both sides, cut at different places, via *msg calls. */
	const size_t total = 100000 + 3;
	unsigned char *flat = malloc(total);
	int ctx;
	if (sender) {
		xt_fill(flat, total, 77);
		struct iovec iov[3] = {{flat, 10}, {flat + 10, 60000}, {flat + 60010, total - 60010}};
		struct fi_msg_tagged m = {.msg_iov = iov, .iov_count = 3, .addr = peer, .tag = 77,
					  .context = &ctx, .data = 0x77};
		xt_sync(sock);
		XT_POST(x->txcq, fi_tsendmsg(x->ep, &m, FI_COMPLETION | FI_REMOTE_CQ_DATA));
		XT_CHECK(xt_wait(x->txcq, NULL, NULL, 30) == 1, "iov send");
	} else {
		memset(flat, 0, total);
		struct iovec iov[3] = {{flat, 50000}, {flat + 50000, 3}, {flat + 50003, total - 50003}};
		struct fi_msg_tagged m = {.msg_iov = iov, .iov_count = 3, .addr = peer, .tag = 77,
					  .context = &ctx};
		XT_RC(fi_trecvmsg(x->ep, &m, FI_COMPLETION));
		xt_sync(sock);
		struct fi_cq_tagged_entry e;
		XT_CHECK(xt_wait(x->rxcq, &e, NULL, 30) == 1, "iov recv");
		XT_CHECK(e.len == total && e.data == 0x77 && (e.flags & FI_REMOTE_CQ_DATA), "iov completion");
		XT_CHECK(xt_verify(flat, total, 77), "iov payload");
	}
	free(flat);
}

/* The untagged iov and msg forms, and the inject forms with CQ data. */
static void msg_forms_case(struct xt_ep *x, fi_addr_t peer, int sender, int sock)
{
	unsigned char a[3000], b[5000], small[16];
	int ctx;
	if (sender) {
		xt_fill(a, sizeof a, 31);
		xt_fill(b, sizeof b, 32);
		xt_fill(small, sizeof small, 33);
		struct iovec iov[2] = {{a, sizeof a}, {b, sizeof b}};
		xt_sync(sock);
		XT_POST(x->txcq, fi_sendv(x->ep, iov, NULL, 2, peer, &ctx));
		XT_CHECK(xt_wait(x->txcq, NULL, NULL, 30) == 1, "fi_sendv");
		struct fi_msg m = {.msg_iov = iov, .iov_count = 1, .addr = peer, .context = &ctx, .data = 0x55};
		XT_POST(x->txcq, fi_sendmsg(x->ep, &m, FI_COMPLETION | FI_REMOTE_CQ_DATA));
		XT_CHECK(xt_wait(x->txcq, NULL, NULL, 30) == 1, "fi_sendmsg");
		XT_POST(x->txcq, fi_injectdata(x->ep, small, sizeof small, 0x66, peer));
		XT_POST(x->txcq, fi_inject(x->ep, small, sizeof small, peer));
		XT_POST(x->txcq, fi_tinjectdata(x->ep, small, sizeof small, 0x77, peer, 5));
		xt_sync_progress(sock, x->txcq);
	} else {
		unsigned char got[8000];
		struct fi_cq_tagged_entry e;
		struct iovec iov[2] = {{got, 100}, {got + 100, sizeof got - 100}};
		XT_RC(fi_recvv(x->ep, iov, NULL, 2, peer, &ctx));
		xt_sync(sock);
		XT_CHECK(xt_wait(x->rxcq, &e, NULL, 30) == 1 && e.len == 8000 && (e.flags & FI_MSG), "fi_recvv");
		XT_CHECK(xt_verify(got, 3000, 31) && xt_verify(got + 3000, 5000, 32), "fi_sendv payload");
		struct fi_msg m = {.msg_iov = iov, .iov_count = 2, .addr = peer, .context = &ctx};
		XT_RC(fi_recvmsg(x->ep, &m, FI_COMPLETION));
		XT_CHECK(xt_wait(x->rxcq, &e, NULL, 30) == 1 && e.len == 3000 && e.data == 0x55 &&
			 (e.flags & FI_REMOTE_CQ_DATA), "fi_recvmsg with CQ data");
		XT_RC(fi_recv(x->ep, got, sizeof got, NULL, peer, &ctx));
		XT_CHECK(xt_wait(x->rxcq, &e, NULL, 30) == 1 && e.data == 0x66 && e.len == 16 &&
			 xt_verify(got, 16, 33), "fi_injectdata");
		XT_RC(fi_recv(x->ep, got, sizeof got, NULL, peer, &ctx));
		XT_CHECK(xt_wait(x->rxcq, &e, NULL, 30) == 1 && !(e.flags & FI_REMOTE_CQ_DATA), "fi_inject");
		XT_RC(fi_trecv(x->ep, got, sizeof got, NULL, peer, 5, 0, &ctx));
		XT_CHECK(xt_wait(x->rxcq, &e, NULL, 30) == 1 && e.data == 0x77 && e.tag == 5, "fi_tinjectdata");
		xt_sync_progress(sock, x->rxcq);
	}
}

static int run(int sender, int sock)
{
	struct xt_ep x;
	xt_open_default(&x, 0);
	fi_addr_t peer = xt_exchange(&x, sock, 1, NULL);
	for (int tagged = 1; tagged >= 0; tagged--) {
		for (int with_data = 0; with_data <= 1; with_data++) {
			for (size_t i = 0; i < NSIZES; i++) {
				unsigned seed = (unsigned)(i + 1 + 100 * with_data);
				if (sender) {
					xt_sync(sock);
					send_one(&x, peer, tagged, sizes[i], seed, with_data);
				} else {
					recv_one(&x, peer, tagged, sizes[i], seed, with_data, sock);
				}
			}
		}
		if (!sender)
			printf("PASS: %s sizes 0..16MiB, with and without CQ data\n", tagged ? "tagged" : "msg");
	}
	iov_case(&x, peer, sender, sock);
	if (!sender)
		xt_pass("iovecs and tsendmsg/trecvmsg");
	msg_forms_case(&x, peer, sender, sock);
	if (!sender)
		xt_pass("sendv/recvv, sendmsg/recvmsg, inject and injectdata forms");
	xt_sync(sock);
	xt_close(&x);
	return 0;
}

static int child(int index, int sock)
{
	(void)index;
	return run(1, sock);
}

int main(void)
{
	xt_init(150);
	int sock;
	pid_t pid;
	xt_spawn(1, child, &sock, &pid);
	run(0, sock);
	xt_reap(1, &pid);
	return 0;
}
