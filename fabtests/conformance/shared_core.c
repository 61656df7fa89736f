/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Two processes on one core, each waiting for the other in a loop of fi_cq_read that never
 * yields: the loop Open MPI's mtl ofi runs for a blocking send. Each round both post a receive
 * and a rendezvous-sized send (48 KiB) to each other and poll until both complete; about half
 * the sends wait for the peer's clear-to-send, which the peer can only send when it gets the
 * core. Before exanet's polls yielded (FI_EXANET_IDLE_YIELD), each such wait lasted until the
 * scheduler's tick took the core away (4 ms, 100 ms under SCHED_RR), which MPI jobs with more
 * ranks than cores paid on every rendezvous.
 *
 * Checked: every byte of every round; that both processes' polls gave the core away and that
 * the other process ran meanwhile (the idle_yields and idle_yields_shared counters); and, on
 * endpoints opened with FI_EXANET_IDLE_YIELD=0, that the same exchange still completes and
 * yields never.
 */
#define _GNU_SOURCE
#include "xt.h"

#include <rdma/fi_ext_exanet.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define BIG (48u << 10)
#define ROUNDS 200
#define ROUNDS_WITHOUT_YIELD 3

static void pin_to_one_cpu(void)
{
	cpu_set_t allowed, one;
	XT_CHECK(sched_getaffinity(0, sizeof allowed, &allowed) == 0, "sched_getaffinity");
	int cpu = 0;
	while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &allowed))
		cpu++;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	XT_CHECK(sched_setaffinity(0, sizeof one, &one) == 0, "sched_setaffinity to cpu %d", cpu);
}

/* Polls both CQs until one send and one receive have completed: never sleeps, never yields. */
static void poll_both(struct xt_ep *x, int round)
{
	int sent = 0, received = 0;
	const double until = xt_now_s() + 60;
	while (!sent || !received) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err = {0};
		ssize_t n = fi_cq_read(x->txcq, &e, 1);
		if (n == 1)
			sent = 1;
		else if (n == -FI_EAVAIL) {
			fi_cq_readerr(x->txcq, &err, 0);
			XT_CHECK(0, "round %d: send failed: %s", round, fi_strerror(err.err));
		}
		n = fi_cq_read(x->rxcq, &e, 1);
		if (n == 1) {
			XT_CHECK(e.len == BIG, "round %d: received %zu bytes", round, e.len);
			received = 1;
		} else if (n == -FI_EAVAIL) {
			fi_cq_readerr(x->rxcq, &err, 0);
			XT_CHECK(0, "round %d: receive failed: %s", round, fi_strerror(err.err));
		}
		XT_CHECK(xt_now_s() < until, "round %d: no completion in 60 s", round);
	}
}

/* `rounds` exchanges with the peer; returns the counters' growth over them. */
static struct fi_exanet_counters exchange(int sock, int first, int rounds, unsigned salt)
{
	struct xt_ep x;
	xt_open_default(&x, 0);
	fi_addr_t peer = xt_exchange(&x, sock, first, NULL);
	unsigned char *out = malloc(BIG), *in = malloc(BIG);
	XT_CHECK(out && in, "out of memory");
	const struct fi_exanet_counters before = xt_counters(x.ep);
	for (int r = 0; r < rounds; r++) {
		xt_fill(out, BIG, salt + 2 * (unsigned)r + (unsigned)first);
		XT_RC(fi_trecv(x.ep, in, BIG, NULL, peer, 100 + r, 0, NULL));
		ssize_t rc;
		while ((rc = fi_tsend(x.ep, out, BIG, NULL, peer, 100 + r, NULL)) == -FI_EAGAIN)
			fi_cq_read(x.txcq, NULL, 0);
		XT_RC(rc);
		poll_both(&x, r);
		XT_CHECK(xt_verify(in, BIG, salt + 2 * (unsigned)r + (unsigned)!first),
			 "round %d: the payload differs", r);
	}
	struct fi_exanet_counters c = xt_counters(x.ep);
	c.idle_yields -= before.idle_yields;
	c.idle_yields_shared -= before.idle_yields_shared;
	c.rndv_sent -= before.rndv_sent;
	c.ri_sent -= before.ri_sent;
	xt_sync_progress(sock, x.rxcq);
	xt_close(&x);
	free(out);
	free(in);
	return c;
}

static void run_side(int sock, int first)
{
	pin_to_one_cpu();
	unsetenv("FI_EXANET_IDLE_YIELD");
	struct fi_exanet_counters c = exchange(sock, first, ROUNDS, 1000);
	const char *who = first ? "first" : "second";
	XT_CHECK(c.rndv_sent + c.ri_sent == ROUNDS, "%s: %llu of %d sends were rendezvous", who,
		 (unsigned long long)(c.rndv_sent + c.ri_sent), ROUNDS);
	XT_CHECK(c.idle_yields > 0 && c.idle_yields_shared > 0,
		 "%s: polls gave the core away %llu times, the peer ran in %llu of them", who,
		 (unsigned long long)c.idle_yields, (unsigned long long)c.idle_yields_shared);
	printf("%s: %d rounds, %llu yields, %llu let the peer run\n", who, ROUNDS,
	       (unsigned long long)c.idle_yields, (unsigned long long)c.idle_yields_shared);
	/* The parameter read when the domain opens: 0 turns the yields off. */
	setenv("FI_EXANET_IDLE_YIELD", "0", 1);
	c = exchange(sock, first, ROUNDS_WITHOUT_YIELD, 5000);
	XT_CHECK(c.idle_yields == 0, "%s: %llu yields with FI_EXANET_IDLE_YIELD=0", who,
		 (unsigned long long)c.idle_yields);
}

static int child(int i, int sock)
{
	(void)i;
	run_side(sock, 0);
	return 0;
}

int main(void)
{
	xt_init(120);
	int sock;
	pid_t pid;
	xt_spawn(1, child, &sock, &pid);
	run_side(sock, 1);
	xt_reap(1, &pid);
	xt_pass("two processes on one core: polls yield to the peer they wait for");
	return 0;
}
