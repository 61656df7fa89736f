/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Endpoint addresses in the formats IP-based programs pass (fi_getinfo(3) addr_format):
 * FI_SOCKADDR_IN, FI_SOCKADDR_IN6, FI_SOCKADDR and FI_ADDR_STR besides exanet's own. For each,
 * a server opens its endpoint from fi_getinfo(node, service, FI_SOURCE) as fabtests' -s does; a
 * client resolves the same node and service into a destination address, inserts it (and the
 * string forms through fi_av_insert and fi_av_insertsvc), and the two exchange tagged messages
 * both ways. fi_getname, fi_av_lookup and fi_av_straddr must give names in the format.
 *
 * Refusals: an address of another host is refused by fi_getinfo (-FI_ENODATA) and by
 * fi_av_insert (FI_ADDR_NOTAVAIL), and every fi_getinfo refusal says why at FI_LOG_LEVEL=info.
 *
 * exanet's longer names (struct fi_exanet_addr_v2, 64 bytes: the endpoint's host and network
 * name): fi_av_insert reads each name's length from its version; a name of this host works; a
 * name of another host is kept in the AV but a send to it fails, and never reaches the endpoint
 * of this host that has the same port; a malformed one is refused.
 *
 * The string form of a network name carries its network fields too ("?node=&host=&inc=&lower="):
 * with FI_EXANET_NETWORK=every_peer (net.addr_formats), where every name is a network one and a
 * 16-byte one reaches nothing, fi_getname's string, fi_getinfo(node = that string), fi_av_insert,
 * fi_av_lookup and fi_av_straddr give back the same peer, and the string fi_av_straddr prints for
 * a name of an FI_FORMAT_UNSPEC domain reaches that endpoint through an FI_ADDR_STR AV. Malformed
 * network fields are refused. Over tcp on IPv4 that binary name is the 32-byte compact form
 * (struct fi_exanet_addr_v3): its 64-byte form reaches the same endpoint, the AV gives back the
 * 32 bytes for both, and a forged compact name is refused. Another host's endpoint is named by
 * address and port alone with the network on (fi_getinfo(node, service), a string without the
 * network fields), never as a source; without a port it is refused.
 */
#include "xt.h"

#include <rdma/fi_ext_exanet.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct format {
	uint32_t addr_format;
	const char *node;
	const char *name;
};

static const struct format formats[] = {
	{FI_FORMAT_UNSPEC, "127.0.0.1", "exanet's own"},
	{FI_SOCKADDR_IN, "127.0.0.1", "FI_SOCKADDR_IN"},
	{FI_SOCKADDR_IN6, "::1", "FI_SOCKADDR_IN6"},
	{FI_SOCKADDR, "127.0.0.1", "FI_SOCKADDR"},
	{FI_ADDR_STR, "127.0.0.1", "FI_ADDR_STR"},
};
static int g_port;
static int g_index; /* the format the next pair of processes tries */

static struct fi_info *hints_for(const struct format *f)
{
	struct fi_info *h = xt_hints();
	h->addr_format = f->addr_format;
	return h;
}

/* The name fi_getname gives must be in the format, with the port it was opened on. */
static void check_name(const struct format *f, const void *name, size_t len, int port)
{
	switch (f->addr_format) {
	case FI_SOCKADDR_IN:
	case FI_SOCKADDR: {
		const struct sockaddr_in *s = name;
		XT_CHECK(len == sizeof *s && s->sin_family == AF_INET && ntohs(s->sin_port) == port,
			 "%s name: len %zu family %d port %d", f->name, len, s->sin_family, ntohs(s->sin_port));
		break;
	}
	case FI_SOCKADDR_IN6: {
		const struct sockaddr_in6 *s = name;
		XT_CHECK(len == sizeof *s && s->sin6_family == AF_INET6 && ntohs(s->sin6_port) == port,
			 "%s name: len %zu", f->name, len);
		break;
	}
	case FI_ADDR_STR: {
		char want[64];
		snprintf(want, sizeof want, "fi_exanet://127.0.0.1:%d/", port);
		XT_CHECK(len == strlen(name) + 1 && !strncmp(name, want, strlen(want)), "%s name \"%s\"", f->name,
			 (const char *)name);
		break;
	}
	default:
		XT_CHECK(len == 16, "native name length %zu", len);
	}
}

/* Version 2 strings whose network fields are malformed: each is refused, none crashes. */
static void check_bad_strings(struct xt_ep *x)
{
	static const char *bad[] = {
		"fi_exanet://192.0.2.1:9/1?host=1",			  /* no incarnation */
		"fi_exanet://192.0.2.1:9/1?inc=1",			  /* no host */
		"fi_exanet://192.0.2.1:9/1?host=1&inc=2&lower=abc",	  /* odd hex digits */
		"fi_exanet://192.0.2.1:9/1?host=1&inc=2&lower=zz",	  /* not hex */
		"fi_exanet://192.0.2.1:9/1?host=1&inc=2&bogus=1",	  /* unknown key */
		"fi_exanet://192.0.2.1:9/1?host=1&host=1&inc=2",	  /* repeated key */
		"fi_exanet://192.0.2.1:9/1?host=11112222333344445&inc=2", /* 65 bits */
		"fi_exanet://192.0.2.1:9/1?node=10000&host=1&inc=2",	  /* node beyond 16 bits */
		"fi_exanet://192.0.2.1:9/1?host=1&inc=2&",		  /* trailing separator */
		"fi_exanet://192.0.2.1:9?host=1&inc=2",			  /* no PDID */
		"fi_sockaddr_in://192.0.2.1:9/1?host=1&inc=2",		  /* not exanet's form */
		"fi_exanet://192.0.2.1:9/1?host=1&inc=2&lower="
		"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", /* 32 bytes */
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		fi_addr_t a = 0;
		const char *names[] = {bad[i]};
		XT_CHECK(fi_av_insert(x->av, names, 1, &a, 0, NULL) == 0 && a == FI_ADDR_NOTAVAIL,
			 "malformed \"%s\" was inserted", bad[i]);
	}
	/* A well-formed one of another host is kept (an operation on it fails: longer_names). */
	fi_addr_t a = FI_ADDR_NOTAVAIL;
	const char *names[] = {"fi_exanet://127.0.0.1:9/1?node=0&host=5eed&inc=7&lower=0002"};
	XT_CHECK(fi_av_insert(x->av, names, 1, &a, 0, NULL) == 1 && a != FI_ADDR_NOTAVAIL,
		 "a version 2 string of another host was refused");
	char back[320];
	size_t blen = sizeof back;
	XT_CHECK(fi_av_lookup(x->av, a, back, &blen) == 0 && !strcmp(back, names[0]),
		 "fi_av_lookup of a version 2 string: \"%s\"", back);
}

static void open_from(struct xt_ep *x, struct fi_info *info)
{
	xt_open_info(x, fi_dupinfo(info), 0);
	xt_enable(x);
}

static void ping(struct xt_ep *x, fi_addr_t peer, uint64_t tag)
{
	char buf[100];
	memset(buf, (int)tag, sizeof buf);
	/* -FI_EAGAIN is the provider's to say (fi_tagged(3)): over the network backend a first
	 * send waits for the peer's hello and credit (seen under ASan, 2026-12-07). */
	XT_POST(x->txcq, fi_tsend(x->ep, buf, sizeof buf, NULL, peer, tag, NULL));
	XT_CHECK(xt_wait(x->txcq, NULL, NULL, 20) == 1, "send of tag %llu", (unsigned long long)tag);
}

static void pong(struct xt_ep *x, fi_addr_t peer, uint64_t tag)
{
	char buf[100] = {0};
	XT_POST(x->rxcq, fi_trecv(x->ep, buf, sizeof buf, NULL, peer, tag, 0, NULL));
	struct fi_cq_tagged_entry e;
	XT_CHECK(xt_wait(x->rxcq, &e, NULL, 20) == 1 && e.tag == tag && e.len == sizeof buf &&
		 buf[99] == (char)tag, "receive of tag %llu", (unsigned long long)tag);
}

/* The server: opened on (node, port) in the format; answers whatever the client sends. */
static int server(int unused, int sock)
{
	(void)unused;
	xt_init(60);
	const int index = g_index;
	const struct format *f = &formats[index];
	char service[16];
	snprintf(service, sizeof service, "%d", g_port + index);
	struct fi_info *h = hints_for(f), *info;
	XT_RC(fi_getinfo(FI_VERSION(1, 17), f->node, service, FI_SOURCE, h, &info));
	XT_CHECK(info->addr_format == (f->addr_format == FI_SOCKADDR ? FI_SOCKADDR_IN : f->addr_format),
		 "%s: answer format %u", f->name, info->addr_format);
	struct xt_ep x;
	open_from(&x, info);
	char name[256];
	size_t len = sizeof name;
	XT_RC(fi_getname(&x.ep->fid, name, &len));
	check_name(f, name, len, g_port + index);
	xt_sync(sock); /* the client may resolve us now */
	/* the client's name comes over the socket, in the format */
	uint32_t n = 0;
	xt_recv_all(sock, &n, sizeof n);
	XT_CHECK(n <= sizeof name, "name length");
	xt_recv_all(sock, name, n);
	fi_addr_t peer = FI_ADDR_NOTAVAIL;
	if (f->addr_format == FI_ADDR_STR) {
		const char *names[] = {name};
		XT_CHECK(fi_av_insert(x.av, names, 1, &peer, 0, NULL) == 1, "%s: insert of \"%s\"", f->name, name);
	} else {
		XT_CHECK(fi_av_insert(x.av, name, 1, &peer, 0, NULL) == 1, "%s: insert of the client's name", f->name);
	}
	pong(&x, peer, 1);
	ping(&x, peer, 2);
	pong(&x, FI_ADDR_UNSPEC, 3);
	xt_sync(sock);
	xt_close(&x);
	fi_freeinfo(info);
	fi_freeinfo(h);
	return 0;
}

static void client(int index, int sock)
{
	xt_init(60);
	const struct format *f = &formats[index];
	char service[16];
	snprintf(service, sizeof service, "%d", g_port + index);
	xt_sync(sock);
	struct fi_info *h = hints_for(f), *info;
	XT_RC(fi_getinfo(FI_VERSION(1, 17), f->node, service, 0, h, &info));
	XT_CHECK(info->dest_addr, "%s: no destination address", f->name);
	struct xt_ep x;
	open_from(&x, info);
	char name[256];
	size_t len = sizeof name;
	XT_RC(fi_getname(&x.ep->fid, name, &len));
	uint32_t n = (uint32_t)len;
	xt_send_all(sock, &n, sizeof n);
	xt_send_all(sock, name, len);

	fi_addr_t server_addr = FI_ADDR_NOTAVAIL;
	if (f->addr_format == FI_ADDR_STR) {
		const char *names[] = {info->dest_addr};
		XT_CHECK(fi_av_insert(x.av, names, 1, &server_addr, 0, NULL) == 1, "%s: insert of \"%s\"", f->name,
			 (const char *)info->dest_addr);
	} else {
		XT_CHECK(fi_av_insert(x.av, info->dest_addr, 1, &server_addr, 0, NULL) == 1, "%s: insert", f->name);
	}
	/* lookup gives the name back in the format; straddr prints it */
	char back[256];
	size_t blen = sizeof back;
	XT_RC(fi_av_lookup(x.av, server_addr, back, &blen));
	XT_CHECK(blen == info->dest_addrlen && !memcmp(back, info->dest_addr, blen), "%s: fi_av_lookup", f->name);
	char text[128];
	size_t tlen = sizeof text;
	XT_CHECK(fi_av_straddr(x.av, info->dest_addr, text, &tlen) && !strncmp(text, "fi_exanet://", 12),
		 "%s: fi_av_straddr \"%s\"", f->name, text);
	ping(&x, server_addr, 1);
	pong(&x, server_addr, 2);
	/* the same endpoint through fi_av_insertsvc */
	fi_addr_t svc = FI_ADDR_NOTAVAIL;
	XT_CHECK(fi_av_insertsvc(x.av, f->node, service, &svc, 0, NULL) == 1 && svc != FI_ADDR_NOTAVAIL,
		 "%s: fi_av_insertsvc", f->name);
	ping(&x, svc, 3);
	/* another host is not reachable: refused, not guessed */
	fi_addr_t other = 0;
	if (f->addr_format == FI_SOCKADDR_IN || f->addr_format == FI_SOCKADDR) {
		struct sockaddr_in far = {.sin_family = AF_INET, .sin_port = htons(9)};
		inet_pton(AF_INET, "192.0.2.1", &far.sin_addr); /* TEST-NET-1: never this host */
		XT_CHECK(fi_av_insert(x.av, &far, 1, &other, 0, NULL) == 0 && other == FI_ADDR_NOTAVAIL,
			 "%s: an address of another host was inserted", f->name);
	} else if (f->addr_format == FI_ADDR_STR) {
		const char *names[] = {"fi_exanet://192.0.2.1:9"};
		XT_CHECK(fi_av_insert(x.av, names, 1, &other, 0, NULL) == 0 && other == FI_ADDR_NOTAVAIL,
			 "%s: an address of another host was inserted", f->name);
		check_bad_strings(&x);
	}
	struct fi_info *none = NULL;
	XT_CHECK(fi_getinfo(FI_VERSION(1, 17), "192.0.2.1", service, 0, h, &none) == -FI_ENODATA,
		 "%s: fi_getinfo for another host", f->name);
	xt_sync(sock);
	xt_close(&x);
	fi_freeinfo(info);
	fi_freeinfo(h);
}

/* One format: the server in a child of ours, the client here. */
static int pair(int unused, int sock)
{
	(void)unused;
	(void)sock;
	int ssock;
	pid_t spid;
	xt_spawn(1, server, &ssock, &spid);
	client(g_index, ssock);
	xt_reap(1, &spid);
	return 0;
}

/* Refusals are explained at FI_LOG_LEVEL=info: run in a child whose stderr is a file. */
static int explains(int index, int sock)
{
	(void)index;
	(void)sock;
	char path[] = "/tmp/exanet-getinfo-log-XXXXXX";
	const int fd = mkstemp(path);
	XT_CHECK(fd >= 0, "mkstemp");
	const int saved = dup(2);
	dup2(fd, 2);
	setenv("FI_LOG_LEVEL", "info", 1);
	setenv("FI_LOG_PROV", "exanet", 1);
	struct fi_info *h = xt_hints(), *info = NULL;
	h->caps |= FI_TRIGGER;
	const int rc1 = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info);
	h->caps &= ~(uint64_t)FI_TRIGGER;
	h->tx_attr->size = (size_t)1 << 30;
	const int rc2 = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info);
	h->tx_attr->size = 0;
	h->addr_format = FI_ADDR_PSMX2;
	const int rc3 = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info);
	fflush(stderr);
	static char log[1 << 20];
	const ssize_t n = pread(fd, log, sizeof log - 1, 0);
	close(fd);
	unlink(path);
	dup2(saved, 2); /* failures below are reported where they belong */
	XT_CHECK(rc1 == -FI_ENODATA && rc2 == -FI_ENODATA && rc3 == -FI_ENODATA, "refusals %d %d %d", rc1, rc2, rc3);
	XT_CHECK(n > 0 && strstr(log, "unsupported caps: requested FI_TRIGGER"), "no reason for FI_TRIGGER logged");
	XT_CHECK(strstr(log, "tx_attr->size 1073741824 requested, at most 65536"), "no reason for the size logged");
	XT_CHECK(strstr(log, "address format FI_ADDR_PSMX2 requested"), "no reason for the format logged");
	fi_freeinfo(h);
	return 0;
}

static int longer_names(int unused, int sock)
{
	(void)unused;
	(void)sock;
	struct xt_ep x;
	xt_open_default(&x, 0);
	struct fi_exanet_addr v1;
	size_t len = sizeof v1;
	XT_CHECK(fi_getname(&x.ep->fid, &v1, &len) == 0 && len == sizeof v1 && v1.version == 1,
		 "fi_getname without the network backend: a 16-byte version 1 name (got %zu bytes)", len);

	struct fi_exanet_addr_v2 names[3];
	memset(names, 0, sizeof names);
	for (int i = 0; i < 3; i++) {
		names[i].v1 = v1;
		names[i].v1.version = 2;
		names[i].incarnation = 0x1000u + (unsigned)i;
	}
	names[1].host = 0x5eed5eed5eed5eedull; /* another host, with our port */
	names[1].lower_len = 16;
	names[2].lower_len = FI_EXANET_LOWER_NAME_BYTES + 1; /* malformed */
	fi_addr_t fa[3];
	const int n = fi_av_insert(x.av, names, 3, fa, 0, NULL);
	XT_CHECK(n == 2 && fa[0] != FI_ADDR_NOTAVAIL && fa[1] != FI_ADDR_NOTAVAIL && fa[2] == FI_ADDR_NOTAVAIL,
		 "inserting 64-byte names: %d inserted (want 2: this host's, another host's; the malformed refused)", n);

	struct fi_exanet_addr_v2 back;
	size_t blen = sizeof back;
	XT_CHECK(fi_av_lookup(x.av, fa[1], &back, &blen) == 0 && blen == sizeof back &&
			 memcmp(&back, &names[1], sizeof back) == 0,
		 "fi_av_lookup of a 64-byte name gives it back whole (%zu bytes)", blen);
	char text[160];
	size_t tlen = sizeof text;
	XT_CHECK(fi_av_straddr(x.av, &names[1], text, &tlen) && !strncmp(text, "fi_exanet://", 12),
		 "fi_av_straddr of a 64-byte name");

	/* This host's longer name reaches us. */
	char in[8] = {0}, out[8] = "v2 here";
	XT_CHECK(fi_trecv(x.ep, in, sizeof in, NULL, FI_ADDR_UNSPEC, 7, 0, NULL) == 0, "trecv");
	xt_send_one(x.ep, x.txcq, out, sizeof out, fa[0], 7); /* the send's completion */
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	XT_CHECK(xt_wait(x.rxcq, &e, &err, 10) == 1 && (e.flags & FI_RECV) && !strcmp(in, out),
		 "received through a 64-byte name");
	ssize_t rc;

	/* Another host's name: an error, and nothing reaches our own endpoint of the same port. */
	XT_CHECK(fi_trecv(x.ep, in, sizeof in, NULL, FI_ADDR_UNSPEC, 8, 0, NULL) == 0, "trecv");
	rc = fi_tsend(x.ep, out, sizeof out, NULL, fa[1], 8, NULL);
	XT_CHECK(rc < 0 && rc != -FI_EAGAIN, "a send to another host's name (no network backend) must fail, got %zd", rc);
	for (int i = 0; i < 1000; i++) {
		struct fi_cq_tagged_entry f;
		XT_CHECK(fi_cq_read(x.rxcq, &f, 1) == -FI_EAGAIN, "something arrived from the send to another host");
	}
	xt_close(&x);
	return 0;
}

/* One message from x (through dest) to u, both endpoints of this process: each progresses
 * while the other waits (the network's hello). */
static void send_between(struct xt_ep *x, fi_addr_t dest, struct xt_ep *u, uint64_t tag,
			 const char *what)
{
	char in[8] = {0}, out[8] = "named";
	XT_RC(fi_trecv(u->ep, in, sizeof in, NULL, FI_ADDR_UNSPEC, tag, 0, NULL));
	ssize_t rc;
	while ((rc = fi_tsend(x->ep, out, sizeof out, NULL, dest, tag, NULL)) == -FI_EAGAIN)
		(void)fi_cq_read(u->rxcq, NULL, 0);
	XT_RC(rc);
	struct fi_cq_tagged_entry e;
	int sent = 0, got = 0;
	for (long i = 0; i < 100000000 && !(sent && got); i++) {
		sent += fi_cq_read(x->txcq, &e, 1) == 1;
		got += fi_cq_read(u->rxcq, &e, 1) == 1;
	}
	XT_CHECK(sent && got && !strcmp(in, out), "%s (sent %d, received %d)", what, sent, got);
}

/* Over an IPv4 lower provider a network name is 32 bytes (version 3, struct
 * fi_exanet_addr_v3): what programs that keep a name in 32 bytes (fi_rdm_stress) can hold. Its
 * 64-byte version 2 form names the same endpoint, and the AV gives back the 32 bytes. */
static void compact_names(struct xt_ep *u)
{
	const struct fi_exanet_addr_v3 *c = (const void *)u->name;
	XT_CHECK(u->namelen == sizeof *c && c->magic == FI_EXANET_ADDR_MAGIC && c->version == 3,
		 "fi_getname over the network (tcp over IPv4): %zu bytes, version %u (want 32, 3)",
		 u->namelen, u->namelen >= 8 ? c->version : 0);
	char tiny[sizeof *c - 1];
	size_t tl = sizeof tiny;
	XT_CHECK(fi_getname(&u->ep->fid, tiny, &tl) == -FI_ETOOSMALL && tl == sizeof *c,
		 "fi_getname into %zu bytes: -FI_ETOOSMALL and 32 (got %zu)", sizeof tiny, tl);

	struct fi_exanet_addr_v2 v2;
	memset(&v2, 0, sizeof v2);
	v2.v1.magic = c->magic;
	v2.v1.node = c->node;
	v2.v1.version = 2;
	v2.v1.pdid = c->pdid;
	v2.v1.port = c->port;
	for (int i = 0; i < 6; i++) {
		v2.host |= (uint64_t)c->host[i] << (8 * i);
		v2.incarnation |= (uint64_t)c->incarnation[i] << (8 * i);
	}
	struct sockaddr_in sin;
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_port = c->lower_port;
	sin.sin_addr.s_addr = c->lower_ipv4;
	memcpy(v2.lower_name, &sin, sizeof sin);
	v2.lower_len = sizeof sin;
	struct fi_exanet_addr_v3 bad = *c;
	bad.magic ^= 1;

	struct xt_ep w;
	xt_open_default(&w, 0);
	/* One call each: a call's names are packed at the stride of its first one (fi_av(3)). */
	const void *names[3] = {c, &v2, &bad};
	fi_addr_t fa[3];
	int n = 0;
	for (int i = 0; i < 3; i++)
		n += fi_av_insert(w.av, names[i], 1, &fa[i], 0, NULL);
	XT_CHECK(n == 2 && fa[0] != FI_ADDR_NOTAVAIL && fa[1] != FI_ADDR_NOTAVAIL && fa[2] == FI_ADDR_NOTAVAIL,
		 "inserting a 32-byte name, its 64-byte form and a forged 32-byte one: %d inserted "
		 "(want 2, the forged one refused)", n);
	for (int i = 0; i < 2; i++) {
		unsigned char back[64];
		size_t blen = sizeof back;
		XT_CHECK(fi_av_lookup(w.av, fa[i], back, &blen) == 0 && blen == sizeof *c &&
				 memcmp(back, c, sizeof *c) == 0,
			 "fi_av_lookup of the %s form: %zu bytes, want the 32-byte name", i ? "64-byte" : "32-byte",
			 blen);
	}
	char t32[320], t64[320];
	size_t l32 = sizeof t32, l64 = sizeof t64;
	XT_CHECK(fi_av_straddr(w.av, c, t32, &l32) && fi_av_straddr(w.av, &v2, t64, &l64) &&
			 !strcmp(t32, t64) && strstr(t32, "&lower="),
		 "fi_av_straddr of the two forms: \"%s\" and \"%s\"", t32, t64);
	send_between(&w, fa[0], u, 11, "the send through the 32-byte name");
	send_between(&w, fa[1], u, 12, "the send through its 64-byte form");
	xt_close(&w);
}

/* With the network on, another host's endpoint is named by its address and port alone, as tcp
 * names its peers: fi_getinfo(node, service), a socket address and a string without the network
 * fields all give the name of the endpoint listening there, whose incarnation and host come with
 * its hello (fi_exanet(7) Addressing). TEST-NET-1's 192.0.2.1 is never this host here. */
static void by_address_alone(struct xt_ep *x)
{
	struct fi_info *h = hints_for(&formats[0]), *info = NULL;
	XT_RC(fi_getinfo(FI_VERSION(1, 17), "192.0.2.1", "9", 0, h, &info));
	const struct fi_exanet_addr_v3 *c = info->dest_addr;
	struct in_addr want;
	inet_pton(AF_INET, "192.0.2.1", &want);
	int inc_zero = 1;
	for (int i = 0; c && i < 6; i++)
		inc_zero &= c->incarnation[i] == 0;
	XT_CHECK(c && info->dest_addrlen == sizeof *c && c->version == 3 && c->port == 9 &&
			 c->lower_port == htons(9) && c->lower_ipv4 == want.s_addr && inc_zero,
		 "fi_getinfo(192.0.2.1, 9) with the network on: dest of %zu bytes, version %u, port %u "
		 "(want the 32-byte name of port 9 there, incarnation 0)",
		 info->dest_addrlen, c ? c->version : 0, c ? c->port : 0);
	fi_freeinfo(info);
	info = NULL;
	XT_CHECK(fi_getinfo(FI_VERSION(1, 17), "192.0.2.1", "9", FI_SOURCE, h, &info) == -FI_ENODATA,
		 "an endpoint of this host opened with another host's address as its source");
	info = NULL;
	XT_CHECK(fi_getinfo(FI_VERSION(1, 17), "192.0.2.1", NULL, 0, h, &info) == -FI_ENODATA,
		 "another host's address without a port named a peer");
	fi_freeinfo(h);

	/* The string form of it in an FI_ADDR_STR AV, and a port 0 one refused. */
	const char *names[] = {"fi_exanet://192.0.2.1:9", "fi_exanet://192.0.2.1:0"};
	fi_addr_t fa[2];
	XT_CHECK(fi_av_insert(x->av, &names[0], 1, &fa[0], 0, NULL) == 1 &&
			 fi_av_insert(x->av, &names[1], 1, &fa[1], 0, NULL) == 0 && fa[1] == FI_ADDR_NOTAVAIL,
		 "\"%s\" kept and \"%s\" refused", names[0], names[1]);
	char back[320];
	size_t blen = sizeof back;
	XT_RC(fi_av_lookup(x->av, fa[0], back, &blen));
	XT_CHECK(strstr(back, "192.0.2.1:9/") && strstr(back, "&inc=0&"),
		 "fi_av_lookup of an address-alone name: \"%s\"", back);
}

/* Over the network (every_peer): the string of a 64-byte name round-trips. */
static int net_server(int unused, int sock)
{
	(void)unused;
	xt_init(60);
	struct fi_info *h = hints_for(&formats[4]), *info;
	XT_RC(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info));
	struct xt_ep x;
	open_from(&x, info);
	char self[320];
	size_t slen = sizeof self;
	XT_RC(fi_getname(&x.ep->fid, self, &slen));
	XT_CHECK(slen == strlen(self) + 1 && strstr(self, "?node=") && strstr(self, "&lower="),
		 "fi_getname over the network: \"%s\" lacks the network fields", self);
	char small[64];
	size_t smlen = sizeof small;
	XT_CHECK(fi_getname(&x.ep->fid, small, &smlen) == -FI_ETOOSMALL && smlen == slen,
		 "fi_getname into 64 bytes: -FI_ETOOSMALL and the length needed (%zu, want %zu)",
		 smlen, slen);
	char text[320];
	size_t tlen = sizeof text;
	XT_CHECK(fi_av_straddr(x.av, self, text, &tlen) && tlen == slen && !strcmp(text, self),
		 "fi_av_straddr of \"%s\" gave \"%s\"", self, text);
	uint32_t n = (uint32_t)slen;
	xt_send_all(sock, &n, sizeof n);
	xt_send_all(sock, self, n);
	char name[320];
	xt_recv_all(sock, &n, sizeof n);
	XT_CHECK(n <= sizeof name, "name length");
	xt_recv_all(sock, name, n);
	fi_addr_t peer = FI_ADDR_NOTAVAIL;
	const char *names[] = {name};
	XT_CHECK(fi_av_insert(x.av, names, 1, &peer, 0, NULL) == 1, "insert of \"%s\"", name);
	pong(&x, peer, 1);
	ping(&x, peer, 2);
	XT_CHECK(xt_counters(x.ep).peers_network >= 1, "the peer was not reached over the network");
	xt_sync(sock);
	xt_close(&x);
	fi_freeinfo(h);
	return 0;
}

static int net_pair(int unused, int sock)
{
	(void)unused;
	(void)sock;
	int ssock;
	pid_t spid;
	xt_spawn(1, net_server, &ssock, &spid);
	xt_init(60);
	uint32_t n = 0;
	char sname[320];
	xt_recv_all(ssock, &n, sizeof n);
	XT_CHECK(n <= sizeof sname, "name length");
	xt_recv_all(ssock, sname, n);
	/* fi_getinfo with the whole string as node: the same name as destination */
	struct fi_info *h = hints_for(&formats[4]), *info;
	XT_RC(fi_getinfo(FI_VERSION(1, 17), sname, NULL, 0, h, &info));
	XT_CHECK(info->dest_addr && !strcmp(info->dest_addr, sname),
		 "fi_getinfo(\"%s\") gave dest \"%s\"", sname,
		 info->dest_addr ? (const char *)info->dest_addr : "(none)");
	struct xt_ep x;
	open_from(&x, info);
	char self[320];
	size_t slen = sizeof self;
	XT_RC(fi_getname(&x.ep->fid, self, &slen));
	n = (uint32_t)slen;
	xt_send_all(ssock, &n, sizeof n);
	xt_send_all(ssock, self, n);
	fi_addr_t peer = FI_ADDR_NOTAVAIL;
	const char *names[] = {sname};
	XT_CHECK(fi_av_insert(x.av, names, 1, &peer, 0, NULL) == 1, "insert of \"%s\"", sname);
	char back[320];
	size_t blen = sizeof back;
	XT_RC(fi_av_lookup(x.av, peer, back, &blen));
	XT_CHECK(blen == strlen(sname) + 1 && !strcmp(back, sname),
		 "fi_av_lookup gave \"%s\" for \"%s\"", back, sname);
	ping(&x, peer, 1);
	pong(&x, peer, 2);

	/* A network name of an FI_FORMAT_UNSPEC domain, printed by its AV, inserted as a string. */
	struct xt_ep u;
	xt_open_default(&u, 0);
	compact_names(&u);
	char text[320];
	size_t tlen = sizeof text;
	XT_CHECK(fi_av_straddr(u.av, u.name, text, &tlen) && tlen == strlen(text) + 1 &&
			 strstr(text, "&lower="),
		 "fi_av_straddr of a network name: \"%s\"", text);
	fi_addr_t ua = FI_ADDR_NOTAVAIL;
	const char *unames[] = {text};
	XT_CHECK(fi_av_insert(x.av, unames, 1, &ua, 0, NULL) == 1, "insert of \"%s\"", text);
	blen = sizeof back;
	XT_RC(fi_av_lookup(x.av, ua, back, &blen));
	XT_CHECK(!strcmp(back, text), "fi_av_lookup gave \"%s\" for \"%s\"", back, text);
	char in[8] = {0}, out[8] = "by text";
	XT_RC(fi_trecv(u.ep, in, sizeof in, NULL, FI_ADDR_UNSPEC, 9, 0, NULL));
	/* Both endpoints are ours: each progresses while the other waits (the network's hello). */
	ssize_t rc;
	while ((rc = fi_tsend(x.ep, out, sizeof out, NULL, ua, 9, NULL)) == -FI_EAGAIN)
		(void)fi_cq_read(u.rxcq, NULL, 0);
	XT_RC(rc);
	struct fi_cq_tagged_entry e;
	int sent = 0, got = 0;
	for (long i = 0; i < 100000000 && !(sent && got); i++) {
		sent += fi_cq_read(x.txcq, &e, 1) == 1;
		got += fi_cq_read(u.rxcq, &e, 1) == 1;
	}
	XT_CHECK(sent && got && !strcmp(in, out),
		 "the send through fi_av_straddr's string (sent %d, received %d)", sent, got);
	check_bad_strings(&x);
	by_address_alone(&x);
	xt_sync(ssock);
	xt_close(&u);
	xt_close(&x);
	fi_freeinfo(h);
	xt_reap(1, &spid);
	return 0;
}

int main(void)
{
	xt_init(120);
	g_port = 20000 + getpid() % 10000;
	const char *net = getenv("FI_EXANET_NETWORK");
	if (net && !strcmp(net, "every_peer")) {
		/* 16-byte names (sockaddrs, node/service) reach nothing here: the string form only
		 */
		int sock;
		pid_t pid;
		xt_spawn(1, net_pair, &sock, &pid);
		xt_reap(1, &pid);
		xt_pass("over the network: FI_ADDR_STR of network names round-trips (getname, "
			"getinfo, AV); 32-byte names and their 64-byte form name one endpoint; another host by "
			"address and port");
		return 0;
	}
	for (int i = 0; i < (int)(sizeof formats / sizeof formats[0]); i++) {
		/* libfabric is never initialized in this process: each format gets a fresh pair */
		g_index = i;
		int sock;
		pid_t pid;
		xt_spawn(1, pair, &sock, &pid);
		xt_reap(1, &pid);
		close(sock);
		char msg[128];
		snprintf(msg, sizeof msg, "%s: fi_getinfo(node, service), fi_getname, AV insert/lookup/straddr, messages",
			 formats[i].name);
		xt_pass(msg);
	}
	int sock;
	pid_t pid;
	xt_spawn(1, explains, &sock, &pid);
	xt_reap(1, &pid);
	xt_pass("fi_getinfo refusals say why at FI_LOG_LEVEL=info");
	xt_spawn(1, longer_names, &sock, &pid);
	xt_reap(1, &pid);
	xt_pass("64-byte names: length from the version, this host's reached, another host's refused at send");
	return 0;
}
