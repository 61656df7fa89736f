/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What the machine itself does between the two cores the benchmarks run on (cpus 0 and 1, as
 * BIND=1 pins them), measured without any provider: the round trip of one cache line written in
 * turn by each core, and the time for one core to write 1 MiB and the other to copy it out.
 *
 * Why: on a virtual machine the host may run the two vCPUs on cores that share a cache or on cores
 * that do not (another CCD of the same socket), and it changes that while a benchmark runs. Seen
 * on the machine of BENCHMARKS.md: the line round trip is 80-120 ns in one placement and 300-400 ns
 * in the other, and every transport that moves data between the cores through caches slows down
 * with it (exanet's streaming bandwidth at 1 MiB: 60 GB/s against 26). A comparison is fair only
 * between runs in the same phase, so the benchmark scripts record this probe beside every run.
 *
 *   core_probe [cpu_a cpu_b]      (default 0 1)
 * prints one line:  line_rtt_ns N handoff_1MiB_us M
 * Each figure is the median of 31 blocks, so a block that another process interrupted does not
 * count. A benchmark tool, not a test: it judges nothing.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { blocks = 31, rtts_per_block = 2000, handoffs_per_block = 8, handoff_bytes = 1 << 20 };

static _Alignas(64) _Atomic long turn;  /* odd: the peer's move, even: the main thread's */
static int cpu_a, cpu_b;
static unsigned char *src, *dst;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	if (pthread_setaffinity_np(pthread_self(), sizeof s, &s) != 0) {
		fprintf(stderr, "core_probe: cannot run on cpu %d\n", cpu);
		exit(2);
	}
}

static void wait_for(long value)
{
	while (atomic_load_explicit(&turn, memory_order_acquire) != value)
		;
}

/* The peer answers every odd value with the next even one; in the handoff phase (negative
 * values) it first copies the buffer the main thread just wrote. */
static void *peer(void *arg)
{
	(void)arg;
	pin(cpu_b);
	for (long i = 0; i < (long)blocks * rtts_per_block; i++) {
		wait_for(2 * i + 1);
		atomic_store_explicit(&turn, 2 * i + 2, memory_order_release);
	}
	for (long i = 0; i < (long)blocks * handoffs_per_block; i++) {
		wait_for(-(2 * i + 1));
		memcpy(dst, src, handoff_bytes);
		atomic_store_explicit(&turn, -(2 * i + 2), memory_order_release);
	}
	return NULL;
}

static int by_value(const void *a, const void *b)
{
	const double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v)
{
	qsort(v, blocks, sizeof *v, by_value);
	return v[blocks / 2];
}

int main(int argc, char **argv)
{
	cpu_a = argc > 2 ? atoi(argv[1]) : 0;
	cpu_b = argc > 2 ? atoi(argv[2]) : 1;
	src = aligned_alloc(4096, handoff_bytes);
	dst = aligned_alloc(4096, handoff_bytes);
	if (!src || !dst)
		return 2;
	memset(src, 1, handoff_bytes);
	memset(dst, 2, handoff_bytes);
	pthread_t t;
	if (pthread_create(&t, NULL, peer, NULL) != 0)
		return 2;
	pin(cpu_a);
	double rtt[blocks], handoff[blocks];
	for (long b = 0, i = 0; b < blocks; b++) {
		const double t0 = now();
		for (int k = 0; k < rtts_per_block; k++, i++) {
			atomic_store_explicit(&turn, 2 * i + 1, memory_order_release);
			wait_for(2 * i + 2);
		}
		rtt[b] = (now() - t0) / rtts_per_block;
	}
	atomic_store(&turn, 0);
	for (long b = 0, i = 0; b < blocks; b++) {
		const double t0 = now();
		for (int k = 0; k < handoffs_per_block; k++, i++) {
			memset(src, (int)i, handoff_bytes);
			atomic_store_explicit(&turn, -(2 * i + 1), memory_order_release);
			wait_for(-(2 * i + 2));
		}
		handoff[b] = (now() - t0) / handoffs_per_block;
	}
	pthread_join(t, NULL);
	printf("line_rtt_ns %.0f handoff_1MiB_us %.1f\n", median(rtt) * 1e9, median(handoff) * 1e6);
	return 0;
}
