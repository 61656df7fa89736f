/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The libfabric objects one by one, in one process: EQ, CQ (every format, wait objects, signal),
 * counters, AV (map and table), MR keys, endpoint naming and options, the -FI_ENOSYS answers of
 * what is not offered, and the order rules of close.
 */
#include "xt.h"

#include <pthread.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>
#include <string.h>
#include <time.h>

static void *signal_later(void *cq)
{
	struct timespec d = {0, 200 * 1000 * 1000};
	nanosleep(&d, NULL);
	fi_cq_signal(cq);
	return NULL;
}

int main(void)
{
	xt_init(60);
	struct xt_ep x;
	struct fi_info *h = xt_hints();
	h->domain_attr->threading = FI_THREAD_SAFE;
	xt_open(&x, h, 0);
	fi_freeinfo(h);

	/* EQ */
	struct fi_eq_attr eqa = {.size = 4, .wait_obj = FI_WAIT_UNSPEC};
	struct fid_eq *eq;
	XT_RC(fi_eq_open(x.fabric, &eqa, &eq, NULL));
	uint32_t ev;
	struct fi_eq_entry ent = {.data = 7}, out;
	struct fi_eq_err_entry eqerr;
	XT_CHECK(fi_eq_read(eq, &ev, &out, sizeof out, 0) == -FI_EAGAIN, "empty EQ");
	XT_CHECK(fi_eq_readerr(eq, &eqerr, 0) == -FI_EAGAIN, "empty EQ readerr");
	for (int i = 0; i < 4; i++)
		XT_CHECK(fi_eq_write(eq, FI_NOTIFY, &ent, sizeof ent, 0) == sizeof ent, "eq write");
	XT_CHECK(fi_eq_write(eq, FI_NOTIFY, &ent, sizeof ent, 0) == -FI_EAGAIN, "a full EQ refuses");
	XT_CHECK(fi_eq_read(eq, &ev, &out, sizeof out, FI_PEEK) == sizeof out && out.data == 7, "peek");
	XT_CHECK(fi_eq_sread(eq, &ev, &out, sizeof out, 100, 0) == sizeof out && ev == FI_NOTIFY, "sread");
	int fd = -1;
	XT_RC(fi_control(&eq->fid, FI_GETWAIT, &fd));
	XT_CHECK(fd >= 0, "EQ wait fd");
	XT_RC(fi_close(&eq->fid));
	xt_pass("EQ write/read/peek/sread/full/wait fd");

	/* CQ formats and waiting */
	const enum fi_cq_format formats[] = {FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_MSG, FI_CQ_FORMAT_DATA,
					     FI_CQ_FORMAT_TAGGED, FI_CQ_FORMAT_UNSPEC};
	for (int i = 0; i < 5; i++) {
		struct fi_cq_attr a = {.format = formats[i], .wait_obj = FI_WAIT_UNSPEC, .size = 16};
		struct fid_cq *cq;
		XT_RC(fi_cq_open(x.domain, &a, &cq, NULL));
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err = {0};
		XT_CHECK(fi_cq_read(cq, &e, 1) == -FI_EAGAIN, "empty CQ");
		XT_CHECK(fi_cq_read(cq, NULL, 0) == -FI_EAGAIN, "fi_cq_read(cq, NULL, 0)");
		XT_CHECK(fi_cq_readerr(cq, &err, 0) == -FI_EAGAIN, "empty readerr");
		double t0 = xt_now_s();
		XT_CHECK(fi_cq_sread(cq, &e, 1, NULL, 150) == -FI_EAGAIN, "sread timeout");
		XT_CHECK(xt_now_s() - t0 >= 0.1, "sread returned before its timeout");
		pthread_t th;
		pthread_create(&th, NULL, signal_later, cq);
		t0 = xt_now_s();
		XT_CHECK(fi_cq_sread(cq, &e, 1, NULL, 10000) == -FI_EAGAIN, "signalled sread");
		XT_CHECK(xt_now_s() - t0 < 5, "fi_cq_signal did not wake sread");
		pthread_join(th, NULL);
		XT_RC(fi_close(&cq->fid));
	}
	struct fi_cq_attr fda = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_FD};
	struct fid_cq *fdcq;
	XT_RC(fi_cq_open(x.domain, &fda, &fdcq, NULL));
	fd = -1;
	XT_RC(fi_control(&fdcq->fid, FI_GETWAIT, &fd));
	XT_CHECK(fd >= 0, "CQ wait fd");
	struct fid *fids[1] = {&fdcq->fid};
	XT_RC(fi_trywait(x.fabric, fids, 1));
	XT_RC(fi_close(&fdcq->fid));
	XT_CHECK(fi_close(&x.txcq->fid) == -FI_EBUSY, "closing a CQ bound to an open endpoint");
	XT_CHECK(fi_close(&x.domain->fid) == -FI_EBUSY, "closing a domain with objects open");
	XT_CHECK(fi_close(&x.fabric->fid) == -FI_EBUSY, "closing a fabric with a domain open");
	xt_pass("CQ formats, sread timeout, signal, wait fd, trywait, busy close of CQ, domain, fabric");

	/* counters */
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC};
	struct fid_cntr *c;
	XT_RC(fi_cntr_open(x.domain, &ca, &c, NULL));
	XT_RC(fi_cntr_set(c, 5));
	XT_RC(fi_cntr_add(c, 3));
	XT_CHECK(fi_cntr_read(c) == 8, "counter value");
	XT_RC(fi_cntr_adderr(c, 2));
	XT_RC(fi_cntr_seterr(c, 4));
	XT_CHECK(fi_cntr_readerr(c) == 4, "counter errors");
	XT_CHECK(fi_cntr_wait(c, 8, 100) == 0, "wait on a reached threshold");
	double t0 = xt_now_s();
	XT_CHECK(fi_cntr_wait(c, 9, 150) == -FI_ETIMEDOUT, "wait timeout");
	XT_CHECK(xt_now_s() - t0 >= 0.1, "counter wait returned early");
	XT_RC(fi_close(&c->fid));
	xt_pass("counters: set/add/read/adderr/seterr/readerr/wait");

	/* AV: map and table, lookup, straddr, remove, invalid input */
	char names[3][64];
	struct xt_ep peers[2];
	for (int i = 0; i < 2; i++) {
		struct fi_info *ph = xt_hints();
		xt_open(&peers[i], ph, 0);
		fi_freeinfo(ph);
		memcpy(names[i], peers[i].name, peers[i].namelen);
	}
	memcpy(names[2], x.name, x.namelen);
	const enum fi_av_type types[] = {FI_AV_MAP, FI_AV_TABLE};
	for (int t = 0; t < 2; t++) {
		struct fi_av_attr aa = {.type = types[t]};
		struct fid_av *av;
		XT_RC(fi_av_open(x.domain, &aa, &av, NULL));
		fi_addr_t addrs[3];
		char flat[3 * 64]; /* names packed at their length (16 bytes, or 64 with the network on) */
		for (int i = 0; i < 3; i++)
			memcpy(flat + x.namelen * i, names[i], x.namelen);
		XT_CHECK(fi_av_insert(av, flat, 3, addrs, 0, NULL) == 3, "insert 3");
		if (types[t] == FI_AV_TABLE)
			XT_CHECK(addrs[0] == 0 && addrs[1] == 1 && addrs[2] == 2, "table indices");
		char back[64];
		size_t len = 4;
		XT_RC(fi_av_lookup(av, addrs[1], back, &len));
		XT_CHECK(len == x.namelen, "lookup reports the full length");
		len = sizeof back;
		XT_RC(fi_av_lookup(av, addrs[1], back, &len));
		XT_CHECK(!memcmp(back, names[1], len), "lookup returns the inserted name");
		char text[64];
		size_t tl = sizeof text;
		XT_CHECK(fi_av_straddr(av, names[0], text, &tl) && strlen(text) > 0, "straddr");
		XT_RC(fi_av_remove(av, &addrs[1], 1, 0));
		len = sizeof back;
		XT_CHECK(fi_av_lookup(av, addrs[1], back, &len) < 0, "lookup after remove");
		char garbage[16] = "not an address";
		fi_addr_t bad = 0;
		XT_CHECK(fi_av_insert(av, garbage, 1, &bad, 0, NULL) == 0 && bad == FI_ADDR_NOTAVAIL,
			 "invalid address gives FI_ADDR_NOTAVAIL");
		XT_RC(fi_close(&av->fid));
	}
	XT_CHECK(fi_close(&x.av->fid) == -FI_EBUSY, "closing an AV bound to an open endpoint");
	for (int i = 0; i < 2; i++)
		xt_close(&peers[i]);
	xt_pass("AV map/table insert, lookup, straddr, remove, invalid input, busy close");

	/* MR keys */
	static char mem[4096];
	struct fid_mr *m1, *m2, *m3;
	XT_RC(fi_mr_reg(x.domain, mem, sizeof mem, FI_SEND | FI_RECV, 0, 42, 0, &m1, NULL));
	XT_CHECK(fi_mr_key(m1) == 42 && fi_mr_desc(m1) != NULL, "requested key");
	XT_CHECK(fi_mr_reg(x.domain, mem, sizeof mem, FI_SEND, 0, 42, 0, &m2, NULL) == -FI_ENOKEY,
		 "duplicate key refused");
	struct iovec iov[2] = {{mem, 100}, {mem + 200, 100}};
	XT_CHECK(fi_mr_regv(x.domain, iov, 2, FI_RECV, 0, 43, 0, &m2, NULL) == -FI_EINVAL,
		 "more iovecs than mr_iov_limit (%zu)", x.info->domain_attr->mr_iov_limit);
	XT_RC(fi_mr_regv(x.domain, iov + 1, 1, FI_RECV, 0, 43, 0, &m2, NULL));
	XT_CHECK(fi_close(&x.domain->fid) == -FI_EBUSY, "a domain with open MRs must stay open");
	XT_RC(fi_close(&m2->fid));
	struct fi_mr_attr ma = {.mr_iov = iov, .iov_count = 1, .access = FI_SEND, .requested_key = 44};
	XT_RC(fi_mr_regattr(x.domain, &ma, 0, &m3));
	XT_CHECK(fi_mr_reg(x.domain, mem, 1, 1ULL << 60, 0, 45, 0, &m2, NULL) == -FI_EINVAL, "unknown access bits");
	XT_RC(fi_close(&m1->fid));
	XT_RC(fi_mr_reg(x.domain, mem, sizeof mem, FI_SEND, 0, 42, 0, &m1, NULL)); /* key free again */
	XT_RC(fi_close(&m1->fid));
	XT_RC(fi_close(&m3->fid));
	xt_pass("MR reg/regv/regattr and keys");

	/* endpoint naming, options, unsupported operations */
	char small[4];
	size_t sl = sizeof small;
	XT_CHECK(fi_getname(&x.ep->fid, small, &sl) == -FI_ETOOSMALL && sl == x.namelen, "getname too small");
	XT_CHECK(x.namelen <= 64, "name fits FI_NAME_MAX");
	/* fi_getinfo announces room for the name fi_getname gives: its length without the network;
	 * with it 64 bytes, the longest a network name takes (fi_getname gives 32 over tcp on IPv4,
	 * which only the open endpoint knows) */
	const int net_on = getenv("FI_EXANET_NETWORK") && strcmp(getenv("FI_EXANET_NETWORK"), "off");
	XT_CHECK(x.info->src_addr && (net_on ? x.info->src_addrlen == 64 && (x.namelen == 32 || x.namelen == 64)
					      : x.info->src_addrlen == x.namelen),
		 "fi_getinfo's src_addrlen %zu, fi_getname's %zu", x.info->src_addrlen, x.namelen);
	size_t optlen = sizeof(size_t);
	size_t opt = 0;
	XT_CHECK(fi_getopt(&x.ep->fid, FI_OPT_ENDPOINT, 12345, &opt, &optlen) == -FI_ENOPROTOOPT, "unknown getopt");
	/* RMA exists, but this endpoint did not ask for FI_RMA */
	XT_CHECK(fi_write(x.ep, mem, 8, NULL, 0, 0, 0, NULL) == -FI_EOPNOTSUPP, "fi_write without FI_RMA");
	XT_CHECK(fi_read(x.ep, mem, 8, NULL, 0, 0, 0, NULL) == -FI_EOPNOTSUPP, "fi_read without FI_RMA");
	XT_CHECK(fi_atomic(x.ep, mem, 1, NULL, 0, 0, 0, FI_INT32, FI_SUM, NULL) == -FI_EOPNOTSUPP,
		 "fi_atomic without FI_ATOMIC");
	XT_CHECK(fi_connect(x.ep, names[0], NULL, 0) == -FI_ENOSYS, "fi_connect");
	struct fid_ep *sep;
	XT_CHECK(fi_scalable_ep(x.domain, x.info, &sep, NULL) == -FI_ENOSYS, "fi_scalable_ep");
	struct fid_ep *raw;
	XT_RC(fi_endpoint(x.domain, x.info, &raw, NULL));
	XT_CHECK(fi_tsend(raw, mem, 8, NULL, 0, 1, NULL) < 0, "posting before fi_enable");
	XT_RC(fi_close(&raw->fid));
	xt_pass("getname, getopt, -FI_ENOSYS for what is not offered, post before enable");

	xt_close(&x);
	return 0;
}
