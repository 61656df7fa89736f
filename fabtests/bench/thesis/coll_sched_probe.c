/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Issue 16, the collectives against coll_model.py: does the way a rank waits for a send change
 * the time of Open MPI's reduce, allreduce and scatter on ranks that time-share the cores?
 *
 * Open MPI 4.1's tuned reduce (binomial), allreduce (recursive doubling) and scatter (binomial)
 * send with blocking sends; with pml cm and the ofi MTL a blocking send polls the provider's
 * completion queue until its send completes, while MPI_Wait goes through Open MPI's progress
 * loop, which yields the core when idle (mpi_yield_when_idle). This program runs the same
 * message schedule as those algorithms (coll_model.py describes them) twice: with MPI_Send, as
 * Open MPI does, and with MPI_Isend followed by MPI_Wait. The network is the same, the
 * messages are the same; only the waiting differs.
 *
 *   mpirun -np 16 ... build/fabtests/coll_sched_probe reduce|allreduce|scatter send|isend SIZE
 * Output (rank 0): "KIND WAIT SIZE AVG_US MIN_US MAX_US", timed as thesis_coll (a barrier, ITERS
 * / 10 + 1 untimed calls, ITERS timed; the mean over ranks of each rank's mean call time).
 * No reduction arithmetic (at most 2048 floats: microseconds against milliseconds of hops).
 * Built beside thesis_coll; its results of 2026-11-28 are in fabtests/bench/results/2026-11-28/.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int use_isend;

static void send_to(const void *buf, int n, int to)
{
	if (use_isend) {
		MPI_Request r;
		MPI_Isend(buf, n, MPI_BYTE, to, 7, MPI_COMM_WORLD, &r);
		MPI_Wait(&r, MPI_STATUS_IGNORE);
	} else {
		MPI_Send(buf, n, MPI_BYTE, to, 7, MPI_COMM_WORLD);
	}
}

/* Open MPI's in-order binomial tree rooted at 0: parent = rank without its lowest set bit (-1
 * for the root), children rank + 2^k for each 2^k below that bit, lowest first. */
static int in_order_tree(int rank, int size, int *kids, int *nk)
{
	for (int mask = 1; mask < size; mask <<= 1) {
		int remote = rank ^ mask;
		if (remote < rank)
			return remote;
		if (remote < size)
			kids[(*nk)++] = remote;
	}
	return -1;
}

static void reduce_once(char *sbuf, char *in0, char *in1, int n, int rank, int size)
{
	int kids[32], nk = 0;
	const int parent = in_order_tree(rank, size, kids, &nk);
	if (nk > 0) {
		MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
		char *in[2] = {in0, in1};
		int bi = 0;
		MPI_Irecv(in[bi], n, MPI_BYTE, kids[0], 7, MPI_COMM_WORLD, &req[bi]);
		for (int i = 1; i < nk; i++) {
			bi ^= 1;
			MPI_Irecv(in[bi], n, MPI_BYTE, kids[i], 7, MPI_COMM_WORLD, &req[bi]);
			MPI_Wait(&req[bi ^ 1], MPI_STATUS_IGNORE);
		}
		MPI_Wait(&req[bi], MPI_STATUS_IGNORE);
	}
	if (parent >= 0)
		send_to(sbuf, n, parent);
}

/* Binomial scatter over the same in-order tree: an even rank receives its subtree's blocks
 * (into room for all), then sends each child, lowest first, the blocks of the child's subtree;
 * an odd rank receives its block. (The blocks' contents are not arranged: timing only.) */
static void scatter_once(char *big, int n, int rank, int size)
{
	int kids[32], nk = 0;
	const int parent = in_order_tree(rank, size, kids, &nk);
	if (parent >= 0)
		MPI_Recv(big, rank % 2 ? n : n * size, MPI_BYTE, parent, 7, MPI_COMM_WORLD,
			 MPI_STATUS_IGNORE);
	for (int i = 0; i < nk; i++) {
		int blocks = kids[i] - rank < size - kids[i] ? kids[i] - rank : size - kids[i];
		send_to(big, n * blocks, kids[i]);
	}
}

/* Recursive doubling on a power of two: receive posted, send, wait for the receive. */
static void allreduce_once(char *sbuf, char *rbuf, int n, int rank, int size)
{
	for (int d = 1; d < size; d <<= 1) {
		MPI_Request r;
		MPI_Irecv(rbuf, n, MPI_BYTE, rank ^ d, 7, MPI_COMM_WORLD, &r);
		send_to(sbuf, n, rank ^ d);
		MPI_Wait(&r, MPI_STATUS_IGNORE);
	}
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc < 4 || (strcmp(argv[1], "reduce") && strcmp(argv[1], "allreduce") &&
			  strcmp(argv[1], "scatter")) ||
	    (strcmp(argv[2], "send") && strcmp(argv[2], "isend")) || (size & (size - 1))) {
		if (rank == 0)
			fprintf(stderr, "usage: coll_sched_probe reduce|allreduce|scatter send|isend SIZE "
					"(a power-of-two number of ranks)\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	const int kind = !strcmp(argv[1], "reduce") ? 0 : !strcmp(argv[1], "allreduce") ? 1 : 2;
	use_isend = !strcmp(argv[2], "isend");
	const int n = atoi(argv[3]);
	const int iters = getenv("ITERS") ? atoi(getenv("ITERS")) : 15;
	const int warm = iters / 10 + 1;
	char *a = calloc(1, (size_t)n + 1), *b = calloc(1, (size_t)n + 1), *c = calloc(1, (size_t)n + 1);
	char *big = calloc((size_t)size, (size_t)n + 1);
	if (!a || !b || !c || !big || iters <= 0 || n <= 0)
		MPI_Abort(MPI_COMM_WORLD, 1);
	double t0 = 0;
	MPI_Barrier(MPI_COMM_WORLD);
	for (int i = 0; i < warm + iters; i++) {
		if (i == warm)
			t0 = MPI_Wtime();
		if (kind == 0)
			reduce_once(a, b, c, n, rank, size);
		else if (kind == 1)
			allreduce_once(a, b, n, rank, size);
		else
			scatter_once(big, n, rank, size);
	}
	double mine = (MPI_Wtime() - t0) * 1e6 / iters, sum, lo, hi;
	MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
	MPI_Reduce(&mine, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
	MPI_Reduce(&mine, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("%s %s %d %.3f %.3f %.3f\n", argv[1], argv[2], n, sum / size, lo, hi);
	free(a);
	free(b);
	free(c);
	free(big);
	MPI_Finalize();
	return 0;
}
