/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * MPI_THREAD_MULTIPLE over exanet: on each rank, THREADS threads send to and receive from the
 * partner rank at the same time, each on its own tag, with sizes crossing exanet's thresholds;
 * every message is checked. Exercises the provider's FI_THREAD_SAFE locking under a real MPI.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define THREADS 4
#define ROUNDS 50

static int rank, size, peer;

static const int sizes[] = {8, 100, 8000, 9000, 200000};

static void *worker(void *arg)
{
	const int t = (int)(long)arg;
	unsigned char *out = malloc(200000), *in = malloc(200000);
	for (int r = 0; r < ROUNDS; r++) {
		const int n = sizes[(r + t) % 5];
		for (int i = 0; i < n; i++)
			out[i] = (unsigned char)(rank + t * 3 + r + i);
		MPI_Request rq[2];
		MPI_Irecv(in, n, MPI_BYTE, peer, t, MPI_COMM_WORLD, &rq[0]);
		MPI_Isend(out, n, MPI_BYTE, peer, t, MPI_COMM_WORLD, &rq[1]);
		MPI_Status st[2];
		MPI_Waitall(2, rq, st);
		int count;
		MPI_Get_count(&st[0], MPI_BYTE, &count);
		CHECK(count == n, "thread %d round %d count %d", t, r, count);
		for (int i = 0; i < n; i++)
			CHECK(in[i] == (unsigned char)(peer + t * 3 + r + i), "thread %d round %d data", t, r);
	}
	free(out);
	free(in);
	return NULL;
}

int main(int argc, char **argv)
{
	int provided;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	CHECK(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE not provided (%d)", provided);
	CHECK(size % 2 == 0, "run with an even number of ranks");
	peer = rank ^ 1;
	pthread_t th[THREADS];
	for (long t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, worker, (void *)t);
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("PASS: MPI_THREAD_MULTIPLE over exanet, %d ranks x %d threads\n", size, THREADS);
	MPI_Finalize();
	return 0;
}
