/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Named address vectors shared by the processes of a node (FI_SHARED_AV, fi_av(3) name, FI_READ).
 * Three processes: the parent writes a named AV, a reader opens the same name read-only, and a
 * target receives.
 *
 *   shared     the reader finds the writer's entry under the same fi_addr (also through map_addr)
 *              and reaches the target with it, inserting nothing itself; a read-only AV refuses
 *              inserts and removals
 *   removal    once the writer removes the entry, the reader's sends to it fail (the removal
 *              reaches the other process's cached routes); the target inserted again gets a new
 *              fi_addr, and the reader's completions name it as the source (FI_SOURCE looks up
 *              past the removed entry)
 *   bounds     FI_READ needs a name and an existing AV; a named AV holds fi_av_attr's count
 *              entries and refuses more; the writer's close removes the file
 *   stale      a writer that died without closing leaves its file, which the next writer
 *              replaces
 *   unsettled  (FI_AV_MAP) an entry left claimed, as by a writer killed between claiming and
 *              publishing it, does not hide the entries after it: re-inserting one of those gives
 *              back its fi_addr (white box: the file's layout, fi_exanet(7))
 *   namespace  a live writer in another PID namespace (as root; skipped otherwise), whose pid
 *              names nobody here: a writer here joins its AV instead of replacing it
 *
 * Run for both AV types (SHARED_AV_TYPE=map selects FI_AV_MAP). No provider of Debian's libfabric
 * 1.17 offers FI_SHARED_AV (shm, tcp, tcp;ofi_rxm, udp all refuse it), so there is no reference to
 * run it against: it checks fi_av(3) as written, and upstream's fi_rdm_shared_av runs in the quick
 * set. The error codes, the capacity bound and the file's name are exanet's (fi_exanet(7), Objects).
 */
#define _GNU_SOURCE /* unshare */
#include "xt.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const int strict = 1; /* exact error codes: exanet's (fi_exanet(7)) */
static enum fi_av_type av_type = FI_AV_TABLE;
static char av_name[64];

struct named {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fi_av_attr attr;
};

static struct fi_info *hints(void)
{
	struct fi_info *h = xt_hints();
	h->caps = FI_TAGGED | FI_SHARED_AV | FI_SOURCE;
	return h;
}

/* Everything but the AV, which the caller opens (named or not) before named_enable. */
static void named_open(struct named *n)
{
	memset(n, 0, sizeof *n);
	struct fi_info *h = hints();
	XT_RC(fi_getinfo(xt_api_version, NULL, NULL, 0, h, &n->info));
	fi_freeinfo(h);
	XT_CHECK(n->info->caps & FI_SHARED_AV, "FI_SHARED_AV not granted");
	XT_RC(fi_fabric(n->info->fabric_attr, &n->fabric, NULL));
	XT_RC(fi_domain(n->fabric, n->info, &n->domain, NULL));
	n->attr.type = av_type;
}

static int named_av(struct named *n, const char *name, uint64_t flags, size_t count)
{
	n->attr.name = name;
	n->attr.flags = flags;
	n->attr.count = count;
	n->attr.map_addr = NULL;
	return fi_av_open(n->domain, &n->attr, &n->av, NULL);
}

static void named_enable(struct named *n)
{
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED};
	XT_RC(fi_cq_open(n->domain, &ca, &n->cq, NULL));
	XT_RC(fi_endpoint(n->domain, n->info, &n->ep, NULL));
	XT_RC(fi_ep_bind(n->ep, &n->av->fid, 0));
	XT_RC(fi_ep_bind(n->ep, &n->cq->fid, FI_TRANSMIT | FI_RECV));
	XT_RC(fi_enable(n->ep));
}

static void named_close(struct named *n)
{
	if (n->ep)
		XT_RC(fi_close(&n->ep->fid));
	if (n->cq)
		XT_RC(fi_close(&n->cq->fid));
	if (n->av)
		XT_RC(fi_close(&n->av->fid));
	XT_RC(fi_close(&n->domain->fid));
	XT_RC(fi_close(&n->fabric->fid));
	fi_freeinfo(n->info);
}

static void expect_err(long rc, int code, const char *what)
{
	if (strict)
		XT_CHECK(rc == -code, "%s = %ld (%s), expected %s", what, rc, fi_strerror((int)-rc), fi_strerror(code));
	else
		XT_CHECK(rc < 0, "%s = %ld, expected a failure", what, rc);
}

/* The target: receives one message from the reader, and says so. */
static int target(int i, int sock)
{
	(void)i;
	struct xt_ep x;
	xt_open_default(&x, 0);
	xt_send_name(sock, &x);
	uint64_t got = 0;
	XT_RC(fi_trecv(x.ep, &got, sizeof got, NULL, FI_ADDR_UNSPEC, 3, 0, NULL));
	XT_CHECK(xt_wait(x.rxcq, NULL, NULL, 20) == 1 && got == 0x5a5a, "the reader's message (%llx)",
		 (unsigned long long)got);
	xt_sync(sock);
	/* Then one message back to the reader, whose name the parent forwards. */
	char rname[64];
	xt_recv_name(sock, rname);
	fi_addr_t to_reader = xt_insert(&x, rname);
	xt_sync(sock); /* the reader's receive is posted */
	const uint64_t v = 0xa5a5;
	xt_send_one(x.ep, x.txcq, &v, sizeof v, to_reader, 4);
	xt_sync(sock);
	xt_close(&x);
	return 0;
}

/* The reader: the named AV read-only; sends through the writer's entry. */
static int reader(int i, int sock)
{
	(void)i;
	fi_addr_t f0;
	char peer_name[64];
	xt_recv_all(sock, &f0, sizeof f0);
	xt_recv_name(sock, peer_name);
	struct named n;
	named_open(&n);
	XT_RC(named_av(&n, av_name, FI_READ, 0));
	XT_CHECK(n.attr.map_addr, "map_addr not returned for a named AV");
	XT_CHECK(((fi_addr_t *)n.attr.map_addr)[0] == f0, "map_addr[0] is %llu, the writer got %llu",
		 (unsigned long long)((fi_addr_t *)n.attr.map_addr)[0], (unsigned long long)f0);
	named_enable(&n);
	char found[64] = {0};
	size_t len = sizeof found;
	XT_RC(fi_av_lookup(n.av, f0, found, &len));
	XT_CHECK(!memcmp(found, peer_name, len < 64 ? len : 64), "the shared entry names another endpoint");
	uint64_t v = 0x5a5a;
	xt_send_one(n.ep, n.cq, &v, sizeof v, f0, 3);
	ssize_t rc;
	fi_addr_t mine;
	expect_err(fi_av_insert(n.av, peer_name, 1, &mine, 0, NULL), FI_EOPNOTSUPP, "insert into a read-only AV");
	expect_err(fi_av_remove(n.av, &f0, 1, 0), FI_EOPNOTSUPP, "remove from a read-only AV");
	xt_sync(sock); /* sent; the writer removes the entry now */
	xt_sync(sock);
	if (strict) {
		rc = fi_tsend(n.ep, &v, sizeof v, NULL, f0, 3, NULL);
		XT_CHECK(rc == -FI_EADDRNOTAVAIL, "a send to the entry the writer removed = %zd", rc);
		XT_CHECK(fi_av_lookup(n.av, f0, found, &len) == -FI_ENOENT, "lookup of the removed entry");
	}
	xt_sync(sock);
	/* The target, inserted again by the writer, sends to us: its completion names the new
	 * fi_addr. */
	fi_addr_t f1;
	xt_recv_all(sock, &f1, sizeof f1);
	struct xt_ep me = {0};
	me.namelen = sizeof me.name;
	XT_RC(fi_getname(&n.ep->fid, me.name, &me.namelen));
	xt_send_name(sock, &me);
	uint64_t back = 0;
	XT_RC(fi_trecv(n.ep, &back, sizeof back, NULL, FI_ADDR_UNSPEC, 4, 0, NULL));
	xt_sync(sock); /* posted */
	struct fi_cq_tagged_entry e;
	fi_addr_t src = FI_ADDR_NOTAVAIL;
	ssize_t got;
	for (double until = xt_now_us() + 20e6; (got = fi_cq_readfrom(n.cq, &e, 1, &src)) == -FI_EAGAIN;)
		XT_CHECK(xt_now_us() < until, "the target's message never came");
	XT_CHECK(got == 1 && back == 0xa5a5, "the target's message: %zd", got);
	XT_CHECK(src == f1, "its source is fi_addr %llu, the writer inserted it as %llu",
		 (unsigned long long)src, (unsigned long long)f1);
	xt_sync(sock);
	xt_sync(sock); /* the writer closed: our mapping stays until we close */
	named_close(&n);
	return 0;
}

/* Creates a named AV with one entry and dies without closing it. */
static int crashing_writer(int i, int sock)
{
	(void)i;
	(void)sock;
	char name[80];
	snprintf(name, sizeof name, "%s.dead", av_name);
	struct named n;
	named_open(&n);
	XT_RC(named_av(&n, name, 0, 4));
	fi_addr_t f = FI_ADDR_NOTAVAIL;
	XT_CHECK(fi_av_insertsvc(n.av, "127.0.0.1", "40000", &f, 0, NULL) == 1 && f == 0, "insertsvc");
	_exit(7);
}

/* The smallest pid from `from` on that names no process here. */
static pid_t free_pid_here(pid_t from)
{
	for (pid_t p = from; p < 30000; p++)
		if (kill(p, 0) != 0 && errno == ESRCH)
			return p;
	return -1;
}

/* A writer in a new PID namespace, under a pid that names nobody outside it, creates the AV
 * "<av_name>.ns" with one entry and keeps it open until the parent closes go[1]. Returns 0 once it is ready,
 * 77 when this process may not create a PID namespace. */
static int start_namespace_writer(const char *tname, const int go[2])
{
	const pid_t want = free_pid_here(2);
	int ready[2];
	XT_CHECK(want > 1 && pipe(ready) == 0, "pid %d, pipe", (int)want);
	const pid_t outer = fork();
	XT_CHECK(outer >= 0, "fork");
	if (outer == 0) {
		close(ready[0]);
		close(go[1]); /* only the parent holds it: its close ends the writer's wait */
		if (unshare(CLONE_NEWPID) != 0)
			_exit(77);
		const pid_t init = fork();
		if (init != 0)
			_exit(init > 0 ? 0 : 3);
		for (;;) { /* pid 1 of the namespace: spend pids until a child gets `want` */
			const pid_t c = fork();
			if (c < 0)
				_exit(4);
			if (c == 0) {
				if (getpid() != want)
					_exit(0);
				char name[80];
				snprintf(name, sizeof name, "%s.ns", av_name);
				struct named n;
				named_open(&n);
				XT_RC(named_av(&n, name, 0, 4));
				fi_addr_t f = FI_ADDR_NOTAVAIL;
				XT_CHECK(fi_av_insert(n.av, tname, 1, &f, 0, NULL) == 1 && f == 0, "ns insert");
				char b = 1;
				XT_CHECK(write(ready[1], &b, 1) == 1, "ready");
				(void)!read(go[0], &b, 1); /* until the parent is done with it */
				named_close(&n);
				_exit(0);
			}
			waitpid(c, NULL, 0);
			if (c >= want)
				_exit(0); /* the writer is done: the namespace ends with us */
		}
	}
	close(ready[1]);
	int status = 0;
	XT_CHECK(waitpid(outer, &status, 0) == outer, "waitpid");
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
		close(ready[0]);
		return 77;
	}
	char b = 0;
	XT_CHECK(read(ready[0], &b, 1) == 1 && b == 1, "the writer in the other namespace did not start");
	close(ready[0]);
	return 0;
}

int main(void)
{
	xt_init(120);
	const char *t = getenv("SHARED_AV_TYPE");
	if (t && !strcmp(t, "map"))
		av_type = FI_AV_MAP;
	snprintf(av_name, sizeof av_name, "xt_shared_av.%d", (int)getpid());

	int socks[2];
	pid_t pids[2];
	xt_spawn(1, target, &socks[0], &pids[0]);
	xt_spawn(1, reader, &socks[1], &pids[1]);

	/* The writer: the target's name under the first fi_addr. */
	char tname[64];
	xt_recv_name(socks[0], tname);
	struct named w;
	named_open(&w);
	struct fid_av *probe;
	struct fi_av_attr pa = {.type = av_type, .flags = FI_READ};
	expect_err(fi_av_open(w.domain, &pa, &probe, NULL), FI_EINVAL, "FI_READ without a name");
	pa.name = "xt_shared_av.never_created";
	expect_err(fi_av_open(w.domain, &pa, &probe, NULL), FI_ENOENT, "FI_READ of an AV that does not exist");
	XT_RC(named_av(&w, av_name, 0, 4));
	XT_CHECK(w.attr.map_addr, "map_addr not returned to the writer");
	fi_addr_t f0 = FI_ADDR_NOTAVAIL;
	XT_CHECK(fi_av_insert(w.av, tname, 1, &f0, 0, NULL) == 1 && f0 != FI_ADDR_NOTAVAIL, "insert");
	xt_send_all(socks[1], &f0, sizeof f0);
	struct xt_ep named_for_reader = {0};
	memcpy(named_for_reader.name, tname, sizeof tname);
	named_for_reader.namelen = sizeof tname;
	xt_send_name(socks[1], &named_for_reader);
	xt_sync(socks[0]); /* the target got the reader's message */
	xt_sync(socks[1]);
	xt_pass("shared: the reader reaches the target through the writer's entry; read-only refuses changes");

	XT_RC(fi_av_remove(w.av, &f0, 1, 0));
	xt_sync(socks[1]); /* removed: the reader tries */
	xt_sync(socks[1]);
	fi_addr_t f1 = FI_ADDR_NOTAVAIL;
	XT_CHECK(fi_av_insert(w.av, tname, 1, &f1, 0, NULL) == 1 && f1 != f0, "insert again: %llu",
		 (unsigned long long)f1);
	xt_send_all(socks[1], &f1, sizeof f1);
	char rname[64];
	xt_recv_name(socks[1], rname);
	struct xt_ep fwd = {0};
	memcpy(fwd.name, rname, sizeof rname);
	fwd.namelen = sizeof rname;
	xt_send_name(socks[0], &fwd);
	xt_sync(socks[1]); /* the reader's receive is posted */
	xt_sync(socks[0]); /* the target may send */
	xt_sync(socks[0]); /* sent */
	xt_sync(socks[1]); /* the reader checked the source */
	xt_reap(1, &pids[0]);
	xt_pass("removal: the reader's sends to the removed entry fail; the new entry is the source");

	/* Capacity: the AV was opened for 4 entries (fi_av_attr count). */
	if (strict) {
		fi_addr_t more[4];
		int k = 0;
		for (; k < 4; k++) {
			char other[64];
			memcpy(other, tname, sizeof other);
			other[12] ^= (char)(k + 1); /* another port: distinct entries */
			if (fi_av_insert(w.av, other, 1, &more[k], 0, NULL) != 1)
				break;
		}
		/* two entries taken (the removed one keeps its place: fi_addrs are not reused) */
		XT_CHECK(k == 2, "a 4-entry named AV took %d more after its two", k);
	}
	XT_RC(fi_close(&w.av->fid));
	w.av = NULL;
	if (strict) {
		char path[128];
		struct stat st;
		snprintf(path, sizeof path, "/dev/shm/exanet-av.%u.%s", (unsigned)geteuid(), av_name);
		XT_CHECK(stat(path, &st) != 0, "the writer's close left %s", path);
		xt_pass("bounds: FI_READ rules, capacity, and the file gone with its writer");
	}
	xt_sync(socks[1]);
	named_close(&w);
	xt_reap(1, &pids[1]);

	/* A writer that died without closing leaves its file; the next writer of the name starts a
	 * fresh AV (the dead one's entries are not handed out again) and removes the file at close. */
	int sock;
	pid_t pid;
	xt_spawn(1, crashing_writer, &sock, &pid);
	int status = 0;
	XT_CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 7,
		 "the crashing writer (status 0x%x)", status);
	close(sock);
	char path[128];
	struct stat st;
	snprintf(path, sizeof path, "/dev/shm/exanet-av.%u.%s.dead", (unsigned)geteuid(), av_name);
	XT_CHECK(stat(path, &st) == 0, "the dead writer's file should be left: %s", path);
	char dead_name[80];
	snprintf(dead_name, sizeof dead_name, "%s.dead", av_name);
	struct named again;
	named_open(&again);
	XT_RC(named_av(&again, dead_name, 0, 4));
	fi_addr_t first = FI_ADDR_NOTAVAIL;
	XT_CHECK(fi_av_insert(again.av, tname, 1, &first, 0, NULL) == 1 && first == 0,
		 "a fresh AV's first entry: %llu", (unsigned long long)first);
	named_close(&again);
	XT_CHECK(stat(path, &st) != 0, "the new writer's close left %s", path);
	xt_pass("stale: a dead writer's file is replaced by the next writer, and removed at its close");

	if (av_type == FI_AV_MAP) {
		char cl_name[80];
		snprintf(cl_name, sizeof cl_name, "%s.claim", av_name);
		struct named a, b;
		named_open(&a);
		XT_RC(named_av(&a, cl_name, 0, 4));
		char second_name[64];
		memcpy(second_name, tname, sizeof second_name);
		second_name[12] ^= 3;
		fi_addr_t e0 = FI_ADDR_NOTAVAIL, e1 = FI_ADDR_NOTAVAIL;
		XT_CHECK(fi_av_insert(a.av, tname, 1, &e0, 0, NULL) == 1 && e0 == 0, "entry 0");
		XT_CHECK(fi_av_insert(a.av, second_name, 1, &e1, 0, NULL) == 1 && e1 == 1, "entry 1");
		/* Entry 0 back to "claimed" (its state word: header 48 bytes, entries of 24, the state
		 * after the 16-byte address). */
		snprintf(path, sizeof path, "/dev/shm/exanet-av.%u.%s", (unsigned)geteuid(), cl_name);
		const int fd = open(path, O_RDWR);
		XT_CHECK(fd >= 0, "open %s", path);
		unsigned char *file = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		XT_CHECK(file != MAP_FAILED, "mmap");
		close(fd);
		uint32_t claimed = 0;
		memcpy(file + 48 + 16, &claimed, sizeof claimed);
		munmap(file, 4096);
		named_open(&b); /* another opener: its cache of the file starts empty */
		XT_RC(named_av(&b, cl_name, 0, 4));
		fi_addr_t again = FI_ADDR_NOTAVAIL;
		XT_CHECK(fi_av_insert(b.av, second_name, 1, &again, 0, NULL) == 1 && again == e1,
			 "an unsettled entry hid the one after it: re-inserting it gave %llu, not %llu",
			 (unsigned long long)again, (unsigned long long)e1);
		named_close(&b);
		named_close(&a);
		xt_pass("unsettled: a claimed entry does not hide the entries after it");
	}

	int go[2];
	XT_CHECK(pipe(go) == 0, "pipe");
	if (start_namespace_writer(tname, go) == 77) {
		printf("SKIP: namespace: unshare(CLONE_NEWPID) not permitted (needs root)\n");
		return 0;
	}
	close(go[0]);
	char ns_name[80];
	snprintf(ns_name, sizeof ns_name, "%s.ns", av_name);
	struct named joiner;
	named_open(&joiner);
	XT_RC(named_av(&joiner, ns_name, 0, 4));
	fi_addr_t second = FI_ADDR_NOTAVAIL;
	char other[64];
	memcpy(other, tname, sizeof other);
	other[12] ^= 1;
	XT_CHECK(fi_av_insert(joiner.av, other, 1, &second, 0, NULL) == 1 && second == 1,
		 "a writer here took the live AV of another PID namespace for a dead one's (its entry: %llu)",
		 (unsigned long long)second);
	named_close(&joiner);
	close(go[1]); /* the writer there closes, and removes the file */
	snprintf(path, sizeof path, "/dev/shm/exanet-av.%u.%s", (unsigned)geteuid(), ns_name);
	for (int i = 0; i < 500 && stat(path, &st) == 0; i++)
		usleep(10000);
	XT_CHECK(stat(path, &st) != 0, "the namespace writer's close left %s", path);
	xt_pass("namespace: a live writer in another PID namespace keeps its AV; a writer here joins it");
	return 0;
}
