/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * MPI point-to-point benchmark of our own, two ranks: ping-pong latency and streaming bandwidth
 * (a window of Isends answered by one short acknowledgement), with the user buffers placed at
 * chosen offsets past a page boundary. A benchmark, not a test: it checks only that the data
 * arrived, and never judges a time.
 *
 *   mpirun -np 2 mpi_bench [options]
 *     -t lat|bw|all   what to measure (default all)
 *     -m MIN -M MAX   message sizes, powers of two from MIN to MAX (default 1 .. 4194304)
 *     -p LIST         buffer offsets past a page, comma separated (default 0,8,16,24,40,63); the
 *                     send and the receive buffer take every pair of them independently
 *     -P S:R          one placement only: send buffer S, receive buffer R bytes past a page
 *     -i N            ping-pong round trips per block at small sizes (default 2000; fewer for
 *                     large messages, at least 10)
 *     -n N            bandwidth windows per block at small sizes (default 100; at least 3)
 *     -w N            bandwidth window (default 64)
 *     -b N            timed blocks per placement (default 3)
 *     -r              the receiver reads every cache line of each message it receives (in the
 *                     bandwidth test, of the window's buffer after each window), as an application
 *                     would; without it (osu's convention) a single-copy transport that writes
 *                     straight into the receive buffer leaves the data in the sender's cache, and
 *                     large-message figures flatter it
 *     -v              also print every placement
 *
 * Each placement is timed in blocks; its figure is its best block (the placement's own cost, with
 * the interference of other processes on a shared machine filtered out). Across placements the
 * program reports the median and the worst, one line per size, as soon as the size is done:
 *   lat SIZE MEDIAN_US WORST_US WORST_PLACEMENT       (one-way latency: half a round trip)
 *   bw  SIZE MEDIAN_MBPS WORST_MBPS WORST_PLACEMENT   (MB/s = 1e6 bytes per second)
 * With -v, before each such line, "place KIND SIZE S:R VALUE" per placement.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_OFFSETS 16
#define TAG_DATA 11
#define TAG_ACK 12

static int rank;

static struct {
	int lat, bw;
	size_t min, max;
	int offsets[MAX_OFFSETS], noffsets;
	int fixed_send, fixed_recv; /* -P, or -1 */
	int iters, windows, window, blocks, verbose, touch;
} opt = {1, 1, 1, 4194304, {0, 8, 16, 24, 40, 63}, 6, -1, -1, 2000, 100, 64, 3, 0, 0};

static volatile unsigned char g_sink;

/* -r: one load per cache line of what arrived, so the data has to reach this core. */
static void touch(const unsigned char *buf, size_t size)
{
	unsigned char x = 0;
	for (size_t i = 0; i < size; i += 64)
		x ^= ((const volatile unsigned char *)buf)[i];
	g_sink = x;
}

static void usage_exit(const char *why)
{
	if (rank == 0)
		fprintf(stderr, "mpi_bench: %s (see the comment at the top of mpi_bench.c)\n", why);
	MPI_Finalize();
	exit(2);
}

static void parse(int argc, char **argv)
{
	int c;
	while ((c = getopt(argc, argv, "t:m:M:p:P:i:n:w:b:rv")) != -1) {
		switch (c) {
		case 't':
			opt.lat = !strcmp(optarg, "lat") || !strcmp(optarg, "all");
			opt.bw = !strcmp(optarg, "bw") || !strcmp(optarg, "all");
			if (!opt.lat && !opt.bw)
				usage_exit("-t takes lat, bw or all");
			break;
		case 'm': opt.min = strtoull(optarg, NULL, 0); break;
		case 'M': opt.max = strtoull(optarg, NULL, 0); break;
		case 'p': {
			char *s = optarg, *end;
			opt.noffsets = 0;
			while (*s && opt.noffsets < MAX_OFFSETS) {
				long v = strtol(s, &end, 0);
				if (end == s || v < 0 || v > 4095)
					usage_exit("-p takes offsets 0..4095, comma separated");
				opt.offsets[opt.noffsets++] = (int)v;
				s = *end == ',' ? end + 1 : end;
				if (*end && *end != ',')
					usage_exit("-p takes offsets 0..4095, comma separated");
			}
			if (!opt.noffsets)
				usage_exit("-p needs at least one offset");
			break;
		}
		case 'P':
			if (sscanf(optarg, "%d:%d", &opt.fixed_send, &opt.fixed_recv) != 2 ||
			    opt.fixed_send < 0 || opt.fixed_send > 4095 || opt.fixed_recv < 0 ||
			    opt.fixed_recv > 4095)
				usage_exit("-P takes SEND:RECV offsets 0..4095");
			break;
		case 'i': opt.iters = atoi(optarg); break;
		case 'n': opt.windows = atoi(optarg); break;
		case 'w': opt.window = atoi(optarg); break;
		case 'b': opt.blocks = atoi(optarg); break;
		case 'r': opt.touch = 1; break;
		case 'v': opt.verbose = 1; break;
		default: usage_exit("unknown option");
		}
	}
	if (opt.min < 1 || opt.max < opt.min || opt.max > ((size_t)1 << 30))
		usage_exit("sizes: 1 <= MIN <= MAX <= 1 GiB");
	if (opt.iters < 1 || opt.windows < 1 || opt.window < 1 || opt.blocks < 1)
		usage_exit("-i, -n, -w and -b take positive numbers");
}

/* A page-aligned region with room for MAX bytes at any offset up to 4095. */
static unsigned char *region(size_t max)
{
	void *p = NULL;
	long page = sysconf(_SC_PAGESIZE);
	if (posix_memalign(&p, (size_t)page, max + 2 * (size_t)page))
		return NULL;
	memset(p, 0, max + 2 * (size_t)page); /* every page touched before any timing */
	return p;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Round trips per block for a size: the full count up to 8 KiB, then a fixed byte budget. */
static int lat_iters(size_t size)
{
	size_t budget = (size_t)opt.iters * 8192 / (size > 8192 ? size : 8192);
	return budget < 10 ? 10 : (int)budget;
}

static int bw_windows(size_t size)
{
	size_t budget = (size_t)opt.windows * 16384 / (size > 16384 ? size : 16384);
	return budget < 3 ? 3 : (int)budget;
}

/* The bytes a message of SIZE carries in round I: both ranks can predict them. */
static unsigned char pattern(size_t size, int round)
{
	return (unsigned char)(size * 7 + (size_t)round * 13 + 1);
}

static void check_arrival(const unsigned char *buf, size_t size, int round, const char *what)
{
	unsigned char want = pattern(size, round);
	if (buf[0] != want || buf[size - 1] != want) {
		fprintf(stderr, "rank %d: %s of %zu bytes did not arrive (got %u/%u, want %u)\n", rank,
			what, size, buf[0], buf[size - 1], want);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
}

/* One-way latency in microseconds for one placement: the best of the blocks. */
static double latency(unsigned char *sbuf, unsigned char *rbuf, size_t size)
{
	const int peer = 1 - rank, iters = lat_iters(size), warmup = iters / 10 + 2;
	double best = 1e300;
	for (int b = 0; b < opt.blocks; b++) {
		memset(sbuf, pattern(size, b), size);
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = 0;
		for (int i = 0; i < warmup + iters; i++) {
			if (i == warmup)
				t0 = MPI_Wtime();
			if (rank == 0) {
				MPI_Send(sbuf, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD);
				MPI_Recv(rbuf, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
				if (opt.touch)
					touch(rbuf, size);
			} else {
				MPI_Recv(rbuf, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
				if (opt.touch)
					touch(rbuf, size);
				MPI_Send(sbuf, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD);
			}
		}
		double us = (MPI_Wtime() - t0) * 1e6 / (2.0 * iters);
		check_arrival(rbuf, size, b, "ping-pong message");
		if (us < best)
			best = us;
	}
	/* rank 0's clock decides; rank 1 learns the figure so both print the same thing */
	MPI_Bcast(&best, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	return best;
}

/* Streaming bandwidth in MB/s for one placement: rank 0 sends windows, rank 1 acknowledges each. */
static double bandwidth(unsigned char *sbuf, unsigned char *rbuf, size_t size, MPI_Request *req)
{
	const int peer = 1 - rank, windows = bw_windows(size), warmup = 2;
	double best = 0;
	for (int b = 0; b < opt.blocks; b++) {
		memset(sbuf, pattern(size, b), size);
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = 0;
		for (int i = 0; i < warmup + windows; i++) {
			if (i == warmup)
				t0 = MPI_Wtime();
			if (rank == 0) {
				for (int k = 0; k < opt.window; k++)
					MPI_Isend(sbuf, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD,
						  &req[k]);
				MPI_Waitall(opt.window, req, MPI_STATUSES_IGNORE);
				MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
			} else {
				for (int k = 0; k < opt.window; k++)
					MPI_Irecv(rbuf, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD,
						  &req[k]);
				MPI_Waitall(opt.window, req, MPI_STATUSES_IGNORE);
				if (opt.touch)
					touch(rbuf, size);
				MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD);
			}
		}
		double secs = MPI_Wtime() - t0;
		if (rank == 1)
			check_arrival(rbuf, size, b, "streamed message");
		double mbps = (double)size * opt.window * windows / secs / 1e6;
		if (mbps > best)
			best = mbps;
	}
	MPI_Bcast(&best, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	return best;
}

/* Runs every placement of one kind at one size and prints the summary line. */
static void sweep(int is_lat, size_t size, unsigned char *sbase, unsigned char *rbase,
		  MPI_Request *req)
{
	double values[MAX_OFFSETS * MAX_OFFSETS], sorted[MAX_OFFSETS * MAX_OFFSETS];
	int place_s[MAX_OFFSETS * MAX_OFFSETS], place_r[MAX_OFFSETS * MAX_OFFSETS], n = 0;
	if (opt.fixed_send >= 0) {
		place_s[0] = opt.fixed_send;
		place_r[0] = opt.fixed_recv;
		n = 1;
	} else {
		for (int i = 0; i < opt.noffsets; i++)
			for (int j = 0; j < opt.noffsets; j++) {
				place_s[n] = opt.offsets[i];
				place_r[n] = opt.offsets[j];
				n++;
			}
	}
	const char *kind = is_lat ? "lat" : "bw";
	int worst = 0;
	for (int k = 0; k < n; k++) {
		unsigned char *s = sbase + place_s[k], *r = rbase + place_r[k];
		values[k] = is_lat ? latency(s, r, size) : bandwidth(s, r, size, req);
		/* worst: the longest latency, the lowest bandwidth */
		if (is_lat ? values[k] > values[worst] : values[k] < values[worst])
			worst = k;
		if (opt.verbose && rank == 0)
			printf("place %s %zu %d:%d %.3f\n", kind, size, place_s[k], place_r[k], values[k]);
	}
	memcpy(sorted, values, sizeof(double) * (size_t)n);
	qsort(sorted, (size_t)n, sizeof(double), cmp_double);
	/* the median of an even count: the mean of the two middle values */
	double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
	if (rank == 0) {
		printf(is_lat ? "%s %zu %.3f %.3f %d:%d\n" : "%s %zu %.1f %.1f %d:%d\n", kind, size,
		       median, values[worst], place_s[worst], place_r[worst]);
		fflush(stdout);
	}
}

int main(int argc, char **argv)
{
	int size;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	parse(argc, argv);
	if (size != 2)
		usage_exit("run with exactly 2 ranks");
	unsigned char *sbase = region(opt.max), *rbase = region(opt.max);
	MPI_Request *req = calloc((size_t)opt.window, sizeof *req);
	if (!sbase || !rbase || !req)
		usage_exit("out of memory");
	if (rank == 0)
		printf("# mpi_bench: kind size median worst worst_placement(send:recv); lat in us "
		       "one way, bw in MB/s, window %d, %d block(s) per placement, received data %s\n",
		       opt.window, opt.blocks, opt.touch ? "read (-r)" : "not read");
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 0 ? !opt.lat : !opt.bw)
			continue;
		for (size_t s = opt.min; s <= opt.max; s *= 2)
			sweep(pass == 0, s, sbase, rbase, req);
	}
	free(req);
	free(sbase);
	free(rbase);
	MPI_Finalize();
	return 0;
}
