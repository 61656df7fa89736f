/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A small harness for exanet's conformance programs: real processes over real shared memory.
 * Processes are forked before any libfabric object exists, exchange endpoint names over a
 * socketpair, and every program is bounded by alarm(). Checks print one line each and make the
 * program exit non-zero on the first failure of a case.
 */
#ifndef EXANET_XT_H
#define EXANET_XT_H

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext_exanet.h>
#include <rdma/fi_tagged.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Failure of a check: report where and why, then leave (children _exit, the parent exit). */
void xt_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4), noreturn));
#define XT_CHECK(cond, ...) \
	do { if (!(cond)) xt_fail(__FILE__, __LINE__, __VA_ARGS__); } while (0)
#define XT_RC(call) \
	do { long xt_rc_ = (long)(call); \
	     XT_CHECK(xt_rc_ >= 0, "%s = %ld (%s)", #call, xt_rc_, fi_strerror((int)-xt_rc_)); } while (0)

/* A posting call that may say -FI_EAGAIN (fi_rma(3), fi_atomic(3): the provider has no resource
 * now, or must learn something first, as exanet's network backend learns a key's grant from its
 * target on first use): retried while cq's progress runs, then checked like XT_RC. */
#define XT_POST(cq, call) \
	do { long xt_rc_; \
	     while ((xt_rc_ = (long)(call)) == -FI_EAGAIN) (void)fi_cq_read((cq), NULL, 0); \
	     XT_CHECK(xt_rc_ >= 0, "%s = %ld (%s)", #call, xt_rc_, fi_strerror((int)-xt_rc_)); } while (0)

/* Bounds the whole program (children included) to `seconds`. */
void xt_init(int seconds);
/* Prints "PASS: name" for a finished case. */
void xt_pass(const char *name);

/* One libfabric endpoint with everything it needs. */
struct xt_ep {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *txcq, *rxcq;
	struct fid_ep *ep;
	char name[64]; /* fi_getname's; empty (namelen 0) when the name is longer */
	size_t namelen;
};

/* The API version xt_open asks fi_getinfo for (default 1.17). */
extern uint32_t xt_api_version;
/* Hints most programs start from: RDM, FI_TAGGED|FI_MSG|FI_DIRECTED_RECV, no mode, mr_mode 0. */
struct fi_info *xt_hints(void);
/* Opens fabric, domain, AV (map), two CQs (tagged format) and an enabled endpoint.
 * cq_flags are added to the CQ bindings (e.g. FI_SELECTIVE_COMPLETION). */
void xt_open(struct xt_ep *x, struct fi_info *hints, uint64_t cq_flags);
/* Opens everything from an fi_info the caller got (which it hands over) and leaves the endpoint
 * disabled; xt_open_disabled is this with fi_getinfo(hints). */
void xt_open_info(struct xt_ep *x, struct fi_info *info, uint64_t cq_flags);
/* xt_open_info with CQs that have the wait object `wait` (FI_WAIT_UNSPEC: for fi_cq_sread). */
void xt_open_info_wait(struct xt_ep *x, struct fi_info *info, uint64_t cq_flags,
		       enum fi_wait_obj wait);
/* xt_open in two steps, for programs that bind more (counters) before enabling. */
void xt_open_disabled(struct xt_ep *x, struct fi_info *hints, uint64_t cq_flags);
void xt_enable(struct xt_ep *x);
void xt_close(struct xt_ep *x);
/* Closes only the endpoint (first, as objects bound to it stay busy until then). */
void xt_close_ep(struct xt_ep *x);
fi_addr_t xt_insert(struct xt_ep *x, const void *name);

/* Waits for one completion on cq (success: returns 1, fills e; error: returns 0, fills err).
 * Fails the program after `seconds` without any. */
int xt_wait(struct fid_cq *cq, struct fi_cq_tagged_entry *e, struct fi_cq_err_entry *err, int seconds);
/* Sends one tagged message (retrying while the provider says -FI_EAGAIN, progressing cq) and
 * waits for its completion on cq; fails the program on an error or after 20 s. */
void xt_send_one(struct fid_ep *ep, struct fid_cq *cq, const void *buf, size_t len, fi_addr_t dest,
		 uint64_t tag);
/* Progresses cq until no entry arrives for a while; returns how many successes it drained. */
int xt_drain(struct fid_cq *cq);

/* Processes: xt_spawn forks n children; child i runs fn(i, sock) and its return is its exit code.
 * The parent talks to child i over socks[i]. xt_reap waits for all and fails on a bad exit. */
typedef int (*xt_child_fn)(int index, int sock);
void xt_spawn(int n, xt_child_fn fn, int *socks, pid_t *pids);
void xt_reap(int n, pid_t *pids);
void xt_send_all(int sock, const void *buf, size_t len);
void xt_recv_all(int sock, void *buf, size_t len);
/* Sends/receives a length-prefixed endpoint name. */
void xt_send_name(int sock, const struct xt_ep *x);
void xt_recv_name(int sock, char name[64]);
/* Swaps endpoint names with the process at the other end of sock (send_first on one side only)
 * and inserts the peer's name; returns its fi_addr and, if name is not NULL, the raw name. */
fi_addr_t xt_exchange(struct xt_ep *x, int sock, int send_first, char *name);
/* xt_open with xt_hints() as they are. */
void xt_open_default(struct xt_ep *x, uint64_t cq_flags);
/* An endpoint for messages and RMA both ways, with user keys, offsets into a registration and
 * no local descriptors (mr_mode 0; checked). */
void xt_open_rma(struct xt_ep *x);
/* exanet's protocol counters of ep now (FI_EXANET_COUNTERS_OPS); fails the test without them. */
struct fi_exanet_counters xt_counters(struct fid_ep *ep);

/* A one-byte barrier over a socket (both sides call it). */
void xt_sync(int sock);
/* The same barrier, progressing cq while it waits (manual progress: a peer may need us). */
void xt_sync_progress(int sock, struct fid_cq *cq);
/* Reads cq (driving manual progress) until sock has something to read. */
void xt_progress_until_readable(int sock, struct fid_cq *cq);
/* Sends a request of len bytes to the process at the other end of sock and returns its 64-bit
 * answer; reads cq meanwhile (manual progress: the peer may need us) unless cq is NULL. */
int64_t xt_ask(int sock, const void *request, size_t len, struct fid_cq *cq);
/* For a polling loop that found nothing: gives the core away. ctest runs two tests at once on CI's
 * two cores, each of two or more processes, and a spinner that keeps its time slice delays the
 * peer it waits for (iov_random took 4-8 times its solo time at -j2 before xt_wait,
 * xt_sync_progress and its own loop called this). Alone on a core it returns at once. */
void xt_idle(void);

/* Deterministic payloads: byte i of message `seed`. */
void xt_fill(void *buf, size_t len, unsigned seed);
int xt_verify(const void *buf, size_t len, unsigned seed);
/* A 64-bit FNV-1a hash of len bytes: "is this memory as it was?" in one number. */
uint64_t xt_checksum(const void *buf, size_t len);

/* For the benchmarks: a monotonic clock in microseconds, and qsort's comparison of doubles. */
double xt_now_us(void);
/* Registers buf for every access under key, bound to x's endpoint where the domain asks for it
 * (FI_MR_ENDPOINT). */
struct fid_mr *xt_mr_reg_bound(struct xt_ep *x, void *buf, size_t len, uint64_t key);
/* Tells the peer at the other end of sock where buf (registered as mr) is and under which key,
 * and learns the same of the peer's (the address is 0 when the domain addresses by offset). */
void xt_exchange_region(struct xt_ep *x, int sock, const void *buf, struct fid_mr *mr,
			uint64_t *peer_addr, uint64_t *peer_key);
/* The same clock in seconds. */
double xt_now_s(void);
/* A size from the environment (decimal), or dflt when unset or empty. */
size_t xt_env_size(const char *name, size_t dflt);
int xt_cmp_double(const void *a, const void *b);

#endif
