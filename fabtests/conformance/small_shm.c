/*
 * A /dev/shm too small for exanet's segments (issue 12 part 8). Segments used to be sparse
 * (ftruncate only): an endpoint opened fine and the first touch of a page that /dev/shm could
 * not supply killed the process, or its peer, with SIGBUS. Each case here runs in a private
 * mount namespace with its own tmpfs over /dev/shm, sized from one real segment (S):
 *   - 1 MiB: both sides of a ping-pong get -FI_ENOMEM from fi_endpoint; nobody dies;
 *   - 1.5 S: the first endpoint opens, the second gets -FI_ENOMEM, and the first still carries
 *     messages of every protocol to itself;
 *   - 2 S plus a page each: a ping-pong of 8 B to 1 MiB works.
 * Needs root (unshare(CLONE_NEWNS) and mount); without it prints why and exits 77 (skipped).
 * The namespaces and their tmpfs disappear with the processes; the real /dev/shm is not used
 * except for measuring S.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xt.h"

static size_t g_segment_bytes; /* S: the file size of one endpoint's segment */
static size_t g_tmpfs_bytes;   /* the size of the tmpfs of the case running */

/* Opens everything up to fi_endpoint and returns its code; on success binds and enables. */
static int try_open(struct xt_ep *x)
{
	memset(x, 0, sizeof *x);
	struct fi_info *hints = xt_hints();
	XT_RC(fi_getinfo(xt_api_version, NULL, NULL, 0, hints, &x->info));
	fi_freeinfo(hints);
	XT_RC(fi_fabric(x->info->fabric_attr, &x->fabric, NULL));
	XT_RC(fi_domain(x->fabric, x->info, &x->domain, NULL));
	struct fi_av_attr av = {.type = FI_AV_MAP};
	XT_RC(fi_av_open(x->domain, &av, &x->av, NULL));
	struct fi_cq_attr cq = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
	XT_RC(fi_cq_open(x->domain, &cq, &x->txcq, NULL));
	XT_RC(fi_cq_open(x->domain, &cq, &x->rxcq, NULL));
	int rc = fi_endpoint(x->domain, x->info, &x->ep, NULL);
	if (rc != 0) {
		x->ep = NULL;
		return rc;
	}
	XT_RC(fi_ep_bind(x->ep, &x->av->fid, 0));
	XT_RC(fi_ep_bind(x->ep, &x->txcq->fid, FI_TRANSMIT));
	XT_RC(fi_ep_bind(x->ep, &x->rxcq->fid, FI_RECV));
	xt_enable(x);
	return 0;
}

/* Messages of every protocol (eager, medium, rendezvous) between x and peer, verified. */
static const size_t g_sizes[] = {8, 4096, 65536, 1 << 20};
static void ping_pong(struct xt_ep *x, fi_addr_t peer, int first)
{
	char *buf = malloc(1 << 20);
	XT_CHECK(buf, "malloc");
	for (size_t i = 0; i < sizeof g_sizes / sizeof g_sizes[0]; i++)
		for (unsigned rep = 0; rep < 3; rep++) {
			const size_t len = g_sizes[i];
			const unsigned seed = (unsigned)(i * 16 + rep);
			for (int turn = 0; turn < 2; turn++) {
				if ((turn == 0) == (first != 0)) {
					xt_fill(buf, len, seed);
					XT_RC(fi_tsend(x->ep, buf, len, NULL, peer, 7, NULL));
					xt_wait(x->txcq, NULL, NULL, 30);
				} else {
					memset(buf, 0, len);
					XT_RC(fi_trecv(x->ep, buf, len, NULL, peer, 7, 0, NULL));
					xt_wait(x->rxcq, NULL, NULL, 30);
					XT_CHECK(xt_verify(buf, len, seed), "payload of %zu bytes", len);
				}
			}
		}
	free(buf);
}

/* Gives this process (and its children) a private /dev/shm of `bytes`. */
static void private_shm(size_t bytes)
{
	XT_CHECK(unshare(CLONE_NEWNS) == 0, "unshare(CLONE_NEWNS): %s", strerror(errno));
	XT_CHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0, "mount --make-rprivate /");
	char opts[64];
	snprintf(opts, sizeof opts, "size=%zu,mode=1777", bytes);
	XT_CHECK(mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, opts) == 0,
		 "mount tmpfs %s on /dev/shm: %s", opts, strerror(errno));
	g_tmpfs_bytes = bytes;
}

/* The peer side of the cases with two processes: same expectation as its parent. */
static int expect_open_fails;
static int peer_side(int index, int sock)
{
	(void)index;
	struct xt_ep x;
	const int rc = try_open(&x);
	if (rc == 0) {
		/* Before the fix the open succeeded; go on so the failure shows as what it was. */
		fi_addr_t other = xt_exchange(&x, sock, 0, NULL);
		ping_pong(&x, other, 0);
	}
	if (expect_open_fails)
		XT_CHECK(rc == -FI_ENOMEM, "fi_endpoint with a %zu-byte /dev/shm = %d (%s), want -FI_ENOMEM",
			 g_tmpfs_bytes, rc, fi_strerror(-rc));
	else
		XT_CHECK(rc == 0, "fi_endpoint = %d (%s)", rc, fi_strerror(-rc));
	xt_close(&x); /* after a failed open: everything but the endpoint */
	return 0;
}

static int case_tiny(int index, int sock)
{
	(void)index;
	(void)sock;
	private_shm(1 << 20);
	expect_open_fails = 1;
	int psock;
	pid_t pid;
	xt_spawn(1, peer_side, &psock, &pid);
	struct xt_ep x;
	const int rc = try_open(&x);
	if (rc == 0) {
		fi_addr_t other = xt_exchange(&x, psock, 1, NULL);
		ping_pong(&x, other, 1);
	}
	XT_CHECK(rc == -FI_ENOMEM, "fi_endpoint with a 1 MiB /dev/shm = %d (%s), want -FI_ENOMEM", rc,
		 fi_strerror(-rc));
	xt_close(&x);
	xt_reap(1, &pid);
	/* Nothing half-made is left in the small /dev/shm. */
	DIR *d = opendir("/dev/shm");
	XT_CHECK(d, "opendir");
	struct dirent *e;
	while ((e = readdir(d)))
		XT_CHECK(strncmp(e->d_name, "exanet", 6) != 0, "left behind: %s", e->d_name);
	closedir(d);
	return 0;
}

static int case_room_for_one(int index, int sock)
{
	(void)index;
	(void)sock;
	private_shm(g_segment_bytes + g_segment_bytes / 2);
	struct xt_ep first, second;
	XT_CHECK(try_open(&first) == 0, "the first endpoint does not fit in 1.5 segments");
	const int rc = try_open(&second);
	XT_CHECK(rc == -FI_ENOMEM, "second endpoint in 1.5 segments: %d (%s), want -FI_ENOMEM", rc,
		 fi_strerror(-rc));
	xt_close(&second);
	/* The first endpoint's pages are all its own: every protocol to itself still works. */
	fi_addr_t self = xt_insert(&first, first.name);
	char *out = malloc(1 << 20), *in = malloc(1 << 20);
	XT_CHECK(out && in, "malloc");
	for (size_t i = 0; i < sizeof g_sizes / sizeof g_sizes[0]; i++) {
		const size_t len = g_sizes[i];
		xt_fill(out, len, (unsigned)i);
		memset(in, 0, len);
		XT_RC(fi_trecv(first.ep, in, len, NULL, self, 9, 0, NULL));
		XT_RC(fi_tsend(first.ep, out, len, NULL, self, 9, NULL));
		xt_wait(first.txcq, NULL, NULL, 30);
		xt_wait(first.rxcq, NULL, NULL, 30);
		XT_CHECK(xt_verify(in, len, (unsigned)i), "self message of %zu bytes", len);
	}
	free(out);
	free(in);
	xt_close(&first);
	return 0;
}

static int case_enough(int index, int sock)
{
	(void)index;
	(void)sock;
	private_shm(2 * g_segment_bytes + 2 * 4096);
	expect_open_fails = 0;
	int psock;
	pid_t pid;
	xt_spawn(1, peer_side, &psock, &pid);
	struct xt_ep x;
	XT_CHECK(try_open(&x) == 0, "fi_endpoint with room for two segments");
	fi_addr_t other = xt_exchange(&x, psock, 1, NULL);
	ping_pong(&x, other, 1);
	xt_close(&x);
	xt_reap(1, &pid);
	return 0;
}

/* One endpoint in the real /dev/shm, under a PDID of its own, to learn S. */
static size_t measure_segment(void)
{
	char pdid[16];
	snprintf(pdid, sizeof pdid, "%u", 800000 + (unsigned)getpid() % 100000);
	setenv("FI_EXANET_PDID", pdid, 1);
	struct xt_ep x;
	xt_open(&x, xt_hints(), 0);
	char prefix[64];
	snprintf(prefix, sizeof prefix, "exanet.%u.%s.", (unsigned)getuid(), pdid);
	size_t bytes = 0;
	DIR *d = opendir("/dev/shm");
	XT_CHECK(d, "opendir /dev/shm");
	struct dirent *e;
	while ((e = readdir(d)))
		if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
			char path[300];
			struct stat st;
			snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
			if (stat(path, &st) == 0)
				bytes = (size_t)st.st_size;
		}
	closedir(d);
	xt_close(&x);
	XT_CHECK(bytes > 0, "our segment was not found in /dev/shm");
	return bytes;
}

int main(void)
{
	if (geteuid() != 0) {
		printf("SKIP: small_shm needs root to mount a private /dev/shm\n");
		return 77;
	}
	xt_init(150);
	g_segment_bytes = measure_segment();
	printf("one segment: %zu bytes\n", g_segment_bytes);
	/* Namespaces may be refused even to root (a container without CAP_SYS_ADMIN). */
	pid_t probe = fork();
	XT_CHECK(probe >= 0, "fork");
	if (probe == 0)
		_exit(unshare(CLONE_NEWNS) == 0 ? 0 : 1);
	int status = 0;
	waitpid(probe, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		printf("SKIP: unshare(CLONE_NEWNS) refused here\n");
		return 77;
	}
	static const struct {
		const char *name;
		xt_child_fn fn;
	} cases[] = {
		{"1 MiB /dev/shm: fi_endpoint fails with -FI_ENOMEM on both sides, no SIGBUS", case_tiny},
		{"room for one segment: the second open fails cleanly, the first works", case_room_for_one},
		{"room for two segments: a ping-pong of 8 B to 1 MiB works", case_enough},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int sock;
		pid_t pid;
		xt_spawn(1, cases[i].fn, &sock, &pid);
		XT_CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
		XT_CHECK(!WIFSIGNALED(status), "%s: killed by signal %d (%s)", cases[i].name,
			 WTERMSIG(status), strsignal(WTERMSIG(status)));
		XT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: failed", cases[i].name);
		close(sock);
		xt_pass(cases[i].name);
	}
	return 0;
}
