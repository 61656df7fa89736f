/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * An MPI job that loses a host (netns_mpi_lost.sh): every rank exchanges with both neighbours
 * of a ring (its pairs span the two hosts) until a call fails. Errors return
 * (MPI_ERRORS_RETURN), so a rank that sees one says which call failed, what MPI said, and when
 * (CLOCK_REALTIME, to compare with when the script took the host away), then aborts the job.
 * A rank that sees nothing for LOST_HOST_MPI_SECONDS (default 120) says so and fails.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BIG (256 * 1024) /* a rendezvous over exanet's network backend */

static double now_s(int clock)
{
	struct timespec t;
	clock_gettime(clock, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	const char *limit = getenv("LOST_HOST_MPI_SECONDS");
	const double seconds = limit ? atof(limit) : 120;
	const int right = (rank + 1) % size, left = (rank + size - 1) % size;
	char *out = malloc(BIG), *in = malloc(BIG);
	memset(out, rank, BIG);

	int rc = MPI_Barrier(MPI_COMM_WORLD);
	printf("rank=%d pid=%d ready\n", rank, (int)getpid());
	fflush(stdout);
	const double end = now_s(CLOCK_MONOTONIC) + seconds;
	long rounds = 0;
	const char *call = "MPI_Barrier";
	while (rc == MPI_SUCCESS && now_s(CLOCK_MONOTONIC) < end) {
		int small_out = rank, small_in = -1;
		call = "MPI_Sendrecv (4 B)";
		rc = MPI_Sendrecv(&small_out, 1, MPI_INT, right, 1, &small_in, 1, MPI_INT, left, 1,
				  MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS)
			break;
		if (small_in != left) {
			printf("rank=%d FAIL: got %d from rank %d\n", rank, small_in, left);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		call = "MPI_Sendrecv (256 KiB)";
		rc = MPI_Sendrecv(out, BIG, MPI_CHAR, left, 2, in, BIG, MPI_CHAR, right, 2,
				  MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		++rounds;
	}
	if (rc == MPI_SUCCESS) {
		printf("rank=%d FAIL: no error in %.0f s (%ld rounds)\n", rank, seconds, rounds);
		fflush(stdout);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	char msg[MPI_MAX_ERROR_STRING] = "";
	int len = 0;
	MPI_Error_string(rc, msg, &len);
	printf("rank=%d error at=%.3f after %ld rounds: %s returned %d (%s)\n", rank,
	       now_s(CLOCK_REALTIME), rounds, call, rc, msg);
	fflush(stdout);
	MPI_Abort(MPI_COMM_WORLD, 3);
	return 3;
}
