/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * One user key, registered again and again (fi_mr(3): a key is the application's to choose and,
 * once its registration is closed, to use again). MPICH does exactly this with the keys of its
 * RMA windows and large messages. A forked target registers, round after round, a random range
 * of one of three buffers under the same key: often the same address as the round before,
 * sometimes a smaller or a shifted range, with read, write or both rights. It announces each
 * registration with a tagged message, as an MPI library sends its keys. The initiator writes
 * (transmit- or delivery-complete) and reads random pieces of each registration (verified at
 * the target and locally); the target closes the registration at the end of the round.
 *
 * Over exanet (both backends) an access the current registration does not cover (past its end,
 * or without the right) must fail with FI_EACCES and leave the target's memory as it was, even
 * where an earlier registration under the key covered it. Over other providers (FI_PROVIDER=
 * tcp or shm: the reference run) only the accesses a registration covers are made: what a
 * provider does with one it does not cover is its own business there.
 *
 * MR_REUSE_OUT_OF_BAND=1 announces registrations over the socket only, so the initiator may
 * still hold what it knew of the last one when it accesses the new one. Then only accesses the
 * new registration covers are made, of any length, and each must land where the new one says
 * (over exanet's network backend, a write past its inline size through the old answer reaches
 * the key's new registration or the closed one's sink, and is written anew when its check says
 * it missed: docs/protocol.md).
 *
 * MR_REUSE_ROUNDS (default 120), MR_REUSE_SEED (default: from the clock; printed) and
 * MR_REUSE_KEY vary it.
 */
#include "xt.h"

#include <poll.h>
#include <rdma/fi_rma.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BUF_LEN (192u << 10) /* past the network backend's inline writes (64 KiB) */
#define NBUF 3
/* MR_REUSE_KEY: the user key (default 0x5e1f). Over exanet's network backend a key of 2^63 or
 * more takes a lower key of its own (slot and generation), not the user's, so a write through a
 * stale answer always reaches the closed registration's sink and is written anew. */
static uint64_t user_key = 0x5e1f;
#define ANNOUNCE_TAG 0xa11

struct command {
	char op; /* R register, U unregister, V verify (waiting up to 10 s), F fill, H checksum, Q quit */
	unsigned seed;
	uint32_t buf;
	uint64_t off, len, access;
};

static int out_of_band(void)
{
	const char *v = getenv("MR_REUSE_OUT_OF_BAND");
	return v && atoi(v) == 1;
}

static int exanet_run(void)
{
	if (out_of_band())
		return 0;
	const char *force = getenv("MR_REUSE_REFUSALS");
	if (force && *force)
		return atoi(force);
	const char *p = getenv("FI_PROVIDER");
	return !p || !*p || strncmp(p, "exanet", 6) == 0;
}

/* ---- target ---------------------------------------------------------------------------- */

static int target(int index, int sock)
{
	(void)index;
	struct xt_ep x;
	xt_open_rma(&x);
	const fi_addr_t peer = xt_exchange(&x, sock, 1, NULL);
	unsigned char *buf[NBUF];
	for (int i = 0; i < NBUF; i++) {
		buf[i] = aligned_alloc(4096, BUF_LEN);
		XT_CHECK(buf[i], "out of memory");
		memset(buf[i], 0x5a, BUF_LEN);
	}
	struct fid_mr *mr = NULL;
	for (;;) {
		struct pollfd p = {.fd = sock, .events = POLLIN};
		if (poll(&p, 1, 0) != 1) {
			fi_cq_read(x.rxcq, NULL, 0); /* manual progress: the peer's accesses need us */
			xt_idle();
			continue;
		}
		struct command c;
		xt_recv_all(sock, &c, sizeof c);
		int64_t answer = 1;
		unsigned char *at = buf[c.buf % NBUF] + c.off;
		switch (c.op) {
		case 'R':
			XT_CHECK(!mr, "registered twice");
			XT_RC(fi_mr_reg(x.domain, at, c.len, c.access, 0, user_key, 0, &mr, NULL));
			answer = (int64_t)fi_mr_key(mr);
			/* announced in band: the initiator accesses it after this message */
			if (!out_of_band())
				xt_send_one(x.ep, x.txcq, &answer, sizeof answer, peer, ANNOUNCE_TAG);
			break;
		case 'U':
			XT_RC(fi_close(&mr->fid));
			mr = NULL;
			break;
		case 'V': { /* a write completes at the initiator when it reached us
			       (FI_TRANSMIT_COMPLETE): it may need our progress to land */
			const double end = xt_now_s() + 10;
			while (!(answer = xt_verify(at, c.len, c.seed)) && xt_now_s() < end)
				fi_cq_read(x.rxcq, NULL, 0);
			break;
		}
		case 'F':
			xt_fill(at, c.len, c.seed);
			break;
		case 'H': {
			uint64_t h = 0;
			for (int i = 0; i < NBUF; i++)
				h = h * 31 + xt_checksum(buf[i], BUF_LEN);
			answer = (int64_t)h;
			break;
		}
		case 'Q':
			xt_send_all(sock, &answer, sizeof answer);
			xt_close(&x);
			return 0;
		}
		xt_send_all(sock, &answer, sizeof answer);
		/* Out of band, the initiator's first access may leave before it heard of the close
		 * (exanet: key_gone goes at our next progress): its packet waits for us, behind
		 * nothing that tells it of the new registration, and must land in that one. */
		if (c.op == 'R' && out_of_band())
			usleep(50000);
	}
}

/* ---- initiator ------------------------------------------------------------------------- */

static int64_t ask(int sock, struct command c)
{
	return xt_ask(sock, &c, sizeof c, NULL);
}

/* The same, progressing x while the answer is on its way (the target sends to us meanwhile,
 * and under manual progress its send may need ours). */
static int64_t ask_progress(int sock, struct command c, struct xt_ep *x)
{
	return xt_ask(sock, &c, sizeof c, x->txcq);
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* One access; returns 1 when it completed, 0 when it failed with FI_EACCES (anything else
 * fails the test). */
static int access_once(struct xt_ep *x, fi_addr_t peer, int write, int delivery, void *local,
		       uint64_t off, uint64_t len, uint64_t key)
{
	int ctx;
	ssize_t rc;
	const double end = xt_now_s() + 20;
	struct iovec iov = {local, len};
	struct fi_rma_iov rma = {off, len, key};
	struct fi_msg_rma m = {.msg_iov = &iov, .iov_count = 1, .addr = peer, .rma_iov = &rma,
			       .rma_iov_count = 1, .context = &ctx};
	do {
		if (write && delivery)
			rc = fi_writemsg(x->ep, &m, FI_COMPLETION | FI_DELIVERY_COMPLETE);
		else
			rc = write ? fi_write(x->ep, local, len, NULL, peer, off, key, &ctx)
				   : fi_read(x->ep, local, len, NULL, peer, off, key, &ctx);
		if (rc == -FI_EAGAIN) {
			fi_cq_read(x->txcq, NULL, 0);
			XT_CHECK(xt_now_s() < end, "-FI_EAGAIN for 20 s");
			xt_idle();
		}
	} while (rc == -FI_EAGAIN);
	if (rc == -FI_EACCES)
		return 0; /* refused at once: allowed (fi_rma(3)) */
	XT_CHECK(rc == 0, "fi_%s = %zd (%s)", write ? "write" : "read", rc, fi_strerror((int)-rc));
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err = {0};
	if (xt_wait(x->txcq, &e, &err, 20) == 1) {
		XT_CHECK(e.op_context == &ctx, "completion of another operation");
		return 1;
	}
	XT_CHECK(err.op_context == &ctx, "error completion of another operation");
	XT_CHECK(err.err == FI_EACCES, "%s of %llu bytes at %llu: error %d (%s), not FI_EACCES",
		 write ? "write" : "read", (unsigned long long)len, (unsigned long long)off, err.err,
		 fi_strerror(err.err));
	return 0;
}

int main(void)
{
	xt_init(240);
	const char *key_env = getenv("MR_REUSE_KEY");
	if (key_env && *key_env)
		user_key = strtoull(key_env, NULL, 0);
	const unsigned rounds = (unsigned)xt_env_size("MR_REUSE_ROUNDS", 120);
	uint64_t seed = xt_env_size("MR_REUSE_SEED", 0);
	if (!seed)
		seed = (uint64_t)(xt_now_us() * 1000) | 1;
	printf("mr_reuse: %u rounds, MR_REUSE_SEED=%llu, key 0x%llx%s\n", rounds,
	       (unsigned long long)seed, (unsigned long long)user_key,
	       out_of_band() ? ", announced out of band" : "");
	uint64_t s = seed;
	const int refusals = exanet_run();
	const int oob = out_of_band();

	int sock;
	pid_t pid;
	xt_spawn(1, target, &sock, &pid);
	struct xt_ep x;
	xt_open_rma(&x);
	fi_addr_t peer = xt_exchange(&x, sock, 0, NULL);
	unsigned char *local = aligned_alloc(4096, BUF_LEN + 4096);
	XT_CHECK(local, "out of memory");

	unsigned same_place = 0, writes = 0, reads = 0, refused = 0;
	uint32_t prev_buf = 0;
	uint64_t prev_off = 0, prev_len = 0;
	for (unsigned r = 0; r < rounds; r++) {
		/* Where: half the rounds exactly where the previous registration was (a buffer
		 * freed and allocated again, or simply registered again), the rest anywhere. */
		struct command reg = {.op = 'R'};
		const unsigned how = (unsigned)(rnd(&s) % 8);
		if (r > 0 && how < 4) {
			reg.buf = prev_buf;
			reg.off = prev_off;
			reg.len = prev_len;
			if (how == 3 && prev_len > 1)
				reg.len = 1 + rnd(&s) % (prev_len - 1); /* a shorter one at the same place */
			same_place++;
		} else {
			reg.buf = (uint32_t)(rnd(&s) % NBUF);
			reg.off = rnd(&s) % 4096;
			reg.len = 1 + rnd(&s) % (BUF_LEN - reg.off);
		}
		const unsigned rights = (unsigned)(rnd(&s) % 4);
		reg.access = rights == 0 ? FI_REMOTE_READ
			   : rights == 1 ? FI_REMOTE_WRITE
					 : FI_REMOTE_READ | FI_REMOTE_WRITE;
		uint64_t announced = 0;
		if (!oob)
			XT_RC(fi_trecv(x.ep, &announced, sizeof announced, NULL, peer, ANNOUNCE_TAG, 0,
				       NULL));
		const uint64_t key = (uint64_t)ask_progress(sock, reg, &x);
		XT_CHECK(key == user_key, "fi_mr_key = 0x%llx", (unsigned long long)key);
		XT_CHECK(oob || (xt_wait(x.rxcq, NULL, NULL, 20) == 1 && announced == user_key),
			 "the registration's announcement");

		for (unsigned k = 0; k < 4; k++) {
			const int write = (int)(rnd(&s) % 2);
			const int allowed = (int)((reg.access & (write ? FI_REMOTE_WRITE : FI_REMOTE_READ)) != 0);
			/* Mostly inside; over exanet, one access in four reaches past the end. */
			const int past = refusals && rnd(&s) % 4 == 0;
			uint64_t off, len;
			if (past) {
				off = rnd(&s) % reg.len;
				len = reg.len - off + 1 + rnd(&s) % 256;
				if (reg.off + off + len > BUF_LEN)
					len = BUF_LEN - reg.off - off;
				if (off + len <= reg.len) /* no room past it in the buffer */
					continue;
			} else {
				off = rnd(&s) % reg.len;
				const uint64_t room = reg.len - off;
				/* half short (inline over the network), half anything */
				len = 1 + rnd(&s) % (rnd(&s) % 2 && room > 4096 ? 4096 : room);
			}
			if (!allowed && !refusals)
				continue;
			const unsigned tag = (unsigned)(r * 16 + k + 1);
			const int expect = allowed && !past;
			int64_t before = 0;
			if (!expect)
				before = ask(sock, (struct command){.op = 'H'});
			if (write) {
				xt_fill(local, len, tag);
			} else if (expect) {
				XT_CHECK(ask(sock, (struct command){.op = 'F', .seed = tag, .buf = reg.buf,
								    .off = reg.off + off, .len = len}) == 1,
					 "fill");
				memset(local, 0, len);
			}
			const int delivery = write && rnd(&s) % 3 == 0;
			const int done = access_once(&x, peer, write, delivery, local, off, len, user_key);
			if (!expect) {
				XT_CHECK(!done, "round %u: a %s of %llu bytes at %llu into a registration of "
					 "%llu bytes with rights 0x%llx was admitted", r,
					 write ? "write" : "read", (unsigned long long)len,
					 (unsigned long long)off, (unsigned long long)reg.len,
					 (unsigned long long)reg.access);
				XT_CHECK(ask(sock, (struct command){.op = 'H'}) == before,
					 "round %u: a refused %s changed the target's memory", r,
					 write ? "write" : "read");
				refused++;
				continue;
			}
			XT_CHECK(done, "round %u: a %s of %llu bytes at %llu inside the registration "
				 "(%llu bytes at %llu of buffer %u, rights 0x%llx) was refused%s", r,
				 write ? "write" : "read", (unsigned long long)len, (unsigned long long)off,
				 (unsigned long long)reg.len, (unsigned long long)reg.off, reg.buf,
				 (unsigned long long)reg.access,
				 r > 0 && reg.buf == prev_buf && reg.off == prev_off ? " (same place as the "
										       "last round's)"
										     : "");
			if (write) {
				XT_CHECK(ask(sock, (struct command){.op = 'V', .seed = tag, .buf = reg.buf,
								    .off = reg.off + off, .len = len}) == 1,
					 "round %u: the write of %llu bytes did not land", r,
					 (unsigned long long)len);
				writes++;
			} else {
				XT_CHECK(xt_verify(local, len, tag), "round %u: the read of %llu bytes "
					 "brought other bytes", r, (unsigned long long)len);
				reads++;
			}
		}
		XT_CHECK(ask(sock, (struct command){.op = 'U'}) == 1, "close");
		prev_buf = reg.buf;
		prev_off = reg.off;
		prev_len = reg.len;
	}
	XT_CHECK(writes > 0 && reads > 0, "nothing was checked");
	printf("mr_reuse: %u rounds (%u at the previous place), %u writes, %u reads verified, "
	       "%u refused\n", rounds, same_place, writes, reads, refused);
	ask(sock, (struct command){.op = 'Q'});
	xt_close(&x);
	xt_reap(1, &pid);
	free(local);
	xt_pass("one user key registered again and again: every access checked against the "
		"registration of its round");
	return 0;
}
