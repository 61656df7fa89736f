/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A message after RMA writes to the same peer: when its receive completes, the writes' data is
 * in the target's memory. fi_endpoint(3) names this FI_ORDER_SAW (sends after writes), which
 * exanet advertises; libfabric's shm and tcp keep it too, and applications rely on it: upstream's
 * fi_ubertest writes with fi_inject_write, sends a message at once and has the peer check its
 * memory when the message arrives (nothing else tells the target an inject write landed).
 *
 * Two processes do the same, round after round, both ways at once: one to three writes into the
 * peer's registration (fi_inject_write, fi_write, fi_writev with 1 to iov_limit entries,
 * fi_writemsg with FI_INJECT or FI_DELIVERY_COMPLETE or neither, fi_writedata,
 * fi_inject_writedata, and fi_atomic FI_ATOMIC_WRITE of bytes where the provider has FI_ATOMIC),
 * lengths around every threshold from 1 byte to 320 KiB at random offsets,
 * then one tagged message (fi_tinject, fi_tsend or fi_tsendmsg, 16 bytes to 256 KiB) that says
 * what was written. The receiver checks every byte when the message completes, before it waits
 * for anything else, then spoils the range so a later round cannot pass on old data. It also
 * checks that the writes' remote CQ data came out of the CQ before the message: fi_endpoint(3)
 * does not promise that without FI_ORDER_STRICT completions, but shm and tcp give that order and
 * so does exanet (WRITE_THEN_SEND_DATA_ORDER=0 leaves the check out). Now and then
 * both register their memory anew under a new key, so first writes to a key come back (over
 * exanet's network backend, the initiator asks the target about a key it has not used).
 *
 * Over exanet it first checks that the first small writes to a key go inline, also over the
 * network, where they wait for the target's answer about the key, and that a window of writes
 * with completions leaves in a few lower messages there (first_writes_inline).
 *
 * Run over exanet (both backends) and over shm and tcp (FI_PROVIDER) as the references.
 * WRITE_THEN_SEND_ROUNDS (default 1000) and WRITE_THEN_SEND_SEED (default: from the clock;
 * printed) vary it.
 */
#include "xt.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>
#include <string.h>
#include <time.h>

#define SLOT (320u << 10)          /* one write's room */
#define SLOTS 3                    /* at most this many writes per round */
#define HALF (SLOTS * SLOT)        /* rounds alternate between two halves of the registration */
#define REGION (2 * HALF)
#define MSG_MAX (256u << 10)
#define KEY_BASE 0x5a70u

enum write_op { OP_INJECT, OP_WRITE, OP_WRITEV, OP_WRITEMSG, OP_WRITEDATA, OP_INJECT_WRITEDATA, OP_ATOMIC, OP_COUNT };
static const char *const op_name[OP_COUNT] = {"fi_inject_write", "fi_write", "fi_writev", "fi_writemsg",
					      "fi_writedata", "fi_inject_writedata", "fi_atomic"};

/* What one message says about the writes before it. */
struct note {
	uint32_t round, writes, with_data;
	struct {
		uint32_t seed, op, off, len;
	} w[SLOTS];
};

static const size_t lengths[] = {1,     7,     8,     15,    16,    17,     63,     64,
				 65,    255,   256,   257,   1023,  1024,   1025,   2048,
				 4095,  4096,  4097,  8191,  8192,  16383,  16384,  16385,
				 32768, 65535, 65536, 65537, 98304, 131072, 262144, SLOT};
static const size_t msg_lengths[] = {sizeof(struct note), 1024, 8192, 16384, 65536, MSG_MAX};

static unsigned long long g_seed;
static int g_rounds;
static int g_data_order; /* check the order of remote CQ data and the message (see main) */

static uint64_t mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

struct rng {
	uint64_t s;
};
static uint64_t next(struct rng *r, uint64_t bound)
{
	r->s = mix(r->s);
	return r->s % bound;
}

struct side {
	struct xt_ep x;
	fi_addr_t peer;
	int sock;
	unsigned char *region, *src, *rbuf, *sbuf, *want;
	struct fid_mr *mr;
	uint64_t peer_addr, peer_key;
	size_t inject_size, iov_limit;
	size_t atomic_max; /* FI_UINT8 FI_ATOMIC_WRITE elements per operation (0: no FI_ATOMIC) */
	uint64_t tx_pending; /* completions this side still waits for on txcq */
	uint64_t data_seen[2]; /* remote CQ data received, by round parity (the peer may be ahead) */
	uint32_t round;      /* the round under way */
	int got_msg;         /* its message from the peer has completed */
	struct fi_context2 ctx[SLOTS + 2]; /* writes, the receive, the send */
};

static void register_region(struct side *s, uint64_t key)
{
	if (s->mr)
		XT_RC(fi_close(&s->mr->fid));
	XT_RC(fi_mr_reg(s->x.domain, s->region, REGION, FI_REMOTE_WRITE | FI_REMOTE_READ, 0, key, 0,
			&s->mr, NULL));
	if (s->x.info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		XT_RC(fi_mr_bind(s->mr, &s->x.ep->fid, 0));
		XT_RC(fi_mr_enable(s->mr));
	}
	xt_exchange_region(&s->x, s->sock, s->region, s->mr, &s->peer_addr, &s->peer_key);
}

/* Reads both CQs once: counts transmit completions and remote CQ data, and notes the receive
 * of this round's message. */
static void poll_once(struct side *s)
{
	const uint32_t round = s->round;
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	ssize_t n = fi_cq_read(s->x.txcq, &e, 1);
	if (n == 1) {
		XT_CHECK(s->tx_pending > 0, "round %u: a transmit completion nobody waits for (flags 0x%llx)",
			 round, (unsigned long long)e.flags);
		s->tx_pending--;
	} else if (n == -FI_EAVAIL) {
		memset(&err, 0, sizeof err);
		fi_cq_readerr(s->x.txcq, &err, 0);
		XT_CHECK(0, "round %u: transmit error %d (%s), flags 0x%llx", round, err.err,
			 fi_strerror(err.err), (unsigned long long)err.flags);
	}
	n = fi_cq_read(s->x.rxcq, &e, 1);
	if (n == 1) {
		if (e.flags & FI_REMOTE_CQ_DATA) {
			const uint64_t of = e.data >> 8;
			XT_CHECK(of == round || of == round + 1, "round %u: CQ data 0x%llx", round,
				 (unsigned long long)e.data);
			s->data_seen[of & 1]++;
		} else {
			XT_CHECK(e.tag == round && !s->got_msg, "round %u: message of round %llu (%s)",
				 round, (unsigned long long)e.tag, s->got_msg ? "a second" : "first");
			s->got_msg = 1;
		}
	} else if (n == -FI_EAVAIL) {
		memset(&err, 0, sizeof err);
		fi_cq_readerr(s->x.rxcq, &err, 0);
		XT_CHECK(0, "round %u: receive error %d (%s)", round, err.err, fi_strerror(err.err));
	}
	if (n <= 0)
		xt_idle();
}

/* Posts, retrying while the provider says -FI_EAGAIN (progressing both queues meanwhile). */
#define POST(s, round, call)                                                          \
	do {                                                                          \
		ssize_t rc_;                                                          \
		while ((rc_ = (call)) == -FI_EAGAIN)                                  \
			poll_once(s);                                                 \
		XT_CHECK(rc_ == 0, "round %u: %s = %zd (%s)", (round), #call, rc_,   \
			 fi_strerror((int)-rc_));                                     \
	} while (0)

/* Returns the operation posted (an inject too long for inject_size goes as its plain form). */
static enum write_op post_write(struct side *s, uint32_t round, int k, enum write_op op, uint64_t off,
				size_t len, struct rng *r)
{
	const uint64_t dst = s->peer_addr + off;
	const uint64_t key = s->peer_key;
	unsigned char *src = s->src + k * SLOT;
	void *ctx = &s->ctx[k];
	const uint64_t data = ((uint64_t)round << 8) | (uint64_t)k;
	if ((op == OP_INJECT || op == OP_INJECT_WRITEDATA) && len > s->inject_size)
		op = op == OP_INJECT ? OP_WRITE : OP_WRITEDATA;
	if (op == OP_ATOMIC && len > s->atomic_max)
		op = OP_WRITE;
	switch (op) {
	case OP_INJECT:
		POST(s, round, fi_inject_write(s->x.ep, src, len, s->peer, dst, key));
		return op;
	case OP_INJECT_WRITEDATA:
		POST(s, round, fi_inject_writedata(s->x.ep, src, len, data, s->peer, dst, key));
		return op;
	case OP_WRITE:
		POST(s, round, fi_write(s->x.ep, src, len, NULL, s->peer, dst, key, ctx));
		break;
	case OP_WRITEDATA:
		POST(s, round, fi_writedata(s->x.ep, src, len, NULL, data, s->peer, dst, key, ctx));
		break;
	case OP_ATOMIC:
		POST(s, round, fi_atomic(s->x.ep, src, len, NULL, s->peer, dst, key, FI_UINT8,
					 FI_ATOMIC_WRITE, ctx));
		break;
	case OP_WRITEV:
	case OP_WRITEMSG: {
		/* 1 to iov_limit entries of random lengths that add up to len */
		struct iovec iov[8];
		size_t count = 1 + next(r, s->iov_limit < 8 ? s->iov_limit : 8);
		if (count > len)
			count = len;
		size_t at = 0;
		for (size_t i = 0; i < count; i++) {
			const size_t left = len - at, after = count - 1 - i;
			const size_t take = i + 1 == count ? left : 1 + next(r, left - after);
			iov[i].iov_base = src + at;
			iov[i].iov_len = take;
			at += take;
		}
		if (op == OP_WRITEV) {
			POST(s, round, fi_writev(s->x.ep, iov, NULL, count, s->peer, dst, key, ctx));
			break;
		}
		struct fi_rma_iov rma = {.addr = dst, .len = len, .key = key};
		struct fi_msg_rma m = {.msg_iov = iov, .iov_count = count, .addr = s->peer,
				       .rma_iov = &rma, .rma_iov_count = 1, .context = ctx};
		static const uint64_t flag_sets[] = {0, FI_INJECT, FI_DELIVERY_COMPLETE};
		uint64_t flags = FI_COMPLETION | flag_sets[next(r, 3)];
		if ((flags & FI_INJECT) && len > s->inject_size)
			flags &= ~FI_INJECT;
		POST(s, round, fi_writemsg(s->x.ep, &m, flags));
		if (flags & FI_INJECT) /* the buffer is ours again: spoil it, the target must not care */
			memset(src, 0xee, len);
		break;
	}
	default:
		XT_CHECK(0, "op %d", op);
	}
	s->tx_pending++;
	return op;
}

static void round_trip(struct side *s, uint32_t round, struct rng *r)
{
	const uint64_t half = (round & 1) * HALF;
	s->round = round;
	s->got_msg = 0;
	/* the peer's message of this round */
	POST(s, round, fi_trecv(s->x.ep, s->rbuf, MSG_MAX, NULL, s->peer, round, 0, &s->ctx[SLOTS]));

	struct note mine = {.round = round, .writes = 1 + (uint32_t)next(r, SLOTS)};
	for (uint32_t k = 0; k < mine.writes; k++) {
		const size_t len = lengths[next(r, sizeof lengths / sizeof lengths[0])];
		const uint64_t off = k * SLOT + next(r, SLOT - len + 1);
		const unsigned seed = round * 4 + k + 1;
		mine.w[k].seed = seed;
		mine.w[k].off = (uint32_t)off;
		mine.w[k].len = (uint32_t)len;
		xt_fill(s->src + k * SLOT, len, seed);
		const enum write_op op = post_write(s, round, (int)k, (enum write_op)next(r, OP_COUNT),
						    half + off, len, r);
		mine.w[k].op = op;
		if (op == OP_WRITEDATA || op == OP_INJECT_WRITEDATA)
			mine.with_data++;
	}
	/* at once: nothing of the writes has been waited for */
	const size_t mlen = msg_lengths[next(r, sizeof msg_lengths / sizeof msg_lengths[0])];
	memcpy(s->sbuf, &mine, sizeof mine);
	const unsigned how = (unsigned)next(r, 3);
	if (how == 0 && mlen <= s->inject_size) {
		POST(s, round, fi_tinject(s->x.ep, s->sbuf, mlen, s->peer, round));
	} else if (how == 1) {
		struct iovec iov = {.iov_base = s->sbuf, .iov_len = mlen};
		struct fi_msg_tagged m = {.msg_iov = &iov, .iov_count = 1, .addr = s->peer,
					  .tag = round, .context = &s->ctx[SLOTS + 1]};
		POST(s, round, fi_tsendmsg(s->x.ep, &m, FI_COMPLETION));
		s->tx_pending++;
	} else {
		POST(s, round, fi_tsend(s->x.ep, s->sbuf, mlen, NULL, s->peer, round, &s->ctx[SLOTS + 1]));
		s->tx_pending++;
	}

	/* the peer's message: its writes must be here now */
	const double end = xt_now_s() + 30;
	while (!s->got_msg) {
		poll_once(s);
		XT_CHECK(xt_now_s() < end, "round %u: no message from the peer in 30 s", round);
	}
	struct note theirs;
	memcpy(&theirs, s->rbuf, sizeof theirs);
	XT_CHECK(theirs.round == round && theirs.writes >= 1 && theirs.writes <= SLOTS,
		 "round %u: the message says round %u, %u writes", round, theirs.round, theirs.writes);
	/* The writes' remote CQ data came out of the CQ before the message (both share rxcq). */
	XT_CHECK(!g_data_order || s->data_seen[round & 1] == theirs.with_data,
		 "round %u (seed %llu): the message completed before the remote CQ data of the writes "
		 "posted ahead of it: %llu of %u read", round, g_seed,
		 (unsigned long long)s->data_seen[round & 1], theirs.with_data);
	for (uint32_t k = 0; k < theirs.writes; k++) {
		unsigned char *at = s->region + half + theirs.w[k].off;
		const size_t len = theirs.w[k].len;
		xt_fill(s->want, len, theirs.w[k].seed);
		size_t bad = 0; /* the first byte that differs */
		while (bad < len && at[bad] == s->want[bad])
			bad++;
		const int ok = bad == len;
		XT_CHECK(ok, "round %u (seed %llu): write %u of %u (%s, %u bytes at %u) not in place when "
			 "the message after it arrived: byte %zu is 0x%02x",
			 round, g_seed, k + 1, theirs.writes, op_name[theirs.w[k].op % OP_COUNT], theirs.w[k].len,
			 theirs.w[k].off, bad, at[bad]);
		for (size_t i = 0; i < len; i++) /* no later round can pass on these bytes */
			at[i] ^= 0xff;
	}
	/* the rest: our own completions and the peer's remote CQ data */
	uint64_t *data = &s->data_seen[round & 1];
	while (s->tx_pending > 0 || *data < theirs.with_data) {
		poll_once(s);
		XT_CHECK(xt_now_s() < end, "round %u: %llu completions and %llu of %u CQ data missing after 30 s",
			 round, (unsigned long long)s->tx_pending, (unsigned long long)*data, theirs.with_data);
	}
	XT_CHECK(*data == theirs.with_data, "round %u: %llu remote CQ data for %u writes", round,
		 (unsigned long long)*data, theirs.with_data);
	*data = 0;
}

/* The first writes to a key, over exanet: over the network the initiator asks the target about
 * a key it has not used, and the writes a stream posts meanwhile wait for the answer. Small
 * ones still go inline (one lower message each, no verdict to wait for), as they would have
 * without the wait; they went by DMA before (2026-12-06). A registration of its own, so that
 * nothing here can land in the rounds' memory. */
#define FIRST_WRITES 8
#define BURST_WRITES 16 /* then a window of writes with completions, 1 KiB each */
#define BURST_LEN 1024
static void first_writes_inline(struct side *s)
{
	static unsigned char target_buf[FIRST_WRITES * 64 + BURST_WRITES * BURST_LEN];
	struct fid_mr *mr = NULL;
	uint64_t addr, key;
	XT_RC(fi_mr_reg(s->x.domain, target_buf, sizeof target_buf, FI_REMOTE_WRITE, 0, KEY_BASE - 1, 0,
			&mr, NULL));
	if (s->x.info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		XT_RC(fi_mr_bind(mr, &s->x.ep->fid, 0));
		XT_RC(fi_mr_enable(mr));
	}
	xt_exchange_region(&s->x, s->sock, target_buf, mr, &addr, &key);
	xt_fill(s->src, 64, 77); /* the same bytes in both processes */
	const struct fi_exanet_counters before = xt_counters(s->x.ep);
	for (int k = 0; k < FIRST_WRITES; k++)
		POST(s, 0, fi_inject_write(s->x.ep, s->src, 64, s->peer, addr + 64 * (uint64_t)k, key));
	struct fi_exanet_counters now = xt_counters(s->x.ep);
	const double end = xt_now_s() + 30;
	while (now.rma_writes - before.rma_writes < FIRST_WRITES) { /* counted once checked */
		poll_once(s);
		XT_CHECK(xt_now_s() < end, "%llu of %d first writes checked in 30 s",
			 (unsigned long long)(now.rma_writes - before.rma_writes), FIRST_WRITES);
		now = xt_counters(s->x.ep);
	}
	XT_CHECK(now.rma_inline_writes - before.rma_inline_writes == FIRST_WRITES,
		 "%llu of the %d first 64-byte writes to a key went inline (peers over the network: %llu)",
		 (unsigned long long)(now.rma_inline_writes - before.rma_inline_writes), FIRST_WRITES,
		 (unsigned long long)now.peers_network);
	/* the peer's writes have landed here before the registration closes */
	for (int k = 0; k < FIRST_WRITES; k++)
		while (memcmp(target_buf + 64 * k, s->src, 64) != 0) {
			poll_once(s);
			XT_CHECK(xt_now_s() < end, "the peer's first write %d did not land in 30 s", k);
		}

	/* A window of writes with completions: the application learns of them only by reading its
	 * CQ, which polls first, so over the network they may leave together, in a few lower
	 * messages, as a window of sends does (net_messages.c); one each before (2026-12-06). */
	const uint64_t at = FIRST_WRITES * 64;
	xt_fill(s->src, BURST_LEN, 78);
	const struct fi_exanet_counters b0 = xt_counters(s->x.ep);
	for (int k = 0; k < BURST_WRITES; k++) {
		POST(s, 0, fi_write(s->x.ep, s->src, BURST_LEN, NULL, s->peer,
				    addr + at + BURST_LEN * (uint64_t)k, key, &s->ctx[0]));
		s->tx_pending++;
	}
	while (s->tx_pending > 0) {
		poll_once(s);
		XT_CHECK(xt_now_s() < end, "%llu write completions missing after 30 s",
			 (unsigned long long)s->tx_pending);
	}
	const struct fi_exanet_counters b1 = xt_counters(s->x.ep);
	const unsigned long long msgs = b1.network_messages_sent - b0.network_messages_sent;
	XT_CHECK(!b1.peers_network || msgs <= BURST_WRITES / 2,
		 "%d writes of %d bytes with completions took %llu lower messages (want at most %d)",
		 BURST_WRITES, BURST_LEN, msgs, BURST_WRITES / 2);
	for (int k = 0; k < BURST_WRITES; k++)
		while (memcmp(target_buf + at + BURST_LEN * k, s->src, BURST_LEN) != 0) {
			poll_once(s);
			XT_CHECK(xt_now_s() < end, "the peer's write %d of the window did not land", k);
		}
	xt_sync_progress(s->sock, s->x.rxcq);
	XT_RC(fi_close(&mr->fid));
}

static int run(int index, int sock)
{
	struct side s;
	memset(&s, 0, sizeof s);
	s.sock = sock;
	/* with FI_ATOMIC where the provider has it (exanet, shm), without elsewhere (tcp) */
	struct fi_info *h = xt_hints(), *info = NULL;
	h->caps = FI_TAGGED | FI_MSG | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ |
		  FI_REMOTE_WRITE;
	if (fi_getinfo(xt_api_version, NULL, NULL, 0, h, &info) != 0) {
		h->caps &= ~FI_ATOMIC;
		XT_RC(fi_getinfo(xt_api_version, NULL, NULL, 0, h, &info));
	}
	fi_freeinfo(h);
	XT_CHECK(!(info->domain_attr->mr_mode & (FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_LOCAL)),
		 "mr_mode 0x%x: user keys, offsets and no descriptors were asked for",
		 info->domain_attr->mr_mode);
	xt_open_info(&s.x, info, 0);
	xt_enable(&s.x);
	if (s.x.info->caps & FI_ATOMIC) {
		size_t count = 0;
		if (fi_atomicvalid(s.x.ep, FI_UINT8, FI_ATOMIC_WRITE, &count) == 0)
			s.atomic_max = count;
	}
	s.peer = xt_exchange(&s.x, sock, index == 0, NULL);
	const char *prov = getenv("FI_PROVIDER");
	if (!prov || !*prov || strcmp(prov, "exanet") == 0)
		XT_CHECK(s.x.info->tx_attr->msg_order & FI_ORDER_SAW, "exanet offers FI_ORDER_SAW: msg_order 0x%llx",
			 (unsigned long long)s.x.info->tx_attr->msg_order);
	s.inject_size = s.x.info->tx_attr->inject_size;
	s.iov_limit = s.x.info->tx_attr->iov_limit;
	s.region = aligned_alloc(4096, REGION);
	s.src = aligned_alloc(4096, SLOTS * SLOT);
	s.rbuf = aligned_alloc(4096, MSG_MAX);
	s.sbuf = aligned_alloc(4096, MSG_MAX);
	s.want = aligned_alloc(4096, SLOT);
	XT_CHECK(s.region && s.src && s.rbuf && s.sbuf && s.want, "out of memory");
	memset(s.region, 0, REGION);
	memset(s.sbuf, 0x33, MSG_MAX);
	uint64_t key = KEY_BASE;
	register_region(&s, key);
	if (!prov || !*prov || strcmp(prov, "exanet") == 0)
		first_writes_inline(&s);

	struct rng shared = {g_seed}; /* the same in both processes: when to register anew */
	struct rng own = {mix(g_seed) ^ (uint64_t)(index + 1)};
	int rekeys = 0;
	for (int round = 0; round < g_rounds; round++) {
		round_trip(&s, (uint32_t)round, &own);
		if (next(&shared, 20) == 0) {
			/* both have finished the round (every write completed and checked) */
			xt_sync_progress(sock, s.x.rxcq);
			register_region(&s, ++key);
			rekeys++;
		}
	}
	xt_sync_progress(sock, s.x.rxcq);
	XT_RC(fi_close(&s.mr->fid));
	xt_close(&s.x);
	if (index == 0)
		printf("%d rounds, %d new keys, inject_size %zu, iov_limit %zu, atomics of up to %zu bytes\n",
		       g_rounds, rekeys, s.inject_size, s.iov_limit, s.atomic_max);
	free(s.region);
	free(s.src);
	free(s.rbuf);
	free(s.sbuf);
	free(s.want);
	return 0;
}

static int child(int index, int sock)
{
	(void)index;
	return run(1, sock);
}

int main(void)
{
	xt_init(170);
	g_rounds = (int)xt_env_size("WRITE_THEN_SEND_ROUNDS", 1000);
	g_seed = xt_env_size("WRITE_THEN_SEND_SEED", (size_t)time(NULL));
	g_data_order = (int)xt_env_size("WRITE_THEN_SEND_DATA_ORDER", 1);
	const char *p = getenv("FI_PROVIDER");
	printf("provider %s, seed %llu (WRITE_THEN_SEND_SEED)\n", p && *p ? p : "exanet", g_seed);
	fflush(stdout);
	int sock;
	pid_t pid;
	xt_spawn(1, child, &sock, &pid);
	run(0, sock);
	xt_reap(1, &pid);
	xt_pass("write_then_send");
	return 0;
}
