/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Every rank exchanges messages with every other rank, at sizes crossing each exanet threshold
 * (eager 40 B, medium 8 KiB, the network's one-piece lower message 16064 B, bounce ring 64 KiB,
 * rendezvous beyond), with the receive posted first and with the message arriving unexpected;
 * the data is checked, then an Allreduce and an Alltoall are. Ranks that share /dev/shm share a
 * host (exanet's own notion, with the boot id).
 *
 * With --paths (the two-host test, fabtests/multinode/netns_mpi.sh), each rank then shows which
 * path its peers' bytes took, from what the kernel counted rather than from the provider:
 *  - network: the TCP bytes this process received on its sockets from addresses of other hosts
 *    (tcp_info, the lower provider's connections) are at least the payload its peers there sent;
 *  - shared memory: TCP between this host's addresses (loopback included) carried less than a
 *    sixteenth of the payload from this host's peers, and this process maps at least one exanet
 *    segment per rank of its host (its own and each peer's mailbox) in /dev/shm.
 * Without --paths (one host), the same exchange runs as an ordinary MPI test.
 * Any failure aborts the job (check.h); rank 0 prints one PASS line.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <linux/tcp.h>
#include <mpi.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static int rank, size;

static const int sizes[] = {0, 1, 40, 41, 1000, 8192, 8193, 16064, 16065, 65536, 65537, 1 << 20};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))
#define MAX_SIZE (1 << 20)

static unsigned char pattern(int from, int to, int s, int order, int i)
{
	return (unsigned char)(from * 131 + to * 17 + s * 7 + order * 3 + i * 13 + (i >> 8));
}

/* Bytes this rank sent to (and, the exchange being symmetric, received from) this host's peers
 * and other hosts' peers. */
static uint64_t payload_here, payload_other;

static void exchange(const int *same_host, int order)
{
	unsigned char **out = calloc(size, sizeof *out), **in = calloc(size, sizeof *in);
	MPI_Request *rq = malloc(2 * size * sizeof *rq);
	for (int p = 0; p < size; p++) {
		out[p] = malloc(MAX_SIZE);
		in[p] = malloc(MAX_SIZE);
	}
	for (int s = 0; s < NSIZES; s++) {
		const int n = sizes[s];
		int nrq = 0;
		for (int p = 0; p < size; p++) {
			if (p == rank)
				continue;
			for (int i = 0; i < n; i++)
				out[p][i] = pattern(rank, p, s, order, i);
			memset(in[p], 0xee, n);
		}
		/* order 0: every receive is posted before any send starts; order 1: the sends go
		 * first and the messages arrive unexpected (or their RTS does) */
		if (order == 0)
			for (int p = 0; p < size; p++)
				if (p != rank)
					MPI_Irecv(in[p], n, MPI_BYTE, p, s, MPI_COMM_WORLD, &rq[nrq++]);
		MPI_Barrier(MPI_COMM_WORLD);
		for (int k = 1; k < size; k++) { /* each rank starts with a different peer */
			const int p = (rank + k) % size;
			MPI_Isend(out[p], n, MPI_BYTE, p, s, MPI_COMM_WORLD, &rq[nrq++]);
			if (same_host[p])
				payload_here += n;
			else
				payload_other += n;
		}
		if (order == 1) {
			MPI_Barrier(MPI_COMM_WORLD);
			for (int p = 0; p < size; p++)
				if (p != rank)
					MPI_Irecv(in[p], n, MPI_BYTE, p, s, MPI_COMM_WORLD, &rq[nrq++]);
		}
		MPI_Waitall(nrq, rq, MPI_STATUSES_IGNORE);
		for (int p = 0; p < size; p++) {
			if (p == rank)
				continue;
			for (int i = 0; i < n; i++)
				CHECK(in[p][i] == pattern(p, rank, s, order, i),
				      "%d bytes from rank %d (order %d): byte %d is %#x", n, p, order, i,
				      in[p][i]);
		}
	}
	for (int p = 0; p < size; p++) {
		free(out[p]);
		free(in[p]);
	}
	free(out);
	free(in);
	free(rq);
}

static void collectives(void)
{
	enum { N = 1 << 18 };
	int *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
	for (int i = 0; i < N; i++)
		a[i] = rank * 3 + i;
	MPI_Allreduce(a, b, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	for (int i = 0; i < N; i++)
		CHECK(b[i] == 3 * size * (size - 1) / 2 + size * i, "allreduce at %d", i);
	const int per = N / size;
	for (int i = 0; i < per * size; i++)
		a[i] = rank * 1000003 + i;
	MPI_Alltoall(a, per, MPI_INT, b, per, MPI_INT, MPI_COMM_WORLD);
	for (int p = 0; p < size; p++)
		for (int i = 0; i < per; i++)
			CHECK(b[p * per + i] == p * 1000003 + rank * per + i, "alltoall from %d at %d", p,
			      i);
	free(a);
	free(b);
}

/* ---- --paths: what the kernel saw ------------------------------------------------------------ */

static struct in_addr own_addrs[64];
static int n_own_addrs;

static void list_own_addresses(void)
{
	struct ifaddrs *ifs, *i;
	CHECK(getifaddrs(&ifs) == 0, "getifaddrs");
	for (i = ifs; i && n_own_addrs < 64; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET)
			own_addrs[n_own_addrs++] = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
	freeifaddrs(ifs);
}

static int on_this_host(struct in_addr a)
{
	if ((ntohl(a.s_addr) >> 24) == 127)
		return 1;
	for (int i = 0; i < n_own_addrs; i++)
		if (own_addrs[i].s_addr == a.s_addr)
			return 1;
	return 0;
}

/* The bytes received and sent over this process's TCP sockets (IPv4), by where the peer is. */
struct tcp_totals {
	uint64_t recv_other, sent_other, recv_here, sent_here;
	int sockets_other;
};

static struct tcp_totals tcp_bytes(void)
{
	struct tcp_totals t = {0};
	DIR *d = opendir("/proc/self/fd");
	CHECK(d, "opendir /proc/self/fd");
	struct dirent *e;
	while ((e = readdir(d))) {
		const int fd = atoi(e->d_name);
		struct sockaddr_in peer;
		socklen_t len = sizeof peer;
		struct tcp_info ti;
		socklen_t tlen = sizeof ti;
		if (e->d_name[0] == '.' || fd == dirfd(d))
			continue;
		if (getpeername(fd, (struct sockaddr *)&peer, &len) != 0 || peer.sin_family != AF_INET)
			continue;
		memset(&ti, 0, sizeof ti);
		if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tlen) != 0)
			continue;
		if (on_this_host(peer.sin_addr)) {
			t.recv_here += ti.tcpi_bytes_received;
			t.sent_here += ti.tcpi_bytes_acked;
		} else {
			t.recv_other += ti.tcpi_bytes_received;
			t.sent_other += ti.tcpi_bytes_acked;
			t.sockets_other++;
		}
	}
	closedir(d);
	return t;
}

/* Distinct exanet mailbox segments (/dev/shm/exanet.<uid>.<pdid>.<port>) this process maps. */
static int exanet_segments_mapped(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	CHECK(f, "open /proc/self/maps");
	char line[512], seen[64][96];
	int n = 0;
	while (fgets(line, sizeof line, f)) {
		char *path = strstr(line, "/dev/shm/exanet.");
		if (!path)
			continue;
		path[strcspn(path, " \n")] = 0;
		int known = 0;
		for (int i = 0; i < n && !known; i++)
			known = strcmp(seen[i], path) == 0;
		if (!known && n < 64)
			snprintf(seen[n++], sizeof seen[0], "%s", path);
	}
	fclose(f);
	return n;
}

static void check_paths(const int *same_host)
{
	int here = 0;
	for (int p = 0; p < size; p++)
		here += same_host[p];
	CHECK(here < size, "every rank is on this host: --paths needs two hosts");
	list_own_addresses();
	const struct tcp_totals t = tcp_bytes();
	const int segments = exanet_segments_mapped();
	/* one line per rank, in rank order (netns_mpi.sh reads them) */
	for (int r = 0; r < size; r++) {
		if (r == rank)
			printf("rank=%d pid=%d host_ranks=%d payload_here=%llu tcp_here_in=%llu "
			       "tcp_here_out=%llu segments=%d payload_other=%llu tcp_other_in=%llu "
			       "tcp_other_out=%llu tcp_other_sockets=%d\n",
			       rank, (int)getpid(), here, (unsigned long long)payload_here,
			       (unsigned long long)t.recv_here, (unsigned long long)t.sent_here, segments,
			       (unsigned long long)payload_other, (unsigned long long)t.recv_other,
			       (unsigned long long)t.sent_other, t.sockets_other);
		fflush(stdout);
		MPI_Barrier(MPI_COMM_WORLD);
	}
	CHECK(t.recv_other >= payload_other,
	      "the network carried %llu B from other hosts, less than their %llu B of payload",
	      (unsigned long long)t.recv_other, (unsigned long long)payload_other);
	CHECK((t.recv_here + t.sent_here) * 16 < payload_here,
	      "tcp on this host carried %llu B in, %llu B out: this host's peers (%llu B) went over "
	      "the network, not shared memory",
	      (unsigned long long)t.recv_here, (unsigned long long)t.sent_here,
	      (unsigned long long)payload_here);
	CHECK(segments >= here, "%d exanet segments mapped, fewer than the %d ranks of this host",
	      segments, here);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	const int paths = argc > 1 && strcmp(argv[1], "--paths") == 0;
	CHECK(size >= 2, "needs at least 2 ranks");

	/* This host: the boot and /dev/shm, as exanet tells hosts apart. */
	struct stat st;
	CHECK(stat("/dev/shm", &st) == 0, "stat /dev/shm");
	char boot[40] = "";
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	if (f) {
		if (!fgets(boot, sizeof boot, f))
			boot[0] = 0;
		fclose(f);
	}
	unsigned long long key[3] = {(unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
				     0};
	for (const char *c = boot; *c; c++)
		key[2] = key[2] * 131 + (unsigned char)*c;
	unsigned long long *keys = malloc(3 * size * sizeof *keys);
	MPI_Allgather(key, 3, MPI_UNSIGNED_LONG_LONG, keys, 3, MPI_UNSIGNED_LONG_LONG,
		      MPI_COMM_WORLD);
	int *same_host = malloc(size * sizeof *same_host);
	for (int p = 0; p < size; p++)
		same_host[p] = memcmp(&keys[3 * p], key, sizeof key) == 0;

	exchange(same_host, 0);
	exchange(same_host, 1);
	collectives();
	MPI_Barrier(MPI_COMM_WORLD);
	if (paths)
		check_paths(same_host);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("PASS: all pairs over exanet, %d ranks%s\n", size,
		       paths ? ", each peer's bytes on its path" : "");
	free(keys);
	free(same_host);
	MPI_Finalize();
	return 0;
}
