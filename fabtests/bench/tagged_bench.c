/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Tagged ping-pong with pre-posted, directed receives, for any libfabric provider (FI_PROVIDER
 * selects it), two processes on this host. Each side posts its next receive before the message
 * it is for can be sent (as MPI does with MPI_Irecv before the partner's MPI_Send), so a
 * receiver-initiated rendezvous can serve every large message. fi_pingpong cannot show that: its
 * receives name no source (FI_ADDR_UNSPEC), and a receive that may match any sender cannot tell
 * one sender where its buffer is.
 *
 *   tagged_bench [sizes...]      (default: 64 KiB .. 4 MiB by powers of 2)
 * Output, one line per size:  size lat_us ri_pct
 *   lat_us  half the round trip, median of the timed iterations
 *   ri_pct  exanet only: the share of rendezvous sends written straight into a receive buffer
 *           by its RTR (counters of both processes); NA for other providers
 * A benchmark, not a test: it checks only that the data arrived. ITERS (default 500).
 * VARIANTS="write read ...": one endpoint pair per exanet protocol variant, taking turns
 * iteration by iteration (paired measurement; one output line per size and variant, the variant
 * in a fourth column).
 * PENDING=N: each side first posts N more directed 64 KiB receives with other tags, which stay
 * posted through the whole run (an application with many receives up at once), and retires them
 * at the end; the latency then shows what every message pays for the receives that wait.
 * PLACEMENT=S:R (default 0:0): the send buffer S bytes past a page, the receive buffer R (the
 * sweeps over placements are xfer_bench's, fabtests/bench/xfer_compare.sh).
 * TAGGED_STAT=min: lat_us is the fastest timed iteration instead of the median (what a machine
 * shared with other work does not slow: fabtests/bench/link_model_check.sh).
 * LINK_POSITIONS="A B": with exanet's link model (FI_EXANET_LINK_MODEL=1), the first process
 * sits at A and the second at B (each X,Y,Z,FPGA, as FI_EXANET_LINK_POSITION takes it), so one
 * command measures a chosen distance (fabtests/bench/link_model_check.sh).
 */
#include "xt.h"

#include <rdma/fi_ext_exanet.h>
#include <string.h>
#include <time.h>

#define TAG 0x5eed
#define PENDING_BYTES 65536

static size_t g_sizes[64];
static size_t g_nsizes;


/* Rendezvous sends so far, and how many of them an RTR served; false without exanet. */
static int rendezvous_counts(struct xt_ep *x, uint64_t *all, uint64_t *ri)
{
	struct fi_exanet_counters_ops *ops;
	if (fi_open_ops(&x->ep->fid, FI_EXANET_COUNTERS_OPS, 0, (void **)&ops, NULL))
		return 0;
	struct fi_exanet_counters c;
	memset(&c, 0, sizeof c);
	if (ops->read(x->ep, &c, sizeof c))
		return 0;
	*all = c.rndv_sent + c.ri_sent;
	*ri = c.ri_sent;
	return 1;
}

/* Posts until the provider takes it, progressing both CQs meanwhile (shm and tcp answer
 * -FI_EAGAIN while earlier work drains). */
#define POST(x, call)                                                                   \
	do {                                                                            \
		ssize_t rc_;                                                            \
		while ((rc_ = (call)) == -FI_EAGAIN) {                                  \
			fi_cq_read((x)->txcq, NULL, 0);                                 \
			fi_cq_read((x)->rxcq, NULL, 0);                                 \
		}                                                                       \
		XT_CHECK(rc_ == 0, "%s = %zd (%s)", #call, rc_, fi_strerror((int)-rc_)); \
	} while (0)

static void wait_one(struct fid_cq *cq)
{
	struct fi_cq_tagged_entry e;
	ssize_t rc;
	while ((rc = fi_cq_read(cq, &e, 1)) == -FI_EAGAIN)
		;
	if (rc != 1) {
		struct fi_cq_err_entry err = {0};
		fi_cq_readerr(cq, &err, 0);
		XT_CHECK(0, "completion error %d (%s)", err.err, fi_strerror(err.err));
	}
}

/* One endpoint pair the ping-pong runs over: normally one; with VARIANTS, one per exanet
 * protocol variant, opened with FI_EXANET_PROTOCOL set to it. */
struct lane {
	struct xt_ep x;
	fi_addr_t peer;
	const char *variant; /* NULL: whatever the environment selects */
	unsigned char *rbase, *rbuf, *pbuf;
	double *t;
	uint64_t all0, ri0;
	int counted;
};

/* One round trip on a lane; `first` sends the ping. Each side has the next receive posted
 * before its partner sends. */
static void round_trip(struct lane *l, int first, const unsigned char *sbuf, size_t size, int last)
{
	struct xt_ep *x = &l->x;
	if (first) {
		POST(x, fi_tsend(x->ep, sbuf, size, NULL, l->peer, TAG, NULL));
		wait_one(x->txcq);
		wait_one(x->rxcq);
		if (!last)
			POST(x, fi_trecv(x->ep, l->rbuf, size, NULL, l->peer, TAG, 0, NULL)); /* the next one */
	} else {
		wait_one(x->rxcq);
		if (!last)
			POST(x, fi_trecv(x->ep, l->rbuf, size, NULL, l->peer, TAG, 0, NULL)); /* before we answer */
		POST(x, fi_tsend(x->ep, sbuf, size, NULL, l->peer, TAG, NULL));
		wait_one(x->txcq);
	}
}

/* Both sides run this. */
static int run(int first, int sock)
{
	/* VARIANTS="write read ...": the lanes take turns iteration by iteration, so a machine that
	 * changes speed during the run (frequency, placement) slows every variant alike and the
	 * ratios between them stay exact. */
	char variants[256] = "";
	if (getenv("VARIANTS"))
		snprintf(variants, sizeof variants, "%s", getenv("VARIANTS"));
	struct lane lanes[8];
	size_t nl = 0;
	for (char *save = NULL, *v = strtok_r(variants, " ", &save); v && nl < 8; v = strtok_r(NULL, " ", &save))
		lanes[nl++].variant = v;
	if (nl == 0)
		lanes[nl++].variant = NULL;
	size_t max = 0;
	for (size_t i = 0; i < g_nsizes; i++)
		if (g_sizes[i] > max)
			max = g_sizes[i];
	const size_t iters = getenv("ITERS") ? strtoull(getenv("ITERS"), NULL, 10) : 500;
	const size_t warm = iters / 10 + 1;
	const size_t pending = getenv("PENDING") ? strtoull(getenv("PENDING"), NULL, 10) : 0;
	int soff = 0, roff = 0;
	if (getenv("PLACEMENT"))
		XT_CHECK(sscanf(getenv("PLACEMENT"), "%d:%d", &soff, &roff) == 2 && soff >= 0 && soff < 4096 &&
				 roff >= 0 && roff < 4096,
			 "PLACEMENT=S:R, offsets 0..4095");
	if (getenv("LINK_POSITIONS")) {
		char a[64], b[64];
		XT_CHECK(sscanf(getenv("LINK_POSITIONS"), "%63s %63s", a, b) == 2,
			 "LINK_POSITIONS=\"X,Y,Z,F X,Y,Z,F\"");
		setenv("FI_EXANET_LINK_POSITION", first ? a : b, 1); /* read when the domain opens */
	}
	const size_t blen = (max + 4095) / 4096 * 4096 + 4096;
	unsigned char *sbase = aligned_alloc(4096, blen);
	XT_CHECK(sbase, "out of memory");
	unsigned char *sbuf = sbase + soff;
	for (size_t v = 0; v < nl; v++) {
		struct lane *l = &lanes[v];
		if (l->variant)
			setenv("FI_EXANET_PROTOCOL", l->variant, 1); /* read when the domain opens */
		struct fi_info *h = xt_hints(); /* FI_DIRECTED_RECV: receives name their source */
		h->domain_attr->threading = FI_THREAD_DOMAIN;
		xt_open(&l->x, h, 0);
		fi_freeinfo(h);
		l->peer = xt_exchange(&l->x, sock, first, NULL);
		l->rbase = aligned_alloc(4096, blen);
		l->rbuf = l->rbase ? l->rbase + roff : NULL;
		l->t = malloc(sizeof(double) * iters);
		l->pbuf = malloc(pending * PENDING_BYTES + 1);
		XT_CHECK(l->rbuf && l->t && l->pbuf, "out of memory");
		for (size_t i = 0; i < pending; i++)
			POST(&l->x, fi_trecv(l->x.ep, l->pbuf + i * PENDING_BYTES, PENDING_BYTES, NULL, l->peer,
					     TAG + 1 + i, 0, NULL));
	}
	if (first)
		printf("%-10s %12s %8s%s\n", "size", "lat_us", "ri_pct", lanes[0].variant ? "  variant" : "");
	for (size_t k = 0; k < g_nsizes; k++) {
		const size_t size = g_sizes[k];
		xt_fill(sbuf, size, (unsigned)k);
		/* The first receives go up before the barrier, so the peer's first sends find them. */
		for (size_t v = 0; v < nl; v++) {
			struct lane *l = &lanes[v];
			l->counted = rendezvous_counts(&l->x, &l->all0, &l->ri0);
			POST(&l->x, fi_trecv(l->x.ep, l->rbuf, size, NULL, l->peer, TAG, 0, NULL));
		}
		xt_sync_progress(sock, lanes[0].x.rxcq);
		for (size_t i = 0; i < warm + iters; i++)
			for (size_t j = 0; j < nl; j++) {
				struct lane *l = &lanes[(i + j) % nl]; /* each lane leads in turn */
				const double t0 = xt_now_us();
				round_trip(l, first, sbuf, size, 0);
				if (i >= warm)
					l->t[i - warm] = (xt_now_us() - t0) / 2;
			}
		for (size_t v = 0; v < nl; v++) {
			struct lane *l = &lanes[v];
			round_trip(l, first, sbuf, size, 1); /* retires the receives still posted */
			XT_CHECK(xt_verify(l->rbuf, size, (unsigned)k), "data of size %zu", size);
			uint64_t all1 = 0, ri1 = 0;
			if (l->counted)
				rendezvous_counts(&l->x, &all1, &ri1);
			/* Both processes' sends count: add the peer's deltas to ours. */
			uint64_t mine[2] = {all1 - l->all0, ri1 - l->ri0}, theirs[2];
			xt_send_all(sock, mine, sizeof mine);
			xt_recv_all(sock, theirs, sizeof theirs);
			if (first) {
				qsort(l->t, iters, sizeof *l->t, xt_cmp_double);
				const uint64_t all = mine[0] + theirs[0], ri = mine[1] + theirs[1];
				char pct[16] = "NA";
				if (l->counted && all)
					snprintf(pct, sizeof pct, "%.1f", 100.0 * (double)ri / (double)all);
				const int fastest = getenv("TAGGED_STAT") && !strcmp(getenv("TAGGED_STAT"), "min");
				printf("%-10zu %12.2f %8s%s%s\n", size, l->t[fastest ? 0 : iters / 2], pct, l->variant ? "  " : "",
				       l->variant ? l->variant : "");
				fflush(stdout);
			}
		}
		xt_sync_progress(sock, lanes[0].x.rxcq);
	}
	/* The pending receives go last: each side sends the other what they wait for. */
	unsigned char *src = calloc(1, PENDING_BYTES);
	XT_CHECK(src, "out of memory");
	for (size_t v = 0; v < nl; v++) {
		struct lane *l = &lanes[v];
		for (size_t i = 0; i < pending; i++)
			POST(&l->x, fi_tsend(l->x.ep, src, PENDING_BYTES, NULL, l->peer, TAG + 1 + i, NULL));
		for (size_t i = 0; i < pending; i++) {
			wait_one(l->x.txcq);
			wait_one(l->x.rxcq);
		}
	}
	xt_sync_progress(sock, lanes[0].x.rxcq);
	free(src);
	for (size_t v = 0; v < nl; v++) {
		struct lane *l = &lanes[v];
		xt_close(&l->x);
		free(l->rbase);
		free(l->pbuf);
		free(l->t);
	}
	free(sbase);
	return 0;
}

static int child(int i, int sock)
{
	(void)i;
	return run(0, sock);
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc && g_nsizes < 64; i++)
		g_sizes[g_nsizes++] = strtoull(argv[i], NULL, 10);
	if (g_nsizes == 0)
		for (size_t s = 64u << 10; s <= (4u << 20); s *= 2)
			g_sizes[g_nsizes++] = s;
	xt_init(1800);
	int sock;
	pid_t pid;
	xt_spawn(1, child, &sock, &pid);
	run(1, sock);
	xt_reap(1, &pid);
	return 0;
}
