/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * MPI's dynamic processes over exanet (Open MPI, pml cm, mtl ofi). The launcher gives a spawned
 * job a namespace of its own, yet it must reach the job that spawned it; exanet derived its
 * protection domain from that namespace, so every message between parents and children was
 * refused (MPI_ERR_OTHER at the first send) while tcp through the same MTL worked.
 *  1. The parents (2 ranks) spawn 2 children. Every parent sends every child messages of every
 *     protocol's sizes (eager, medium, rendezvous); the children take them from MPI_ANY_SOURCE,
 *     check the source and the bytes, and send each back changed; the parents check the answers.
 *  2. The intercommunicator merged: an Allreduce over all four and a 256 KiB Bcast from a child.
 *  3. MPI_Open_port / MPI_Comm_accept in the parents, MPI_Comm_connect in the children (the port
 *     name travels over the spawn intercommunicator): a message each way on the new one.
 *  4. After the children disconnected and exited, the parents spawn again (1 child): a
 *     second generation reaches them too.
 * Any error aborts the job; parent rank 0 prints one PASS line.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* exanet's defaults: eager up to 84 B, medium up to 16 KiB, rendezvous above. */
static const int sizes[] = {0, 1, 84, 85, 4096, 16384, 16385, 65536, (1 << 20) + 3};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))
#define MAXSIZE ((1 << 20) + 3)
#define BCAST_BYTES (256 << 10)

static unsigned char pattern(int from, int size, int i, int answer)
{
	return (unsigned char)(from * 53 + size * 7 + i * 13 + answer * 101);
}

static void fill(unsigned char *b, int from, int size, int answer)
{
	for (int i = 0; i < size; i++)
		b[i] = pattern(from, size, i, answer);
}

static int first_wrong(const unsigned char *b, int from, int size, int answer)
{
	for (int i = 0; i < size; i++)
		if (b[i] != pattern(from, size, i, answer))
			return i;
	return -1;
}

/* The parents' side of part 1 over intercommunicator inter: each parent to each child. */
static void parents_exchange(MPI_Comm inter, int rank, unsigned char *buf)
{
	int children;
	MPI_Comm_remote_size(inter, &children);
	for (int s = 0; s < NSIZES; s++) {
		for (int c = 0; c < children; c++) {
			fill(buf, rank, sizes[s], 0);
			MPI_Send(buf, sizes[s], MPI_BYTE, c, sizes[s], inter);
			MPI_Status st;
			memset(buf, 0xee, sizes[s]);
			MPI_Recv(buf, sizes[s], MPI_BYTE, c, sizes[s], inter, &st);
			int n;
			MPI_Get_count(&st, MPI_BYTE, &n);
			CHECK(n == sizes[s], "answer from child %d: %d bytes, not %d", c, n, sizes[s]);
			const int bad = first_wrong(buf, rank, sizes[s], 1 + c);
			CHECK(bad < 0, "answer of %d bytes from child %d: byte %d wrong", sizes[s], c, bad);
		}
	}
}

/* The children's side: every parent's message from MPI_ANY_SOURCE, answered. */
static void children_exchange(MPI_Comm parent, int rank, unsigned char *buf)
{
	int parents;
	MPI_Comm_remote_size(parent, &parents);
	for (int s = 0; s < NSIZES; s++) {
		for (int p = 0; p < parents; p++) {
			MPI_Status st;
			memset(buf, 0xee, sizes[s]);
			MPI_Recv(buf, MAXSIZE, MPI_BYTE, MPI_ANY_SOURCE, sizes[s], parent, &st);
			int n;
			MPI_Get_count(&st, MPI_BYTE, &n);
			const int from = st.MPI_SOURCE;
			CHECK(from >= 0 && from < parents, "message from parent %d", from);
			CHECK(n == sizes[s], "message from parent %d: %d bytes, not %d", from, n, sizes[s]);
			const int bad = first_wrong(buf, from, sizes[s], 0);
			CHECK(bad < 0, "message of %d bytes from parent %d: byte %d wrong", sizes[s], from,
			      bad);
			fill(buf, from, sizes[s], 1 + rank);
			MPI_Send(buf, sizes[s], MPI_BYTE, from, sizes[s], parent);
		}
	}
}

/* Part 2: the merged communicator (children high). */
static void merged_collectives(MPI_Comm inter, int high, unsigned char *buf)
{
	MPI_Comm all;
	MPI_Intercomm_merge(inter, high, &all);
	int rank, size, sum = 0;
	MPI_Comm_rank(all, &rank);
	MPI_Comm_size(all, &size);
	MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, all);
	CHECK(sum == size * (size - 1) / 2, "Allreduce over the merged job gave %d", sum);
	const int root = size - 1; /* a child */
	if (rank == root)
		fill(buf, root, BCAST_BYTES, 7);
	else
		memset(buf, 0, BCAST_BYTES);
	MPI_Bcast(buf, BCAST_BYTES, MPI_BYTE, root, all);
	const int bad = first_wrong(buf, root, BCAST_BYTES, 7);
	CHECK(bad < 0, "Bcast from the merged rank %d: byte %d wrong", root, bad);
	MPI_Comm_free(&all);
}

/* Part 3, both sides: every accepting rank sends each remote rank a message, which answers it. */
static void connected_exchange(MPI_Comm c, int accepting, int rank)
{
	int remote;
	MPI_Comm_remote_size(c, &remote);
	unsigned char buf[4096];
	MPI_Status st;
	if (accepting) {
		fill(buf, rank, sizeof buf, 3);
		for (int r = 0; r < remote; r++)
			MPI_Send(buf, sizeof buf, MPI_BYTE, r, 5, c);
		for (int r = 0; r < remote; r++) {
			MPI_Recv(buf, sizeof buf, MPI_BYTE, r, 6, c, &st);
			const int bad = first_wrong(buf, rank, sizeof buf, 4 + r);
			CHECK(bad < 0, "connected answer from %d: byte %d wrong", r, bad);
		}
		return;
	}
	for (int k = 0; k < remote; k++) {
		MPI_Recv(buf, sizeof buf, MPI_BYTE, MPI_ANY_SOURCE, 5, c, &st);
		const int bad = first_wrong(buf, st.MPI_SOURCE, sizeof buf, 3);
		CHECK(bad < 0, "connected message from %d: byte %d wrong", st.MPI_SOURCE, bad);
		fill(buf, st.MPI_SOURCE, sizeof buf, 4 + rank);
		MPI_Send(buf, sizeof buf, MPI_BYTE, st.MPI_SOURCE, 6, c);
	}
}

static int child_main(int generation)
{
	MPI_Comm parent;
	MPI_Comm_get_parent(&parent);
	CHECK(parent != MPI_COMM_NULL, "started as a child without a parent");
	int rank;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	unsigned char *buf = malloc(MAXSIZE);
	CHECK(buf, "no memory");
	children_exchange(parent, rank, buf);
	if (generation == 1) {
		merged_collectives(parent, 1, buf);
		char port[MPI_MAX_PORT_NAME];
		MPI_Bcast(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, parent);
		MPI_Comm c;
		MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &c);
		connected_exchange(c, 0, rank);
		MPI_Comm_disconnect(&c);
	}
	MPI_Comm_disconnect(&parent);
	free(buf);
	MPI_Finalize();
	return 0;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	if (argc > 2 && strcmp(argv[1], "child") == 0)
		return child_main(atoi(argv[2]));
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	unsigned char *buf = malloc(MAXSIZE);
	CHECK(buf, "no memory");

	char *gen1[] = {"child", "1", NULL};
	MPI_Comm inter;
	int errs[2];
	MPI_Comm_spawn(argv[0], gen1, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, errs);
	CHECK(errs[0] == MPI_SUCCESS && errs[1] == MPI_SUCCESS, "spawn: %d %d", errs[0], errs[1]);
	parents_exchange(inter, rank, buf);
	merged_collectives(inter, 0, buf);

	char port[MPI_MAX_PORT_NAME] = "";
	if (rank == 0)
		MPI_Open_port(MPI_INFO_NULL, port);
	MPI_Bcast(port, MPI_MAX_PORT_NAME, MPI_CHAR, rank == 0 ? MPI_ROOT : MPI_PROC_NULL, inter);
	MPI_Comm c;
	MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &c);
	connected_exchange(c, 1, rank);
	MPI_Comm_disconnect(&c);
	if (rank == 0)
		MPI_Close_port(port);
	MPI_Comm_disconnect(&inter);

	char *gen2[] = {"child", "2", NULL};
	MPI_Comm_spawn(argv[0], gen2, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, errs);
	CHECK(errs[0] == MPI_SUCCESS, "second spawn: %d", errs[0]);
	parents_exchange(inter, rank, buf);
	MPI_Comm_disconnect(&inter);

	if (rank == 0)
		printf("PASS: spawn: %d parents, 2 then 1 children, %d sizes each way, merged "
		       "collectives, connect/accept\n", size, NSIZES);
	free(buf);
	MPI_Finalize();
	return 0;
}
