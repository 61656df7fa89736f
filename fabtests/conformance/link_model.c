/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The link and topology model of the emulated device (FI_EXANET_LINK_*, fi_exanet(7) LINK
 * MODEL), end to end through the parameters: two processes ping-pong under the model, placed
 * (1) by FI_EXANET_LINK_POSITION 5 hops apart, (2) by a placement file keyed by rank, 3 hops
 * apart through the torus's wrap-around, and (3) with a torus and a placement file that cannot
 * be used (warned about, the defaults then: rank order, 1 hop). Each time the messages arrive
 * whole, eager, medium and rendezvous, and the round trips take at least what the model says
 * (a lower bound only: the model holds messages back, and nothing can make them faster; a
 * loaded machine only adds). Per-hop latency 2 ms, so the lower bound is far above the cost of
 * the emulation itself.
 */
#include "xt.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define HOP_NS 2000000 /* 2 ms */
#define ROUNDS 5

static const size_t sizes[] = {8, 1000, 100000};
#define NSIZES (sizeof sizes / sizeof sizes[0])

struct scenario {
	const char *name;
	const char *position[2]; /* FI_EXANET_LINK_POSITION per process, or NULL */
	const char *torus;
	int placement_file;      /* write one keyed by rank: rank 0 at 0,0,0,1 and rank 1 at 3,0,0,1 */
	const char *placement;   /* else this FI_EXANET_LINK_PLACEMENT, or NULL */
	unsigned hops;
};

static const struct scenario scenarios[] = {
	{"explicit positions, 5 hops", {"0,0,0,1", "2,1,0,1"}, "4x4x2", 0, NULL, 5},
	{"placement file by rank, 3 hops around the torus", {NULL, NULL}, "4x4x2", 1, NULL, 3},
	{"unusable torus and placement: defaults, rank order, 1 hop", {NULL, NULL}, "4by4", 0,
	 "/nonexistent/placement", 1},
};

static char g_file[64];

/* The environment each domain open reads (both processes set their own). */
static void configure(const struct scenario *s, int rank)
{
	setenv("FI_EXANET_LINK_MODEL", "1", 1);
	char hop[32];
	snprintf(hop, sizeof hop, "%d", HOP_NS);
	setenv("FI_EXANET_LINK_HOP_NS", hop, 1);
	setenv("FI_EXANET_LINK_TORUS", s->torus, 1);
	char r[8];
	snprintf(r, sizeof r, "%d", rank);
	setenv("PMI_RANK", r, 1);
	if (s->position[rank])
		setenv("FI_EXANET_LINK_POSITION", s->position[rank], 1);
	else
		unsetenv("FI_EXANET_LINK_POSITION");
	if (s->placement_file)
		setenv("FI_EXANET_LINK_PLACEMENT", g_file, 1);
	else if (s->placement)
		setenv("FI_EXANET_LINK_PLACEMENT", s->placement, 1);
	else
		unsetenv("FI_EXANET_LINK_PLACEMENT");
}

/* ROUNDS round trips of every size; returns the seconds the first process measured. */
static double ping_pong(const struct scenario *s, int rank, int sock)
{
	configure(s, rank);
	struct xt_ep x;
	xt_open_default(&x, 0);
	fi_addr_t peer = xt_exchange(&x, sock, rank == 0, NULL);
	static char out[100000], in[100000];
	xt_sync(sock);
	const double t0 = xt_now_us();
	for (size_t k = 0; k < NSIZES; k++) {
		for (int i = 0; i < ROUNDS; i++) {
			const unsigned seed = (unsigned)(k * 100 + (size_t)i);
			XT_RC(fi_trecv(x.ep, in, sizeof in, NULL, peer, 1, 0, NULL));
			if (rank == 0) {
				xt_fill(out, sizes[k], seed);
				xt_send_one(x.ep, x.txcq, out, sizes[k], peer, 1);
				XT_CHECK(xt_wait(x.rxcq, NULL, NULL, 60) == 1, "%s: reply %zu/%d", s->name, k, i);
			} else {
				XT_CHECK(xt_wait(x.rxcq, NULL, NULL, 60) == 1, "%s: message %zu/%d", s->name, k, i);
				memcpy(out, in, sizes[k]);
				xt_send_one(x.ep, x.txcq, out, sizes[k], peer, 1);
			}
			XT_CHECK(xt_verify(in, sizes[k], seed), "%s: data of size %zu", s->name, sizes[k]);
		}
	}
	const double seconds = (xt_now_us() - t0) / 1e6;
	xt_sync_progress(sock, x.rxcq);
	xt_close(&x);
	return seconds;
}

static int child(int i, int sock)
{
	(void)i;
	for (size_t k = 0; k < sizeof scenarios / sizeof scenarios[0]; k++)
		ping_pong(&scenarios[k], 1, sock);
	return 0;
}

int main(void)
{
	xt_init(120);
	snprintf(g_file, sizeof g_file, "/tmp/exanet-placement.%d", (int)getpid());
	FILE *f = fopen(g_file, "w");
	XT_CHECK(f, "cannot write %s", g_file);
	fprintf(f, "# rank x y z fpga\n0 0 0 0 1\n\n1 3 0 0 1   # x 3 is x 0's neighbour\n");
	fclose(f);
	int sock;
	pid_t pid;
	xt_spawn(1, child, &sock, &pid);
	for (size_t k = 0; k < sizeof scenarios / sizeof scenarios[0]; k++) {
		const struct scenario *s = &scenarios[k];
		const double took = ping_pong(s, 0, sock);
		/* Every one-way trip crosses the hops, whatever else it costs. */
		const double least = 2.0 * ROUNDS * NSIZES * s->hops * HOP_NS / 1e9;
		printf("%s: %d round trips of %zu sizes in %.3f s (the model's hops alone: %.3f s)\n",
		       s->name, ROUNDS, NSIZES, took, least);
		XT_CHECK(took >= least, "%s: %.3f s, faster than the %u hops allow (%.3f s)", s->name, took,
			 s->hops, least);
	}
	xt_reap(1, &pid);
	unlink(g_file);
	xt_pass("link model: positions, placement file, defaults; messages never faster than the hops");
	return 0;
}
