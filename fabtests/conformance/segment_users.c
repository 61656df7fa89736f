/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Isolation between users (issue 12 part 2). /dev/shm is world-writable, so another user can
 * create files under the names of our segments before we do. This program runs as root and
 * plays the other user (uid/gid 65534, no groups) in child processes, checking that:
 *   - nobody else can open our segments (the other user gets EACCES);
 *   - a user-chosen port whose name another user squatted fails with -FI_EACCES, and the
 *     squatter's file is left as it was (with a live "owner" and a 0666 mode);
 *   - automatic ports skip squatted names, and no squatted file is unlinked by root (not even
 *     one whose header names a dead owner, which the stale-segment reclaim would take);
 *   - root's sends to a port whose segment another user made (a well-formed copy of a real
 *     segment, mode 0666, mapped by a live process; and one whose header says mailbox size 0)
 *     fail with -FI_EACCES, nothing crashes, and not one byte of those files changes.
 * Without root the program cannot switch users: it says so and exits 77 (ctest: skipped).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xt.h"

#define OTHER_UID 65534
/* Offsets in the segment header (prov/exanet/src/dev/emu/layout.hpp, segment_header). The
 * template is a real segment's header, so only these fields are edited; the magic is checked
 * to catch a layout change. */
#define HDR_MAGIC 0
#define HDR_PORT 12
#define HDR_OWNER_PID 16
#define HDR_MAILBOX_SLOTS 24
#define SEGMENT_MAGIC 0x45584e54u
#define DEAD_PID 0x7ffffff0 /* above any pid_max */
/* The automatic port search of dev/emu/device.cpp (open): port_limit 2^16, first 2^15. */
#define FIRST_AUTO_PORT 32768u
#define AUTO_SPAN 32768u

static unsigned g_pdid;
static unsigned char *g_template; /* the bytes of a real segment of ours */
static size_t g_template_len;

static void seg_name(char *out, size_t n, unsigned uid, unsigned port)
{
	snprintf(out, n, "/exanet.%u.%u.%u", uid, g_pdid, port);
}

static unsigned auto_port(pid_t pid, unsigned n)
{
	uint32_t start = (uint32_t)pid * 2654435761u;
	return FIRST_AUTO_PORT + (start + n) % AUTO_SPAN;
}

/* The ports of this PDID whose segment files uid owns, in order of the directory. */
static int ports_owned_by(unsigned uid, unsigned *ports, int max)
{
	char prefix[64];
	snprintf(prefix, sizeof prefix, "exanet.%u.%u.", uid, g_pdid);
	DIR *d = opendir("/dev/shm");
	XT_CHECK(d, "opendir /dev/shm");
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < max) {
		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
			continue;
		char path[300];
		struct stat st;
		snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
		if (stat(path, &st) == 0 && st.st_uid == uid)
			ports[n++] = (unsigned)strtoul(e->d_name + strlen(prefix), NULL, 10);
	}
	closedir(d);
	return n;
}

static void load_template(unsigned port)
{
	char name[64], path[80];
	seg_name(name, sizeof name, 0, port);
	snprintf(path, sizeof path, "/dev/shm%s", name);
	int fd = open(path, O_RDONLY);
	XT_CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	struct stat st;
	XT_CHECK(fstat(fd, &st) == 0 && st.st_size > 4096, "fstat %s", path);
	g_template_len = (size_t)st.st_size;
	g_template = malloc(g_template_len);
	XT_CHECK(g_template, "malloc");
	size_t got = 0;
	while (got < g_template_len) {
		ssize_t r = read(fd, g_template + got, g_template_len - got);
		XT_CHECK(r > 0, "read %s", path);
		got += (size_t)r;
	}
	close(fd);
	uint32_t magic;
	memcpy(&magic, g_template + HDR_MAGIC, 4);
	XT_CHECK(magic == SEGMENT_MAGIC, "segment header layout changed: update HDR_* offsets");
}

/* ---- the other user ------------------------------------------------------------------------ */

static void become_other_user(void)
{
	XT_CHECK(setgroups(0, NULL) == 0, "setgroups: %s", strerror(errno));
	XT_CHECK(setresgid(OTHER_UID, OTHER_UID, OTHER_UID) == 0, "setresgid: %s", strerror(errno));
	XT_CHECK(setresuid(OTHER_UID, OTHER_UID, OTHER_UID) == 0, "setresuid: %s", strerror(errno));
	XT_CHECK(geteuid() == OTHER_UID && getuid() == OTHER_UID, "still root");
}

/* A squatted file: under root's name for `port`, created by the other user with `mode`, holding
 * the template with port, owner pid and mailbox size edited; kept mapped by the squatter. */
struct squat {
	unsigned port;
	char name[64];
	unsigned char *map;
	size_t len;
};

static void squat_create(struct squat *s, unsigned port, mode_t mode, int32_t owner,
			 uint32_t mailbox_slots)
{
	s->port = port;
	seg_name(s->name, sizeof s->name, 0, port);
	int fd = shm_open(s->name, O_RDWR | O_CREAT | O_EXCL, 0600);
	XT_CHECK(fd >= 0, "other user: shm_open(%s): %s", s->name, strerror(errno));
	XT_CHECK(fchmod(fd, mode) == 0, "fchmod");
	s->len = g_template_len;
	XT_CHECK(ftruncate(fd, (off_t)s->len) == 0, "ftruncate");
	s->map = mmap(NULL, s->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	XT_CHECK(s->map != MAP_FAILED, "mmap");
	close(fd);
	memcpy(s->map, g_template, s->len);
	uint32_t p32 = port;
	memcpy(s->map + HDR_PORT, &p32, 4);
	memcpy(s->map + HDR_OWNER_PID, &owner, 4);
	memcpy(s->map + HDR_MAILBOX_SLOTS, &mailbox_slots, 4);
}

/* True if the file under the name is still the squatter's, byte for byte what it wrote. */
static int squat_intact(const struct squat *s)
{
	char path[80];
	snprintf(path, sizeof path, "/dev/shm%s", s->name);
	struct stat st;
	if (stat(path, &st) != 0 || st.st_uid != OTHER_UID || (size_t)st.st_size != s->len)
		return 0;
	unsigned char *expect = malloc(s->len);
	XT_CHECK(expect, "malloc");
	memcpy(expect, g_template, s->len);
	uint32_t p32 = s->port;
	memcpy(expect + HDR_PORT, &p32, 4);
	memcpy(expect + HDR_OWNER_PID, s->map + HDR_OWNER_PID, 4);
	memcpy(expect + HDR_MAILBOX_SLOTS, s->map + HDR_MAILBOX_SLOTS, 4);
	int same = memcmp(expect, s->map, s->len) == 0;
	free(expect);
	return same;
}

/* The squatter: creates what the parent asks, reports, and checks on request.
 * Commands (one byte, then arguments): 'S' port mode owner(0: self) mailbox -> 'k';
 * 'C' -> one byte, the number of squats not intact; 'X' unlinks all and exits. */
enum { max_squats = 16 };
static int squatter(int index, int sock)
{
	(void)index;
	become_other_user();
	struct squat squats[max_squats];
	int n = 0;
	for (;;) {
		char cmd;
		xt_recv_all(sock, &cmd, 1);
		if (cmd == 'S') {
			uint32_t arg[4];
			xt_recv_all(sock, arg, sizeof arg);
			XT_CHECK(n < max_squats, "too many squats");
			squat_create(&squats[n++], arg[0], (mode_t)arg[1],
				     arg[2] ? (int32_t)arg[2] : (int32_t)getpid(), arg[3]);
			xt_send_all(sock, "k", 1);
		} else if (cmd == 'O') {
			/* Try to open root's segment at the port that follows. */
			uint32_t port;
			xt_recv_all(sock, &port, 4);
			char name[64];
			seg_name(name, sizeof name, 0, port);
			int fd_ro = shm_open(name, O_RDONLY, 0);
			int e_ro = errno;
			int fd_rw = shm_open(name, O_RDWR, 0);
			int e_rw = errno;
			char path[80];
			snprintf(path, sizeof path, "/dev/shm%s", name);
			int fd_plain = open(path, O_RDONLY);
			int e_plain = errno;
			char ok = fd_ro < 0 && e_ro == EACCES && fd_rw < 0 && e_rw == EACCES &&
				  fd_plain < 0 && e_plain == EACCES;
			xt_send_all(sock, &ok, 1);
		} else if (cmd == 'C') {
			char bad = 0;
			for (int i = 0; i < n; i++)
				if (!squat_intact(&squats[i])) {
					fprintf(stderr, "squatted %s was changed or removed\n", squats[i].name);
					bad++;
				}
			xt_send_all(sock, &bad, 1);
		} else {
			for (int i = 0; i < n; i++) {
				munmap(squats[i].map, squats[i].len);
				shm_unlink(squats[i].name);
			}
			return 0;
		}
	}
}

static void squat(int sock, unsigned port, mode_t mode, int32_t owner, uint32_t mailbox_slots)
{
	uint32_t arg[4] = {port, (uint32_t)mode, (uint32_t)owner, mailbox_slots};
	xt_send_all(sock, "S", 1);
	xt_send_all(sock, arg, sizeof arg);
	char k;
	xt_recv_all(sock, &k, 1);
}

static int squats_changed(int sock)
{
	char bad;
	xt_send_all(sock, "C", 1);
	xt_recv_all(sock, &bad, 1);
	return bad;
}

/* ---- root's processes ---------------------------------------------------------------------- */

static struct fi_info *hints_here(void)
{
	struct fi_info *h = xt_hints();
	return h;
}

/* Root process C: waits, opens an endpoint on an automatic port, sends one message to A. */
static int auto_port_child(int index, int sock)
{
	(void)index;
	char go[64];
	xt_recv_name(sock, go); /* A's name: the squats are in place */
	struct xt_ep x;
	xt_open(&x, hints_here(), 0);
	fi_addr_t a = xt_insert(&x, go);
	char msg[32] = "root to root";
	XT_RC(fi_tsend(x.ep, msg, sizeof msg, NULL, a, 0x5e6, NULL));
	xt_wait(x.txcq, NULL, NULL, 20);
	xt_sync(sock);
	xt_close(&x);
	return 0;
}

/* Root process B: its sends to squatted ports must fail cleanly, never crash. */
static int foreign_send_child(int index, int sock)
{
	(void)index;
	uint32_t ports[2];
	xt_recv_all(sock, ports, sizeof ports);
	struct xt_ep x;
	xt_open(&x, hints_here(), 0);
	for (int i = 0; i < 2; i++) {
		char service[16];
		snprintf(service, sizeof service, "%u", ports[i]);
		fi_addr_t to = FI_ADDR_NOTAVAIL;
		XT_CHECK(fi_av_insertsvc(x.av, "127.0.0.1", service, &to, 0, NULL) == 1,
			 "fi_av_insertsvc port %u", ports[i]);
		char msg[64] = "secret of root";
		ssize_t r = fi_tsend(x.ep, msg, sizeof msg, NULL, to, 1, NULL);
		XT_CHECK(r == -FI_EACCES, "fi_tsend to the squatted port %u = %zd (%s), want -FI_EACCES",
			 ports[i], r, fi_strerror((int)-r));
		r = fi_tinject(x.ep, msg, 8, to, 2);
		XT_CHECK(r == -FI_EACCES, "fi_tinject to the squatted port %u = %zd", ports[i], r);
	}
	xt_close(&x);
	return 0;
}

/* Whatever happens, no file of this PDID is left behind, the other user's included. */
static void remove_all_segments(void)
{
	DIR *d = opendir("/dev/shm");
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		unsigned uid, pdid, port;
		if (sscanf(e->d_name, "exanet.%u.%u.%u", &uid, &pdid, &port) == 3 && pdid == g_pdid) {
			char name[300];
			snprintf(name, sizeof name, "/%s", e->d_name);
			shm_unlink(name);
		}
	}
	closedir(d);
}

/* argv[1], if given, runs only that case (1 to 4): to see each fail on its own. */
int main(int argc, char **argv)
{
	const int only = argc > 1 ? atoi(argv[1]) : 0;
#define WANT(n) (only == 0 || only == (n))
	if (geteuid() != 0) {
		printf("SKIP: segment_users needs root to act as a second user (setresuid)\n");
		return 77;
	}
	xt_init(120);
	g_pdid = 900000 + (unsigned)getpid() % 100000;
	char pdid[16];
	snprintf(pdid, sizeof pdid, "%u", g_pdid);
	setenv("FI_EXANET_PDID", pdid, 1);
	atexit(remove_all_segments);

	/* C first, before any endpoint here, so its first automatic port is predictable. */
	int c_sock;
	pid_t c_pid;
	xt_spawn(1, auto_port_child, &c_sock, &c_pid);

	struct xt_ep a;
	xt_open(&a, hints_here(), 0);
	unsigned a_port;
	XT_CHECK(ports_owned_by(0, &a_port, 1) == 1, "A's segment not found in /dev/shm");
	load_template(a_port);

	int other_sock;
	pid_t other_pid;
	xt_spawn(1, squatter, &other_sock, &other_pid);

	/* 1. Nobody else can open our segments. */
	if (WANT(1)) {
		char name[64], path[80];
		seg_name(name, sizeof name, 0, a_port);
		snprintf(path, sizeof path, "/dev/shm%s", name);
		struct stat st;
		XT_CHECK(stat(path, &st) == 0 && st.st_uid == 0 && (st.st_mode & 07777) == 0600,
			 "our segment is uid %u mode %o", (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
		uint32_t p = a_port;
		xt_send_all(other_sock, "O", 1);
		xt_send_all(other_sock, &p, 4);
		char ok;
		xt_recv_all(other_sock, &ok, 1);
		XT_CHECK(ok, "the other user could open root's segment (or failed other than EACCES)");
		xt_pass("another user cannot open our segments (EACCES)");
	}

	/* 2. A user-chosen port squatted by the other user (0666, live owner, mailbox size 0). */
	if (WANT(2)) {
		const unsigned port = 2000 + (unsigned)getpid() % 20000;
		squat(other_sock, port, 0666, 0, 0);
		struct fi_info *info = NULL;
		char service[16];
		snprintf(service, sizeof service, "%u", port);
		XT_RC(fi_getinfo(xt_api_version, "127.0.0.1", service, FI_SOURCE, hints_here(), &info));
		struct fid_fabric *fabric;
		struct fid_domain *domain;
		struct fid_ep *ep = NULL;
		XT_RC(fi_fabric(info->fabric_attr, &fabric, NULL));
		XT_RC(fi_domain(fabric, info, &domain, NULL));
		int rc = fi_endpoint(domain, info, &ep, NULL);
		XT_CHECK(rc == -FI_EACCES, "fi_endpoint on squatted port %u = %d (%s), want -FI_EACCES",
			 port, rc, fi_strerror(-rc));
		XT_RC(fi_close(&domain->fid));
		XT_RC(fi_close(&fabric->fid));
		fi_freeinfo(info);
		XT_CHECK(squats_changed(other_sock) == 0, "root touched the squatted file");
		xt_pass("a squatted user-chosen port is -FI_EACCES and the file is untouched");
	}

	/* 3. Root's traffic to segments the other user made fails, and lands nowhere. */
	if (WANT(3)) {
		uint32_t ports[2] = {3000 + (unsigned)getpid() % 20000, 3001 + (unsigned)getpid() % 20000};
		squat(other_sock, ports[0], 0666, 0, 1024); /* well-formed, mapped by a live owner */
		squat(other_sock, ports[1], 0666, 0, 0);    /* mailbox size 0: mask 2^32 - 1 */
		int b_sock;
		pid_t b_pid;
		xt_spawn(1, foreign_send_child, &b_sock, &b_pid);
		xt_send_all(b_sock, ports, sizeof ports);
		xt_reap(1, &b_pid);
		XT_CHECK(squats_changed(other_sock) == 0, "root's traffic changed a squatted file");
		xt_pass("sends to another user's segments fail with -FI_EACCES; nothing lands, no crash");
	}

	/* 4. Automatic ports: C's first candidates are squatted (and some names elsewhere look
	 * stale): C skips them, nothing of the other user's is unlinked, and root's traffic flows. */
	if (WANT(4)) {
		unsigned squatted[8];
		for (unsigned n = 0; n < 4; n++) {
			squatted[n] = auto_port(c_pid, n);
			squat(other_sock, squatted[n], n % 2 ? 0600 : 0666, n < 2 ? DEAD_PID : 0,
			      n == 3 ? 0 : 1024);
		}
		for (unsigned n = 4; n < 8; n++) {
			squatted[n] = 10000 + (unsigned)getpid() % 20000 + n;
			squat(other_sock, squatted[n], 0644, DEAD_PID, 1024);
		}
		fi_addr_t from_c;
		(void)from_c;
		char buf[32] = {0};
		XT_RC(fi_trecv(a.ep, buf, sizeof buf, NULL, FI_ADDR_UNSPEC, 0x5e6, 0, NULL));
		xt_send_name(c_sock, &a);
		xt_wait(a.rxcq, NULL, NULL, 20);
		XT_CHECK(strcmp(buf, "root to root") == 0, "C's message: \"%s\"", buf);
		unsigned mine[4];
		int n = ports_owned_by(0, mine, 4);
		XT_CHECK(n == 2, "root has %d segments of this PDID, want 2 (A and C)", n);
		const unsigned c_port = mine[0] == a_port ? mine[1] : mine[0];
		for (int i = 0; i < 8; i++)
			XT_CHECK(c_port != squatted[i], "C took squatted port %u", c_port);
		XT_CHECK(c_port == auto_port(c_pid, 4),
			 "C's port %u is not its fifth candidate %u: the squats missed (did the automatic "
			 "port search of dev/emu/device.cpp change? update auto_port())",
			 c_port, auto_port(c_pid, 4));
		xt_sync_progress(c_sock, a.rxcq);
		xt_reap(1, &c_pid);
		XT_CHECK(squats_changed(other_sock) == 0, "root unlinked or changed a squatted file");
		xt_pass("automatic ports skip squatted names; no foreign file is reclaimed");
	}

	if (!WANT(4)) {
		kill(c_pid, SIGKILL);
		waitpid(c_pid, NULL, 0);
	}
	xt_send_all(other_sock, "X", 1);
	xt_reap(1, &other_pid);
	xt_close(&a);
	free(g_template);
	return 0;
}
