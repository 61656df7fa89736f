/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Shared by the MPI test programs: a failed check names the rank and the reason, then aborts the
 * whole job (MPI_Abort), so mpirun exits non-zero and ctest sees the failure.
 */
#ifndef EXANET_MPI_CHECK_H
#define EXANET_MPI_CHECK_H

#include <mpi.h>
#include <stdio.h>

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (!(cond)) {                                             \
			int r_ = -1;                                       \
			MPI_Comm_rank(MPI_COMM_WORLD, &r_);                \
			fprintf(stderr, "rank %d: FAIL ", r_);             \
			fprintf(stderr, __VA_ARGS__);                      \
			fprintf(stderr, "\n");                             \
			MPI_Abort(MPI_COMM_WORLD, 1);                      \
		}                                                          \
	} while (0)

#endif
