/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * MPI_Comm_accept / MPI_Comm_connect between two separate launches (two mpiruns sharing an
 * ompi-server), for fabtests/mpi/two_launches.sh. The accepting job writes its port name to a
 * file, the connecting job reads it; then messages of every exanet protocol's sizes go each way,
 * every byte checked.
 *   connect_accept accept|connect PORT_FILE
 * Each rank 0 prints one PASS line; an error aborts the job.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static const int sizes[] = {1, 84, 85, 16384, 16385, (1 << 20) + 3};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

static unsigned char pattern(int size, int i, int way)
{
	return (unsigned char)(size * 7 + i * 13 + way * 101);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	CHECK(argc == 3, "usage: connect_accept accept|connect PORT_FILE");
	const int accepting = strcmp(argv[1], "accept") == 0;
	const char *file = argv[2];
	char port[MPI_MAX_PORT_NAME] = "";
	MPI_Comm c;
	if (accepting) {
		MPI_Open_port(MPI_INFO_NULL, port);
		char tmp[4096];
		snprintf(tmp, sizeof tmp, "%s.tmp", file);
		FILE *f = fopen(tmp, "w");
		CHECK(f && fputs(port, f) >= 0 && fclose(f) == 0 && rename(tmp, file) == 0,
		      "writing %s", file);
		MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &c);
	} else {
		FILE *f;
		for (int tries = 0; !(f = fopen(file, "r")); tries++) {
			CHECK(tries < 300, "no port name in %s after 30 s", file);
			usleep(100000);
		}
		CHECK(fgets(port, sizeof port, f), "reading %s", file);
		fclose(f);
		MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &c);
	}
	unsigned char *buf = malloc(sizes[NSIZES - 1]);
	CHECK(buf, "no memory");
	for (int s = 0; s < NSIZES; s++) {
		const int n = sizes[s];
		for (int way = 0; way < 2; way++) {
			const int sending = (way == 0) == accepting;
			if (sending) {
				for (int i = 0; i < n; i++)
					buf[i] = pattern(n, i, way);
				MPI_Send(buf, n, MPI_BYTE, 0, s, c);
				continue;
			}
			MPI_Status st;
			int got;
			memset(buf, 0, n);
			MPI_Recv(buf, n, MPI_BYTE, 0, s, c, &st);
			MPI_Get_count(&st, MPI_BYTE, &got);
			CHECK(got == n, "%d bytes, not %d", got, n);
			for (int i = 0; i < n; i++)
				CHECK(buf[i] == pattern(n, i, way), "%d bytes: byte %d wrong", n, i);
		}
	}
	MPI_Comm_disconnect(&c);
	if (accepting)
		MPI_Close_port(port);
	printf("PASS: connect_accept (%s): %d sizes each way\n", argv[1], NSIZES);
	free(buf);
	MPI_Finalize();
	return 0;
}
