/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Open MPI point-to-point over exanet, beyond the smoke job. Ranks pair up (0-1, 2-3, ...):
 *  - non-blocking Isend/Irecv of sizes crossing every exanet threshold (eager 40 B, medium 8 KiB,
 *    rendezvous), both orders (receive posted first, message first), data verified;
 *  - non-overtaking: 64 messages of mixed sizes on one tag arrive in send order;
 *  - Mprobe/Improbe with Mrecv, and Probe with MPI_ANY_SOURCE/MPI_ANY_TAG;
 *  - a posted receive cancelled (MPI_Test_cancelled true), and the next message still matches;
 *  - 4000 outstanding Irecv/Isend requests completed with Waitall;
 *  - persistent requests (Send_init/Recv_init, Startall) over several rounds.
 * Exits non-zero (MPI_Abort) on any error; rank 0 prints one PASS line.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int rank, size;

static void fill(unsigned char *b, int n, int seed)
{
	for (int i = 0; i < n; i++)
		b[i] = (unsigned char)(seed * 31 + i * 7);
}

static int ok(const unsigned char *b, int n, int seed)
{
	for (int i = 0; i < n; i++)
		if (b[i] != (unsigned char)(seed * 31 + i * 7))
			return 0;
	return 1;
}

static const int sizes[] = {0, 1, 40, 41, 1000, 8192, 8193, 65536, 1 << 20, 3 << 20};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

static void sizes_both_orders(int peer, int sender)
{
	unsigned char *b = malloc(3 << 20);
	for (int order = 0; order < 2; order++) {
		for (int s = 0; s < NSIZES; s++) {
			const int n = sizes[s], seed = s + 100 * order;
			MPI_Request rq;
			if (sender) {
				fill(b, n, seed);
				if (order == 1) /* the receiver posts first: wait for its go */
					MPI_Recv(NULL, 0, MPI_BYTE, peer, 999, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				MPI_Isend(b, n, MPI_BYTE, peer, s, MPI_COMM_WORLD, &rq);
				MPI_Wait(&rq, MPI_STATUS_IGNORE);
			} else {
				MPI_Status st;
				int count;
				memset(b, 0, n);
				if (order == 0) /* the message first: let it arrive unexpected */
					MPI_Probe(peer, s, MPI_COMM_WORLD, &st);
				MPI_Irecv(b, n, MPI_BYTE, peer, s, MPI_COMM_WORLD, &rq);
				if (order == 1)
					MPI_Send(NULL, 0, MPI_BYTE, peer, 999, MPI_COMM_WORLD);
				MPI_Wait(&rq, &st);
				MPI_Get_count(&st, MPI_BYTE, &count);
				CHECK(count == n && ok(b, n, seed), "size %d order %d", n, order);
			}
		}
	}
	free(b);
}

static void non_overtaking(int peer, int sender)
{
	enum { N = 64 };
	static unsigned char bufs[N][70000];
	MPI_Request rq[N];
	for (int i = 0; i < N; i++) {
		const int n = sizes[i % NSIZES] > 70000 ? 70000 : sizes[i % NSIZES];
		if (sender) {
			fill(bufs[i], n, i);
			MPI_Isend(bufs[i], n, MPI_BYTE, peer, 5, MPI_COMM_WORLD, &rq[i]);
		} else {
			MPI_Irecv(bufs[i], 70000, MPI_BYTE, peer, 5, MPI_COMM_WORLD, &rq[i]);
		}
	}
	MPI_Status st[N];
	MPI_Waitall(N, rq, st);
	if (!sender)
		for (int i = 0; i < N; i++) {
			const int n = sizes[i % NSIZES] > 70000 ? 70000 : sizes[i % NSIZES];
			int count;
			MPI_Get_count(&st[i], MPI_BYTE, &count);
			CHECK(count == n && ok(bufs[i], n, i), "message %d overtaken or damaged", i);
		}
}

static void probes(int peer, int sender)
{
	int v[4] = {1, 2, 3, 4}, got[4];
	if (sender) {
		MPI_Send(v, 4, MPI_INT, peer, 31, MPI_COMM_WORLD);
		MPI_Send(v, 2, MPI_INT, peer, 32, MPI_COMM_WORLD);
		MPI_Send(v, 3, MPI_INT, peer, 33, MPI_COMM_WORLD);
		return;
	}
	MPI_Message m;
	MPI_Status st;
	int count, flag = 0;
	MPI_Mprobe(peer, 31, MPI_COMM_WORLD, &m, &st);
	MPI_Get_count(&st, MPI_INT, &count);
	CHECK(count == 4, "mprobe count %d", count);
	MPI_Mrecv(got, 4, MPI_INT, &m, &st);
	CHECK(got[3] == 4, "mrecv data");
	do
		MPI_Improbe(peer, 32, MPI_COMM_WORLD, &flag, &m, &st);
	while (!flag);
	MPI_Mrecv(got, 4, MPI_INT, &m, &st);
	MPI_Get_count(&st, MPI_INT, &count);
	CHECK(count == 2 && got[1] == 2, "improbe/mrecv");
	MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
	CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == 33, "wildcard probe %d/%d", st.MPI_SOURCE, st.MPI_TAG);
	MPI_Recv(got, 4, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st);
}

static void cancel(int peer, int sender)
{
	int x = 0;
	if (sender) {
		MPI_Barrier(MPI_COMM_WORLD);
		x = 42;
		MPI_Send(&x, 1, MPI_INT, peer, 41, MPI_COMM_WORLD);
		return;
	}
	MPI_Request rq;
	MPI_Status st;
	int cancelled = 0;
	MPI_Irecv(&x, 1, MPI_INT, peer, 41, MPI_COMM_WORLD, &rq);
	MPI_Cancel(&rq);
	MPI_Wait(&rq, &st);
	MPI_Test_cancelled(&st, &cancelled);
	CHECK(cancelled, "a posted, unmatched receive must cancel");
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Recv(&x, 1, MPI_INT, peer, 41, MPI_COMM_WORLD, &st);
	CHECK(x == 42, "the message after a cancel");
}

static void many_outstanding(int peer, int sender)
{
	enum { N = 4000 };
	int *v = malloc(N * sizeof *v);
	MPI_Request *rq = malloc(N * sizeof *rq);
	for (int i = 0; i < N; i++) {
		if (sender) {
			v[i] = i * 3;
			MPI_Isend(&v[i], 1, MPI_INT, peer, i % 7, MPI_COMM_WORLD, &rq[i]);
		} else {
			v[i] = -1;
			MPI_Irecv(&v[i], 1, MPI_INT, peer, i % 7, MPI_COMM_WORLD, &rq[i]);
		}
	}
	MPI_Waitall(N, rq, MPI_STATUSES_IGNORE);
	if (!sender)
		for (int i = 0; i < N; i++)
			CHECK(v[i] == i * 3, "outstanding request %d got %d", i, v[i]);
	free(v);
	free(rq);
}

static void persistent(int peer, int sender)
{
	enum { N = 100000 };
	unsigned char *b = malloc(N);
	MPI_Request rq;
	if (sender)
		MPI_Send_init(b, N, MPI_BYTE, peer, 51, MPI_COMM_WORLD, &rq);
	else
		MPI_Recv_init(b, N, MPI_BYTE, peer, 51, MPI_COMM_WORLD, &rq);
	for (int round = 0; round < 10; round++) {
		if (sender)
			fill(b, N, round);
		MPI_Startall(1, &rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
		if (!sender)
			CHECK(ok(b, N, round), "persistent round %d", round);
	}
	MPI_Request_free(&rq);
	free(b);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	CHECK(size % 2 == 0, "run with an even number of ranks");
	const int peer = rank ^ 1, sender = rank % 2 == 0;
	sizes_both_orders(peer, sender);
	non_overtaking(peer, sender);
	probes(peer, sender);
	cancel(peer, sender);
	many_outstanding(peer, sender);
	persistent(peer, sender);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("PASS: point-to-point over exanet, %d ranks\n", size);
	MPI_Finalize();
	return 0;
}
