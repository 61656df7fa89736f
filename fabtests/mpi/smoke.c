/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Open MPI over exanet, the smallest honest check: blocking ping-pong of every protocol size with
 * the data verified, wildcard source and tag, a synchronous send (Open MPI's ack protocol), a
 * probe (FI_PEEK), truncation reported as MPI_ERR_TRUNCATE, and a collective. Exits non-zero on
 * any error. p2p.c, collectives.c and threads.c go further.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	const int sizes[] = {0, 8, 40, 41, 4096, 8192, 8193, 65536, 4 << 20};
	const int peer = rank ^ 1;
	if (peer < size) {
		for (int s = 0; s < (int)(sizeof sizes / sizeof sizes[0]); s++) {
			int n = sizes[s];
			char *b = malloc(n + 1);
			for (int it = 0; it < 20; it++) {
				if (rank % 2 == 0) {
					memset(b, it + s, n);
					MPI_Send(b, n, MPI_CHAR, peer, it, MPI_COMM_WORLD);
					MPI_Recv(b, n, MPI_CHAR, peer, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				} else {
					MPI_Status st;
					int count;
					MPI_Recv(b, n, MPI_CHAR, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
					MPI_Get_count(&st, MPI_CHAR, &count);
					CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == it && count == n, "status");
					for (int i = 0; i < n; i++)
						CHECK(b[i] == (char)(it + s), "data");
					MPI_Send(b, n, MPI_CHAR, peer, it, MPI_COMM_WORLD);
				}
			}
			free(b);
		}
		int v = rank, got = -1, flag = 0;
		MPI_Status st;
		if (rank % 2 == 0) {
			MPI_Ssend(&v, 1, MPI_INT, peer, 77, MPI_COMM_WORLD);
			int big[4] = {1, 2, 3, 4};
			MPI_Send(big, 4, MPI_INT, peer, 78, MPI_COMM_WORLD);
		} else {
			do
				MPI_Iprobe(peer, 77, MPI_COMM_WORLD, &flag, &st);
			while (!flag);
			MPI_Recv(&got, 1, MPI_INT, peer, 77, MPI_COMM_WORLD, &st);
			CHECK(got == peer, "ssend payload");
			MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
			int small[2];
			int rc = MPI_Recv(small, 2, MPI_INT, peer, 78, MPI_COMM_WORLD, &st);
			int cls = MPI_SUCCESS;
			MPI_Error_class(rc, &cls);
			CHECK(cls == MPI_ERR_TRUNCATE, "truncation must be MPI_ERR_TRUNCATE");
		}
	}
	int sum = 0;
	MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	CHECK(sum == size * (size - 1) / 2, "allreduce");
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("PASS: Open MPI over exanet, %d ranks\n", size);
	MPI_Finalize();
	return 0;
}
