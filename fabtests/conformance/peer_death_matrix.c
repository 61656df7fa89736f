/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The peer-death matrix (issue 12, part 3): two processes run one protocol stage in a loop, the
 * test kills one of them with SIGKILL at a random moment, and the survivor must see every
 * operation that names the dead peer end (an FI_ECONNRESET error completion, or -FI_ECONNRESET
 * from the post once the peer is known dead) within 5 s of the kill, with no call blocking, and
 * must have unlinked the dead peer's segment by then. Then its endpoint still works (a message
 * to itself) and closes without leaving its own segment behind.
 *
 * Stages (each with either process killed):
 *   pingpong_64, pingpong_4k   eager and medium ping-pong: the survivor waits in a directed
 *                              receive (the hang the issue found: 5 of 5 at 64 B)
 *   pingpong_64k, pingpong_1m  rendezvous ping-pong: RTR, RTS, CTS and the write at random
 *   rts_wait_cts               a 16 MiB RTS no receive matches: the sender waits for a CTS
 *   mid_dma                    16 MiB transfers back to back: the kill lands mid-write
 *   rtr_stored                 the receive's RTR waits at the sender, which sends only after
 *                              the kill (before or after the survivor notices, at random)
 *   rma_read                   16 MiB reads the target answers (no CMA), in a loop
 * In every stage each process also keeps a directed receive posted for the other, as an MPI
 * rank waiting for its next message would.
 *
 * Plus any_source: an any-source receive stays posted when the only peer dies (another peer may
 * still send; libfabric's shm and tcp behave the same, see fi_exanet(7)), takes a later message
 * from a live sender, and can be cancelled.
 *
 * PEER_DEATH_KILLS (default 2) kills per stage and side; PEER_DEATH_SEED reproduces a run;
 * PEER_DEATH_STAGE=name runs one stage.
 */
#include "xt.h"

#include <errno.h>
#include <poll.h>
#include <rdma/fi_ext_exanet.h>
#include <rdma/fi_rma.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BIG (16u << 20)
#define DEADLINE_S 5.0

enum stage { PP64, PP4K, PP64K, PP1M, RTS_WAIT_CTS, MID_DMA, RTR_STORED, RMA_READ, NSTAGES };
static const char *const stage_names[NSTAGES] = {
	"pingpong_64", "pingpong_4k", "pingpong_64k", "pingpong_1m",
	"rts_wait_cts", "mid_dma",    "rtr_stored",   "rma_read",
};
static const size_t pingpong_len[] = {64, 4096, 65536, 1u << 20};

static void segment_path(const char *name, char *path, size_t n)
{
	struct fi_exanet_addr a;
	memcpy(&a, name, sizeof a);
	snprintf(path, n, "/dev/shm/exanet.%u.%u.%u", (unsigned)getuid(), a.pdid, a.port);
}

static int segment_exists(const char *name)
{
	char path[128];
	struct stat st;
	segment_path(name, path, sizeof path);
	return stat(path, &st) == 0;
}

/* What the children swap through the parent: the endpoint name and a readable region. */
struct blob {
	char name[64];
	uint64_t addr, key;
};

/* What a survivor reports to the parent. */
/* What an operation naming a dead peer may end with (fi_exanet(7), PEER FAILURE): FI_ECONNRESET,
 * or FI_EHOSTUNREACH when this process first used the address after the peer had died and its
 * segment was already reclaimed (nothing then tells a dead endpoint from one never created). */
static int dead_peer_error(int err)
{
	return err == FI_ECONNRESET || err == FI_EHOSTUNREACH;
}

struct report {
	double first_error;  /* when the first failure naming the peer was seen */
	double all_done;     /* when the last outstanding operation had ended */
	int first_err;       /* its error code (positive) */
	int errors, successes_after; /* operations that failed; succeeded after the first failure */
	int bad_err;         /* an error other than a dead peer's, or 0 */
};

/* ---- the child side ------------------------------------------------------------------------- */

struct op {
	int done, err;
};

struct child {
	struct xt_ep x;
	fi_addr_t peer;
	struct blob peer_blob;
	int sock;
	int outstanding;
	int failed; /* a failure naming the peer was seen: stop posting, drain, report */
	int go_pending; /* rtr_stored's survivor: the parent's "go" is still to be read */
	struct report rep;
};

static void note_error(struct child *c, int err)
{
	if (!c->failed) {
		c->failed = 1;
		c->rep.first_error = xt_now_s();
		c->rep.first_err = err;
	}
	c->rep.errors++;
	if (!dead_peer_error(err) && !c->rep.bad_err)
		c->rep.bad_err = err;
}

static void read_cq(struct child *c, struct fid_cq *cq)
{
	struct fi_cq_tagged_entry e;
	ssize_t n = fi_cq_read(cq, &e, 1);
	if (n == 1) {
		struct op *o = e.op_context;
		if (o) o->done = 1;
		c->outstanding--;
		if (c->failed) c->rep.successes_after++;
	} else if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = {0};
		XT_CHECK(fi_cq_readerr(cq, &err, 0) == 1, "fi_cq_readerr");
		struct op *o = err.op_context;
		if (o) { o->done = 1; o->err = err.err; }
		c->outstanding--;
		note_error(c, err.err);
	}
}

static void progress(struct child *c)
{
	read_cq(c, c->x.txcq);
	read_cq(c, c->x.rxcq);
}

/* Posts with retry on -FI_EAGAIN; 0 if posted, -1 if it failed (recorded). */
#define POST(c, call) post_op((c), ({ ssize_t rc_; while ((rc_ = (call)) == -FI_EAGAIN) progress(c); rc_; }))
static int post_op(struct child *c, ssize_t rc)
{
	if (rc == 0) {
		c->outstanding++;
		return 0;
	}
	note_error(c, (int)-rc);
	return -1;
}

/* Waits until o ends (0: success) or any failure was seen (-1). */
static int await(struct child *c, struct op *o)
{
	while (!o->done && !c->failed)
		progress(c);
	return o->done && !o->err ? 0 : -1;
}

static int peer_recv(struct child *c, void *buf, size_t len, uint64_t tag, struct op *o)
{
	memset(o, 0, sizeof *o);
	return POST(c, fi_trecv(c->x.ep, buf, len, NULL, c->peer, tag, 0, o));
}

static int peer_send(struct child *c, const void *buf, size_t len, uint64_t tag, struct op *o)
{
	memset(o, 0, sizeof *o);
	return POST(c, fi_tsend(c->x.ep, buf, len, NULL, c->peer, tag, o));
}

/* The parent said "go" (rtr_stored: the peer was killed); non-blocking. */
static int parent_said(struct child *c)
{
	struct pollfd p = {c->sock, POLLIN, 0};
	if (poll(&p, 1, 0) != 1) return 0;
	char b;
	XT_CHECK(read(c->sock, &b, 1) == 1 && b == 'g', "the parent's go");
	c->go_pending = 0;
	return 1;
}

/* Every path to the report takes the go first: read later, it would be taken for the sync
 * byte that follows the report, and the parent's next write would meet a closed socket. */
static void take_go(struct child *c)
{
	if (!c->go_pending) return;
	char b;
	xt_recv_all(c->sock, &b, 1);
	XT_CHECK(b == 'g', "the parent's go (got %d)", b);
	c->go_pending = 0;
}

static void stage_pingpong(struct child *c, int idx, size_t len)
{
	char *sbuf = malloc(len), *rbuf = malloc(len);
	memset(sbuf, idx, len);
	/* static: operations outlive this function (they end in child_main, after the kill), and
	 * each child is its own process */
	static struct op s, r;
	for (uint64_t round = 0; !c->failed; round++) {
		if (idx == 0) {
			if (peer_send(c, sbuf, len, 1, &s) || await(c, &s)) break;
			if (peer_recv(c, rbuf, len, 1, &r) || await(c, &r)) break;
		} else {
			if (peer_recv(c, rbuf, len, 1, &r) || await(c, &r)) break;
			if (peer_send(c, sbuf, len, 1, &s) || await(c, &s)) break;
		}
	}
	/* the buffers stay allocated: a failed operation's buffer is ours again only once drained */
}

static void stage_big(struct child *c, int idx, enum stage st)
{
	char *buf = malloc(BIG);
	memset(buf, 0x5a, BIG);
	static struct op o, w; /* outlive this function, as in stage_pingpong */
	/* Each side keeps a receive for the other posted (tag 7; nobody sends it). */
	static char small[64];
	if (peer_recv(c, small, sizeof small, 7, &w)) return;
	switch (st) {
	case RTS_WAIT_CTS: /* process 0 sends tag 1; process 1 never posts tag 1 */
		if (idx == 0 && peer_send(c, buf, BIG, 1, &o)) return;
		while (!c->failed) progress(c);
		break;
	case MID_DMA:
		while (!c->failed) {
			if (idx == 0) {
				if (peer_send(c, buf, BIG, 2, &o) || await(c, &o)) break;
			} else {
				if (peer_recv(c, buf, BIG, 2, &o) || await(c, &o)) break;
			}
		}
		break;
	case RTR_STORED: /* process 1's receive goes first: its RTR waits at process 0 */
		if (idx == 1) {
			if (peer_recv(c, buf, BIG, 3, &o)) return;
			while (!c->failed) progress(c);
		} else {
			/* told that the peer is dead: send now (the liveness check may or may not have
			 * noticed yet), after a random pause */
			while (!c->failed && !parent_said(c)) progress(c);
			take_go(c); /* failed first: the parent's word still comes */
			double until = xt_now_s() + (rand() % 400) / 1000.0;
			while (!c->failed && xt_now_s() < until) progress(c);
			if (!c->failed && peer_send(c, buf, BIG, 3, &o)) return;
			while (!c->failed) progress(c);
		}
		break;
	case RMA_READ: /* process 0 reads process 1's region again and again */
		while (!c->failed && idx == 0) {
			memset(&o, 0, sizeof o);
			if (POST(c, fi_read(c->x.ep, buf, BIG, NULL, c->peer, c->peer_blob.addr,
					    c->peer_blob.key, &o)) || await(c, &o))
				break;
		}
		while (!c->failed) progress(c);
		break;
	default:
		break;
	}
}

static int child_main(int idx, int sock)
{
	char *s_env = getenv("PEER_DEATH_CHILD_STAGE");
	enum stage st = (enum stage)atoi(s_env);
	srand((unsigned)getpid() ^ (unsigned)time(NULL));
	struct child c = {.sock = sock, .go_pending = st == RTR_STORED && idx == 0};
	struct fi_info *h = xt_hints();
	h->caps |= FI_RMA;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY;
	xt_open(&c.x, h, 0);
	fi_freeinfo(h);
	void *region = calloc(1, BIG);
	struct fid_mr *mr;
	XT_RC(fi_mr_reg(c.x.domain, region, BIG, FI_REMOTE_READ, 0, 0, 0, &mr, NULL));
	struct blob mine = {.key = fi_mr_key(mr)};
	memcpy(mine.name, c.x.name, sizeof mine.name);
	mine.addr = (c.x.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)region : 0;
	xt_send_all(sock, &mine, sizeof mine);
	xt_recv_all(sock, &c.peer_blob, sizeof c.peer_blob);
	c.peer = xt_insert(&c.x, c.peer_blob.name);
	xt_sync(sock); /* both are connected: start */

	if (st <= PP1M)
		stage_pingpong(&c, idx, pingpong_len[st]);
	else
		stage_big(&c, idx, st);

	/* Only a survivor gets here. Every outstanding operation must end. */
	while (c.outstanding > 0 && xt_now_s() - c.rep.first_error < 20)
		progress(&c);
	c.rep.all_done = xt_now_s();
	take_go(&c); /* a post that failed at once (the kill came first) returned before it */
	XT_CHECK(c.outstanding == 0, "%d operations never ended after the peer died", c.outstanding);
	xt_send_all(sock, &c.rep, sizeof c.rep);
	xt_sync(sock); /* the parent checked the dead peer's segment */

	/* The endpoint still works, and a new operation naming the dead peer fails at once. */
	uint64_t v = 42, got = 0;
	fi_addr_t self = xt_insert(&c.x, c.x.name);
	XT_RC(fi_trecv(c.x.ep, &got, sizeof got, NULL, self, 9, 0, NULL));
	XT_RC(fi_tsend(c.x.ep, &v, sizeof v, NULL, self, 9, NULL));
	XT_CHECK(xt_wait(c.x.rxcq, NULL, NULL, 10) == 1 && got == 42, "loopback after the peer died");
	ssize_t rc = fi_tsend(c.x.ep, &v, sizeof v, NULL, c.peer, 1, NULL);
	XT_CHECK(rc < 0 && dead_peer_error((int)-rc), "a send to the dead peer returned %zd", rc);
	rc = fi_trecv(c.x.ep, &got, sizeof got, NULL, c.peer, 1, 0, NULL);
	XT_CHECK(rc < 0 && dead_peer_error((int)-rc), "a receive from the dead peer returned %zd", rc);
	char name[64];
	memcpy(name, c.x.name, sizeof name);
	fi_close(&mr->fid);
	xt_close(&c.x);
	XT_CHECK(!segment_exists(name), "the survivor's own segment is left after close");
	return 0;
}

/* ---- the parent: spawns, kills, judges -------------------------------------------------------- */

static void wait_readable(int sock, double seconds, const char *what)
{
	struct pollfd p = {sock, POLLIN, 0};
	int r = poll(&p, 1, (int)(seconds * 1000));
	XT_CHECK(r == 1, "%s within %.0f s", what, seconds);
}

/* One byte to the survivor. If it is gone, say how it ended (a crash is the provider's fault,
 * an early exit the test's) rather than only that the write failed. */
static void to_survivor(int sock, pid_t pid, char b)
{
	if (write(sock, &b, 1) == 1) return;
	const int err = errno;
	int status = 0;
	const pid_t w = waitpid(pid, &status, WNOHANG);
	if (w == pid && WIFSIGNALED(status))
		xt_fail(__FILE__, __LINE__, "the survivor died of signal %d (%s)", WTERMSIG(status),
			strsignal(WTERMSIG(status)));
	xt_fail(__FILE__, __LINE__, "write to the survivor: %s (it %s, status 0x%x)", strerror(err),
		w == pid ? "exited" : "is still running", status);
}

static double worst_s;
static int kills_done;

static void one_kill(enum stage st, int victim)
{
	char env[16];
	snprintf(env, sizeof env, "%d", (int)st);
	setenv("PEER_DEATH_CHILD_STAGE", env, 1);
	if (st == RMA_READ)
		setenv("FI_EXANET_USE_CMA", "0", 1); /* the target answers: it serves while it dies */
	int socks[2];
	pid_t pids[2];
	xt_spawn(2, child_main, socks, pids);
	unsetenv("FI_EXANET_USE_CMA");
	struct blob b[2];
	xt_recv_all(socks[0], &b[0], sizeof b[0]);
	xt_recv_all(socks[1], &b[1], sizeof b[1]);
	xt_send_all(socks[0], &b[1], sizeof b[1]);
	xt_send_all(socks[1], &b[0], sizeof b[0]);
	xt_sync(socks[0]);
	xt_sync(socks[1]);
	const int survivor = 1 - victim;

	/* A random moment of the running stage: up to 150 ms in. */
	usleep((useconds_t)(rand() % 150000));
	const double t_kill = xt_now_s();
	kill(pids[victim], SIGKILL);
	int status;
	XT_CHECK(waitpid(pids[victim], &status, 0) == pids[victim], "waitpid");
	if (st == RTR_STORED && survivor == 0)
		to_survivor(socks[0], pids[0], 'g');
	wait_readable(socks[survivor], 20, "the survivor's report");
	struct report rep;
	xt_recv_all(socks[survivor], &rep, sizeof rep);
	const double t_seen = xt_now_s();
	XT_CHECK(rep.errors > 0, "no operation failed");
	XT_CHECK(rep.first_error >= t_kill, "an operation failed %.3f s before the peer was killed (err %d)",
		 t_kill - rep.first_error, rep.first_err);
	XT_CHECK(!rep.bad_err, "an operation failed with %d (%s), not a dead peer's error", rep.bad_err,
		 fi_strerror(rep.bad_err));
	const double took = rep.all_done - t_kill;
	XT_CHECK(took <= DEADLINE_S, "the survivor's operations ended %.2f s after the kill", took);
	/* The survivor unlinked the dead peer's segment when it failed the peer (before it
	 * reported), and nothing else of ours runs (RUN_SERIAL). */
	XT_CHECK(!segment_exists(b[victim].name), "the dead peer's segment was not reclaimed (%.2f s)",
		 t_seen - t_kill);
	if (took > worst_s) worst_s = took;
	to_survivor(socks[survivor], pids[survivor], 's');
	char ack;
	xt_recv_all(socks[survivor], &ack, 1); /* the survivor's sync byte, sent after its report */
	xt_reap(1, &pids[survivor]);
	close(socks[0]);
	close(socks[1]);
	kills_done++;
}

/* ---- any-source receives ---------------------------------------------------------------------- */

static int quiet_peer(int i, int sock)
{
	(void)i;
	struct xt_ep x;
	xt_open_default(&x, 0);
	xt_exchange(&x, sock, 1, NULL);
	xt_sync(sock);
	for (;;) fi_cq_read(x.rxcq, NULL, 0);
	return 0;
}

static void any_source(void)
{
	int sock;
	pid_t pid;
	xt_spawn(1, quiet_peer, &sock, &pid);
	struct xt_ep x;
	xt_open_default(&x, 0);
	char name[64];
	fi_addr_t peer = xt_exchange(&x, sock, 0, name);
	xt_sync(sock);
	uint64_t any = 0, directed = 0;
	int any_ctx, dir_ctx;
	XT_RC(fi_trecv(x.ep, &any, sizeof any, NULL, FI_ADDR_UNSPEC, 5, 0, &any_ctx));
	XT_RC(fi_trecv(x.ep, &directed, sizeof directed, NULL, peer, 6, 0, &dir_ctx));
	const double t_kill = xt_now_s();
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	struct fi_cq_err_entry err = {0};
	XT_CHECK(xt_wait(x.rxcq, NULL, &err, 10) == 0 && err.op_context == &dir_ctx &&
		 err.err == FI_ECONNRESET, "the directed receive must fail with FI_ECONNRESET");
	const double took = xt_now_s() - t_kill;
	XT_CHECK(took <= DEADLINE_S, "the directed receive failed after %.2f s", took);
	XT_CHECK(!segment_exists(name), "the dead peer's segment was not reclaimed");
	/* The any-source receive stays posted: nothing for it in a further second. */
	struct fi_cq_tagged_entry e;
	for (double until = xt_now_s() + 1; xt_now_s() < until;)
		XT_CHECK(fi_cq_read(x.rxcq, &e, 1) == -FI_EAGAIN, "an any-source receive ended");
	/* A live sender (here the endpoint itself) still reaches it. */
	fi_addr_t self = xt_insert(&x, x.name);
	uint64_t v = 77;
	XT_RC(fi_tsend(x.ep, &v, sizeof v, NULL, self, 5, NULL));
	XT_CHECK(xt_wait(x.rxcq, &e, NULL, 10) == 1 && e.op_context == &any_ctx && any == 77,
		 "the any-source receive takes a live sender's message");
	/* And another one can be cancelled. */
	XT_RC(fi_trecv(x.ep, &any, sizeof any, NULL, FI_ADDR_UNSPEC, 5, 0, &any_ctx));
	XT_RC(fi_cancel(&x.ep->fid, &any_ctx));
	memset(&err, 0, sizeof err);
	XT_CHECK(xt_wait(x.rxcq, NULL, &err, 10) == 0 && err.err == FI_ECANCELED, "cancel");
	printf("  any-source: directed receive failed after %.2f s; any-source stayed posted\n", took);
	xt_close(&x);
}

int main(void)
{
	const char *k = getenv("PEER_DEATH_KILLS");
	const int kills = k && atoi(k) > 0 ? atoi(k) : 2;
	const char *only = getenv("PEER_DEATH_STAGE");
	const char *s = getenv("PEER_DEATH_SEED");
	const unsigned seed = s ? (unsigned)strtoul(s, NULL, 0) : (unsigned)time(NULL) ^ (unsigned)getpid();
	srand(seed);
	printf("PEER_DEATH_SEED=%u PEER_DEATH_KILLS=%d\n", seed, kills);
	xt_init(60 + kills * NSTAGES * 2 * 8);

	if (!only || !strcmp(only, "any_source")) {
		any_source();
		xt_pass("any_source: the directed receive fails, the any-source one stays posted");
	}
	for (int st = 0; st < NSTAGES; st++) {
		if (only && strcmp(only, stage_names[st]))
			continue;
		for (int victim = 0; victim < 2; victim++) {
			worst_s = 0;
			for (int i = 0; i < kills; i++)
				one_kill((enum stage)st, victim);
			char line[128];
			snprintf(line, sizeof line, "%s, process %d killed: %d kills, worst %.2f s",
				 stage_names[st], victim, kills, worst_s);
			xt_pass(line);
		}
	}
	printf("%d kills, 0 failures\n", kills_done);
	return 0;
}
