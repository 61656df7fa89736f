/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Losing a host, at the libfabric level (run by netns_lost.sh on two network namespaces): a
 * survivor on host A and a peer on host B, over exanet's network backend, connected and
 * exchanging until the script takes B's link down or kills B's processes. Then the operations
 * the survivor has outstanding with B must end in error completions within a bound, not hang:
 *   - a 16 MiB tagged send whose RTS B holds unmatched (waiting for a CTS),
 *   - a 16 MiB receive directed at B (B never sends it),
 *   - an RMA read of B's memory posted after the loss (its key already known).
 * With the link down B is alive and loses A the same way: its own directed receive must fail.
 * Both then close their endpoint, which must not hang either (the whole run is bounded).
 *
 * The two processes share a folder (only the network is private to each host): names, B's
 * region and "ready" travel there as files.
 *   lost_host peer     DIR   (host B)
 *   lost_host survivor DIR   (host A); the script creates DIR/down once B is gone
 * FI_EXANET_NETWORK_LOST_AFTER_MS sets how long silence takes to count as a loss; the bound
 * checked is LOST_HOST_BOUND_S seconds (default 15) from the loss to the last error.
 */
#include "xt.h"

#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BIG (16u << 20)
#define REGION (1u << 20)

static const char *dir;

static void put_file(const char *name, const void *buf, size_t len)
{
	char path[512], tmp[520];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "wb");
	XT_CHECK(f && fwrite(buf, 1, len, f) == len && fclose(f) == 0, "writing %s", tmp);
	XT_CHECK(rename(tmp, path) == 0, "rename %s", path); /* whole or absent for the reader */
}

static int have_file(const char *name)
{
	char path[512];
	struct stat st;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	return stat(path, &st) == 0;
}

/* Waits for a file the other host writes, progressing cq meanwhile (manual progress). */
static void get_file(const char *name, void *buf, size_t len, struct fid_cq *cq)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	const double end = xt_now_s() + 60;
	while (!have_file(name)) {
		XT_CHECK(xt_now_s() < end, "%s did not appear within 60 s", path);
		if (cq)
			(void)fi_cq_read(cq, NULL, 0);
		usleep(1000);
	}
	if (!buf)
		return;
	FILE *f = fopen(path, "rb");
	XT_CHECK(f && fread(buf, 1, len, f) == len, "reading %s", path);
	fclose(f);
}

static void open_ep(struct xt_ep *x)
{
	struct fi_info *h = xt_hints();
	h->caps |= FI_RMA;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY;
	xt_open(x, h, 0);
	fi_freeinfo(h);
}

/* Takes an error completion from cq within the time left before `end`; returns its context. */
static void *expect_error(struct fid_cq *cq, double end, const char *what)
{
	struct fi_cq_tagged_entry e;
	for (;;) {
		ssize_t r = fi_cq_read(cq, &e, 1);
		if (r == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			XT_CHECK(fi_cq_readerr(cq, &err, 0) == 1, "fi_cq_readerr");
			printf("  %s: error %d (%s)\n", what, err.err, fi_strerror(err.err));
			XT_CHECK(err.err != 0, "%s: an error entry without an error", what);
			return err.op_context;
		}
		XT_CHECK(r != 1, "%s: a success completion with a lost host", what);
		XT_CHECK(r == -FI_EAGAIN, "fi_cq_read = %zd", r);
		XT_CHECK(xt_now_s() < end, "%s: no error completion within the bound (hang)", what);
	}
}

static double bound_s(void)
{
	return (double)xt_env_size("LOST_HOST_BOUND_S", 15);
}

static int peer(void)
{
	struct xt_ep x;
	open_ep(&x);
	put_file("b.name", x.name, sizeof x.name);
	char name[64];
	get_file("a.name", name, sizeof name, NULL);
	fi_addr_t a = xt_insert(&x, name);

	void *region = calloc(1, REGION);
	struct fid_mr *mr = xt_mr_reg_bound(&x, region, REGION, 0);
	uint64_t desc[2] = {(x.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)region : 0,
			    fi_mr_key(mr)};
	put_file("b.region", desc, sizeof desc);

	/* One message each way over the network: the survivor's tag 7, our answer tag 8. */
	uint64_t v = 0;
	XT_RC(fi_trecv(x.ep, &v, sizeof v, NULL, a, 7, 0, NULL));
	XT_CHECK(xt_wait(x.rxcq, NULL, NULL, 30) == 1 && v == 7, "warm-up message from the survivor");
	v = 8;
	xt_send_one(x.ep, x.txcq, &v, sizeof v, a, 8);

	/* A receive the survivor never matches: with the link down it must fail on this side too. */
	void *buf = malloc(BIG);
	int recv_ctx;
	XT_RC(fi_trecv(x.ep, buf, BIG, NULL, a, 3, 0, &recv_ctx));
	put_file("b.ready", "", 0);
	/* Progress (answering the survivor's liveness pings) until the survivor is lost. Killed
	 * here in the kill mode. */
	const double end = xt_now_s() + 120;
	void *ctx = expect_error(x.rxcq, end, "peer: directed receive from the survivor");
	XT_CHECK(ctx == &recv_ctx, "the error completion is not the receive's");
	printf("peer: lost the survivor, error completion received\n");
	XT_RC(fi_close(&mr->fid));
	xt_close(&x);
	free(region);
	free(buf);
	printf("PASS: peer\n");
	return 0;
}

static int survivor(void)
{
	struct xt_ep x;
	open_ep(&x);
	put_file("a.name", x.name, sizeof x.name);
	char name[64];
	get_file("b.name", name, sizeof name, NULL);
	fi_addr_t b = xt_insert(&x, name);
	uint64_t desc[2];
	get_file("b.region", desc, sizeof desc, NULL);

	uint64_t v = 7;
	xt_send_one(x.ep, x.txcq, &v, sizeof v, b, 7);
	XT_RC(fi_trecv(x.ep, &v, sizeof v, NULL, b, 8, 0, NULL));
	XT_CHECK(xt_wait(x.rxcq, NULL, NULL, 30) == 1 && v == 8, "warm-up message from the peer");
	/* One RMA read while all is well: the key's grant is learnt from B now. */
	char *dst = malloc(REGION);
	XT_POST(x.txcq, fi_read(x.ep, dst, 8, NULL, b, desc[0], desc[1], NULL));
	XT_CHECK(xt_wait(x.txcq, NULL, NULL, 30) == 1, "warm-up RMA read");
	get_file("b.ready", NULL, 0, x.txcq);

	void *sbuf = malloc(BIG), *rbuf = malloc(BIG);
	int send_ctx, recv_ctx, read_ctx;
	XT_RC(fi_tsend(x.ep, sbuf, BIG, NULL, b, 1, &send_ctx)); /* B holds its RTS unmatched */
	XT_RC(fi_trecv(x.ep, rbuf, BIG, NULL, b, 2, 0, &recv_ctx));
	put_file("a.ready", "", 0);

	/* Keep progressing while the script takes B away; time from when it says B is gone. */
	get_file("down", NULL, 0, x.txcq);
	const double lost_at = xt_now_s(), end = lost_at + bound_s();
	ssize_t rc;
	while ((rc = fi_read(x.ep, dst, REGION, NULL, b, desc[0], desc[1], &read_ctx)) == -FI_EAGAIN) {
		(void)fi_cq_read(x.txcq, NULL, 0);
		XT_CHECK(xt_now_s() < end, "fi_read kept saying -FI_EAGAIN");
	}
	int tx_errors = 2;
	if (rc < 0) { /* B already counted lost: refused at once, which is as good */
		printf("  RMA read posted after the loss: %zd (%s)\n", rc, fi_strerror((int)-rc));
		tx_errors = 1;
	}
	int seen_send = 0, seen_read = 0;
	for (int i = 0; i < tx_errors; i++) {
		void *ctx = expect_error(x.txcq, end, "survivor: send or read");
		seen_send += ctx == &send_ctx;
		seen_read += ctx == &read_ctx;
	}
	XT_CHECK(seen_send == 1 && seen_read == tx_errors - 1, "error completions of other operations");
	XT_CHECK(expect_error(x.rxcq, end, "survivor: directed receive") == &recv_ctx,
		 "the receive's error completion is another's");
	const double took = xt_now_s() - lost_at;
	printf("survivor: every operation with the lost host failed %.2f s after it went (bound %.0f s)\n",
	       took, bound_s());

	/* A new send to the lost host is refused, or fails as a completion. */
	v = 9;
	rc = fi_tsend(x.ep, &v, sizeof v, NULL, b, 9, &send_ctx);
	if (rc == 0)
		expect_error(x.txcq, xt_now_s() + bound_s(), "survivor: send after the loss");
	else
		printf("  send after the loss: %zd (%s)\n", rc, fi_strerror((int)-rc));
	xt_close(&x);
	free(sbuf);
	free(rbuf);
	free(dst);
	printf("PASS: survivor (%.2f s)\n", took);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "peer") && strcmp(argv[1], "survivor"))) {
		fprintf(stderr, "usage: %s peer|survivor DIR\n", argv[0]);
		return 2;
	}
	dir = argv[2];
	xt_init(180);
	setvbuf(stdout, NULL, _IOLBF, 0);
	return strcmp(argv[1], "peer") == 0 ? peer() : survivor();
}
