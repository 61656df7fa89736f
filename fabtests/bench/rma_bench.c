/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * RMA latency and bandwidth for any libfabric provider (FI_PROVIDER selects it), two processes
 * on this host. A benchmark, not a test: it prints numbers and checks only that the data arrived.
 *
 *   rma_bench [sizes...]      (default: 8 B .. 4 MiB by powers of 4)
 * Output, one line per size:  size write_lat_us write_bw_MBps read_bw_MBps put_notify_lat_us
 *
 * write latency: half the round trip of a writedata ping-pong (each side waits for the other's
 *                remote CQ data, then writes back), the RMA analogue of fi_pingpong.
 * put-notify:    the same ping-pong with fi_write and then, at once, an 8-byte fi_send that
 *                tells the peer (which reads its memory when the message arrives: FI_ORDER_SAW
 *                puts the data ahead of the message), half the round trip.
 * bandwidth:     a window of WINDOW outstanding fi_write (or fi_read) of one size, repeated,
 *                bytes over wall time at the initiator; the target only progresses. Writes
 *                count at their (transmit) completion, as the provider reports it.
 * Environment: ITERS (ping-pong round trips, default 2000), WINDOW (default 64), PLACEMENT=S:R
 * (default 0:0): every source buffer S bytes past a page, every destination R bytes past one (the
 * placement sweeps are xfer_bench's: fabtests/bench/xfer_compare.sh).
 */
#include "xt.h"

#include <poll.h>
#include <rdma/fi_rma.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZE (4u << 20)
/* The registered buffer: destinations in the lower half, sources in the upper, each with a page
 * of room for the placement offsets, then a page for put-notify's messages. */
#define HALF (MAX_SIZE + 4096u)
#define NOTES (2 * HALF)
#define REGISTERED (NOTES + 4096u)

static int g_soff, g_roff; /* PLACEMENT=S:R */

struct side {
	struct xt_ep x;
	struct fid_mr *mr;
	void *desc;
	unsigned char *buf; /* registered: the remote target and the local source/result */
	uint64_t peer_addr, peer_key;
	fi_addr_t peer;
};

static void open_side(struct side *s, int sock, int first)
{
	struct fi_info *h = xt_hints();
	h->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	xt_open(&s->x, h, 0);
	fi_freeinfo(h);
	s->buf = aligned_alloc(4096, REGISTERED);
	XT_CHECK(s->buf, "out of memory");
	memset(s->buf, 0, REGISTERED);
	s->mr = xt_mr_reg_bound(&s->x, s->buf, REGISTERED, 7);
	s->desc = fi_mr_desc(s->mr);
	s->peer = xt_exchange(&s->x, sock, first, NULL);
	xt_exchange_region(&s->x, sock, s->buf, s->mr, &s->peer_addr, &s->peer_key);
}

/* Posts until accepted, progressing the CQ meanwhile; returns completions reaped while waiting. */
#define POST(s, call)                                                                  \
	({                                                                             \
		ssize_t rc_;                                                           \
		int reaped_ = 0;                                                       \
		while ((rc_ = (call)) == -FI_EAGAIN) {                                 \
			struct fi_cq_tagged_entry e_;                                  \
			if (fi_cq_read((s)->x.txcq, &e_, 1) == 1)                      \
				reaped_++;                                             \
		}                                                                      \
		XT_CHECK(rc_ == 0, "%s = %zd (%s)", #call, rc_, fi_strerror((int)-rc_)); \
		reaped_;                                                               \
	})

static void reap(struct side *s, int n)
{
	struct fi_cq_tagged_entry e[16];
	while (n > 0) {
		ssize_t got = fi_cq_read(s->x.txcq, e, 16);
		if (got > 0)
			n -= (int)got;
		else if (got != -FI_EAGAIN) {
			struct fi_cq_err_entry err = {0};
			fi_cq_readerr(s->x.txcq, &err, 0);
			XT_CHECK(0, "RMA error %d (%s)", err.err, fi_strerror(err.err));
		}
	}
}

/* Waits for one entry on the receive CQ: the peer's writedata (remote CQ data), or its message. */
static void wait_rx(struct side *s)
{
	struct fi_cq_tagged_entry e;
	for (;;) {
		ssize_t got = fi_cq_read(s->x.rxcq, &e, 1);
		if (got == 1)
			return;
		fi_cq_read(s->x.txcq, NULL, 0);
		XT_CHECK(got == -FI_EAGAIN, "rx CQ: %zd", got);
	}
}

/* The target of the bandwidth phase progresses until the initiator says done. */
static void serve_until(struct side *s, int sock)
{
	for (;;) {
		fi_cq_read(s->x.rxcq, NULL, 0);
		struct pollfd p = {.fd = sock, .events = POLLIN};
		if (poll(&p, 1, 0) == 1)
			break;
	}
	char c;
	xt_recv_all(sock, &c, 1);
}

static double pingpong(struct side *s, size_t size, int first, size_t iters)
{
	unsigned char *src = s->buf + HALF + g_soff;
	const uint64_t dst = s->peer_addr + g_roff;
	double t0 = 0;
	for (size_t i = 0; i < iters + iters / 10; i++) {
		if (i == iters / 10)
			t0 = xt_now_s(); /* the first tenth warms up */
		if (first) {
			POST(s, fi_writedata(s->x.ep, src, size, s->desc, i, s->peer, dst, s->peer_key, NULL));
			reap(s, 1);
			wait_rx(s);
		} else {
			wait_rx(s);
			POST(s, fi_writedata(s->x.ep, src, size, s->desc, i, s->peer, dst, s->peer_key, NULL));
			reap(s, 1);
		}
	}
	return (xt_now_s() - t0) / iters / 2 * 1e6;
}

static double put_notify(struct side *s, size_t size, int first, size_t iters)
{
	unsigned char *src = s->buf + HALF + g_soff;
	const uint64_t dst = s->peer_addr + g_roff;
	uint64_t *note = (uint64_t *)(s->buf + NOTES), *got = note + 8;
	double t0 = 0;
	for (size_t i = 0; i < iters + iters / 10; i++) {
		if (i == iters / 10)
			t0 = xt_now_s(); /* the first tenth warms up */
		int done = POST(s, fi_recv(s->x.ep, got, sizeof *got, s->desc, s->peer, NULL));
		if (!first)
			wait_rx(s);
		*note = i;
		done += POST(s, fi_write(s->x.ep, src, size, s->desc, s->peer, dst, s->peer_key, NULL));
		done += POST(s, fi_send(s->x.ep, note, sizeof *note, s->desc, s->peer, NULL));
		if (first)
			wait_rx(s);
		XT_CHECK(*got == i, "put-notify message %zu says %llu", i, (unsigned long long)*got);
		reap(s, 2 - done);
	}
	return (xt_now_s() - t0) / iters / 2 * 1e6;
}

/* Writes go from our upper half into the peer's lower half; reads from the peer's upper half
 * into our lower half, so a write still landing (transmit completion does not wait for it)
 * can never mix into the data the reads check. */
static double bandwidth(struct side *s, size_t size, int read, size_t window)
{
	unsigned char *local = read ? s->buf + g_roff : s->buf + HALF + g_soff;
	const uint64_t remote = s->peer_addr + (read ? HALF + (uint64_t)g_soff : (uint64_t)g_roff);
	size_t rounds = (256u << 20) / (size * window);
	if (rounds < 4)
		rounds = 4;
	if (rounds > 2000)
		rounds = 2000;
	double t0 = 0;
	for (size_t r = 0; r < rounds + 1; r++) {
		if (r == 1)
			t0 = xt_now_s(); /* round 0 warms up */
		int done = 0;
		for (size_t w = 0; w < window; w++) {
			if (read)
				done += POST(s, fi_read(s->x.ep, local, size, s->desc, s->peer, remote, s->peer_key, NULL));
			else
				done += POST(s, fi_write(s->x.ep, local, size, s->desc, s->peer, remote, s->peer_key, NULL));
		}
		reap(s, (int)window - done);
	}
	return (double)size * window * rounds / (xt_now_s() - t0) / 1e6;
}

static size_t g_sizes[64], g_nsizes;

static int run(int first, int sock)
{
	struct side s;
	open_side(&s, sock, first);
	const size_t iters = xt_env_size("ITERS", 2000), window = xt_env_size("WINDOW", 64);
	if (first)
		printf("%-10s %14s %14s %14s %18s\n", "size", "write_lat_us", "write_MBps", "read_MBps",
		       "put_notify_lat_us");
	for (size_t i = 0; i < g_nsizes; i++) {
		const size_t size = g_sizes[i];
		const size_t rounds = size > (1u << 20) ? iters / 10 + 1 : iters; /* of each ping-pong */
		xt_sync(sock);
		const double lat = pingpong(&s, size, first, rounds);
		xt_sync(sock);
		xt_fill(s.buf + HALF + g_soff, size, (unsigned)size + 7);
		const double pn = put_notify(&s, size, first, rounds);
		/* the last message came after the last write, which carried this */
		XT_CHECK(xt_verify(s.buf + g_roff, size, (unsigned)size + 7), "put-notify data of %zu bytes", size);
		xt_sync(sock);
		double wbw = 0, rbw = 0;
		if (first) {
			xt_fill(s.buf + HALF + g_soff, size, (unsigned)size);
			wbw = bandwidth(&s, size, 0, window);
			xt_send_all(sock, "w", 1);
			xt_sync(sock);
			rbw = bandwidth(&s, size, 1, window);
			XT_CHECK(xt_verify(s.buf + g_roff, size, (unsigned)size ^ 1), "read data of %zu bytes", size);
			xt_send_all(sock, "r", 1);
			printf("%-10zu %14.2f %14.1f %14.1f %18.2f\n", size, lat, wbw, rbw, pn);
			fflush(stdout);
		} else {
			serve_until(&s, sock);
			XT_CHECK(xt_verify(s.buf + g_roff, size, (unsigned)size), "written data of %zu bytes", size);
			xt_fill(s.buf + HALF + g_soff, size, (unsigned)size ^ 1); /* what the reads bring back */
			xt_sync(sock);
			serve_until(&s, sock);
		}
	}
	xt_sync(sock);
	XT_RC(fi_close(&s.mr->fid));
	xt_close(&s.x);
	free(s.buf);
	return 0;
}

static int child(int index, int sock)
{
	(void)index;
	return run(0, sock);
}

int main(int argc, char **argv)
{
	xt_init(1800);
	if (getenv("PLACEMENT"))
		XT_CHECK(sscanf(getenv("PLACEMENT"), "%d:%d", &g_soff, &g_roff) == 2 && g_soff >= 0 && g_soff < 4096 &&
				 g_roff >= 0 && g_roff < 4096,
			 "PLACEMENT=S:R, offsets 0..4095");
	for (int i = 1; i < argc && g_nsizes < 64; i++)
		g_sizes[g_nsizes++] = strtoull(argv[i], NULL, 10);
	if (!g_nsizes)
		for (size_t s = 8; s <= MAX_SIZE; s *= 4)
			g_sizes[g_nsizes++] = s;
	for (size_t i = 0; i < g_nsizes; i++)
		XT_CHECK(g_sizes[i] >= 1 && g_sizes[i] <= MAX_SIZE, "sizes are 1..%u", MAX_SIZE);
	int sock;
	pid_t pid;
	xt_spawn(1, child, &sock, &pid);
	run(1, sock);
	xt_reap(1, &pid);
	return 0;
}
