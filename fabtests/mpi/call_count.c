/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libfabric calls per MPI message, so a regression in the path Open MPI's mtl ofi takes through
 * exanet shows (issue 17, part 3). Runs under fi_count.so (LD_PRELOAD; see fi_count.c), which
 * counts the data-path calls through each endpoint's and CQ's ops table. Two ranks, three phases:
 *   small  ping-pong of 8-byte messages (MPI_Send/MPI_Recv): the mtl injects them
 *   large  ping-pong of 64 KiB messages: a send with a completion, exanet's rendezvous below
 *   stream windows of 64 Isend of 8 bytes answered by a zero-byte acknowledgement
 * For each phase, both ranks' counts are summed and divided by the MPI messages of the phase:
 *   posts    send, inject and receive calls (sends retried after -FI_EAGAIN not included:
 *            how often a full mailbox makes a sender retry depends on timing)
 *   entries  completion entries read
 *   calls    posts, reads that returned entries or an error, fi_cq_readerr and other calls
 * Reads that found nothing (polls while waiting) depend on timing: printed, never judged. Nothing
 * here measures or judges time. A phase fails if a figure exceeds its bound (below), if the
 * library is not loaded, or if it saw fewer posts than messages (it did not see the calls).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fi_count.h"

#define ROUNDS 2000
#define WINDOW 64
#define WINDOWS 60

/*
 * Bounds: today's figures (2026-11-24, Open MPI 4.1.4 over exanet) with a margin of 10%.
 *            posts  entries  calls  measured
 *   small    2.00   1.00     3.00   an inject, a receive, one read returning the receive's entry
 *   large    2.00   2.00     4.00   a send and a receive, each completion read on its own
 *   stream   2.00   1.985    2.05   Isend is a send with a completion (only the zero-byte
 *                                   acknowledgement is injected); reads take many entries at once
 * Which reads find several entries at once depends on timing; posts and entries do not. The
 * stream's calls bound allows the receiver to read every completion on its own (2 + 1 + 1/64).
 */
struct bound {
	const char *name;
	double posts, entries, calls;
};
static const struct bound bounds[] = {
	{"small", 2.2, 1.1, 3.3},
	{"large", 2.2, 2.2, 4.4},
	{"stream", 2.2, 2.2, 3.3},
};

static int rank;
static int (*snapshot)(struct fi_count *);

static void take(struct fi_count *c)
{
	memset(c, 0, sizeof *c);
	snapshot(c);
}

/* Both ranks' counts between a and b, summed at rank 0; checked there against bound k. */
static void judge(int k, const struct fi_count *a, const struct fi_count *b, double messages)
{
	uint64_t d[sizeof(struct fi_count) / sizeof(uint64_t)], sum[sizeof d / sizeof d[0]];
	const uint64_t *pa = (const uint64_t *)a, *pb = (const uint64_t *)b;
	for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
		d[i] = pb[i] - pa[i];
	MPI_Reduce(d, sum, (int)(sizeof d / sizeof d[0]), MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank != 0)
		return;
	struct fi_count t;
	memcpy(&t, sum, sizeof t);
	const double posts = (double)(t.send + t.inject + t.recv - t.post_again) / messages;
	const double entries = (double)t.entries / messages;
	const double calls = (double)(t.send + t.inject + t.recv - t.post_again + t.read_full +
				      t.read_other + t.readerr + t.other) /
			     messages;
	const struct bound *bd = &bounds[k];
	printf("%-6s messages %.0f: posts %.3f (<= %.2f) entries %.3f (<= %.2f) calls %.3f (<= %.2f); "
	       "send %llu inject %llu recv %llu retried %llu reads %llu errors %llu readerr %llu "
	       "other %llu; empty polls %.2f per message (not judged)\n",
	       bd->name, messages, posts, bd->posts, entries, bd->entries, calls, bd->calls,
	       (unsigned long long)t.send, (unsigned long long)t.inject, (unsigned long long)t.recv,
	       (unsigned long long)t.post_again, (unsigned long long)t.read_full,
	       (unsigned long long)t.read_other, (unsigned long long)t.readerr,
	       (unsigned long long)t.other, (double)t.read_empty / messages);
	fflush(stdout);
	CHECK(posts >= 1.0, "%s: %.3f posts per message: fi_count.so did not see the calls", bd->name,
	      posts);
	CHECK(posts <= bd->posts, "%s: %.3f posts per message, bound %.2f", bd->name, posts, bd->posts);
	CHECK(entries <= bd->entries, "%s: %.3f completion entries per message, bound %.2f", bd->name,
	      entries, bd->entries);
	CHECK(calls <= bd->calls, "%s: %.3f libfabric calls per message, bound %.2f", bd->name, calls,
	      bd->calls);
	CHECK(t.read_other == 0 && t.readerr == 0, "%s: %llu failed reads, %llu fi_cq_readerr",
	      bd->name, (unsigned long long)t.read_other, (unsigned long long)t.readerr);
}

static void pingpong(int k, int bytes)
{
	const int peer = 1 - rank;
	char *buf = calloc(1, (size_t)bytes);
	CHECK(buf, "out of memory");
	struct fi_count a, b;
	MPI_Barrier(MPI_COMM_WORLD);
	take(&a);
	for (int i = 0; i < ROUNDS; i++) {
		if (rank == 0) {
			buf[0] = (char)i;
			MPI_Send(buf, bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
			MPI_Recv(buf, bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			CHECK(buf[bytes - 1] == (char)(i + 1), "round %d: reply not received", i);
		} else {
			MPI_Recv(buf, bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			CHECK(buf[0] == (char)i, "round %d: message not received", i);
			buf[bytes - 1] = (char)(i + 1);
			MPI_Send(buf, bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
		}
	}
	take(&b);
	judge(k, &a, &b, 2.0 * ROUNDS);
	free(buf);
}

static void stream(int k)
{
	const int peer = 1 - rank;
	char buf[WINDOW][8];
	MPI_Request req[WINDOW];
	struct fi_count a, b;
	MPI_Barrier(MPI_COMM_WORLD);
	take(&a);
	for (int w = 0; w < WINDOWS; w++) {
		for (int i = 0; i < WINDOW; i++) {
			if (rank == 0) {
				memset(buf[i], w + i, 8);
				MPI_Isend(buf[i], 8, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &req[i]);
			} else {
				MPI_Irecv(buf[i], 8, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &req[i]);
			}
		}
		MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
		if (rank == 0) {
			MPI_Recv(NULL, 0, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			for (int i = 0; i < WINDOW; i++)
				CHECK(buf[i][7] == (char)(w + i), "window %d message %d lost", w, i);
			MPI_Send(NULL, 0, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
		}
	}
	take(&b);
	judge(k, &a, &b, (double)WINDOWS * (WINDOW + 1));
}

int main(int argc, char **argv)
{
	int size;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	CHECK(size == 2, "run with 2 ranks, not %d", size);
	snapshot = (int (*)(struct fi_count *))dlsym(RTLD_DEFAULT, FI_COUNT_SNAPSHOT);
	CHECK(snapshot, "fi_count.so is not loaded (LD_PRELOAD)");
	pingpong(0, 8);
	pingpong(1, 65536);
	stream(2);
	if (rank == 0)
		printf("PASS: libfabric calls per MPI message within the bounds\n");
	MPI_Finalize();
	return 0;
}
