/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * FI_THREAD_SAFE: two threads send 20000 tagged messages each (8 B, 4 KiB, 64 KiB) to a second
 * endpoint of the same process while two threads post receives and a fifth reads both CQs, all
 * at once. Every message arrives exactly once, intact. Then a flood against a receiver that does
 * not progress turns into -FI_EAGAIN, not loss, and drains completely once it does.
 * THREAD_SAFE_MESSAGES=N (at most 20000) sends fewer per thread: the TSan stage of ci/test.sh
 * uses it, where every access costs ten times more and a race shows in the first thousands.
 */
#include "xt.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#define PER_THREAD 20000
#define SENDERS 2

static int per_thread = PER_THREAD;
static struct xt_ep a, b;
static fi_addr_t a_to_b;
static atomic_int sends_done, recvs_done;
static atomic_int seen[SENDERS][PER_THREAD];
static unsigned char payload[SENDERS][3][65536];

static size_t size_of(int i) { return i % 3 == 0 ? 8 : (i % 3 == 1 ? 4096 : 65536); }

static void *sender(void *arg)
{
	int t = (int)(intptr_t)arg;
	for (int i = 0; i < per_thread; i++) {
		/* payload[t][k] never changes, so a rendezvous send may read it at any time */
		ssize_t rc;
		while ((rc = fi_tsend(a.ep, payload[t][i % 3], size_of(i), NULL, a_to_b,
				      ((uint64_t)t << 32) | (uint64_t)i, NULL)) == -FI_EAGAIN)
			;
		XT_RC(rc);
	}
	return NULL;
}

static atomic_int completed[SENDERS];

static void *receiver(void *arg)
{
	int t = (int)(intptr_t)arg;
	for (int i = 0; i < per_thread; i++) {
		/* at most 64 receives of this thread in flight; the reaper frees each buffer */
		while (i - atomic_load(&completed[t]) >= 64)
			;
		void *buf = malloc(65536);
		ssize_t rc;
		/* receive sender t's messages, any sequence number: wildcard on the low 32 bits */
		while ((rc = fi_trecv(b.ep, buf, 65536, NULL, FI_ADDR_UNSPEC, (uint64_t)t << 32,
				      0xffffffffULL, buf)) == -FI_EAGAIN)
			;
		XT_RC(rc);
	}
	return NULL;
}

static void *reaper(void *arg)
{
	(void)arg;
	struct fi_cq_tagged_entry e[16];
	while (atomic_load(&recvs_done) < SENDERS * per_thread || atomic_load(&sends_done) < SENDERS * per_thread) {
		ssize_t n = fi_cq_read(b.rxcq, e, 16);
		for (ssize_t k = 0; k < n; k++) {
			int t = (int)(e[k].tag >> 32), i = (int)(e[k].tag & 0xffffffff);
			XT_CHECK(t < SENDERS && i < per_thread, "tag");
			XT_CHECK(e[k].len == size_of(i), "len %zu for message %d", e[k].len, i);
			XT_CHECK(!memcmp(e[k].op_context, payload[t][i % 3], size_of(i)), "payload %d/%d", t, i);
			XT_CHECK(atomic_fetch_add(&seen[t][i], 1) == 0, "message %d/%d twice", t, i);
			free(e[k].op_context);
			atomic_fetch_add(&completed[t], 1);
			atomic_fetch_add(&recvs_done, 1);
		}
		XT_CHECK(n > 0 || n == -FI_EAGAIN, "rx cq read %zd", n);
		n = fi_cq_read(a.txcq, e, 16);
		if (n > 0)
			atomic_fetch_add(&sends_done, (int)n);
		XT_CHECK(n > 0 || n == -FI_EAGAIN, "tx cq read %zd", n);
	}
	return NULL;
}

int main(void)
{
	xt_init(150);
	const char *n = getenv("THREAD_SAFE_MESSAGES");
	if (n) {
		per_thread = atoi(n);
		XT_CHECK(per_thread > 0 && per_thread <= PER_THREAD, "THREAD_SAFE_MESSAGES=%s", n);
	}
	struct fi_info *h = xt_hints();
	h->domain_attr->threading = FI_THREAD_SAFE;
	xt_open(&a, h, 0);
	xt_open(&b, h, 0);
	fi_freeinfo(h);
	XT_CHECK(a.info->domain_attr->threading == FI_THREAD_SAFE, "threading echoed");
	a_to_b = xt_insert(&a, b.name);
	for (int t = 0; t < SENDERS; t++)
		for (int k = 0; k < 3; k++)
			xt_fill(payload[t][k], sizeof payload[t][k], (unsigned)(t * 3 + k));

	pthread_t th[5];
	pthread_create(&th[0], NULL, reaper, NULL);
	for (int t = 0; t < SENDERS; t++) {
		pthread_create(&th[1 + t], NULL, receiver, (void *)(intptr_t)t);
		pthread_create(&th[3 + t], NULL, sender, (void *)(intptr_t)t);
	}
	for (int i = 0; i < 5; i++)
		pthread_join(th[i], NULL);
	for (int t = 0; t < SENDERS; t++)
		for (int i = 0; i < per_thread; i++)
			XT_CHECK(seen[t][i] == 1, "message %d/%d seen %d times", t, i, seen[t][i]);
	xt_pass("FI_THREAD_SAFE: 2 senders, 2 receivers and a CQ reader at once");

	/* Flood: b does not progress, so a's posts must stop with -FI_EAGAIN. */
	fi_addr_t b_to_a = xt_insert(&b, a.name);
	(void)b_to_a;
	static uint32_t seq[100000];
	int posted = 0, again = 0;
	for (; posted < 100000; posted++) {
		seq[posted] = (uint32_t)posted;
		ssize_t rc = fi_tsend(a.ep, &seq[posted], 4, NULL, a_to_b, 77, NULL);
		if (rc == -FI_EAGAIN) {
			again = 1;
			break;
		}
		XT_RC(rc);
	}
	XT_CHECK(again, "100000 unreceived sends never met back-pressure");
	for (int i = 0; i < posted; i++) {
		uint32_t got = ~0u;
		XT_RC(fi_trecv(b.ep, &got, 4, NULL, FI_ADDR_UNSPEC, 77, 0, NULL));
		struct fi_cq_tagged_entry e;
		XT_CHECK(xt_wait(b.rxcq, &e, NULL, 30) == 1 && got == (uint32_t)i, "flooded message %d", i);
	}
	xt_drain(a.txcq);
	printf("  %d sends accepted before -FI_EAGAIN; all received in order\n", posted);
	xt_pass("back-pressure is -FI_EAGAIN, never loss");
	xt_close(&a);
	xt_close(&b);
	return 0;
}
