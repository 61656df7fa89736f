/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * exanet provider extensions for libfabric applications.
 *
 * Selecting the provider needs nothing from this header: set FI_PROVIDER=exanet (and
 * FI_PROVIDER_PATH when the module is not installed). The header names the provider and its
 * address format for applications that want to recognise exanet addresses.
 */
#ifndef FI_EXT_EXANET_H
#define FI_EXT_EXANET_H

#include <stddef.h>
#include <stdint.h>

#include <rdma/fi_ext_exanet_version.h> /* FI_EXANET_VERSION_MAJOR... (generated) */

#ifdef __cplusplus
extern "C" {
#endif

#define FI_EXANET_PROV_NAME "exanet"
#define FI_EXANET_FABRIC_NAME "exanet"
#define FI_EXANET_DOMAIN_NAME "exanet0"

/* An endpoint name as returned by fi_getname (addr_format FI_FORMAT_UNSPEC, 16 bytes). */
struct fi_exanet_addr {
	uint32_t magic;   /* FI_EXANET_ADDR_MAGIC */
	uint16_t node;    /* node id */
	uint16_t version; /* 1 */
	uint32_t pdid;    /* protection domain */
	uint32_t port;    /* mailbox on the node: below 65536, so that FI_SOCKADDR_IN(6) and
			     FI_ADDR_STR ("fi_exanet://HOST:PORT/PDID") can name it too */
};

#define FI_EXANET_ADDR_MAGIC 0x584e5445u

/* The longer name (version 2, 64 bytes: FI_NAME_MAX) of an endpoint that other hosts can
 * reach: the version 1 fields, then the host, the endpoint's incarnation and its network name.
 * fi_getname gives it only when the network backend is on (fi_exanet(7)). */
#define FI_EXANET_LOWER_NAME_BYTES 31
struct fi_exanet_addr_v2 {
	struct fi_exanet_addr v1; /* version 2 */
	uint64_t host;            /* the host's identity */
	uint64_t incarnation;     /* this opening of the endpoint */
	uint8_t lower_len;        /* bytes of lower_name in use */
	uint8_t lower_name[FI_EXANET_LOWER_NAME_BYTES]; /* the lower provider's endpoint name */
};

/* The same name in 32 bytes (version 3), which fi_getname gives instead of version 2 when the
 * lower provider names its endpoint by an IPv4 socket address (tcp) with nothing else set: the
 * port shrinks to its 16 bits, host and incarnation to their 48. fi_av_insert takes either form
 * of a name, and they name the same endpoint. Read the version at the offset it has in struct
 * fi_exanet_addr to know a name's length (16, 32 or 64 bytes). */
struct fi_exanet_addr_v3 {
	uint32_t magic;          /* FI_EXANET_ADDR_MAGIC */
	uint16_t node;
	uint16_t version;        /* 3 */
	uint32_t pdid;
	uint16_t port;
	uint16_t lower_port;     /* the lower sockaddr_in's sin_port (network byte order) */
	uint32_t lower_ipv4;     /* its sin_addr (network byte order) */
	uint8_t host[6];         /* host identity, little-endian */
	uint8_t incarnation[6];  /* incarnation, little-endian */
};

/*
 * Per-endpoint protocol counters. Open the ops on an endpoint with
 *     struct fi_exanet_counters_ops *ops;
 *     fi_open_ops(&ep->fid, FI_EXANET_COUNTERS_OPS, 0, (void **)&ops, NULL);
 * then ops->read(ep, &counters, sizeof counters) fills as many bytes as both sides know. New
 * counters are only ever appended. FI_EXANET_STATS=stderr (or a file name, appended to) prints
 * them when the endpoint closes, one "exanet-stats key=value ..." line per endpoint; the
 * exanet-stats tool in util/ tabulates those lines.
 */
#define FI_EXANET_COUNTERS_OPS "exanet_counters"

struct fi_exanet_counters {
	uint64_t eager_sent, eager_recv;   /* messages carried in one mailbox packet */
	uint64_t medium_sent, medium_recv; /* messages copied through the bounce ring */
	uint64_t rndv_sent, rndv_recv;     /* rendezvous announced by an RTS (sender-initiated,
	                                      or concurrent when an RTR crossed it) */
	uint64_t fast_recv;      /* messages that found their receive already posted */
	uint64_t unexpected_max; /* high-water mark of the unexpected queues */
	uint64_t mailbox_full;   /* control packets that met a full mailbox and were retried */
	uint64_t dead_peers;     /* peers found dead while transfers waited on them */
	uint64_t rma_writes, rma_inline_writes, rma_reads; /* RMA operations started here */
	uint64_t rma_read_requests_served; /* reads this endpoint answered for peers without CMA */
	uint64_t rndv_acked; /* rendezvous sends completed by the receiver's ack (read variant) */
	/* Receiver-initiated rendezvous (RTR: the receive was posted first and told the sender
	 * where its buffer is; the sender's DMA write is the whole transfer). */
	uint64_t ri_sent;        /* sends written straight into a receive buffer by an RTR */
	uint64_t ri_recv;        /* receives completed by such a write, with no further packet */
	uint64_t concurrent;     /* RTR and RTS crossed: the RTR served as the CTS */
	uint64_t rtr_sent;       /* RTRs sent when the receive was posted */
	uint64_t rtr_late;       /* RTRs sent when a suspension lifted */
	uint64_t rtr_stored;     /* RTRs that arrived before their send and waited for it */
	uint64_t rtr_dropped;    /* RTRs whose send went eager or medium (the packet serves it) */
	uint64_t rtr_stale;      /* RTRs answered with a NACK (the send log no longer reached) */
	uint64_t suspensions;    /* receives that could not send an RTR when posted */
	uint64_t parked;         /* packets held until an earlier write's notification was taken */
	uint64_t served_drops;   /* RTS packets dropped because an RTR already served the send */
	uint64_t rtr_cancels;    /* receive cancels that needed the handshake with the sender */
	/* What this endpoint refused from peers (the target's checks), by reason. Each is also
	 * logged at FI_LOG_WARN, at most once every 10 s per reason. */
	uint64_t drop_foreign_pdid; /* packets stamped with another protection domain */
	uint64_t drop_unknown;      /* packets of an unknown type or wire version */
	uint64_t drop_bad_field;    /* packets naming what is not theirs or not there: a bounce ring
	                               range, a send, receive, slot or chunk that is stale or forged */
	uint64_t drop_dma_refused;  /* DMA writes outside every receive buffer, read landing piece
	                               and registration armed for them (refused before or as they
	                               land; the initiator's operation fails with FI_EACCES) */
	uint64_t drop_notify_refused; /* DMA notifications for a slot not armed for them */
	uint64_t drop_rma_event;    /* RMA events or rma_done packets naming no live registration,
	                               a right it lacks, or more bytes than it holds */
	uint64_t psn_window_drops; /* message packets whose psn lay beyond the reorder window, and
	                              packets refused because their sender's parked queue was full */
	uint64_t rndv_timeouts;  /* probes sent for rendezvous receives whose data had not come for
	                            FI_EXANET_RNDV_TIMEOUT_MS (the sender is asked whether the
	                            send exists; a receive fails only if it does not) */
	/* Resource bounds (fi_exanet(7), RESOURCE MANAGEMENT). */
	uint64_t intake_held;    /* packets held at the unexpected-message bound until a receive
	                            made room (back-pressure, never loss) */
	uint64_t drop_backlog;      /* control packets (answers to a peer's requests) dropped
	                               because that peer left more than 2 x notify_slots + tx_size of
	                               them waiting in its full mailbox (it does not drain it), and
	                               RMA requests of a peer beyond notify_slots being answered */
	uint64_t rndv_deadlines;    /* rendezvous receives failed with FI_ETIMEDOUT at
	                               FI_EXANET_RNDV_DEADLINE_MS (opt-in; 0 by default) */
	/* Eager trains: messages of 37 B to FI_EXANET_EAGER_MAX carried in several consecutive
	 * mailbox packets (not counted in eager_sent and eager_recv). A train packet that is out
	 * of order, of another message or beyond the limit counts in drop_bad_field. */
	uint64_t train_sent, train_recv;
	/* Message payload bytes (send and tagged send, every protocol; not RMA): a send counts
	 * when its data has left (eager and medium at the post, rendezvous at its completion),
	 * a receive when it completes (the bytes delivered, after truncation). */
	uint64_t bytes_sent;
	uint64_t bytes_recv;
	/* Which path the endpoint's peers take (FI_EXANET_NETWORK): the peers it connected
	 * through this host's shared memory and over the network backend, and the bytes it
	 * handed to the network's lower provider (packets, bounce-ring data and DMA writes, every
	 * peer; 0 with the network off). */
	uint64_t peers_shared_memory;
	uint64_t peers_network;
	uint64_t network_bytes_sent;
	/* The messages it handed to the network's lower provider (DMA writes apart): with the
	 * message counters above, how many lower messages an exanet message took (one for an
	 * eager, train or medium message: its packets and ring bytes go together). */
	uint64_t network_messages_sent;
	/* The emulated DMA engine's writes (FI_EXANET_DMA_ENGINE; messages, RMA and read answers
	 * to peers of this host): landed by cross-memory attach, and staged through the target's
	 * segment. */
	uint64_t dma_writes_direct;
	uint64_t dma_writes_staged;
	/* Not a count: 1 if the network backend's lower completion queue has a wait fd, 0 if it
	 * has none or the network is off. fi_enable gives it one only where something may sleep
	 * on the endpoint (a CQ with a wait object, any counter, FI_PROGRESS_AUTO's thread): an
	 * fd costs the lower tcp provider work on every arrival (fi_exanet(7), NETWORK BACKEND). */
	uint64_t network_sleepable;
	/* RMA writes, reads and atomics aimed at a registration not known to be backed (registered
	 * without FI_MR_ALLOCATED over memory not all mapped, such as MPICH's whole-address-space
	 * window) that found an unmapped or protected page here: refused, and the initiator gets
	 * an FI_EACCES error completion (fi_exanet(7), RMA). */
	uint64_t rma_target_faults;
	/* Manual progress on a shared core (fi_exanet(7), PROGRESS; FI_EXANET_IDLE_YIELD): how
	 * often the application's polls, having found nothing many times in a row, gave the core
	 * away (sched_yield), and how many of those yields let another task run (they lasted 3 us
	 * or more). */
	uint64_t idle_yields;
	uint64_t idle_yields_shared;
};

struct fid_ep;
struct fi_exanet_counters_ops {
	size_t size; /* sizeof(struct fi_exanet_counters_ops) */
	int (*read)(struct fid_ep *ep, struct fi_exanet_counters *counters, size_t size);
};

/*
 * Protocol testing, not for applications: forces the packet orderings the rendezvous must
 * survive (fabtests/conformance/rendezvous_races.c).
 *     struct fi_exanet_testing_ops *t;
 *     fi_open_ops(&ep->fid, FI_EXANET_TESTING_OPS, 0, (void **)&t, NULL);
 *     t->hold_mailbox(ep, 1);   progress (and a send's look at the mailbox) take no packet;
 *                               DMA notifications still land and are taken
 *     t->hold_mailbox(ep, 0);   back to normal
 */
#define FI_EXANET_TESTING_OPS "exanet_testing"

struct fi_exanet_testing_ops {
	size_t size; /* sizeof(struct fi_exanet_testing_ops) */
	int (*hold_mailbox)(struct fid_ep *ep, int hold);
};

#ifdef __cplusplus
}
#endif

#endif /* FI_EXT_EXANET_H */
