/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fi_count.so: counts the libfabric data-path calls of a program, whatever the provider, for the
 * call_count test. Loaded with LD_PRELOAD, it takes over fi_fabric (the one entry point that is a
 * real symbol; the data-path calls are inline functions calling through the ops tables of each
 * object) and, from the fabric down, gives every domain, endpoint and CQ a copy of its ops table
 * whose entries count and then call the provider's own. Each copy sits in a struct next to the
 * provider's original table, so a wrapper finds the function it stands for from the object it is
 * called on.
 *
 * Counts are process-wide (struct fi_count in fi_count.h). exanet_fi_count_snapshot() copies
 * them; FI_COUNT_REPORT=1 also prints them to stderr at exit.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "fi_count.h"

static struct fi_count g_count;

#define ADD(field, n) __atomic_fetch_add(&g_count.field, (uint64_t)(n), __ATOMIC_RELAXED)
#define CONTAINER(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

__attribute__((visibility("default"))) int exanet_fi_count_snapshot(struct fi_count *out)
{
	uint64_t *dst = (uint64_t *)out, *src = (uint64_t *)&g_count;
	for (size_t i = 0; i < sizeof g_count / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	return 0;
}

static ssize_t posted(ssize_t rc)
{
	if (rc == -FI_EAGAIN)
		ADD(post_again, 1);
	return rc;
}

static ssize_t read_result(ssize_t rc)
{
	if (rc > 0) {
		ADD(read_full, 1);
		ADD(entries, rc);
	} else if (rc == -FI_EAGAIN) {
		ADD(read_empty, 1);
	} else {
		ADD(read_other, 1);
	}
	return rc;
}

/* ---- tagged ----------------------------------------------------------------------------- */

struct tagged_wrap {
	struct fi_ops_tagged ops; /* what the endpoint now points at */
	struct fi_ops_tagged *orig;
};
#define T_ORIG(ep) (CONTAINER((ep)->tagged, struct tagged_wrap, ops)->orig)

static ssize_t t_recv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
		      uint64_t tag, uint64_t ignore, void *ctx)
{
	ADD(recv, 1);
	return posted(T_ORIG(ep)->recv(ep, buf, len, desc, src, tag, ignore, ctx));
}
static ssize_t t_recvv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
		       fi_addr_t src, uint64_t tag, uint64_t ignore, void *ctx)
{
	ADD(recv, 1);
	return posted(T_ORIG(ep)->recvv(ep, iov, desc, count, src, tag, ignore, ctx));
}
static ssize_t t_recvmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg, uint64_t flags)
{
	if (flags & FI_PEEK)
		ADD(other, 1);
	else
		ADD(recv, 1);
	return posted(T_ORIG(ep)->recvmsg(ep, msg, flags));
}
static ssize_t t_send(struct fid_ep *ep, const void *buf, size_t len, void *desc, fi_addr_t dest,
		      uint64_t tag, void *ctx)
{
	ADD(send, 1);
	return posted(T_ORIG(ep)->send(ep, buf, len, desc, dest, tag, ctx));
}
static ssize_t t_sendv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
		       fi_addr_t dest, uint64_t tag, void *ctx)
{
	ADD(send, 1);
	return posted(T_ORIG(ep)->sendv(ep, iov, desc, count, dest, tag, ctx));
}
static ssize_t t_sendmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg, uint64_t flags)
{
	ADD(send, 1);
	return posted(T_ORIG(ep)->sendmsg(ep, msg, flags));
}
static ssize_t t_inject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest,
			uint64_t tag)
{
	ADD(inject, 1);
	return posted(T_ORIG(ep)->inject(ep, buf, len, dest, tag));
}
static ssize_t t_senddata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			  uint64_t data, fi_addr_t dest, uint64_t tag, void *ctx)
{
	ADD(send, 1);
	return posted(T_ORIG(ep)->senddata(ep, buf, len, desc, data, dest, tag, ctx));
}
static ssize_t t_injectdata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
			    fi_addr_t dest, uint64_t tag)
{
	ADD(inject, 1);
	return posted(T_ORIG(ep)->injectdata(ep, buf, len, data, dest, tag));
}

/* ---- msg -------------------------------------------------------------------------------- */

struct msg_wrap {
	struct fi_ops_msg ops;
	struct fi_ops_msg *orig;
};
#define M_ORIG(ep) (CONTAINER((ep)->msg, struct msg_wrap, ops)->orig)

static ssize_t m_recv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
		      void *ctx)
{
	ADD(recv, 1);
	return posted(M_ORIG(ep)->recv(ep, buf, len, desc, src, ctx));
}
static ssize_t m_recvv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
		       fi_addr_t src, void *ctx)
{
	ADD(recv, 1);
	return posted(M_ORIG(ep)->recvv(ep, iov, desc, count, src, ctx));
}
static ssize_t m_recvmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
	ADD(recv, 1);
	return posted(M_ORIG(ep)->recvmsg(ep, msg, flags));
}
static ssize_t m_send(struct fid_ep *ep, const void *buf, size_t len, void *desc, fi_addr_t dest,
		      void *ctx)
{
	ADD(send, 1);
	return posted(M_ORIG(ep)->send(ep, buf, len, desc, dest, ctx));
}
static ssize_t m_sendv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
		       fi_addr_t dest, void *ctx)
{
	ADD(send, 1);
	return posted(M_ORIG(ep)->sendv(ep, iov, desc, count, dest, ctx));
}
static ssize_t m_sendmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
	ADD(send, 1);
	return posted(M_ORIG(ep)->sendmsg(ep, msg, flags));
}
static ssize_t m_inject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest)
{
	ADD(inject, 1);
	return posted(M_ORIG(ep)->inject(ep, buf, len, dest));
}
static ssize_t m_senddata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			  uint64_t data, fi_addr_t dest, void *ctx)
{
	ADD(send, 1);
	return posted(M_ORIG(ep)->senddata(ep, buf, len, desc, data, dest, ctx));
}
static ssize_t m_injectdata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
			    fi_addr_t dest)
{
	ADD(inject, 1);
	return posted(M_ORIG(ep)->injectdata(ep, buf, len, data, dest));
}

/* ---- endpoint (cancel) ------------------------------------------------------------------ */

struct ep_wrap {
	struct fi_ops_ep ops;
	struct fi_ops_ep *orig;
};

static ssize_t e_cancel(fid_t fid, void *ctx)
{
	struct fid_ep *ep = CONTAINER(fid, struct fid_ep, fid);
	ADD(other, 1);
	return CONTAINER(ep->ops, struct ep_wrap, ops)->orig->cancel(fid, ctx);
}

/* ---- CQ --------------------------------------------------------------------------------- */

struct cq_wrap {
	struct fi_ops_cq ops;
	struct fi_ops_cq *orig;
};
#define C_ORIG(cq) (CONTAINER((cq)->ops, struct cq_wrap, ops)->orig)

static ssize_t c_read(struct fid_cq *cq, void *buf, size_t count)
{
	return read_result(C_ORIG(cq)->read(cq, buf, count));
}
static ssize_t c_readfrom(struct fid_cq *cq, void *buf, size_t count, fi_addr_t *src)
{
	return read_result(C_ORIG(cq)->readfrom(cq, buf, count, src));
}
static ssize_t c_readerr(struct fid_cq *cq, struct fi_cq_err_entry *buf, uint64_t flags)
{
	ADD(readerr, 1);
	return C_ORIG(cq)->readerr(cq, buf, flags);
}
static ssize_t c_sread(struct fid_cq *cq, void *buf, size_t count, const void *cond, int timeout)
{
	ADD(other, 1);
	return C_ORIG(cq)->sread(cq, buf, count, cond, timeout);
}
static ssize_t c_sreadfrom(struct fid_cq *cq, void *buf, size_t count, fi_addr_t *src,
			   const void *cond, int timeout)
{
	ADD(other, 1);
	return C_ORIG(cq)->sreadfrom(cq, buf, count, src, cond, timeout);
}

/* ---- the chain: fabric -> domain -> endpoint and CQ -------------------------------------- */

struct domain_wrap {
	struct fi_ops_domain ops;
	struct fi_ops_domain *orig;
};
struct fabric_wrap {
	struct fi_ops_fabric ops;
	struct fi_ops_fabric *orig;
};

/* A copy of the provider's table, at most as large as ours (an older provider's is smaller). */
#define WRAP(type, obj_ops)                                                        \
	({                                                                                \
		type *w_ = calloc(1, sizeof *w_);                                         \
		if (w_) {                                                                 \
			size_t n_ = (obj_ops)->size < sizeof w_->ops ? (obj_ops)->size    \
								     : sizeof w_->ops;    \
			memcpy(&w_->ops, (obj_ops), n_);                                  \
			w_->orig = (obj_ops);                                             \
		}                                                                         \
		w_;                                                                       \
	})

static int d_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
		      void *context)
{
	int rc = CONTAINER(domain->ops, struct domain_wrap, ops)->orig->endpoint(domain, info, ep,
										context);
	if (rc || !*ep)
		return rc;
	struct fid_ep *e = *ep;
	if (e->tagged) {
		struct tagged_wrap *w = WRAP(struct tagged_wrap, e->tagged);
		if (w) {
			w->ops.recv = t_recv, w->ops.recvv = t_recvv, w->ops.recvmsg = t_recvmsg;
			w->ops.send = t_send, w->ops.sendv = t_sendv, w->ops.sendmsg = t_sendmsg;
			w->ops.inject = t_inject, w->ops.senddata = t_senddata;
			w->ops.injectdata = t_injectdata;
			e->tagged = &w->ops;
		}
	}
	if (e->msg) {
		struct msg_wrap *w = WRAP(struct msg_wrap, e->msg);
		if (w) {
			w->ops.recv = m_recv, w->ops.recvv = m_recvv, w->ops.recvmsg = m_recvmsg;
			w->ops.send = m_send, w->ops.sendv = m_sendv, w->ops.sendmsg = m_sendmsg;
			w->ops.inject = m_inject, w->ops.senddata = m_senddata;
			w->ops.injectdata = m_injectdata;
			e->msg = &w->ops;
		}
	}
	if (e->ops) {
		struct ep_wrap *w = WRAP(struct ep_wrap, e->ops);
		if (w) {
			w->ops.cancel = e_cancel;
			e->ops = &w->ops;
		}
	}
	return 0;
}

static int d_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq,
		     void *context)
{
	int rc = CONTAINER(domain->ops, struct domain_wrap, ops)->orig->cq_open(domain, attr, cq,
									       context);
	if (rc || !*cq)
		return rc;
	struct cq_wrap *w = WRAP(struct cq_wrap, (*cq)->ops);
	if (w) {
		w->ops.read = c_read, w->ops.readfrom = c_readfrom, w->ops.readerr = c_readerr;
		w->ops.sread = c_sread, w->ops.sreadfrom = c_sreadfrom;
		(*cq)->ops = &w->ops;
	}
	return 0;
}

static int f_domain(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **dom,
		    void *context)
{
	int rc = CONTAINER(fabric->ops, struct fabric_wrap, ops)->orig->domain(fabric, info, dom,
									      context);
	if (rc || !*dom)
		return rc;
	struct domain_wrap *w = WRAP(struct domain_wrap, (*dom)->ops);
	if (w) {
		w->ops.endpoint = d_endpoint;
		w->ops.cq_open = d_cq_open;
		(*dom)->ops = &w->ops;
	}
	return 0;
}

/* Exported as fi_fabric@FABRIC_1.1 (fi_count.map), the version programs link against. */
__attribute__((visibility("default"))) int fi_fabric(struct fi_fabric_attr *attr,
						     struct fid_fabric **fabric, void *context)
{
	static int (*real)(struct fi_fabric_attr *, struct fid_fabric **, void *);
	if (!real)
		real = (int (*)(struct fi_fabric_attr *, struct fid_fabric **, void *))dlvsym(
			RTLD_NEXT, "fi_fabric", "FABRIC_1.1");
	if (!real)
		return -FI_ENOSYS;
	int rc = real(attr, fabric, context);
	if (rc || !*fabric)
		return rc;
	struct fabric_wrap *w = WRAP(struct fabric_wrap, (*fabric)->ops);
	if (w) {
		w->ops.domain = f_domain;
		(*fabric)->ops = &w->ops;
	}
	return 0;
}

__attribute__((destructor)) static void report(void)
{
	const char *r = getenv("FI_COUNT_REPORT");
	if (!r || !*r || *r == '0')
		return;
	fprintf(stderr,
		"fi_count pid=%d send=%llu inject=%llu recv=%llu post_again=%llu read_full=%llu "
		"read_empty=%llu read_other=%llu entries=%llu readerr=%llu other=%llu\n",
		(int)getpid(), (unsigned long long)g_count.send, (unsigned long long)g_count.inject,
		(unsigned long long)g_count.recv, (unsigned long long)g_count.post_again,
		(unsigned long long)g_count.read_full, (unsigned long long)g_count.read_empty,
		(unsigned long long)g_count.read_other, (unsigned long long)g_count.entries,
		(unsigned long long)g_count.readerr, (unsigned long long)g_count.other);
}
