/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Message and RMA latency, bandwidth and message rate for any libfabric provider (FI_PROVIDER
 * selects it), two processes on this host, with the user buffers placed at chosen offsets past a
 * page. A benchmark, not a test: it never judges a time, but it checks the data of every size and
 * placement (see "Verification"), so a fast wrong answer fails instead of flattering.
 *
 *   xfer_bench -m MODE [options] [sizes...]     (sizes in bytes; K, M suffixes; default 1 .. 64M
 *                                                by powers of 2, "rate": 8)
 * Modes (one per run):
 *   tagged_lat    fi_tsend/fi_trecv ping-pong, each receive posted before the peer sends;
 *                 one-way latency (half the round trip), us
 *   tagged_unexp  the same, each message arriving unexpected (see "Unexpected" below), us
 *   msg_lat       fi_send/fi_recv ping-pong, receives posted first, us
 *   msg_unexp     fi_send/fi_recv, unexpected, us
 *   bw            streaming bandwidth, one direction: a window of sends, the receiver answers each
 *                 window with a short acknowledgement once all of it has arrived; MB/s (1e6 B/s)
 *   bibw          both directions at once: each side sends a window and receives the peer's;
 *                 bytes of both directions over the time, MB/s
 *   rate          bw reported as messages per second, millions (default size 8)
 *   rma_write_lat fi_writedata ping-pong (each side waits for the peer's remote CQ data), one
 *                 way, us
 *   rma_read_lat  one fi_read at a time, the whole operation (a read is a round trip), us
 *   rma_write_bw  a window of fi_write, each asking FI_DELIVERY_COMPLETE (counted once the
 *                 target has the data; -T: the provider's default transmit completion), MB/s
 *   rma_read_bw   a window of fi_read, MB/s
 * Message modes use tagged calls except msg_*; -M makes bw, bibw and rate untagged.
 * Receives name their source (FI_DIRECTED_RECV, as MPI's do when the source is known); -A posts
 * them with FI_ADDR_UNSPEC instead.
 *
 * Placement: -P S:R[,S:R...] runs only those placements: the source buffer S bytes past a page and
 * the destination buffer R bytes past a page (RMA: the local buffer of a write and the remote one
 * of a read are the sources). Default: the sweep, every pair of -o offsets (default
 * 0,8,16,24,40,63: 36 pairs) up to -F bytes (default 1M), above it the 12 pairs whose receive
 * offset is the send offset's own or the one half the list further (0:0 8:8 16:16 24:24 40:40
 * 63:63 0:24 8:40 16:63 24:0 40:8 63:16): every offset on both sides and six different relative
 * alignments within a cache line, at a third of the cost, where one iteration takes milliseconds
 * (the sizes above 1 MiB would otherwise take most of a full run's time).
 *
 * Iterations adapt to the size: a probe (1, 2, 4... iterations until they take 2 ms, at least 4
 * unless that takes 0.2 s, at most 64) times the first placement of each size (its median
 * iteration) and every placement of that size
 * then runs the same count, as
 * many iterations as fit -t milliseconds (default 15), at least -n (default 5; 3 from 16 MiB) and
 * at most 100000, after a warm-up of a tenth of that, in one sequence. A placement's value is the
 * median over its timed iterations (a bandwidth iteration is a window: robust against a
 * neighbour's interruption on a shared machine); the summary of a size is the median over
 * placements and the worst placement.
 * Bandwidth windows are -w messages (default 64) but at most -W bytes in flight (default 64M:
 * from 2 MiB the window halves as the size doubles, never below 4), which keeps the sizes above
 * 1 MiB from taking most of a full run (32 messages of 2 MiB in flight are a full pipeline).
 * Like osu's, bw, bibw and rate reuse one send and one receive buffer for every message of a cell,
 * so the data stays in the caches. -C BYTES (say 64M, twice this machine's L3) cycles instead:
 * message k of a cell is sent from, and received into, buffer k modulo the number of page-aligned
 * buffers that fit BYTES (at the placement's offsets), so a buffer is cold again when it comes
 * round, as in an application that streams through more data than the caches hold.
 *
 * Unexpected: the sender stamps the time before its send call and, once the call returned, raises
 * a flag in memory both processes share. The receiver, progressing its completion queues all the
 * while, waits for the flag, then goes on progressing for -d microseconds (default 10: the message,
 * or its header, has arrived and been taken in by the provider), and only then posts the receive.
 * The one-way latency is the whole time from the send call to the receive's completion, minus the
 * receiver's deliberate wait (from seeing the flag to posting). What a provider moves while the
 * receiver waits counts in its favour, as it would in an application that posts late. With exanet
 * the output shows the share of receives that found their message already waiting (counters).
 *
 * Verification: before each placement each side fills its source buffer with data of its own
 * for that size, placement and direction; after the timed loop, outside it, the receiving side
 * checks its destination buffer (the last transfer's data). A path that moved nothing leaves the
 * data of the previous placement, or of the probe, which have other seeds, and the run fails.
 * With -T an RMA write may complete before the target placed it: the target then progresses up
 * to two seconds for the data to appear.
 *
 * Output: "# ..." header lines, then one line per placement and size as it completes:
 *   SIZE S:R VALUE ITERS FAST_PCT
 * (FAST_PCT: exanet's counters, the share of messages that found their receive already posted,
 * both sides: 100 in the posted modes, 0 when every message arrived unexpected; NA for other
 * providers and for bandwidth and RMA), and after each size a summary line
 *   # SIZE median VALUE worst VALUE at S:R (N placements, T s)
 * Environment: FI_PROVIDER (default exanet), BIND=1 pins the processes to cpus 0 and 1,
 * XFER_TIMEOUT (seconds for the whole run, default 3600), XFER_DEBUG=1 prints the first samples
 * of every cell on stderr, XFER_DECILES=1 the deciles of every cell's timed samples (minimum,
 * 10 %, ... maximum) on stderr: whether a median hides two regimes (a run that changes state
 * part-way through, or from one run to the next).
 *
 * Two hosts: by default the program forks its second side here and the two share memory (the
 * unexpected modes' flags, the one-sided modes' stop signal). -S PORT instead runs only the
 * follower, which listens on TCP PORT (every address) for one leader; -c HOST:PORT runs only the
 * leader, which connects to it, times and prints. The two may then run on different hosts (or
 * network namespaces, fabtests/bench/net_compare.sh): the TCP connection carries what the
 * socketpair carried (endpoint names, the barriers, the counters). Only the modes that need no
 * shared memory run so: tagged_lat, msg_lat, bw, bibw, rate, rma_write_lat; the others are
 * refused with an error. Both sides need the same mode, options and sizes. In this form each line
 * has a sixth column RTR_PCT: exanet's share of data messages written straight into a receive
 * buffer its RTR announced (counter ri_recv, both sides; receiver-initiated rendezvous), NA
 * elsewhere.
 */
#define _GNU_SOURCE
#include "xt.h"

#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rdma/fi_ext_exanet.h>
#include <rdma/fi_rma.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096
#define TAG_DATA 0x5eedull
#define TAG_ACK 0xacdull
#define MAX_PLACEMENTS 64
#define MAX_SIZES 64
#define MAX_ITERS 100000

enum mode {
	TAGGED_LAT, TAGGED_UNEXP, MSG_LAT, MSG_UNEXP, BW, BIBW, RATE,
	RMA_WRITE_LAT, RMA_READ_LAT, RMA_WRITE_BW, RMA_READ_BW, NMODES
};
static const char *mode_names[NMODES] = {
	"tagged_lat", "tagged_unexp", "msg_lat", "msg_unexp", "bw", "bibw", "rate",
	"rma_write_lat", "rma_read_lat", "rma_write_bw", "rma_read_bw"};
static const char *mode_units[NMODES] = {
	"us", "us", "us", "us", "MBps", "MBps", "Mmsgps", "us", "us", "MBps", "MBps"};

static struct {
	int mode;
	int untagged, any_source, transmit_complete;
	size_t sizes[MAX_SIZES], nsizes;
	int offsets[16], noffsets;
	int fixed[MAX_PLACEMENTS][2], nfixed; /* -P */
	size_t full_max;
	double cell_ms, delay_us;
	size_t min_iters, window, window_bytes;
	size_t max_size;
	size_t cycle_bytes; /* -C: the bandwidth modes' buffers cycle through this much memory */
	const char *serve_port, *connect_to; /* -S, -c: one side of two hosts */
} opt = {.mode = -1, .full_max = 1u << 20, .cell_ms = 15, .delay_us = 10, .min_iters = 5,
	 .window = 64, .window_bytes = 64u << 20};

/* What the two processes share besides the socket: the unexpected mode's flags, stamps and
 * half-trip times, and the one-sided modes' "stop serving" generation. */
struct shared {
	volatile uint64_t seq[2];  /* messages each side has posted */
	volatile double stamp[2];  /* when each side called its last send */
	volatile double half[2];   /* the follower's last half-trip latency */
	volatile uint64_t stop_gen; /* the initiator of a one-sided phase raises it when done */
};
static struct shared *shr;
static double g_iter_us; /* the leader's median iteration time in the last cell */
static double g_rtr_pct; /* the last cell's RTR share (two hosts; -1: none) */

/* Everything of one process. */
struct side {
	int first, me; /* first: the leader, which times and prints; me: 0 leader, 1 follower */
	int sock;
	struct xt_ep x;
	fi_addr_t peer, rpeer; /* rpeer: what receives name (peer, or FI_ADDR_UNSPEC with -A) */
	int tagged;
	unsigned char *sbase, *rbase; /* page-aligned; the buffers are base + offset */
	size_t blen;
	unsigned char ack[64];
	struct fid_mr *mr_s, *mr_r;
	void *desc_s, *desc_r;
	uint64_t peer_saddr, peer_skey, peer_raddr, peer_rkey; /* the peer's buffers, for RMA */
	uint64_t nsent, nseen; /* unexpected modes: own sends, peer's sends seen */
	/* -C: this cell's buffers (1 without -C), their spacing, the next one each way, and the
	 * buffer of the last receive posted (what the cell's check reads) */
	size_t cyc_n, cyc_stride, send_slot, recv_slot;
	unsigned char *last_rbuf;
	int tx_pending;
	double *t; /* the leader's samples, one per timed iteration */
	struct fi_exanet_counters_ops *cops;
};


static double median_of(double *v, size_t n)
{
	qsort(v, n, sizeof *v, xt_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The verification pattern, eight bytes at a time (64 MiB in milliseconds, unlike a byte loop):
 * word i of the message with this seed, stored at any alignment. */
static uint64_t pattern_word(uint64_t i, uint64_t seed)
{
	uint64_t z = (i + 1) * 0x9e3779b97f4a7c15ull ^ (seed + 1) * 0xbf58476d1ce4e5b9ull;
	return z ^ (z >> 29);
}

static void fill(unsigned char *p, size_t len, uint64_t seed)
{
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		const uint64_t w = pattern_word(i / 8, seed);
		memcpy(p + i, &w, 8);
	}
	const uint64_t w = pattern_word(i / 8, seed);
	memcpy(p + i, &w, len - i);
}

/* The index of the first wrong byte, or len when all are right. */
static size_t verify(const unsigned char *p, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i += 8) {
		const uint64_t w = pattern_word(i / 8, seed);
		const size_t n = len - i < 8 ? len - i : 8;
		if (memcmp(p + i, &w, n))
			for (size_t k = 0; k < n; k++)
				if (p[i + k] != ((const unsigned char *)&w)[k])
					return i + k;
	}
	return len;
}

/* The seed of the data one side sends at one size and placement; probes use other seeds. */
static uint64_t seed_of(size_t size, int s, int r, int from, int probe)
{
	return ((uint64_t)size << 24) ^ ((uint64_t)s << 16) ^ ((uint64_t)r << 8) ^ (uint64_t)from << 1 ^
	       (uint64_t)probe << 62;
}

/* Progresses the transmit side once, counting its completions out of tx_pending. */
static void progress(struct side *d)
{
	struct fi_cq_tagged_entry e[16];
	ssize_t n = fi_cq_read(d->x.txcq, e, 16);
	if (n > 0)
		d->tx_pending -= (int)n;
	else if (n != -FI_EAGAIN) {
		struct fi_cq_err_entry err = {0};
		fi_cq_readerr(d->x.txcq, &err, 0);
		XT_CHECK(0, "transmit completion error %d (%s)", err.err, fi_strerror(err.err));
	}
}

/* Both queues once, for a side that only has to keep the provider moving. */
static void progress_all(struct side *d)
{
	progress(d);
	fi_cq_read(d->x.rxcq, NULL, 0);
}

/* Waits for n receive completions (remote CQ data included), progressing the transmit side. */
static void wait_rx(struct side *d, size_t n)
{
	struct fi_cq_tagged_entry e[16];
	while (n > 0) {
		ssize_t got = fi_cq_read(d->x.rxcq, e, n < 16 ? n : 16);
		if (got > 0) {
			n -= (size_t)got;
		} else if (got == -FI_EAGAIN) {
			progress(d);
		} else {
			struct fi_cq_err_entry err = {0};
			fi_cq_readerr(d->x.rxcq, &err, 0);
			XT_CHECK(0, "receive completion error %d (%s)", err.err, fi_strerror(err.err));
		}
	}
}

/* Waits until at most `left` transmits (sends, writes, reads) are outstanding. */
static void wait_tx(struct side *d, int left)
{
	while (d->tx_pending > left) {
		progress(d);
		if (d->tx_pending > left)
			fi_cq_read(d->x.rxcq, NULL, 0);
	}
}

/* Posts until the provider takes it, progressing meanwhile (a provider answers -FI_EAGAIN while
 * earlier work drains). Only a count-0 read touches the receive queue: no completion is lost. */
#define POST(d, call)                                                                   \
	do {                                                                            \
		ssize_t rc_;                                                            \
		while ((rc_ = (call)) == -FI_EAGAIN)                                    \
			progress_all(d);                                                \
		XT_CHECK(rc_ == 0, "%s = %zd (%s)", #call, rc_, fi_strerror((int)-rc_)); \
	} while (0)

static void post_send(struct side *d, const void *buf, size_t len, uint64_t tag)
{
	if (d->tagged)
		POST(d, fi_tsend(d->x.ep, buf, len, NULL, d->peer, tag, NULL));
	else
		POST(d, fi_send(d->x.ep, buf, len, NULL, d->peer, NULL));
	d->tx_pending++;
}

static void post_recv(struct side *d, void *buf, size_t len, uint64_t tag)
{
	if (d->tagged)
		POST(d, fi_trecv(d->x.ep, buf, len, NULL, d->rpeer, tag, 0, NULL));
	else
		POST(d, fi_recv(d->x.ep, buf, len, NULL, d->rpeer, NULL));
}

/* RMA: writes go from our send buffer into the peer's receive buffer, reads from the peer's send
 * buffer into our receive buffer (the send buffer is always the source). */
static void post_write(struct side *d, int s, int r, size_t size, int data)
{
	if (!data && !opt.transmit_complete) {
		/* counted once the destination processed it (see -T) */
		struct iovec iov = {.iov_base = d->sbase + s, .iov_len = size};
		struct fi_rma_iov rma = {.addr = d->peer_raddr + r, .len = size, .key = d->peer_rkey};
		struct fi_msg_rma msg = {.msg_iov = &iov, .desc = &d->desc_s, .iov_count = 1, .addr = d->peer,
					 .rma_iov = &rma, .rma_iov_count = 1};
		POST(d, fi_writemsg(d->x.ep, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE));
	} else if (data)
		POST(d, fi_writedata(d->x.ep, d->sbase + s, size, d->desc_s, 7, d->peer, d->peer_raddr + r,
				     d->peer_rkey, NULL));
	else
		POST(d, fi_write(d->x.ep, d->sbase + s, size, d->desc_s, d->peer, d->peer_raddr + r, d->peer_rkey, NULL));
	d->tx_pending++;
}

static void post_read(struct side *d, int s, int r, size_t size)
{
	POST(d, fi_read(d->x.ep, d->rbase + r, size, d->desc_r, d->peer, d->peer_saddr + s, d->peer_skey, NULL));
	d->tx_pending++;
}

static int is_rma(void)
{
	return opt.mode >= RMA_WRITE_LAT;
}

static int is_bw(void)
{
	return opt.mode == BW || opt.mode == BIBW || opt.mode == RATE || opt.mode == RMA_WRITE_BW ||
	       opt.mode == RMA_READ_BW;
}

/* Messages per bandwidth window at this size (both processes compute it alike). */
static size_t window_of(size_t size)
{
	size_t w = opt.window;
	while (w > 4 && w * size > opt.window_bytes)
		w /= 2;
	return w;
}

/* -C: the bandwidth modes' k-th send and k-th receive of a cell use buffer k modulo the number
 * that fit the cycle (each a page-aligned stride apart, at the placement's offset), so the data
 * has left the caches before it is used again, as an application's would; without -C every
 * message of a cell reuses one buffer, as osu's bandwidth test does. */
static int cycles(void)
{
	return opt.cycle_bytes > 0 && (opt.mode == BW || opt.mode == BIBW || opt.mode == RATE);
}

static size_t cycle_stride(size_t size)
{
	return (size + PAGE - 1) / PAGE * PAGE + PAGE;
}

static size_t cycle_count(size_t size)
{
	if (!cycles())
		return 1;
	const size_t n = opt.cycle_bytes / cycle_stride(size);
	return n ? n : 1;
}

/* The buffer at `slot` (then the next slot, wrapping): set up once per cell in cell(), so the
 * timed loops pay an add and a compare per message, not a division. */
static unsigned char *next_buf(struct side *d, unsigned char *base, int off, size_t *slot)
{
	unsigned char *p = base + *slot * d->cyc_stride + off;
	if (++*slot == d->cyc_n)
		*slot = 0;
	return p;
}

static unsigned char *next_send_buf(struct side *d, int s)
{
	return next_buf(d, d->sbase, s, &d->send_slot);
}

static unsigned char *next_recv_buf(struct side *d, int r)
{
	return d->last_rbuf = next_buf(d, d->rbase, r, &d->recv_slot);
}

/* exanet's counters of this endpoint (all 0 elsewhere). */
static struct fi_exanet_counters counters(struct side *d)
{
	struct fi_exanet_counters c;
	memset(&c, 0, sizeof c);
	if (d->cops && d->cops->read(d->x.ep, &c, sizeof c))
		memset(&c, 0, sizeof c);
	return c;
}

/* Receives that found their receive posted (exanet's counters; 0 elsewhere). */
static uint64_t fast_recvs(struct side *d)
{
	return counters(d).fast_recv;
}

static int two_hosts(void)
{
	return opt.serve_port || opt.connect_to;
}

/* Data messages both sides receive in a cell of `all` iterations (acknowledgements left out):
 * the denominator of the RTR share. */
static double data_messages(size_t size, size_t all)
{
	switch (opt.mode) {
	case TAGGED_LAT: case MSG_LAT: return 2.0 * (double)all;
	case BW: case RATE: return (double)window_of(size) * (double)all;
	case BIBW: return 2.0 * (double)window_of(size) * (double)all;
	default: return 0;
	}
}

static void open_side(struct side *d)
{
	struct fi_info *h = xt_hints(); /* RDM, tagged and untagged, directed receives, mr_mode 0 */
	if (is_rma()) {
		h->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
		h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	}
	xt_open(&d->x, h, 0);
	fi_freeinfo(h);
	d->tagged = !(opt.mode == MSG_LAT || opt.mode == MSG_UNEXP || opt.untagged);
	d->blen = (opt.max_size + 64 + PAGE - 1) / PAGE * PAGE + PAGE;
	if (cycles() && d->blen < opt.cycle_bytes)
		d->blen = opt.cycle_bytes;
	d->sbase = aligned_alloc(PAGE, d->blen);
	d->rbase = aligned_alloc(PAGE, d->blen);
	XT_CHECK(d->sbase && d->rbase, "out of memory (%zu bytes twice)", d->blen);
	memset(d->sbase, 0, d->blen); /* every page touched before anything is timed */
	memset(d->rbase, 0, d->blen);
	d->peer = xt_exchange(&d->x, d->sock, d->first, NULL);
	d->rpeer = opt.any_source ? FI_ADDR_UNSPEC : d->peer;
	if (is_rma()) {
		const uint64_t acc = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
		XT_RC(fi_mr_reg(d->x.domain, d->sbase, d->blen, acc, 0, 1, 0, &d->mr_s, NULL));
		XT_RC(fi_mr_reg(d->x.domain, d->rbase, d->blen, acc, 0, 2, 0, &d->mr_r, NULL));
		if (d->x.info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
			XT_RC(fi_mr_bind(d->mr_s, &d->x.ep->fid, 0));
			XT_RC(fi_mr_enable(d->mr_s));
			XT_RC(fi_mr_bind(d->mr_r, &d->x.ep->fid, 0));
			XT_RC(fi_mr_enable(d->mr_r));
		}
		d->desc_s = fi_mr_desc(d->mr_s);
		d->desc_r = fi_mr_desc(d->mr_r);
		const int virt = (d->x.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
		uint64_t mine[4] = {virt ? (uint64_t)(uintptr_t)d->sbase : 0, fi_mr_key(d->mr_s),
				    virt ? (uint64_t)(uintptr_t)d->rbase : 0, fi_mr_key(d->mr_r)};
		uint64_t theirs[4];
		xt_send_all(d->sock, mine, sizeof mine);
		xt_recv_all(d->sock, theirs, sizeof theirs);
		d->peer_saddr = theirs[0];
		d->peer_skey = theirs[1];
		d->peer_raddr = theirs[2];
		d->peer_rkey = theirs[3];
	} else if (fi_open_ops(&d->x.ep->fid, FI_EXANET_COUNTERS_OPS, 0, (void **)&d->cops, NULL)) {
		d->cops = NULL;
	}
	d->t = malloc(sizeof(double) * (MAX_ITERS + MAX_ITERS / 10 + 2));
	XT_CHECK(d->t, "out of memory");
}

static void close_side(struct side *d)
{
	xt_close_ep(&d->x);
	if (d->mr_s) {
		XT_RC(fi_close(&d->mr_s->fid));
		XT_RC(fi_close(&d->mr_r->fid));
	}
	xt_close(&d->x);
	free(d->sbase);
	free(d->rbase);
	free(d->t);
}

/* --- the measurements: both processes run the same function for the same cell --- */

/* Ping-pong with each receive posted before the peer sends. */
static void lat_posted(struct side *d, int s, int r, size_t size, size_t n)
{
	unsigned char *sb = d->sbase + s, *rb = d->rbase + r;
	for (size_t i = 0; i < n; i++) {
		const double t0 = xt_now_us();
		if (d->first) {
			post_send(d, sb, size, TAG_DATA);
			wait_rx(d, 1);
			wait_tx(d, 0);
			if (i + 1 < n)
				post_recv(d, rb, size, TAG_DATA); /* before the peer's next answer */
			d->t[i] = (xt_now_us() - t0) / 2;
		} else {
			wait_rx(d, 1);
			if (i + 1 < n)
				post_recv(d, rb, size, TAG_DATA); /* before we answer */
			post_send(d, sb, size, TAG_DATA);
			wait_tx(d, 0);
		}
	}
}

/* One message sent for the unexpected ping-pong: the stamp before the call, the flag after. */
static void unexp_send(struct side *d, const void *buf, size_t size)
{
	shr->stamp[d->me] = xt_now_us();
	post_send(d, buf, size, TAG_DATA);
	__atomic_store_n(&shr->seq[d->me], ++d->nsent, __ATOMIC_RELEASE);
}

/* One message received late; returns its one-way latency without the deliberate wait. */
static double unexp_recv(struct side *d, void *buf, size_t size)
{
	const int peer = !d->me;
	while (__atomic_load_n(&shr->seq[peer], __ATOMIC_ACQUIRE) <= d->nseen)
		progress_all(d);
	const double seen = xt_now_us(), stamp = shr->stamp[peer];
	d->nseen++;
	while (xt_now_us() - seen < opt.delay_us)
		progress_all(d); /* the provider takes the message in */
	const double posted = xt_now_us();
	post_recv(d, buf, size, TAG_DATA);
	wait_rx(d, 1);
	return (seen - stamp) + (xt_now_us() - posted);
}

static void lat_unexpected(struct side *d, int s, int r, size_t size, size_t n)
{
	unsigned char *sb = d->sbase + s, *rb = d->rbase + r;
	for (size_t i = 0; i < n; i++) {
		if (d->first) {
			unexp_send(d, sb, size);
			const double back = unexp_recv(d, rb, size);
			d->t[i] = (shr->half[1] + back) / 2;
			wait_tx(d, 0);
		} else {
			shr->half[1] = unexp_recv(d, rb, size); /* published by the flag of our answer */
			wait_tx(d, 0);
			unexp_send(d, sb, size);
		}
	}
	wait_tx(d, 0);
}

/* One direction: windows of sends, each acknowledged once all of it arrived. The receiver keeps
 * the next window's receives posted before it acknowledges, so every message finds its receive. */
static void bw_one_way(struct side *d, int s, int r, size_t size, size_t n)
{
	const size_t w = window_of(size);
	/* the first window's receives (or acknowledgement) went up before the barrier */
	for (size_t i = 0; i < n; i++) {
		if (d->first) {
			const double t0 = xt_now_us();
			for (size_t k = 0; k < w; k++)
				post_send(d, next_send_buf(d, s), size, TAG_DATA);
			wait_tx(d, 0);
			wait_rx(d, 1);
			if (i + 1 < n)
				post_recv(d, d->ack, sizeof d->ack, TAG_ACK);
			d->t[i] = xt_now_us() - t0;
		} else {
			wait_rx(d, w);
			if (i + 1 < n)
				for (size_t k = 0; k < w; k++)
					post_recv(d, next_recv_buf(d, r), size, TAG_DATA);
			post_send(d, d->ack, 4, TAG_ACK);
			wait_tx(d, 0);
		}
	}
}

static void bw_pre(struct side *d, int r, size_t size)
{
	if (opt.mode == BIBW || !d->first)
		for (size_t k = 0; k < window_of(size); k++)
			post_recv(d, next_recv_buf(d, r), size, TAG_DATA);
	else
		post_recv(d, d->ack, sizeof d->ack, TAG_ACK);
}

/* Both directions: each side keeps the receives of the next window posted while it sends this
 * one (the peer cannot start its next window before ours arrived), waits for its own window to
 * be sent and the peer's to arrive. */
static void bw_both_ways(struct side *d, int s, int r, size_t size, size_t n)
{
	const size_t w = window_of(size);
	for (size_t i = 0; i < n; i++) {
		const double t0 = xt_now_us();
		if (i + 1 < n)
			for (size_t k = 0; k < w; k++)
				post_recv(d, next_recv_buf(d, r), size, TAG_DATA);
		for (size_t k = 0; k < w; k++)
			post_send(d, next_send_buf(d, s), size, TAG_DATA);
		wait_tx(d, 0);
		wait_rx(d, w);
		d->t[i] = xt_now_us() - t0;
	}
}

/* The target of one-sided operations progresses until the initiator says it is done. */
static void serve(struct side *d, uint64_t gen)
{
	while (__atomic_load_n(&shr->stop_gen, __ATOMIC_ACQUIRE) == gen)
		progress_all(d);
}

static void rma_write_pingpong(struct side *d, int s, int r, size_t size, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const double t0 = xt_now_us();
		if (d->first) {
			post_write(d, s, r, size, 1);
			wait_rx(d, 1); /* the peer's writedata */
			wait_tx(d, 0);
			d->t[i] = (xt_now_us() - t0) / 2;
		} else {
			wait_rx(d, 1);
			post_write(d, s, r, size, 1);
			wait_tx(d, 0);
		}
	}
}

static void rma_one_sided(struct side *d, int s, int r, size_t size, size_t n, uint64_t gen)
{
	if (!d->first) {
		serve(d, gen);
		return;
	}
	const size_t w = opt.mode == RMA_READ_LAT ? 1 : window_of(size);
	for (size_t i = 0; i < n; i++) {
		const double t0 = xt_now_us();
		for (size_t k = 0; k < w; k++)
			if (opt.mode == RMA_WRITE_BW)
				post_write(d, s, r, size, 0);
			else
				post_read(d, s, r, size);
		wait_tx(d, 0);
		d->t[i] = xt_now_us() - t0;
	}
	__atomic_add_fetch(&shr->stop_gen, 1, __ATOMIC_RELEASE);
}

/* Does this side receive data in this mode (and so verifies it)? */
static int receives_data(const struct side *d)
{
	switch (opt.mode) {
	case BW: case RATE: case RMA_WRITE_BW:
		return !d->first;
	case RMA_READ_LAT: case RMA_READ_BW:
		return d->first;
	default:
		return 1;
	}
}

/* One cell: a size and a placement, `warm` untimed iterations then n timed ones in one sequence,
 * over the very buffers and calls the mode measures. Before it each side fills its source with the
 * data of this cell; after it the receiving side checks what arrived (the data of the last
 * transfer: a path that moved nothing leaves the previous cell's data, which has another seed, and
 * fails). Returns the leader's value: the median over the timed iterations, in the mode's unit.
 * *fast_pct: the share of receives that found their message already waiting, from exanet's
 * counters of both sides (-1 where there are none). */
static double cell(struct side *d, size_t size, int s, int r, size_t warm, size_t n, int probe, double *fast_pct)
{
	d->cyc_n = cycle_count(size);
	d->cyc_stride = cycle_stride(size);
	d->send_slot = d->recv_slot = 0;
	d->last_rbuf = d->rbase + r;
	for (size_t k = 0; k < d->cyc_n; k++) /* every buffer a send of the cell may use */
		fill(d->sbase + k * d->cyc_stride + s, size, seed_of(size, s, r, d->me, probe));
	const uint64_t gen = __atomic_load_n(&shr->stop_gen, __ATOMIC_ACQUIRE);
	const uint64_t fast0 = fast_recvs(d);
	const uint64_t ri0 = counters(d).ri_recv;
	const size_t all = warm + n;
	switch (opt.mode) {
	case TAGGED_LAT: case MSG_LAT: post_recv(d, d->rbase + r, size, TAG_DATA); break;
	case BW: case RATE: case BIBW: bw_pre(d, r, size); break;
	default: break;
	}
	xt_sync_progress(d->sock, d->x.rxcq);
	switch (opt.mode) {
	case TAGGED_LAT: case MSG_LAT: lat_posted(d, s, r, size, all); break;
	case TAGGED_UNEXP: case MSG_UNEXP: lat_unexpected(d, s, r, size, all); break;
	case BW: case RATE: bw_one_way(d, s, r, size, all); break;
	case BIBW: bw_both_ways(d, s, r, size, all); break;
	case RMA_WRITE_LAT: rma_write_pingpong(d, s, r, size, all); break;
	default: rma_one_sided(d, s, r, size, all, gen); break;
	}
	xt_sync_progress(d->sock, d->x.rxcq);
	if (receives_data(d)) {
		const uint64_t seed = seed_of(size, s, r, !d->me, probe);
		/* the buffer of the last receive posted (the bandwidth modes' last message) */
		unsigned char *const got = d->last_rbuf;
		size_t bad = verify(got, size, seed);
		/* With -T a write completes at its initiator before the target may have placed it:
		 * the data must still arrive, the target progressing, within two seconds. */
		for (const double t0 = xt_now_us(); bad != size && opt.transmit_complete && xt_now_us() - t0 < 2e6;
		     bad = verify(got, size, seed))
			progress_all(d);
		XT_CHECK(bad == size, "%s size %zu placement %d:%d%s: wrong data at byte %zu", mode_names[opt.mode], size,
			 s, r, probe ? " (probe)" : "", bad);
	}
	const double posted = is_rma() || is_bw() ? 0 : (double)all;
	*fast_pct = -1;
	if (d->cops && posted > 0) { /* both sides run the same provider: both have counters */
		uint64_t mine = fast_recvs(d) - fast0, theirs = 0;
		xt_send_all(d->sock, &mine, sizeof mine);
		xt_recv_all(d->sock, &theirs, sizeof theirs);
		*fast_pct = 100.0 * (double)(mine + theirs) / (2 * posted);
	}
	g_rtr_pct = -1;
	if (two_hosts() && d->cops && data_messages(size, all) > 0) {
		uint64_t mine = counters(d).ri_recv - ri0, theirs = 0;
		xt_send_all(d->sock, &mine, sizeof mine);
		xt_recv_all(d->sock, &theirs, sizeof theirs);
		g_rtr_pct = 100.0 * (double)(mine + theirs) / data_messages(size, all);
	}
	if (!d->first)
		return 0;
	if (getenv("XFER_DEBUG"))
		for (size_t i = 0; i < warm + n && i < 8; i++)
			fprintf(stderr, "t[%zu] = %g\n", i, d->t[i]);
	const double med = median_of(d->t + warm, n);
	if (getenv("XFER_DECILES") && n >= 10) { /* sorted by median_of */
		fprintf(stderr, "# %zu B deciles:", size);
		for (int k = 0; k <= 10; k++)
			fprintf(stderr, " %.4g", d->t[warm + (k == 10 ? n - 1 : k * n / 10)]);
		fprintf(stderr, "\n");
	}
	/* what one iteration costs, for the probe: a ping-pong sample is half a round trip, and the
	 * unexpected one leaves out the two deliberate waits */
	switch (opt.mode) {
	case TAGGED_LAT: case MSG_LAT: case RMA_WRITE_LAT: g_iter_us = 2 * med; break;
	case TAGGED_UNEXP: case MSG_UNEXP: g_iter_us = 2 * (med + opt.delay_us); break;
	default: g_iter_us = med;
	}
	if (!is_bw())
		return med;
	const size_t w = window_of(size);
	if (opt.mode == RATE)
		return (double)w / med; /* messages per microsecond: millions per second */
	return (opt.mode == BIBW ? 2.0 : 1.0) * (double)w * (double)size / med; /* bytes per us: MB/s */
}

/* The placements of one size: -P as given, else every pair of offsets up to -F bytes and the
 * twelve-pair subset above (each offset on both sides; the receive offset the send offset's own
 * or the one three places further in the list). */
static size_t placements_of(size_t size, int pl[][2])
{
	size_t np = 0;
	if (opt.nfixed) {
		for (int i = 0; i < opt.nfixed; i++) {
			pl[np][0] = opt.fixed[i][0];
			pl[np++][1] = opt.fixed[i][1];
		}
		return np;
	}
	const int no = opt.noffsets;
	for (int i = 0; i < no; i++)
		for (int j = 0; j < no; j++) {
			if (size > opt.full_max && j != i && j != (i + no / 2) % no)
				continue;
			pl[np][0] = opt.offsets[i];
			pl[np++][1] = opt.offsets[j];
		}
	return np;
}

static size_t clamp_iters(double n, size_t size)
{
	const size_t lo = size >= (16u << 20) && opt.min_iters > 3 ? 3 : opt.min_iters;
	if (n < (double)lo)
		return lo;
	if (n > MAX_ITERS)
		return MAX_ITERS;
	return (size_t)n;
}

static void run(struct side *d)
{
	open_side(d);
	if (getenv("BIND") && atoi(getenv("BIND"))) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(d->me % (int)sysconf(_SC_NPROCESSORS_ONLN), &set);
		XT_CHECK(sched_setaffinity(0, sizeof set, &set) == 0, "sched_setaffinity");
	}
	if (d->first) {
		printf("# xfer_bench mode %s provider %s unit %s%s%s\n", mode_names[opt.mode],
		       d->x.info->fabric_attr->prov_name, mode_units[opt.mode], d->tagged ? " tagged" : " untagged",
		       opt.any_source ? " any-source" : "");
		printf("# size placement value iters fast_pct%s\n", two_hosts() ? " rtr_pct" : "");
	}
	static int pl[MAX_PLACEMENTS][2];
	static double val[MAX_PLACEMENTS];
	if (two_hosts() && opt.nsizes > 0) {
		/* Over a network the first transfer to a peer sets up its connection (milliseconds): a
		 * probe that included it would cut the first size to the minimum of iterations. */
		double fast;
		placements_of(opt.sizes[0], pl);
		cell(d, opt.sizes[0], pl[0][0], pl[0][1], 1, 1, 1, &fast);
	}
	for (size_t k = 0; k < opt.nsizes; k++) {
		const size_t size = opt.sizes[k];
		const size_t np = placements_of(size, pl);
		const double began = xt_now_us();
		double fast;
		/* The probe: the first placement, 1, 2, 4... iterations until they take 2 ms; the
		 * leader decides and tells the follower. */
		size_t n = 1;
		double per = 0;
		for (;;) {
			const double t0 = xt_now_us();
			cell(d, size, pl[0][0], pl[0][1], 1, n, 1, &fast);
			uint64_t more = 0;
			if (d->first) {
				/* the median iteration, not the elapsed time: a neighbour's interruption of
				 * the probe must not cut every placement of the size to the minimum */
				per = g_iter_us > 0.01 ? g_iter_us : 0.01;
				const double spent = xt_now_us() - t0;
				more = n < 64 && (spent < 2000 || (n < 4 && spent < 200000));
			}
			if (d->first)
				xt_send_all(d->sock, &more, sizeof more);
			else
				xt_recv_all(d->sock, &more, sizeof more);
			if (!more)
				break;
			n *= 2;
		}
		uint64_t iters = d->first ? clamp_iters(opt.cell_ms * 1000 / per, size) : 0;
		if (d->first)
			xt_send_all(d->sock, &iters, sizeof iters);
		else
			xt_recv_all(d->sock, &iters, sizeof iters);
		const size_t warm = iters / 10 + 1;
		for (size_t p = 0; p < np; p++) {
			val[p] = cell(d, size, pl[p][0], pl[p][1], warm, iters, 0, &fast);
			if (d->first) {
				char f[16] = "NA";
				if (fast >= 0)
					snprintf(f, sizeof f, "%.0f", fast);
				if (two_hosts()) {
					char rp[16] = "NA";
					if (g_rtr_pct >= 0)
						snprintf(rp, sizeof rp, "%.0f", g_rtr_pct);
					printf("%zu %d:%d %.4g %zu %s %s\n", size, pl[p][0], pl[p][1], val[p], (size_t)iters,
					       f, rp);
				} else {
					printf("%zu %d:%d %.4g %zu %s\n", size, pl[p][0], pl[p][1], val[p], (size_t)iters, f);
				}
			}
		}
		if (d->first) {
			size_t worst = 0;
			for (size_t p = 1; p < np; p++)
				if (is_bw() ? val[p] < val[worst] : val[p] > val[worst])
					worst = p;
			const int ws = pl[worst][0], wr = pl[worst][1];
			const double wv = val[worst];
			printf("# %zu median %.4g worst %.4g at %d:%d (%zu placements, %.1f s)\n", size, median_of(val, np),
			       wv, ws, wr, np, (xt_now_us() - began) / 1e6);
			fflush(stdout);
		}
	}
	xt_sync_progress(d->sock, d->x.rxcq);
	close_side(d);
}

static int child(int index, int sock)
{
	(void)index;
	struct side d = {.first = 0, .me = 1, .sock = sock};
	run(&d);
	return 0;
}

/* The out-of-band connection of two hosts: small messages both ways (barriers), so no Nagle. */
static int oob_ready(int fd)
{
	const int one = 1;
	XT_CHECK(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0, "TCP_NODELAY");
	return fd;
}

/* -S PORT: waits (within XFER_TIMEOUT) for the one leader. */
static int accept_leader(const char *port)
{
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai;
	int rc = getaddrinfo(NULL, port, &hints, &ai);
	XT_CHECK(rc == 0, "-S %s: %s", port, gai_strerror(rc));
	int ls = socket(ai->ai_family, ai->ai_socktype, 0);
	const int one = 1;
	XT_CHECK(ls >= 0 && setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0, "socket");
	XT_CHECK(bind(ls, ai->ai_addr, ai->ai_addrlen) == 0, "-S %s: bind: %s", port, strerror(errno));
	XT_CHECK(listen(ls, 1) == 0, "listen");
	freeaddrinfo(ai);
	int fd = accept(ls, NULL, NULL);
	XT_CHECK(fd >= 0, "accept: %s", strerror(errno));
	close(ls);
	return oob_ready(fd);
}

/* -c HOST:PORT: connects to the follower, retrying for ten seconds while it starts. */
static int connect_leader(const char *host_port)
{
	char host[256];
	snprintf(host, sizeof host, "%s", host_port);
	char *colon = strrchr(host, ':');
	XT_CHECK(colon && colon[1], "-c %s: HOST:PORT", host_port);
	*colon = 0;
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
	int rc = getaddrinfo(host, colon + 1, &hints, &ai);
	XT_CHECK(rc == 0, "-c %s: %s", host_port, gai_strerror(rc));
	for (int attempt = 0;; attempt++) {
		int fd = socket(ai->ai_family, ai->ai_socktype, 0);
		XT_CHECK(fd >= 0, "socket");
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
			freeaddrinfo(ai);
			return oob_ready(fd);
		}
		XT_CHECK(attempt < 100, "-c %s: connect: %s", host_port, strerror(errno));
		close(fd);
		usleep(100000);
	}
}

static size_t parse_size(const char *a)
{
	char *end;
	double v = strtod(a, &end);
	switch (*end) {
	case 'k': case 'K': v *= 1024; break;
	case 'm': case 'M': v *= 1024 * 1024; break;
	case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
	case 0: break;
	default: XT_CHECK(0, "size %s: bytes, or with K, M or G", a);
	}
	XT_CHECK(v >= 1, "size %s: at least 1 byte", a);
	return (size_t)v;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: xfer_bench -m MODE [-P S:R,...] [-o OFFSETS] [-F BYTES] [-t MS] [-n N] [-w N] [-W BYTES]\n"
		"                  [-d US] [-C BYTES] [-M] [-A] [-T] [-S PORT | -c HOST:PORT] [sizes...]\n"
		"modes: tagged_lat tagged_unexp msg_lat msg_unexp bw bibw rate rma_write_lat rma_read_lat\n"
		"       rma_write_bw rma_read_bw   (see the comment at the top of xfer_bench.c)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int c;
	const char *offsets = "0,8,16,24,40,63";
	while ((c = getopt(argc, argv, "m:P:o:F:t:n:w:W:d:C:MATS:c:h")) != -1) {
		switch (c) {
		case 'm':
			for (int i = 0; i < NMODES; i++)
				if (!strcmp(optarg, mode_names[i]))
					opt.mode = i;
			if (opt.mode < 0)
				usage();
			break;
		case 'P':
			for (char *save = NULL, *t = strtok_r(optarg, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
				XT_CHECK(opt.nfixed < MAX_PLACEMENTS, "too many placements");
				XT_CHECK(sscanf(t, "%d:%d", &opt.fixed[opt.nfixed][0], &opt.fixed[opt.nfixed][1]) == 2,
					 "placement %s: S:R", t);
				opt.nfixed++;
			}
			break;
		case 'o': offsets = optarg; break;
		case 'F': opt.full_max = parse_size(optarg); break;
		case 't': opt.cell_ms = atof(optarg); break;
		case 'n': opt.min_iters = strtoull(optarg, NULL, 10); break;
		case 'w': opt.window = strtoull(optarg, NULL, 10); break;
		case 'W': opt.window_bytes = parse_size(optarg); break;
		case 'd': opt.delay_us = atof(optarg); break;
		case 'M': opt.untagged = 1; break;
		case 'A': opt.any_source = 1; break;
		case 'T': opt.transmit_complete = 1; break;
		case 'C': opt.cycle_bytes = parse_size(optarg); break;
		case 'S': opt.serve_port = optarg; break;
		case 'c': opt.connect_to = optarg; break;
		default: usage();
		}
	}
	if (opt.mode < 0)
		usage();
	{
		char buf[256];
		snprintf(buf, sizeof buf, "%s", offsets);
		for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			XT_CHECK(opt.noffsets < 16, "at most 16 offsets");
			opt.offsets[opt.noffsets++] = atoi(t);
		}
		XT_CHECK(opt.noffsets > 0, "no offsets");
	}
	for (int i = 0; i < opt.noffsets; i++)
		XT_CHECK(opt.offsets[i] >= 0 && opt.offsets[i] < PAGE, "offsets are 0..4095");
	for (int i = 0; i < opt.nfixed; i++)
		XT_CHECK(opt.fixed[i][0] >= 0 && opt.fixed[i][0] < PAGE && opt.fixed[i][1] >= 0 && opt.fixed[i][1] < PAGE,
			 "placements are 0..4095");
	XT_CHECK(opt.min_iters >= 1 && opt.window >= 1 && opt.window <= 512, "-n at least 1, -w 1..512");
	for (int i = optind; i < argc; i++) {
		XT_CHECK(opt.nsizes < MAX_SIZES, "at most %d sizes", MAX_SIZES);
		opt.sizes[opt.nsizes++] = parse_size(argv[i]);
	}
	if (opt.nsizes == 0) {
		if (opt.mode == RATE)
			opt.sizes[opt.nsizes++] = 8;
		else
			for (size_t s = 1; s <= (64u << 20); s *= 2)
				opt.sizes[opt.nsizes++] = s;
	}
	for (size_t i = 0; i < opt.nsizes; i++)
		if (opt.sizes[i] > opt.max_size)
			opt.max_size = opt.sizes[i];
	shr = mmap(NULL, sizeof *shr, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	XT_CHECK(shr != MAP_FAILED, "mmap of the shared flags");
	xt_init(getenv("XFER_TIMEOUT") ? atoi(getenv("XFER_TIMEOUT")) : 3600);
	if (two_hosts()) {
		XT_CHECK(!(opt.serve_port && opt.connect_to), "-S and -c: one side each");
		XT_CHECK(opt.mode == TAGGED_LAT || opt.mode == MSG_LAT || opt.mode == BW || opt.mode == BIBW ||
				 opt.mode == RATE || opt.mode == RMA_WRITE_LAT,
			 "-m %s needs both sides on one host (shared memory); with -S/-c: tagged_lat, msg_lat, "
			 "bw, bibw, rate, rma_write_lat",
			 mode_names[opt.mode]);
		struct side d = {.first = opt.connect_to != NULL, .me = opt.connect_to ? 0 : 1,
				 .sock = opt.connect_to ? connect_leader(opt.connect_to) : accept_leader(opt.serve_port)};
		run(&d);
		close(d.sock);
		return 0;
	}
	int sock;
	pid_t pid;
	xt_spawn(1, child, &sock, &pid);
	struct side d = {.first = 1, .me = 0, .sock = sock};
	run(&d);
	xt_reap(1, &pid);
	return 0;
}
