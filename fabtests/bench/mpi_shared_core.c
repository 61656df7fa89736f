/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * MPI operations where ranks wait for each other, for runs with more ranks than cores
 * (shared_core_compare.sh): per message size, the time of one
 *   ring       MPI_Sendrecv to the next rank, from the previous one (a blocking send and a
 *              receive at once: the pattern whose rendezvous waited for the scheduler's tick)
 *   allreduce  MPI_Allreduce (MPI_SUM of doubles)
 *   bcast      MPI_Bcast from a root that moves round the ranks
 * Each operation runs for about SECONDS (default 0.3) after one untimed round; rank 0 prints
 * "OP SIZE US_PER_OP" per size. A benchmark, not a test: it checks the ring's data and nothing
 * about time.
 *   mpirun -np N mpi_shared_core [SIZES...]      (bytes, multiples of 8; default 8 64 1024
 *                                                 8192 49152 262144)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;

static double run(const char *op, double *a, double *b, int n, double seconds)
{
	const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
	long done = 0;
	int stop = 0;
	double start = 0;
	for (long i = 0; !stop; i++) {
		if (i == 1) { /* the first round untimed (connections, registrations) */
			MPI_Barrier(MPI_COMM_WORLD);
			start = MPI_Wtime();
		}
		if (!strcmp(op, "ring")) {
			for (int k = 0; k < n; k++)
				a[k] = rank * 1e6 + (double)i + k;
			MPI_Sendrecv(a, n, MPI_DOUBLE, next, 7, b, n, MPI_DOUBLE, prev, 7, MPI_COMM_WORLD,
				     MPI_STATUS_IGNORE);
			if (b[n - 1] != prev * 1e6 + (double)i + (n - 1)) {
				fprintf(stderr, "rank %d: ring data wrong at round %ld\n", rank, i);
				MPI_Abort(MPI_COMM_WORLD, 2);
			}
		} else if (!strcmp(op, "allreduce")) {
			MPI_Allreduce(a, b, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		} else {
			MPI_Bcast(a, n, MPI_DOUBLE, (int)(i % nranks), MPI_COMM_WORLD);
		}
		if (i >= 1) {
			done++;
			/* every rank stops at the same round: rank 0's clock decides, every 8 rounds */
			if (done % 8 == 0) {
				int over = rank == 0 && MPI_Wtime() - start >= seconds;
				MPI_Bcast(&over, 1, MPI_INT, 0, MPI_COMM_WORLD);
				stop = over;
			}
		}
	}
	return (MPI_Wtime() - start) / (double)done * 1e6;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	const char *env = getenv("SECONDS_PER_OP");
	const double seconds = env ? atof(env) : 0.3;
	static const long dflt[] = {8, 64, 1024, 8192, 49152, 262144};
	int nsizes = argc > 1 ? argc - 1 : (int)(sizeof dflt / sizeof dflt[0]);
	for (int s = 0; s < nsizes; s++) {
		const long bytes = argc > 1 ? atol(argv[s + 1]) : dflt[s];
		const int n = bytes >= 8 ? (int)(bytes / 8) : 1;
		double *a = calloc((size_t)n, 8), *b = calloc((size_t)n, 8);
		if (!a || !b)
			MPI_Abort(MPI_COMM_WORLD, 1);
		static const char *ops[] = {"ring", "allreduce", "bcast"};
		for (int o = 0; o < 3; o++) {
			const double us = run(ops[o], a, b, n, seconds);
			if (rank == 0)
				printf("%s %ld %.3f\n", ops[o], (long)n * 8, us);
			fflush(stdout);
		}
		free(a);
		free(b);
	}
	MPI_Finalize();
	return 0;
}
