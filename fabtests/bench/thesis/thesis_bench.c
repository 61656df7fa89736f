/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The point-to-point experiments of the ExaNeST write-based MPI thesis (research seed 000, §9.3)
 * over libfabric, two processes on this host, every exanet protocol family side by side: one
 * endpoint pair per variant, the pairs taking turns iteration by iteration, so a machine that
 * changes speed slows every variant alike and the ratios between them stay fair.
 *
 *   thesis_bench MODE [sizes...]     (sizes in bytes; default 64 .. 8192 by powers of 2)
 * Modes, each in the order of the thesis's programs (not tagged_bench's, which posts every
 * receive before the peer can send):
 *   lat   osu_latency: A sends, waits for its send, then posts its receive and waits; B posts its
 *         receive, waits, then answers. The receive for the next message is posted only after
 *         one's own send completed, so whether its RTR is at the sender in time is a race, as in
 *         the thesis (fast receives about 0.1% there). Value: half the round trip, us.
 *   bw    osu_bw: B posts a window of receives, A a window of sends; B answers each full window
 *         with a short acknowledgement, after which both start the next. Value: MB/s (1e6 B/s).
 *   ffr   the thesis's forced-fast-receive program: B posts its receive, then both pass a
 *         two-process barrier through the fabric (a 0-byte message each way: the RTR is ahead of
 *         B's barrier message on the same ordered path, so it is at A when A leaves the
 *         barrier), then A's send is timed. Values: send_us (A's send call to its completion,
 *         the thesis's timed MPI_Send) and deliver_us (A's send call to B's receive completion;
 *         both processes read one CLOCK_MONOTONIC).
 * Output, one line per size and variant:  MODE SIZE VARIANT VALUE [DELIVER_US] RI_PCT
 *   RI_PCT: the share of rendezvous sends (both processes) an RTR found waiting at the sender
 *   (the thesis's "fast receive", counted at the sender), from exanet's counters: ri_sent over
 *   ri_sent + rndv_sent. NA without exanet, or without rendezvous sends (eager sizes).
 * Environment:
 *   VARIANTS="write read optimistic write:any" (default): the exanet protocol families
 *     (FI_EXANET_PROTOCOL); ":any" posts the receives of the timed messages with FI_ADDR_UNSPEC
 *     (MPI_ANY_SOURCE), which keeps the receiver from sending an RTR.
 *   ITERS (lat, ffr; default 200), WINDOWS (bw; default 10), WINDOW (bw; default 64).
 *   PCTL (default 50, the median): each value is this percentile of the iterations' times,
 *     fastest first (bw: of the windows' times). A machine shared with other work only adds to a
 *     time, and under the link model the modelled delay is the same in every iteration, so a low
 *     percentile (run.sh takes 10) keeps the protocols' difference and drops most preemptions.
 *   LAT_POST_DELAY_US (lat): each process progresses this long after its send completed before
 *     it posts its next receive, as if a send completed only once its data was delivered (the
 *     emulated engine completes a DMA write when it is issued; run.sh's share-p2p_lat_late row).
 *   LINK_POSITIONS="A B": with FI_EXANET_LINK_MODEL=1, process A sits at A and B at B (each
 *     X,Y,Z,FPGA, as FI_EXANET_LINK_POSITION takes it).
 * A benchmark, not a test: it checks only that the data arrived.
 */
#define _GNU_SOURCE
#include "xt.h"

#include <sched.h>

#include <rdma/fi_ext_exanet.h>
#include <string.h>

#define TAG_DATA 0x7e51
#define TAG_SYNC 0x7e52
#define MAX_LANES 8
#define MAX_WINDOW 256

enum mode { MODE_LAT, MODE_BW, MODE_FFR };

static size_t g_sizes[64];
static size_t g_nsizes;

/* Each POST retries while the provider answers -FI_EAGAIN, progressing both queues. */
#define POST(x, call)                                                                   \
	do {                                                                            \
		ssize_t rc_;                                                            \
		while ((rc_ = (call)) == -FI_EAGAIN) {                                  \
			fi_cq_read((x)->txcq, NULL, 0);                                 \
			fi_cq_read((x)->rxcq, NULL, 0);                                 \
		}                                                                       \
		XT_CHECK(rc_ == 0, "%s = %zd (%s)", #call, rc_, fi_strerror((int)-rc_)); \
	} while (0)

/* Waits for one completion on `cq`, progressing `other` meanwhile: the read family's sender
 * completes only when the receiver's progress has sent its acknowledgement, and either side may
 * be the one that has to move. */
static void wait_one(struct fid_cq *cq, struct fid_cq *other)
{
	struct fi_cq_tagged_entry e;
	ssize_t rc;
	while ((rc = fi_cq_read(cq, &e, 1)) == -FI_EAGAIN)
		fi_cq_read(other, NULL, 0);
	if (rc != 1) {
		struct fi_cq_err_entry err = {0};
		fi_cq_readerr(cq, &err, 0);
		XT_CHECK(0, "completion error %d (%s)", err.err, fi_strerror(err.err));
	}
}

struct lane {
	struct xt_ep x;
	fi_addr_t peer;
	fi_addr_t src; /* what the timed receives name: the peer, or FI_ADDR_UNSPEC (":any") */
	char name[32];
	unsigned char *rbuf;
	double *t, *t2;
	uint64_t all0, ri0;
	int counted;
};

static int rendezvous_counts(struct lane *l, uint64_t *all, uint64_t *ri)
{
	struct fi_exanet_counters_ops *ops;
	if (fi_open_ops(&l->x.ep->fid, FI_EXANET_COUNTERS_OPS, 0, (void **)&ops, NULL))
		return 0;
	struct fi_exanet_counters c;
	memset(&c, 0, sizeof c);
	if (ops->read(l->x.ep, &c, sizeof c))
		return 0;
	*all = c.rndv_sent + c.ri_sent;
	*ri = c.ri_sent;
	return 1;
}

static void tx(struct lane *l, const void *buf, size_t size, uint64_t tag)
{
	POST(&l->x, fi_tsend(l->x.ep, buf, size, NULL, l->peer, tag, NULL));
}

static void rx(struct lane *l, void *buf, size_t size, fi_addr_t src, uint64_t tag)
{
	POST(&l->x, fi_trecv(l->x.ep, buf, size, NULL, src, tag, 0, NULL));
}

static double g_post_delay_us;

/* LAT_POST_DELAY_US: progress this long after one's send completed before posting the next
 * receive, as if the send had completed only when its data was delivered. */
static void post_delay(struct lane *l)
{
	if (g_post_delay_us <= 0)
		return;
	const double until = xt_now_us() + g_post_delay_us;
	while (xt_now_us() < until) {
		fi_cq_read(l->x.txcq, NULL, 0);
		fi_cq_read(l->x.rxcq, NULL, 0);
	}
}

/* One iteration of osu_latency; returns the one-way time (A only). */
static double lat_once(struct lane *l, int a, const unsigned char *sbuf, size_t size)
{
	struct xt_ep *x = &l->x;
	if (a) {
		const double t0 = xt_now_us();
		tx(l, sbuf, size, TAG_DATA);
		wait_one(x->txcq, x->rxcq);
		post_delay(l);
		rx(l, l->rbuf, size, l->src, TAG_DATA);
		wait_one(x->rxcq, x->txcq);
		return (xt_now_us() - t0) / 2;
	}
	rx(l, l->rbuf, size, l->src, TAG_DATA);
	wait_one(x->rxcq, x->txcq);
	tx(l, sbuf, size, TAG_DATA);
	wait_one(x->txcq, x->rxcq);
	post_delay(l); /* (the next iteration posts the receive) */
	return 0;
}

/* One window of osu_bw; returns its duration (A only). */
static double bw_once(struct lane *l, int a, const unsigned char *sbuf, size_t size, size_t window)
{
	struct xt_ep *x = &l->x;
	static char ack;
	if (a) {
		const double t0 = xt_now_us();
		for (size_t i = 0; i < window; i++)
			tx(l, sbuf, size, TAG_DATA);
		for (size_t i = 0; i < window; i++)
			wait_one(x->txcq, x->rxcq);
		rx(l, &ack, 0, l->peer, TAG_SYNC);
		wait_one(x->rxcq, x->txcq);
		return xt_now_us() - t0;
	}
	for (size_t i = 0; i < window; i++)
		rx(l, l->rbuf + i * size, size, l->src, TAG_DATA);
	for (size_t i = 0; i < window; i++)
		wait_one(x->rxcq, x->txcq);
	tx(l, &ack, 0, TAG_SYNC);
	wait_one(x->txcq, x->rxcq);
	return 0;
}

/* One forced-fast-receive iteration: A returns its send time and stamps its start in *t0;
 * B returns the time its receive completed. */
static double ffr_once(struct lane *l, int a, const unsigned char *sbuf, size_t size, double *t0)
{
	struct xt_ep *x = &l->x;
	static char token;
	if (!a)
		rx(l, l->rbuf, size, l->src, TAG_DATA); /* first: its RTR leads B's barrier message */
	rx(l, &token, 0, l->peer, TAG_SYNC);
	tx(l, &token, 0, TAG_SYNC);
	wait_one(x->txcq, x->rxcq);
	wait_one(x->rxcq, x->txcq); /* the peer's barrier message (B: the data comes after it) */
	if (a) {
		*t0 = xt_now_us();
		tx(l, sbuf, size, TAG_DATA);
		wait_one(x->txcq, x->rxcq);
		return xt_now_us() - *t0;
	}
	wait_one(x->rxcq, x->txcq);
	return xt_now_us();
}

/* The PCTL-th percentile of n times (nearest rank), fastest first. */
static double percentile(double *v, size_t n, double pctl)
{
	qsort(v, n, sizeof *v, xt_cmp_double);
	size_t k = (size_t)(pctl / 100.0 * (double)n + 0.5);
	k = k > 0 ? k - 1 : 0;
	return v[k < n ? k : n - 1];
}

static enum mode g_mode;

/* PIN (default 1): A on the first allowed CPU, B on the second. Unpinned, on this loaded
 * machine, whole runs of iterations took 4-6 ms each (a scheduler slice) with every RTR in time
 * (seen with LAT_POST_DELAY_US); pinned, none did in the same trials. That fits both processes,
 * which poll without ever blocking, landing on one CPU and handing over only when a slice ends. */
static void pin(int a)
{
	if (getenv("PIN") && !strcmp(getenv("PIN"), "0"))
		return;
	cpu_set_t allowed, one;
	if (sched_getaffinity(0, sizeof allowed, &allowed) || CPU_COUNT(&allowed) < 2)
		return;
	for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &allowed) && seen++ == (a ? 0 : 1)) {
			CPU_ZERO(&one);
			CPU_SET(cpu, &one);
			(void)sched_setaffinity(0, sizeof one, &one);
			return;
		}
}

static int run(int a, int sock)
{
	pin(a);
	char variants[256] = "write read optimistic write:any";
	if (getenv("VARIANTS"))
		snprintf(variants, sizeof variants, "%s", getenv("VARIANTS"));
	if (getenv("LINK_POSITIONS")) {
		char pa[64], pb[64];
		XT_CHECK(sscanf(getenv("LINK_POSITIONS"), "%63s %63s", pa, pb) == 2,
			 "LINK_POSITIONS=\"X,Y,Z,F X,Y,Z,F\"");
		setenv("FI_EXANET_LINK_POSITION", a ? pa : pb, 1); /* read when the domain opens */
	}
	const size_t iters = xt_env_size("ITERS", 200);
	const size_t windows = xt_env_size("WINDOWS", 10);
	const size_t window = xt_env_size("WINDOW", 64);
	XT_CHECK(iters > 0 && windows > 0 && window > 0 && window <= MAX_WINDOW, "ITERS, WINDOWS > 0, WINDOW 1..%d",
		 MAX_WINDOW);
	const size_t n = g_mode == MODE_BW ? windows : iters;
	const double pctl = getenv("PCTL") ? atof(getenv("PCTL")) : 50;
	g_post_delay_us = getenv("LAT_POST_DELAY_US") ? atof(getenv("LAT_POST_DELAY_US")) : 0;
	XT_CHECK(pctl > 0 && pctl <= 100, "PCTL: 0 < PCTL <= 100");
	size_t max = 0;
	for (size_t i = 0; i < g_nsizes; i++)
		max = g_sizes[i] > max ? g_sizes[i] : max;
	struct lane lanes[MAX_LANES];
	size_t nl = 0;
	char *save = NULL;
	for (char *v = strtok_r(variants, " ", &save); v && nl < MAX_LANES; v = strtok_r(NULL, " ", &save)) {
		struct lane *l = &lanes[nl++];
		memset(l, 0, sizeof *l);
		snprintf(l->name, sizeof l->name, "%s", v);
		char family[32];
		snprintf(family, sizeof family, "%s", v);
		char *colon = strchr(family, ':');
		const int any = colon && !strcmp(colon, ":any");
		XT_CHECK(!colon || any, "variant %s: the only suffix is :any", v);
		if (colon)
			*colon = 0;
		setenv("FI_EXANET_PROTOCOL", family, 1); /* read when the domain opens */
		struct fi_info *h = xt_hints();
		xt_open(&l->x, h, 0);
		fi_freeinfo(h);
		l->peer = xt_exchange(&l->x, sock, a, NULL);
		l->src = any ? FI_ADDR_UNSPEC : l->peer;
		l->rbuf = malloc(max * (g_mode == MODE_BW ? window : 1) + 1);
		l->t = malloc(sizeof(double) * n);
		l->t2 = malloc(sizeof(double) * n);
		XT_CHECK(l->rbuf && l->t && l->t2, "out of memory");
	}
	unsigned char *sbuf = malloc(max + 1);
	XT_CHECK(sbuf, "out of memory");
	for (size_t k = 0; k < g_nsizes; k++) {
		const size_t size = g_sizes[k];
		xt_fill(sbuf, size, (unsigned)k + 1);
		for (size_t v = 0; v < nl; v++)
			lanes[v].counted = rendezvous_counts(&lanes[v], &lanes[v].all0, &lanes[v].ri0);
		xt_sync_progress(sock, lanes[0].x.rxcq);
		const size_t warm = n / 10 + 1;
		for (size_t i = 0; i < warm + n; i++)
			for (size_t j = 0; j < nl; j++) {
				struct lane *l = &lanes[(i + j) % nl]; /* each lane leads in turn */
				double v = 0, t0 = 0;
				switch (g_mode) {
				case MODE_LAT:
					v = lat_once(l, a, sbuf, size);
					break;
				case MODE_BW:
					v = bw_once(l, a, sbuf, size, window);
					break;
				case MODE_FFR:
					v = ffr_once(l, a, sbuf, size, &t0);
					break;
				}
				if (i >= warm) {
					l->t[i - warm] = v;
					l->t2[i - warm] = t0;
				}
			}
		for (size_t v = 0; v < nl; v++) {
			struct lane *l = &lanes[v];
			if (!a)
				XT_CHECK(xt_verify(l->rbuf, size, (unsigned)k + 1), "%s: data of size %zu", l->name, size);
			uint64_t all1 = 0, ri1 = 0;
			if (l->counted)
				rendezvous_counts(l, &all1, &ri1);
			uint64_t mine[2] = {all1 - l->all0, ri1 - l->ri0}, theirs[2];
			xt_send_all(sock, mine, sizeof mine);
			xt_recv_all(sock, theirs, sizeof theirs);
			double deliver = 0;
			if (g_mode == MODE_FFR) {
				/* B's completion times come to A, which subtracts its send stamps. */
				if (a) {
					double *done = malloc(sizeof(double) * n);
					XT_CHECK(done, "out of memory");
					xt_recv_all(sock, done, sizeof(double) * n);
					for (size_t i = 0; i < n; i++)
						done[i] -= l->t2[i];
					deliver = percentile(done, n, pctl);
					free(done);
				} else {
					xt_send_all(sock, l->t, sizeof(double) * n);
				}
			}
			if (!a)
				continue;
			const uint64_t all = mine[0] + theirs[0], ri = mine[1] + theirs[1];
			char pct[16] = "NA";
			if (l->counted && all)
				snprintf(pct, sizeof pct, "%.1f", 100.0 * (double)ri / (double)all);
			const double m = percentile(l->t, n, pctl);
			switch (g_mode) {
			case MODE_LAT:
				printf("lat %zu %s %.3f %s\n", size, l->name, m, pct);
				break;
			case MODE_BW:
				printf("bw %zu %s %.3f %s\n", size, l->name, (double)size * (double)window / m, pct);
				break;
			case MODE_FFR:
				printf("ffr %zu %s %.3f %.3f %s\n", size, l->name, m, deliver, pct);
				break;
			}
			fflush(stdout);
		}
		xt_sync_progress(sock, lanes[0].x.rxcq);
	}
	for (size_t v = 0; v < nl; v++) {
		xt_close(&lanes[v].x);
		free(lanes[v].rbuf);
		free(lanes[v].t);
		free(lanes[v].t2);
	}
	free(sbuf);
	return 0;
}

static int child(int i, int sock)
{
	(void)i;
	return run(0, sock);
}

int main(int argc, char **argv)
{
	XT_CHECK(argc >= 2, "usage: thesis_bench lat|bw|ffr [sizes...]");
	if (!strcmp(argv[1], "lat"))
		g_mode = MODE_LAT;
	else if (!strcmp(argv[1], "bw"))
		g_mode = MODE_BW;
	else if (!strcmp(argv[1], "ffr"))
		g_mode = MODE_FFR;
	else
		XT_CHECK(0, "mode %s: lat, bw or ffr", argv[1]);
	for (int i = 2; i < argc && g_nsizes < 64; i++)
		g_sizes[g_nsizes++] = strtoull(argv[i], NULL, 10);
	if (g_nsizes == 0)
		for (size_t s = 64; s <= 8192; s *= 2)
			g_sizes[g_nsizes++] = s;
	xt_init(1800);
	int sock;
	pid_t pid;
	xt_spawn(1, child, &sock, &pid);
	run(1, sock);
	xt_reap(1, &pid);
	return 0;
}
