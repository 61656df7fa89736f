/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Open MPI collectives over exanet (their point-to-point algorithms run on exanet's tagged
 * messages): Bcast, Allreduce, Alltoall, Alltoallv and Gather at sizes crossing the eager,
 * medium and rendezvous thresholds, each result checked. Rank 0 prints one PASS line.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int rank, size;

/* element counts (of int): 4 B .. 4 MiB */
static const int counts[] = {1, 10, 11, 300, 2048, 2049, 65536, 1 << 20};
#define NCOUNTS ((int)(sizeof counts / sizeof counts[0]))

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	for (int c = 0; c < NCOUNTS; c++) {
		const int n = counts[c];
		int *a = malloc((size_t)n * sizeof(int)), *b = malloc((size_t)n * sizeof(int));
		/* Bcast from each root */
		for (int root = 0; root < size; root++) {
			for (int i = 0; i < n; i++)
				a[i] = rank == root ? i ^ root : -1;
			MPI_Bcast(a, n, MPI_INT, root, MPI_COMM_WORLD);
			for (int i = 0; i < n; i++)
				CHECK(a[i] == (i ^ root), "bcast n=%d root=%d at %d", n, root, i);
		}
		/* Allreduce */
		for (int i = 0; i < n; i++)
			a[i] = rank + i;
		MPI_Allreduce(a, b, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
		for (int i = 0; i < n; i++)
			CHECK(b[i] == size * (size - 1) / 2 + size * i, "allreduce n=%d at %d", n, i);
		free(a);
		free(b);
		/* Alltoall and Gather with n/size elements per rank (at least 1) */
		const int per = n / size ? n / size : 1;
		int *s = malloc((size_t)per * size * sizeof(int)), *r = malloc((size_t)per * size * sizeof(int));
		for (int p = 0; p < size; p++)
			for (int i = 0; i < per; i++)
				s[p * per + i] = rank * 1000003 + p * 1009 + i;
		MPI_Alltoall(s, per, MPI_INT, r, per, MPI_INT, MPI_COMM_WORLD);
		for (int p = 0; p < size; p++)
			for (int i = 0; i < per; i++)
				CHECK(r[p * per + i] == p * 1000003 + rank * 1009 + i, "alltoall n=%d from %d", n, p);
		/* Alltoallv: rank p sends (p + 1) * k elements to everyone, k = per / size (>= 1) */
		const int k = per / size ? per / size : 1;
		int *sc = malloc(size * sizeof(int)), *sd = malloc(size * sizeof(int));
		int *rc = malloc(size * sizeof(int)), *rd = malloc(size * sizeof(int));
		int soff = 0, roff = 0;
		for (int p = 0; p < size; p++) {
			sc[p] = (rank + 1) * k;
			sd[p] = soff;
			soff += sc[p];
			rc[p] = (p + 1) * k;
			rd[p] = roff;
			roff += rc[p];
		}
		int *vs = malloc((size_t)soff * sizeof(int)), *vr = malloc((size_t)roff * sizeof(int));
		for (int p = 0; p < size; p++)
			for (int i = 0; i < sc[p]; i++)
				vs[sd[p] + i] = rank * 7919 + p * 104729 + i;
		MPI_Alltoallv(vs, sc, sd, MPI_INT, vr, rc, rd, MPI_INT, MPI_COMM_WORLD);
		for (int p = 0; p < size; p++)
			for (int i = 0; i < rc[p]; i++)
				CHECK(vr[rd[p] + i] == p * 7919 + rank * 104729 + i, "alltoallv n=%d from %d", n, p);
		/* Gather to the last rank */
		MPI_Gather(s, per, MPI_INT, r, per, MPI_INT, size - 1, MPI_COMM_WORLD);
		if (rank == size - 1)
			for (int p = 0; p < size; p++)
				for (int i = 0; i < per; i++)
					CHECK(r[p * per + i] == p * 1000003 + 0 * 1009 + i, "gather n=%d from %d", n, p);
		free(s);
		free(r);
		free(sc);
		free(sd);
		free(rc);
		free(rd);
		free(vs);
		free(vr);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("PASS: collectives over exanet, %d ranks\n", size);
	MPI_Finalize();
	return 0;
}
