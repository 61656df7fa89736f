/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * One collective of the thesis's evaluation (research seed 000, §9.4), timed as osu_bcast and its
 * siblings time theirs: per size, a barrier, then ITERS back-to-back calls; a rank's figure is its
 * average call time, and the line reports the average over the ranks (what osu prints).
 *
 *   mpirun -np N thesis_coll bcast|reduce|allreduce|scatter [sizes...]   (default 64 .. 8192)
 * Output (rank 0), one line per size:  COLL SIZE AVG_US MIN_US MAX_US
 * (SIZE is the bytes per rank: the message of bcast, the vector of reduce and allreduce
 * (MPI_FLOAT, MPI_SUM), the block each rank receives of scatter).
 * ITERS (default 50; a tenth more go first, untimed). The root is rank 0. A benchmark, not a
 * test: it checks only that bcast and scatter delivered the root's data.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, ranks;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &ranks);
	if (argc < 2) {
		if (rank == 0)
			fprintf(stderr, "usage: thesis_coll bcast|reduce|allreduce|scatter [sizes...]\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	const char *coll = argv[1];
	const int kind = !strcmp(coll, "bcast") ? 0 : !strcmp(coll, "reduce") ? 1 : !strcmp(coll, "allreduce") ? 2
		: !strcmp(coll, "scatter") ? 3 : -1;
	if (kind < 0) {
		if (rank == 0)
			fprintf(stderr, "thesis_coll: unknown collective %s\n", coll);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	size_t sizes[64], nsizes = 0, max = 0;
	for (int i = 2; i < argc && nsizes < 64; i++)
		sizes[nsizes++] = strtoull(argv[i], NULL, 10);
	if (nsizes == 0)
		for (size_t s = 64; s <= 8192; s *= 2)
			sizes[nsizes++] = s;
	for (size_t i = 0; i < nsizes; i++)
		max = sizes[i] > max ? sizes[i] : max;
	const int iters = getenv("ITERS") ? atoi(getenv("ITERS")) : 50;
	if (iters <= 0)
		MPI_Abort(MPI_COMM_WORLD, 2);
	const int warm = iters / 10 + 1;
	/* scatter's root sends every rank a block */
	unsigned char *sbuf = malloc(max * (size_t)ranks + 4), *rbuf = malloc(max * (size_t)ranks + 4);
	if (!sbuf || !rbuf)
		MPI_Abort(MPI_COMM_WORLD, 1);
	for (size_t s = 0; s < nsizes; s++) {
		const size_t size = sizes[s];
		const int floats = (int)(size / sizeof(float));
		for (size_t i = 0; i < size * (size_t)ranks; i++)
			sbuf[i] = rank == 0 ? (unsigned char)(i * 7 + s) : 0;
		double t0 = 0;
		MPI_Barrier(MPI_COMM_WORLD);
		for (int i = 0; i < warm + iters; i++) {
			if (i == warm)
				t0 = MPI_Wtime();
			switch (kind) {
			case 0:
				MPI_Bcast(rank == 0 ? sbuf : rbuf, (int)size, MPI_BYTE, 0, MPI_COMM_WORLD);
				break;
			case 1:
				MPI_Reduce(sbuf, rbuf, floats, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
				break;
			case 2:
				MPI_Allreduce(sbuf, rbuf, floats, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
				break;
			case 3:
				MPI_Scatter(sbuf, (int)size, MPI_BYTE, rbuf, (int)size, MPI_BYTE, 0, MPI_COMM_WORLD);
				break;
			}
		}
		double mine = (MPI_Wtime() - t0) * 1e6 / iters, sum, lo, hi;
		int bad = 0;
		if (rank != 0 && (kind == 0 || kind == 3)) {
			const size_t off = kind == 3 ? size * (size_t)rank : 0;
			for (size_t i = 0; i < size && !bad; i++)
				bad = rbuf[i] != (unsigned char)((off + i) * 7 + s);
		}
		int anybad;
		MPI_Reduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
		MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
		MPI_Reduce(&mine, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
		MPI_Reduce(&mine, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		if (rank == 0) {
			if (anybad) {
				fprintf(stderr, "thesis_coll: %s of %zu bytes delivered wrong data\n", coll, size);
				MPI_Abort(MPI_COMM_WORLD, 1);
			}
			printf("%s %zu %.3f %.3f %.3f\n", coll, size, sum / ranks, lo, hi);
			fflush(stdout);
		}
	}
	free(sbuf);
	free(rbuf);
	MPI_Finalize();
	return 0;
}
