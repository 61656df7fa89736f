/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Registrations of memory that no page backs (fi_mr(3): without FI_MR_ALLOCATED among the
 * mr_mode bits a provider returns, "all registered memory regions must be backed by physical
 * memory pages at the time the registration call is made" does not hold, so such a registration
 * must be accepted). MPICH's ch4:ofi registers the whole address space, fi_mr_reg(NULL,
 * UINTPTR_MAX), for a dynamic window, and attaches memory to it later (MPICH's test suite,
 * rma/win_dynamic_acc_collattach, found exanet refusing it).
 *
 * A target registers (NULL, SIZE_MAX) and lays out, in 64 KiB chunks:
 *     0 read-write | 1 PROT_NONE | 2 read-only | 3 read-write | 4 unmapped hole | 5 read-write
 * and maps more memory after the registration (as MPI_Win_attach does). An initiator then
 * writes (inline, eager and staged sizes; with and without FI_DELIVERY_COMPLETE), reads and
 * performs atomics:
 *   - into mapped memory they land, and read back, including the memory mapped later;
 *   - into the hole, the PROT_NONE chunk, across a chunk's end into the hole, and writes and
 *     modifying atomics into the read-only chunk, each ends in an FI_EACCES error completion;
 *   - the target survives every one of them (it would die of SIGSEGV if it touched the page),
 *     its read-only chunk is unchanged, and it counts the refusals it made (rma_target_faults).
 */
#include "xt.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define CHUNK (64u << 10)
#define CHUNKS 6
#define LATER (2 * CHUNK)
#define KEY 0x77

enum { RW0 = 0, NONE = 1, RO = 2, RW3 = 3, HOLE = 4, RW5 = 5 };

struct target_desc {
	uint64_t key;
	uint64_t area;  /* the 6 chunks above */
	uint64_t later; /* mapped after the registration */
};

struct command {
	char op; /* V: verify len bytes at addr hold seed's payload; Q: check and quit */
	unsigned seed;
	uint64_t addr, len;
};

static uint64_t g_mr_offer;
/* RMA_UNBACKED_WRITES=refused: exanet's network backend refuses writes into such a registration
 * (its lower provider would fault in the target); reads and atomics still go. */
static int g_writes_refused;

static void open_ep(struct xt_ep *x)
{
	struct fi_info *h = xt_hints();
	h->caps |= FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	h->domain_attr->mr_mode = (int)g_mr_offer;
	xt_open_disabled(x, h, 0);
	fi_freeinfo(h);
	XT_CHECK(!(x->info->domain_attr->mr_mode & FI_MR_ALLOCATED),
		 "the provider requires FI_MR_ALLOCATED (mr_mode 0x%x): nothing to test",
		 x->info->domain_attr->mr_mode);
	xt_enable(x);
}

static int target(int index, int sock)
{
	(void)index;
	struct xt_ep x;
	open_ep(&x);
	/* Far below where the kernel places mappings (top-down from near the stack), so that no
	 * later mapping of this process (a peer's segment, a thread's stack) fills the hole. */
	unsigned char *a = mmap((void *)(uintptr_t)0x200000000000ull, CHUNKS * CHUNK, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (a == MAP_FAILED)
		a = mmap(NULL, CHUNKS * CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	XT_CHECK(a != MAP_FAILED, "mmap");
	for (unsigned c = 0; c < CHUNKS; c++)
		if (c != HOLE)
			xt_fill(a + c * CHUNK, CHUNK, 100 + c);
	XT_RC(mprotect(a + NONE * CHUNK, CHUNK, PROT_NONE));
	XT_RC(mprotect(a + RO * CHUNK, CHUNK, PROT_READ));
	XT_RC(munmap(a + HOLE * CHUNK, CHUNK));

	struct fid_mr *mr;
	XT_RC(fi_mr_reg(x.domain, NULL, SIZE_MAX, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, KEY, 0, &mr, NULL));
	if (x.info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		XT_RC(fi_mr_bind(mr, &x.ep->fid, 0));
		XT_RC(fi_mr_enable(mr));
	}
	/* attached after the registration, as MPI_Win_attach does to a dynamic window */
	unsigned char *later = mmap(NULL, LATER, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	XT_CHECK(later != MAP_FAILED, "mmap");
	xt_fill(later, LATER, 200);

	xt_exchange(&x, sock, 1, NULL);
	const struct target_desc d = {fi_mr_key(mr), (uint64_t)(uintptr_t)a, (uint64_t)(uintptr_t)later};
	xt_send_all(sock, &d, sizeof d);
	for (;;) {
		(void)fi_cq_read(x.rxcq, NULL, 0); /* manual progress: serves the initiator */
		(void)fi_cq_read(x.txcq, NULL, 0);
		struct pollfd p = {.fd = sock, .events = POLLIN};
		if (poll(&p, 1, 0) != 1) {
			xt_idle();
			continue;
		}
		struct command c;
		xt_recv_all(sock, &c, sizeof c);
		int64_t answer;
		if (c.op == 'V') {
			answer = xt_verify((void *)(uintptr_t)c.addr, c.len, c.seed);
		} else {
			answer = xt_verify(a + RO * CHUNK, CHUNK, 100 + RO);
			XT_CHECK(msync(a + HOLE * CHUNK, CHUNK, MS_ASYNC) == -1 && errno == ENOMEM,
				 "the hole was mapped meanwhile: the refusals tested nothing");
			const struct fi_exanet_counters n = xt_counters(x.ep);
			printf("target: %llu accesses refused for want of memory (rma_target_faults)\n",
			       (unsigned long long)n.rma_target_faults);
			if (c.len && n.rma_target_faults < c.len)
				answer = 0;
			XT_RC(fi_close(&mr->fid));
			xt_close(&x);
		}
		xt_send_all(sock, &answer, sizeof answer);
		if (c.op == 'Q')
			return answer ? 0 : 1;
	}
}

static int64_t ask(int sock, char op, unsigned seed, uint64_t addr, uint64_t len)
{
	const struct command c = {.op = op, .seed = seed, .addr = addr, .len = len};
	int64_t answer;
	xt_send_all(sock, &c, sizeof c);
	xt_recv_all(sock, &answer, sizeof answer);
	return answer;
}

struct run {
	struct xt_ep x;
	fi_addr_t peer;
	struct target_desc d;
	int sock;
	unsigned refused; /* accesses that failed as they should */
};

/* 1 on success, else the error completion's code. */
static int finish(struct run *r)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err = {0};
	if (xt_wait(r->x.txcq, &e, &err, 20))
		return 1;
	return err.err;
}

static int rma(struct run *r, int read, void *buf, size_t len, uint64_t addr, uint64_t flags)
{
	struct iovec iov = {buf, len};
	struct fi_rma_iov rio = {.addr = addr, .len = len, .key = r->d.key};
	struct fi_msg_rma m = {.msg_iov = &iov, .iov_count = 1, .addr = r->peer, .rma_iov = &rio,
			       .rma_iov_count = 1, .context = r};
	if (read)
		XT_POST(r->x.txcq, fi_readmsg(r->x.ep, &m, FI_COMPLETION));
	else
		XT_POST(r->x.txcq, fi_writemsg(r->x.ep, &m, FI_COMPLETION | flags));
	return finish(r);
}

static void refused(struct run *r, int rc, const char *what, size_t len)
{
	XT_CHECK(rc == FI_EACCES, "%s of %zu bytes: %s, not FI_EACCES", what, len,
		 rc == 1 ? "succeeded" : fi_strerror(rc));
	r->refused++;
}

static void transfers(struct run *r, unsigned char *buf, unsigned char *back)
{
	static const size_t sizes[] = {1, 8, 48, 200, 1000, 4096, 9000, 20000, 40000};
	const uint64_t a = r->d.area;
	unsigned seed = 1;
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		const size_t len = sizes[i];
		for (int dc = 0; dc < 2; dc++) {
			const uint64_t flags = dc ? FI_DELIVERY_COMPLETE : 0;
			const uint64_t off = 13 + 7 * i;
			if (g_writes_refused) {
				const int rc = rma(r, 0, buf, len, a + RW0 * CHUNK + off, flags);
				XT_CHECK(rc == FI_EOPNOTSUPP, "write of %zu over the network: %s, not FI_EOPNOTSUPP",
					 len, rc == 1 ? "succeeded" : fi_strerror(rc));
				continue;
			}
			/* mapped memory: lands */
			xt_fill(buf, len, seed);
			XT_CHECK(rma(r, 0, buf, len, a + RW0 * CHUNK + off, flags) == 1, "write of %zu", len);
			XT_CHECK(ask(r->sock, 'V', seed, a + RW0 * CHUNK + off, len), "write of %zu not there", len);
			seed++;
			xt_fill(buf, len, seed);
			XT_CHECK(rma(r, 0, buf, len, r->d.later + off, flags) == 1, "write of %zu, later memory", len);
			XT_CHECK(ask(r->sock, 'V', seed, r->d.later + off, len), "write of %zu into later memory not there", len);
			XT_CHECK(rma(r, 1, back, len, r->d.later + off, 0) == 1, "read of %zu, later memory", len);
			XT_CHECK(!memcmp(back, buf, len), "read of %zu from later memory: wrong data", len);
			seed++;
			/* no memory, or none that may be written: refused, the target unharmed */
			refused(r, rma(r, 0, buf, len, a + HOLE * CHUNK + off, flags), "write into the hole", len);
			if (len > 1)
				refused(r, rma(r, 0, buf, len, a + HOLE * CHUNK - len / 2, flags),
					"write across into the hole", len);
			refused(r, rma(r, 0, buf, len, a + NONE * CHUNK + off, flags), "write into PROT_NONE", len);
			refused(r, rma(r, 0, buf, len, a + RO * CHUNK + off, flags), "write into read-only", len);
		}
		/* reads */
		if (g_writes_refused) {
			unsigned char *want = malloc(LATER);
			XT_CHECK(want, "out of memory");
			xt_fill(want, LATER, 200);
			XT_CHECK(rma(r, 1, back, len, r->d.later + 3, 0) == 1, "read of %zu, later memory", len);
			XT_CHECK(!memcmp(back, want + 3, len), "read of %zu from later memory: wrong data", len);
			free(want);
		}
		XT_CHECK(rma(r, 1, back, len, a + RO * CHUNK + 5, 0) == 1, "read of %zu, read-only", len);
		unsigned char *want = malloc(CHUNK);
		XT_CHECK(want, "out of memory");
		xt_fill(want, CHUNK, 100 + RO);
		XT_CHECK(!memcmp(back, want + 5, len), "read of %zu from read-only memory: wrong data", len);
		xt_fill(want, CHUNK, 100 + RW5);
		XT_CHECK(rma(r, 1, back, len, a + RW5 * CHUNK + 9, 0) == 1, "read of %zu", len);
		XT_CHECK(!memcmp(back, want + 9, len), "read of %zu: wrong data", len);
		free(want);
		refused(r, rma(r, 1, back, len, a + HOLE * CHUNK + 64, 0), "read from the hole", len);
		if (len > 1)
			refused(r, rma(r, 1, back, len, a + RW5 * CHUNK - len / 2, 0), "read across into the hole", len);
		refused(r, rma(r, 1, back, len, a + NONE * CHUNK, 0), "read from PROT_NONE", len);
	}
	xt_pass(g_writes_refused ? "writes refused with FI_EOPNOTSUPP (network backend); reads: mapped memory "
				   "(also mapped after the registration) is read, a hole and PROT_NONE refuse "
				   "with FI_EACCES"
				 : "writes and reads: mapped memory (also mapped after the registration) is "
				   "reached, a hole, PROT_NONE and read-only memory refuse with FI_EACCES");
}

static void atomics(struct run *r)
{
	const uint64_t a = r->d.area;
	const uint64_t at = a + RW3 * CHUNK + 64;
	uint64_t v = 5, result = 0, compare = 0;
	/* the value there: the chunk's fill */
	XT_POST(r->x.txcq, fi_fetch_atomic(r->x.ep, &v, 1, NULL, &result, NULL, r->peer, at, r->d.key,
					    FI_UINT64, FI_ATOMIC_READ, r));
	XT_CHECK(finish(r) == 1, "atomic read");
	const uint64_t before = result;
	XT_POST(r->x.txcq, fi_atomic(r->x.ep, &v, 1, NULL, r->peer, at, r->d.key, FI_UINT64, FI_SUM, r));
	XT_CHECK(finish(r) == 1, "atomic sum");
	XT_POST(r->x.txcq, fi_fetch_atomic(r->x.ep, &v, 1, NULL, &result, NULL, r->peer, at, r->d.key,
					    FI_UINT64, FI_SUM, r));
	XT_CHECK(finish(r) == 1 && result == before + 5, "fetch-and-add: %llu, not %llu",
		 (unsigned long long)result, (unsigned long long)before + 5);
	compare = before + 10;
	v = 42;
	XT_POST(r->x.txcq, fi_compare_atomic(r->x.ep, &v, 1, NULL, &compare, NULL, &result, NULL, r->peer,
					      at, r->d.key, FI_UINT64, FI_CSWAP, r));
	XT_CHECK(finish(r) == 1 && result == before + 10, "compare-and-swap");
	XT_POST(r->x.txcq, fi_fetch_atomic(r->x.ep, &v, 1, NULL, &result, NULL, r->peer, at, r->d.key,
					    FI_UINT64, FI_ATOMIC_READ, r));
	XT_CHECK(finish(r) == 1 && result == 42, "atomic read after the swap: %llu", (unsigned long long)result);
	/* in the later memory */
	const uint64_t lat = r->d.later + 4096;
	XT_POST(r->x.txcq, fi_atomic(r->x.ep, &v, 1, NULL, r->peer, lat, r->d.key, FI_UINT64, FI_ATOMIC_WRITE, r));
	XT_CHECK(finish(r) == 1, "atomic write, later memory");
	XT_POST(r->x.txcq, fi_fetch_atomic(r->x.ep, &v, 1, NULL, &result, NULL, r->peer, lat, r->d.key,
					    FI_UINT64, FI_ATOMIC_READ, r));
	XT_CHECK(finish(r) == 1 && result == 42, "atomic read, later memory");
	/* where there is nothing, or nothing to write */
	const uint64_t bad[] = {a + HOLE * CHUNK, a + NONE * CHUNK + 8, a + RO * CHUNK + 16};
	for (size_t i = 0; i < 3; i++) {
		XT_POST(r->x.txcq, fi_atomic(r->x.ep, &v, 1, NULL, r->peer, bad[i], r->d.key, FI_UINT64,
					      FI_SUM, r));
		refused(r, finish(r), "atomic sum", 8);
		XT_POST(r->x.txcq, fi_compare_atomic(r->x.ep, &v, 1, NULL, &compare, NULL, &result, NULL,
						      r->peer, bad[i], r->d.key, FI_UINT64, FI_CSWAP, r));
		refused(r, finish(r), "compare-and-swap", 8);
		if (i < 2) {
			XT_POST(r->x.txcq, fi_fetch_atomic(r->x.ep, &v, 1, NULL, &result, NULL, r->peer, bad[i],
							    r->d.key, FI_UINT64, FI_ATOMIC_READ, r));
			refused(r, finish(r), "atomic read", 8);
		}
	}
	/* a read-only word can be read */
	XT_POST(r->x.txcq, fi_fetch_atomic(r->x.ep, &v, 1, NULL, &result, NULL, r->peer, a + RO * CHUNK,
					    r->d.key, FI_UINT64, FI_ATOMIC_READ, r));
	XT_CHECK(finish(r) == 1, "atomic read of read-only memory");
	xt_pass("atomics: performed in mapped memory, refused with FI_EACCES where there is none "
		"or it is read-only");
}

static void run_offer(uint64_t offer)
{
	g_mr_offer = offer;
	printf("mr_mode offered: 0x%llx\n", (unsigned long long)offer);
	fflush(stdout);
	int sock;
	pid_t pid;
	xt_spawn(1, target, &sock, &pid);
	struct run r = {.sock = sock};
	open_ep(&r.x);
	r.peer = xt_exchange(&r.x, sock, 0, NULL);
	xt_recv_all(sock, &r.d, sizeof r.d);
	unsigned char *buf = malloc(CHUNK), *back = malloc(CHUNK);
	XT_CHECK(buf && back, "out of memory");
	transfers(&r, buf, back);
	atomics(&r);
	/* still serving: a last write lands */
	if (!g_writes_refused) {
		xt_fill(buf, 100, 999);
		XT_CHECK(rma(&r, 0, buf, 100, r.d.area + RW5 * CHUNK, 0) == 1, "write after the refusals");
		XT_CHECK(ask(sock, 'V', 999, r.d.area + RW5 * CHUNK, 100), "write after the refusals not there");
	}
	/* Refusals the target itself made: at least the 8 atomics (the target performs every atomic),
	 * and the reads by request and staged writes it refused. Writes and reads by cross-memory
	 * attach are refused by the initiator's kernel instead. */
	XT_CHECK(ask(sock, 'Q', 0, 0, 8), "target: read-only memory changed, or fewer than 8 refusals counted");
	printf("initiator: %u accesses refused with FI_EACCES\n", r.refused);
	xt_close(&r.x);
	free(buf);
	free(back);
	xt_reap(1, &pid);
	xt_pass("target alive after every refusal, its read-only memory unchanged");
}

int main(void)
{
	xt_init(170);
	const char *w = getenv("RMA_UNBACKED_WRITES");
	g_writes_refused = w && !strcmp(w, "refused");
	run_offer(0);
	run_offer(FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED | FI_MR_ENDPOINT); /* MPICH's */
	return 0;
}
