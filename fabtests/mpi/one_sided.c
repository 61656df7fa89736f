/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * MPI one-sided communication over exanet: Open MPI's osc rdma on btl ofi, which moves every
 * MPI_Put, MPI_Get and atomic through exanet's RMA and atomics (fi_write, fi_read,
 * fi_fetch_atomic, fi_atomic).
 *
 * 1. Lock-protected reads, the pattern osc rdma itself uses for its window state: rank 0 rewrites
 *    a 4 KiB table while holding an exclusive lock word (a fetch-add that found it 0); the other
 *    ranks take it shared (fetch-add 1, backing off while the exclusive bit is set), read the
 *    table with MPI_Get, and release with a non-fetching MPI_Accumulate. A table read with
 *    entries of two versions, or a lock word that does not come back to 0, fails.
 * 2. Puts and gets of random sizes (1 B to 256 KiB, the thresholds of every path in between) at
 *    random offsets into the next rank's window, each read back and compared, and the whole
 *    window checked by its owner after a barrier.
 * Prints "PASS: ..." from rank 0.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define TABLE_ENTRIES 512
#define EXCLUSIVE (INT64_C(1) << 40)
#define SLICE (512 * 1024)

static void lock_protected_reads(int rank, int size, int iterations) {
	int64_t* base;
	MPI_Win win;
	MPI_Win_allocate((TABLE_ENTRIES + 1) * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL,
			 MPI_COMM_WORLD, &base, &win);
	for (int i = 0; i <= TABLE_ENTRIES; ++i) base[i] = 0;
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Win_lock_all(0, win);
	const int64_t take = EXCLUSIVE, give = -EXCLUSIVE, one = 1, minus_one = -1;
	int64_t seen;
	long torn = 0;
	static int64_t table[TABLE_ENTRIES];
	if (rank == 0) {
		for (int version = 1; version <= iterations * (size - 1); ++version) {
			for (;;) {
				MPI_Fetch_and_op(&take, &seen, MPI_INT64_T, 0, 0, MPI_SUM, win);
				MPI_Win_flush(0, win);
				if (seen == 0) break;
				MPI_Fetch_and_op(&give, &seen, MPI_INT64_T, 0, 0, MPI_SUM, win);
				MPI_Win_flush(0, win);
			}
			MPI_Win_sync(win);
			for (int i = 1; i <= TABLE_ENTRIES; ++i) base[i] = version;
			MPI_Win_sync(win);
			MPI_Fetch_and_op(&give, &seen, MPI_INT64_T, 0, 0, MPI_SUM, win);
			MPI_Win_flush(0, win);
		}
	} else {
		for (int k = 0; k < iterations; ++k) {
			for (;;) {
				MPI_Fetch_and_op(&one, &seen, MPI_INT64_T, 0, 0, MPI_SUM, win);
				MPI_Win_flush(0, win);
				CHECK(seen >= 0, "lock word %lld: a release was applied twice", (long long)seen);
				if (!(seen & EXCLUSIVE)) break;
				MPI_Accumulate(&minus_one, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, MPI_SUM, win);
			}
			MPI_Get(table, TABLE_ENTRIES, MPI_INT64_T, 0, 1, TABLE_ENTRIES, MPI_INT64_T, win);
			MPI_Win_flush(0, win);
			MPI_Accumulate(&minus_one, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, MPI_SUM, win);
			for (int i = 1; i < TABLE_ENTRIES; ++i) {
				if (table[i] != table[0]) {
					++torn;
					break;
				}
			}
		}
	}
	MPI_Win_unlock_all(win);
	MPI_Barrier(MPI_COMM_WORLD);
	long all_torn = 0;
	MPI_Reduce(&torn, &all_torn, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		CHECK(all_torn == 0, "%ld of %d table reads saw two versions under the lock", all_torn,
		      iterations * (size - 1));
		CHECK(base[0] == 0, "lock word %lld after every release (expected 0)", (long long)base[0]);
	}
	MPI_Win_free(&win);
}

static unsigned char pattern(int writer, size_t at) {
	return (unsigned char)(writer * 131 + at * 7 + (at >> 9));
}

static void random_puts_and_gets(int rank, int size, int rounds) {
	unsigned char* base;
	MPI_Win win;
	MPI_Win_allocate(SLICE, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
	memset(base, 0xEE, SLICE);
	MPI_Barrier(MPI_COMM_WORLD);
	const int target = (rank + 1) % size;
	unsigned char* out = malloc(SLICE);
	unsigned char* back = malloc(SLICE);
	CHECK(out && back, "malloc");
	for (size_t i = 0; i < SLICE; ++i) out[i] = pattern(rank, i);
	static const size_t sizes[] = {1, 7, 8, 36, 64, 255, 4096, 8191, 8192, 8193, 16384,
				       65535, 65536, 65537, 131072, 262144};
	unsigned seed = 0x5EED + rank;
	MPI_Win_lock(MPI_LOCK_SHARED, target, 0, win);
	for (int r = 0; r < rounds; ++r) {
		const size_t len = sizes[rand_r(&seed) % (sizeof sizes / sizeof sizes[0])];
		const size_t at = rand_r(&seed) % (SLICE - len + 1);
		const size_t from = rand_r(&seed) % 64;  /* where the read lands: placement varies */
		MPI_Put(out + at, (int)len, MPI_BYTE, target, (MPI_Aint)at, (int)len, MPI_BYTE, win);
		MPI_Win_flush(target, win);
		memset(back, 0, len + from);
		MPI_Get(back + from, (int)len, MPI_BYTE, target, (MPI_Aint)at, (int)len, MPI_BYTE, win);
		MPI_Win_flush(target, win);
		CHECK(memcmp(back + from, out + at, len) == 0,
		      "round %d: %zu bytes put at %zu of rank %d read back different", r, len, at,
		      target);
	}
	MPI_Win_unlock(target, win);
	MPI_Barrier(MPI_COMM_WORLD);
	/* What landed here: every byte is the writer's pattern for its position, or untouched. */
	const int writer = (rank + size - 1) % size;
	size_t written = 0;
	for (size_t i = 0; i < SLICE; ++i) {
		if (base[i] == pattern(writer, i)) {
			++written;
			continue;
		}
		CHECK(base[i] == 0xEE, "byte %zu of the window is 0x%02x: neither rank %d's nor untouched",
		      i, base[i], writer);
	}
	CHECK(written > 0, "nothing of rank %d's puts landed", writer);
	free(out);
	free(back);
	MPI_Win_free(&win);
}

int main(int argc, char** argv) {
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	CHECK(size >= 2, "needs at least 2 ranks");
	const int iterations = argc > 1 ? atoi(argv[1]) : 1000;
	lock_protected_reads(rank, size, iterations);
	random_puts_and_gets(rank, size, iterations / 4);
	if (rank == 0)
		printf("PASS: one-sided over %d ranks: %d lock-protected table reads consistent, "
		       "random puts and gets read back\n", size, iterations * (size - 1));
	MPI_Finalize();
	return 0;
}
