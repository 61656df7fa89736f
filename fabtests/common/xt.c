/* SPDX-License-Identifier: BSD-2-Clause */
#include "xt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int xt_is_child;
uint32_t xt_api_version = FI_VERSION(1, 17);
static pid_t xt_children[16];
static int xt_nchildren;

static void kill_children(void)
{
	for (int i = 0; i < xt_nchildren; i++)
		if (xt_children[i] > 0)
			kill(xt_children[i], SIGKILL);
}

/* The children a failing parent killed could not remove their segments (their exit never ran):
 * remove them here, so one failure does not fail the leak check that ends the run as well
 * (shm_leak_check) and hide which test broke. A segment is recognised by its header: the magic
 * and the creator's pid (dev/emu/layout.hpp, segment_header: magic at 0, owner_pid at 16). */
static void remove_killed_children_segments(void)
{
	for (int i = 0; i < xt_nchildren; i++)
		if (xt_children[i] > 0)
			(void)waitpid(xt_children[i], NULL, 0);
	DIR *d = opendir("/dev/shm");
	if (!d)
		return;
	char prefix[32];
	snprintf(prefix, sizeof prefix, "exanet.%u.", (unsigned)getuid());
	for (struct dirent *e; (e = readdir(d));) {
		if (strncmp(e->d_name, prefix, strlen(prefix)))
			continue;
		char path[300];
		snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
		const int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		uint32_t head[5];
		const int ours = pread(fd, head, sizeof head, 0) == (ssize_t)sizeof head && head[0] == 0x45584e54u;
		close(fd);
		for (int i = 0; ours && i < xt_nchildren; i++)
			if (xt_children[i] > 0 && (pid_t)head[4] == xt_children[i]) {
				char wake[300]; /* its wake socket, if it had one (dev/emu/segment.hpp) */
				snprintf(wake, sizeof wake, "/dev/shm/exanet-wake.%s", e->d_name + strlen("exanet."));
				unlink(wake);
				unlink(path);
			}
	}
	closedir(d);
}

void xt_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "FAIL [%s pid %d] %s:%d: ", xt_is_child ? "child" : "parent", getpid(), file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	fflush(stderr);
	kill_children(); /* a child's own children (a process tree of its own) go with it */
	remove_killed_children_segments();
	if (xt_is_child)
		_exit(1);
	exit(1);
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "FAIL: TIMEOUT\n";
	ssize_t r = write(2, msg, sizeof msg - 1);
	(void)r;
	kill_children();
	_exit(2);
}

void xt_init(int seconds)
{
	signal(SIGALRM, on_alarm);
	signal(SIGPIPE, SIG_IGN);
	alarm((unsigned)seconds);
	setvbuf(stdout, NULL, _IOLBF, 0);
}

void xt_pass(const char *name)
{
	printf("PASS: %s\n", name);
}

struct fi_info *xt_hints(void)
{
	struct fi_info *h = fi_allocinfo();
	XT_CHECK(h, "fi_allocinfo");
	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_TAGGED | FI_MSG | FI_DIRECTED_RECV;
	h->mode = 0;
	h->domain_attr->mr_mode = 0;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	const char *prov = getenv("FI_PROVIDER");
	h->fabric_attr->prov_name = strdup(prov && *prov ? prov : "exanet");
	return h;
}

void xt_open_disabled(struct xt_ep *x, struct fi_info *hints, uint64_t cq_flags)
{
	struct fi_info *info = NULL;
	XT_RC(fi_getinfo(xt_api_version, NULL, NULL, 0, hints, &info));
	xt_open_info(x, info, cq_flags);
}

void xt_open_info(struct xt_ep *x, struct fi_info *info, uint64_t cq_flags)
{
	xt_open_info_wait(x, info, cq_flags, FI_WAIT_NONE);
}

void xt_open_info_wait(struct xt_ep *x, struct fi_info *info, uint64_t cq_flags,
		       enum fi_wait_obj wait)
{
	memset(x, 0, sizeof *x);
	x->info = info;
	XT_RC(fi_fabric(x->info->fabric_attr, &x->fabric, NULL));
	XT_RC(fi_domain(x->fabric, x->info, &x->domain, NULL));
	struct fi_av_attr av = {.type = FI_AV_MAP};
	XT_RC(fi_av_open(x->domain, &av, &x->av, NULL));
	struct fi_cq_attr cq = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = wait};
	XT_RC(fi_cq_open(x->domain, &cq, &x->txcq, NULL));
	XT_RC(fi_cq_open(x->domain, &cq, &x->rxcq, NULL));
	XT_RC(fi_endpoint(x->domain, x->info, &x->ep, NULL));
	XT_RC(fi_ep_bind(x->ep, &x->av->fid, 0));
	XT_RC(fi_ep_bind(x->ep, &x->txcq->fid, FI_TRANSMIT | cq_flags));
	XT_RC(fi_ep_bind(x->ep, &x->rxcq->fid, FI_RECV | cq_flags));
}

void xt_enable(struct xt_ep *x)
{
	XT_RC(fi_enable(x->ep));
	x->namelen = sizeof x->name;
	const int rc = fi_getname(&x->ep->fid, x->name, &x->namelen);
	if (rc == -FI_ETOOSMALL) { /* a long FI_ADDR_STR name: the caller asks for it itself */
		x->name[0] = '\0';
		x->namelen = 0;
	} else {
		XT_RC(rc);
	}
}

void xt_open(struct xt_ep *x, struct fi_info *hints, uint64_t cq_flags)
{
	xt_open_disabled(x, hints, cq_flags);
	xt_enable(x);
}

void xt_close_ep(struct xt_ep *x)
{
	if (x->ep)
		XT_RC(fi_close(&x->ep->fid));
	x->ep = NULL;
}

void xt_close(struct xt_ep *x)
{
	xt_close_ep(x);
	XT_RC(fi_close(&x->av->fid));
	if (x->txcq)  /* a test may close it first (a CQ on a wait set goes before the set) */
		XT_RC(fi_close(&x->txcq->fid));
	XT_RC(fi_close(&x->rxcq->fid));
	XT_RC(fi_close(&x->domain->fid));
	XT_RC(fi_close(&x->fabric->fid));
	fi_freeinfo(x->info);
}

fi_addr_t xt_insert(struct xt_ep *x, const void *name)
{
	fi_addr_t a = FI_ADDR_NOTAVAIL;
	XT_CHECK(fi_av_insert(x->av, name, 1, &a, 0, NULL) == 1, "fi_av_insert");
	return a;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void xt_idle(void)
{
	sched_yield();
}

int xt_wait(struct fid_cq *cq, struct fi_cq_tagged_entry *e, struct fi_cq_err_entry *err, int seconds)
{
	struct fi_cq_tagged_entry scratch;
	const double end = now_s() + seconds;
	for (;;) {
		ssize_t r = fi_cq_read(cq, e ? e : &scratch, 1);
		if (r == 1)
			return 1;
		if (r == -FI_EAVAIL) {
			struct fi_cq_err_entry tmp = {0};
			XT_CHECK(fi_cq_readerr(cq, err ? err : &tmp, 0) == 1, "fi_cq_readerr");
			return 0;
		}
		XT_CHECK(r == -FI_EAGAIN, "fi_cq_read = %zd (%s)", r, fi_strerror((int)-r));
		XT_CHECK(now_s() < end, "no completion within %d s", seconds);
		xt_idle();
	}
}

int xt_drain(struct fid_cq *cq)
{
	struct fi_cq_tagged_entry e[16];
	int n = 0;
	for (int idle = 0; idle < 20000; idle++) {
		ssize_t r = fi_cq_read(cq, e, 16);
		if (r > 0) {
			n += (int)r;
			idle = 0;
		} else {
			XT_CHECK(r == -FI_EAGAIN, "fi_cq_read while draining = %zd", r);
		}
	}
	return n;
}

void xt_send_one(struct fid_ep *ep, struct fid_cq *cq, const void *buf, size_t len, fi_addr_t dest,
		 uint64_t tag)
{
	ssize_t rc;
	while ((rc = fi_tsend(ep, buf, len, NULL, dest, tag, NULL)) == -FI_EAGAIN)
		fi_cq_read(cq, NULL, 0);
	XT_RC(rc);
	XT_CHECK(xt_wait(cq, NULL, NULL, 20) == 1, "the completion of a send");
}

/* XT_CHILD_ENV="NAME=value;NAME=value": settings of the spawned processes only, so that a test
 * can give two peers different parameters (every parameter is read when a domain opens). */
static void xt_apply_child_env(void)
{
	const char *spec = getenv("XT_CHILD_ENV");
	if (!spec || !*spec)
		return;
	char *copy = strdup(spec);
	XT_CHECK(copy, "out of memory");
	for (char *save = NULL, *kv = strtok_r(copy, ";", &save); kv; kv = strtok_r(NULL, ";", &save)) {
		char *eq = strchr(kv, '=');
		XT_CHECK(eq && eq != kv, "XT_CHILD_ENV: '%s' is not NAME=value", kv);
		*eq = '\0';
		XT_CHECK(setenv(kv, eq + 1, 1) == 0, "setenv %s", kv);
	}
	free(copy);
}

void xt_spawn(int n, xt_child_fn fn, int *socks, pid_t *pids)
{
	for (int i = 0; i < n; i++) {
		int sv[2];
		XT_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
		fflush(stdout);
		pid_t pid = fork();
		XT_CHECK(pid >= 0, "fork");
		if (pid == 0) {
			xt_is_child = 1;
			xt_nchildren = 0;
			close(sv[0]);
			xt_apply_child_env();
			_exit(fn(i, sv[1]));
		}
		close(sv[1]);
		socks[i] = sv[0];
		pids[i] = pid;
		if (xt_nchildren < 16)
			xt_children[xt_nchildren++] = pid;
	}
}

void xt_reap(int n, pid_t *pids)
{
	for (int i = 0; i < n; i++) {
		int status = 0;
		XT_CHECK(waitpid(pids[i], &status, 0) == pids[i], "waitpid");
		XT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			 "child %d failed (status 0x%x)", i, status);
	}
	xt_nchildren = 0;
}

void xt_send_all(int sock, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t r = write(sock, p, len);
		if (r < 0 && errno == EINTR)
			continue;
		XT_CHECK(r > 0, "write to peer process");
		p += r;
		len -= (size_t)r;
	}
}

void xt_recv_all(int sock, void *buf, size_t len)
{
	char *p = buf;
	while (len) {
		ssize_t r = read(sock, p, len);
		if (r < 0 && errno == EINTR)
			continue;
		XT_CHECK(r > 0, "read from peer process");
		p += r;
		len -= (size_t)r;
	}
}

void xt_send_name(int sock, const struct xt_ep *x)
{
	uint32_t len = (uint32_t)x->namelen;
	xt_send_all(sock, &len, sizeof len);
	xt_send_all(sock, x->name, len);
}

void xt_recv_name(int sock, char name[64])
{
	uint32_t len = 0;
	xt_recv_all(sock, &len, sizeof len);
	XT_CHECK(len <= 64, "name length %u", len);
	xt_recv_all(sock, name, len);
}

fi_addr_t xt_exchange(struct xt_ep *x, int sock, int send_first, char *name)
{
	char peer[64];
	if (send_first) {
		xt_send_name(sock, x);
		xt_recv_name(sock, peer);
	} else {
		xt_recv_name(sock, peer);
		xt_send_name(sock, x);
	}
	if (name)
		memcpy(name, peer, sizeof peer);
	return xt_insert(x, peer);
}

struct fi_exanet_counters xt_counters(struct fid_ep *ep)
{
	struct fi_exanet_counters_ops *ops;
	XT_RC(fi_open_ops(&ep->fid, FI_EXANET_COUNTERS_OPS, 0, (void **)&ops, NULL));
	/* Zeroed: a provider built before a counter was appended leaves it untouched (0). */
	struct fi_exanet_counters c;
	memset(&c, 0, sizeof c);
	XT_RC(ops->read(ep, &c, sizeof c));
	return c;
}

void xt_open_default(struct xt_ep *x, uint64_t cq_flags)
{
	struct fi_info *h = xt_hints();
	xt_open(x, h, cq_flags);
	fi_freeinfo(h);
}

void xt_open_rma(struct xt_ep *x)
{
	struct fi_info *h = xt_hints();
	h->caps = FI_TAGGED | FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	h->domain_attr->mr_mode = 0;
	xt_open(x, h, 0);
	fi_freeinfo(h);
	XT_CHECK(!(x->info->domain_attr->mr_mode & (FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_LOCAL)),
		 "mr_mode 0x%x: user keys, offsets and no descriptors were asked for",
		 x->info->domain_attr->mr_mode);
}

void xt_sync(int sock)
{
	char c = 's';
	xt_send_all(sock, &c, 1);
	xt_recv_all(sock, &c, 1);
}

void xt_progress_until_readable(int sock, struct fid_cq *cq)
{
	for (;;) {
		struct pollfd p = {.fd = sock, .events = POLLIN};
		if (poll(&p, 1, 0) == 1)
			return;
		fi_cq_read(cq, NULL, 0);
		xt_idle();
	}
}

int64_t xt_ask(int sock, const void *request, size_t len, struct fid_cq *cq)
{
	xt_send_all(sock, request, len);
	if (cq)
		xt_progress_until_readable(sock, cq);
	int64_t answer;
	xt_recv_all(sock, &answer, sizeof answer);
	return answer;
}

void xt_sync_progress(int sock, struct fid_cq *cq)
{
	char c = 's';
	xt_send_all(sock, &c, 1);
	xt_progress_until_readable(sock, cq);
	xt_recv_all(sock, &c, 1);
}

void xt_fill(void *buf, size_t len, unsigned seed)
{
	unsigned char *p = buf;
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)(i * 131u + seed * 7u + (i >> 8));
}

int xt_verify(const void *buf, size_t len, unsigned seed)
{
	const unsigned char *p = buf;
	for (size_t i = 0; i < len; i++)
		if (p[i] != (unsigned char)(i * 131u + seed * 7u + (i >> 8)))
			return 0;
	return 1;
}

uint64_t xt_checksum(const void *buf, size_t len)
{
	const unsigned char *b = buf;
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < len; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

double xt_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

struct fid_mr *xt_mr_reg_bound(struct xt_ep *x, void *buf, size_t len, uint64_t key)
{
	struct fid_mr *mr;
	XT_RC(fi_mr_reg(x->domain, buf, len, FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE,
			0, key, 0, &mr, NULL));
	if (x->info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		XT_RC(fi_mr_bind(mr, &x->ep->fid, 0));
		XT_RC(fi_mr_enable(mr));
	}
	return mr;
}

void xt_exchange_region(struct xt_ep *x, int sock, const void *buf, struct fid_mr *mr,
			uint64_t *peer_addr, uint64_t *peer_key)
{
	uint64_t mine[2] = {(x->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)buf : 0,
			    fi_mr_key(mr)};
	uint64_t theirs[2];
	xt_send_all(sock, mine, sizeof mine);
	xt_recv_all(sock, theirs, sizeof theirs);
	*peer_addr = theirs[0];
	*peer_key = theirs[1];
}

double xt_now_s(void)
{
	return xt_now_us() * 1e-6;
}

size_t xt_env_size(const char *name, size_t dflt)
{
	const char *v = getenv(name);
	return v && *v ? strtoull(v, NULL, 10) : dflt;
}

int xt_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}
