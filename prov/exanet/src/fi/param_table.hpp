// SPDX-License-Identifier: BSD-2-Clause
// The one list of exanet's runtime parameters (FI_EXANET_*): name, type, default, bounds and
// text. Everything else is made from it: fi/params.cpp defines each with fi_param_define and
// holds every value read to its bounds (a value outside them is clamped, with a warning);
// util/exanet_params.cpp prints the list, fi_exanet(7)'s RUNTIME PARAMETERS section and the
// README's table, and ctest docs.params fails when those files and this table disagree
// (`cmake --build build --target update-docs` rewrites them).
//
// No libfabric here: the tool includes this header alone. fi/params.cpp checks at compile time
// that every default below is proto::config's default and that each id is bound to a field.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace exanet::fi {

enum class param_type : std::uint8_t { size, integer, boolean, string };

enum class param_id : std::uint8_t {
  eager_max,
  medium_max,
  inject_size,
  mailbox_slots,
  bounce_ring_bytes,
  bounce_peers,
  notify_slots,
  rma_inline_max,
  mr_keys,
  event_rings,
  tx_size,
  rx_size,
  unexpected_max,
  unexpected_bytes,
  stored_rtr_max,
  iov_limit,
  pdid,
  node,
  use_cma,
  dma_engine,
  copy,
  dead_peer_check_ms,
  rndv_timeout_ms,
  rndv_deadline_ms,
  stats,
  profile,
  live_stats,
  proto_info,
  progress,
  idle_yield,
  protocol,
  network,
  network_provider,
  network_node,
  network_lost_after_ms,
  network_ring_bytes,
  link_model,
  link_hop_ns,
  link_intra_mbps,
  link_inter_mbps,
  link_inject_ns,
  link_yield,
  link_torus,
  link_placement,
  link_position,
};

struct param_spec {
  param_id id;
  std::string_view name;          // lower case; the variable is FI_EXANET_<NAME>
  param_type type;
  std::int64_t default_value;     // size, integer, boolean: the value used when unset
  std::string_view default_text;  // the default as documented when it is not default_value
                                  // (derived, or a string's default)
  std::int64_t min, max;          // size, integer: accepted values, inclusive
  std::string_view choices;       // string: the accepted values, '|' between them; empty: any
  std::string_view help;          // plain text: fi_info -e, the man page, the README
  std::string_view manual;        // more for fi_exanet(7) only, in roff; may be empty
};

inline constexpr std::int64_t int_max = 2147483647;

// Bounds say what the provider can honour, not what is wise: mailbox_slots is the device's own
// limit (dev/emu/layout.hpp, geometry_bounds), notify_slots its one bell word, mr_keys the 16-bit
// key slot of an RMA event, event_rings one doorbell word, iov_limit proto::max_iov, tx_size and
// rx_size attr.hpp's max_queue_size; fi/params.cpp asserts the ones it can see.
inline constexpr param_spec g_params[] = {
    {param_id::eager_max, "eager_max", param_type::size, 84, "", 0, 276, "",
     "Largest message sent eager, copied into mailbox packets: up to 36 bytes in its envelope "
     "packet, above that as a train of up to 5 more packets ahead of it (48 bytes each). At "
     "most 276 and FI_EXANET_MEDIUM_MAX; 36 or less: no trains.",
     "84 (one packet ahead of the envelope: 64-byte messages) is measured against the bounce "
     "ring under Open MPI (BENCHMARKS.md): every further packet of a train costs both ends more "
     "instructions than the ring's copy of its 48 bytes, and a mailbox slot."},
    {param_id::medium_max, "medium_max", param_type::size, 16384, "", 0, std::int64_t{1} << 29, "",
     "Largest message sent through the per-sender bounce ring (bytes); larger ones use the "
     "rendezvous. At most half a bounce ring.",
     "16384: with the ring's lines taken ahead by the sender, a 12\\-16 KiB message is 2.2 "
     "times faster through the ring than by rendezvous when the two cores share a cache, and "
     "still faster in latency (but 25% slower streaming) when they do not (BENCHMARKS.md).\n"
     "Set it to 36 for the ExaNeST thesis's two\\-protocol baseline (see "
     "\\fBFI_EXANET_PROTOCOL\\fR)."},
    {param_id::inject_size, "inject_size", param_type::size, 4096, "", 0, std::int64_t{1} << 29,
     "", "Largest fi_inject payload, copied at post time; at most FI_EXANET_MEDIUM_MAX.", ""},
    {param_id::mailbox_slots, "mailbox_slots", param_type::size, 1024, "", 16,
     std::int64_t{1} << 22, "",
     "64-byte packets per endpoint mailbox, rounded up to a power of two.", ""},
    {param_id::bounce_ring_bytes, "bounce_ring_bytes", param_type::size, 262144, "", 4096,
     std::int64_t{1} << 30, "",
     "Bytes of each per-sender bounce ring at a receiver, rounded up to a power of two.", ""},
    {param_id::bounce_peers, "bounce_peers", param_type::size, 64, "", 1, 65536, "",
     "Senders that can hold a bounce ring at one receiver; further senders use the rendezvous "
     "for medium messages.",
     "With \\fBFI_EXANET_BOUNCE_RING_BYTES\\fR it makes most of an endpoint's footprint (see "
     "FOOTPRINT)."},
    {param_id::notify_slots, "notify_slots", param_type::size, 1024, "", 16, 4096, "",
     "DMA notification slots per endpoint: rendezvous receives in progress at once.", ""},
    {param_id::rma_inline_max, "rma_inline_max", param_type::size, 65536, "", 0,
     std::int64_t{1} << 29, "",
     "Largest RMA write copied through the per-sender bounce ring and landed by the target's "
     "progress; larger ones, and FI_DELIVERY_COMPLETE writes, are DMA writes. At most half a "
     "bounce ring; 0 disables.",
     ""},
    {param_id::mr_keys, "mr_keys", param_type::size, 2048, "", 16, 65536, "",
     "Memory registrations one endpoint can expose to RMA, rounded up to a power of two.", ""},
    {param_id::event_rings, "event_rings", param_type::size, 64, "", 0, 64, "",
     "Initiators that can hold a ring for RMA events (remote CQ data, FI_RMA_EVENT counts) at "
     "one target; further initiators, and all with 0, send them as mailbox packets.",
     ""},
    {param_id::tx_size, "tx_size", param_type::size, 1024, "", 1, 65536, "",
     "Transmit queue size reported to applications (tx_attr->size).",
     "The sizes an endpoint is granted (\\fItx_attr\\->size\\fR, \\fIrx_attr\\->size\\fR) also "
     "size the pools peers' packets draw from (RESOURCE MANAGEMENT)."},
    {param_id::rx_size, "rx_size", param_type::size, 1024, "", 1, 65536, "",
     "Receive queue size reported to applications (rx_attr->size).", ""},
    {param_id::unexpected_max, "unexpected_max", param_type::size, 0, "16 x rx_attr->size", 0,
     std::int64_t{1} << 24, "",
     "Unexpected messages one endpoint holds at once; at the bound it takes no more message "
     "packets until the application receives. 0: the default.",
     ""},
    {param_id::unexpected_bytes, "unexpected_bytes", param_type::size, 0,
     "rx_attr->size x FI_EXANET_MEDIUM_MAX, at most 64 MiB", 0, std::int64_t{1} << 34, "",
     "Bytes of unexpected medium payload (of messages above 276 bytes) one endpoint holds at "
     "once; at the bound, as "
     "FI_EXANET_UNEXPECTED_MAX. 0: the default.",
     ""},
    {param_id::stored_rtr_max, "stored_rtr_max", param_type::size, 0, "4 x tx_attr->size", 0,
     std::int64_t{1} << 24, "",
     "RTRs one endpoint holds for sends not posted yet; beyond it an RTR is refused and its "
     "receive goes sender-initiated. 0: the default.",
     ""},
    {param_id::iov_limit, "iov_limit", param_type::size, 8, "", 1, 8, "",
     "Iovecs per operation and remote ranges per RMA operation (iov_limit and rma_iov_limit).",
     "Upstream fabtests 1.17's \\fBfi_ubertest\\fR needs 4 or 5: its weighted iovec layouts of "
     "6 entries add up to a byte more or less than the message they describe."},
    {param_id::pdid, "pdid", param_type::integer, 1,
     "derived from the launch (Open MPI, PMIx, Slurm, Intel MPI; shared with spawned jobs), "
     "else 1",
     1, int_max, "", "Protection domain id; only endpoints of equal PDID can talk.",
     "See PROTECTION."},
    {param_id::node, "node", param_type::integer, 0, "", 0, 65535, "",
     "Node id of this host.", ""},
    {param_id::use_cma, "use_cma", param_type::boolean, 0, "", 0, 1, "",
     "The older form of FI_EXANET_DMA_ENGINE, which it overrides when set: 1 is cma, 0 is "
     "staged. Unset: FI_EXANET_DMA_ENGINE decides.",
     ""},
    {param_id::dma_engine, "dma_engine", param_type::string, 0, "auto", 0, 0, "auto|staged|cma",
     "How the emulated DMA engine moves a write. staged: pipelined through the target's shared "
     "staging area and copied out by the target when it progresses; RMA reads are answered by "
     "the target. cma: process_vm_writev, and reads by process_vm_readv, which land without the "
     "target's progress (but a read of 2 KiB or more to 1 to 63 bytes ahead of its source modulo "
     "a page is answered by the target, through the staging area). auto: each write the way "
     "measured cheaper now for its size; reads as staged.",
     "Which engine is faster depends on how dear a copy between two cores is, and that changes "
     "with the machine's state: on one VM staging was 3 to 6 times faster than cross\\-memory "
     "attach for large transfers; on the same VM a day later, with core\\-to\\-core copies 3.5 "
     "times dearer, cross\\-memory attach was 1.5 times faster from 64 KiB and staging still "
     "won at 16 KiB (BENCHMARKS.md).\n"
     "\\fIauto\\fR times both engines on the endpoint's own writes, per size class (powers of "
     "two from 4 KiB) and per placement (a destination 1 to 63 bytes ahead of its source modulo "
     "a page, where the kernel's copy ran 5 to 20 times slower on the machine of BENCHMARKS.md "
     "and the staged engine, which places its own copies, did not; or any other): a cross\\-memory attach write from its post until the system call "
     "returns; a staged write that found the staging area free, from its first piece until "
     "the target has copied its last piece out, or, for a write of a stream (one that starts "
     "soon after the last ended), until its last piece went in; an engine's cost is the least "
     "of its last four samples. After two samples of each, every write takes the cheaper; one write in 16 of each class (one in 64 when the other was found 1.5 "
     "times dearer) takes the other, to notice a change. The counters \\fIdma_writes_direct\\fR "
     "and \\fIdma_writes_staged\\fR show the split. "
     "Cross\\-memory attach is also useful when a target computes for long without calling "
     "into libfabric; \\fIauto\\fR sees that as a slow staged write. Under the link model "
     "(\\fBFI_EXANET_LINK_MODEL\\fR) \\fIauto\\fR stages every write: the model, not "
     "the copy, times them there.\n"
     "exanet falls back to staging by itself, and logs it once, when the kernel refuses "
     "cross\\-memory attach (ptrace restrictions or seccomp)."},
    {param_id::copy, "copy", param_type::string, 0, "auto", 0, 0, "auto|libc|loop",
     "How copies of 2 KiB and more between a user buffer and exanet's shared areas are made "
     "when the destination lies 1 to 63 bytes ahead of the source modulo a page, or the two "
     "disagree in their position within a 64-byte cache line: auto (measured once per process, "
     "about a millisecond), libc (always memcpy) or loop (always exanet's loops).",
     "\\fIauto\\fR picks \\fBmemcpy\\fR(3) for each of the two cases unless it is more "
     "than 1.25 times slower than exanet's loop for it: a backward loop for a destination just "
     "ahead of its source (whose loads never alias the stores just made; memcpy ran 15 to 30 "
     "times slower there on the machine of BENCHMARKS.md), a forward loop of unaligned loads and "
     "aligned AVX2 or SSE2 stores for misaligned buffers (see BUFFER PLACEMENT).\n"
     "The choice is logged at \\fBFI_LOG_LEVEL\\fR=info; another value is logged as a warning "
     "and \\fIauto\\fR is used."},
    {param_id::dead_peer_check_ms, "dead_peer_check_ms", param_type::integer, 200, "", 1,
     3600000, "",
     "How often (milliseconds) progress checks whether peers are alive while a transfer or a "
     "posted receive waits on them.",
     "See PEER FAILURE."},
    {param_id::rndv_timeout_ms, "rndv_timeout_ms", param_type::integer, 30000, "", 0, int_max,
     "",
     "A receive matched to a rendezvous whose data has not come for this long (milliseconds) "
     "asks its sender whether the send exists, and fails with FI_EIO if it does not. 0: never "
     "ask.",
     "See PEER FAILURE."},
    {param_id::rndv_deadline_ms, "rndv_deadline_ms", param_type::integer, 0, "", 0, int_max, "",
     "Opt-in hard limit (milliseconds): a receive matched to a rendezvous fails with "
     "FI_ETIMEDOUT when no data came for this long, even if its sender has the send. 0: none.",
     "See PEER FAILURE."},
    {param_id::stats, "stats", param_type::string, 0, "off", 0, 0, "",
     "Print each endpoint's protocol counters when it closes: stderr (or 1), or a file name to "
     "append one line per endpoint to; 0 or empty: off.",
     "See COUNTERS."},
    {param_id::profile, "profile", param_type::string, 0, "off", 0, 0, "",
     "Stamp each message's phases (post, link, match, copy, completion) and report them per "
     "protocol and size class when the endpoint closes: stderr (or 1; the sums), or a file name "
     "to append the sums and the stamps to; 0 or empty: off. Off, it costs one test per phase.",
     "An \\fBexanet\\-profile\\fR line per protocol and size class holds, per phase (post, "
     "issued, arrival, match, copy, done), a count and the sum of its CLOCK_MONOTONIC stamps in "
     "ns, and the endpoint's own mean parts; in a file, \\fBexanet\\-profile\\-stamps\\fR lines "
     "follow with the endpoint's first 65536 stamps. The link part needs both ends' stamps: "
     "\\fBfabtests/bench/thesis/model.py profile\\fR \\fIFILE\\fR prints each part of a "
     "message (the medians over the messages of a ping-pong). A profiled endpoint allocates "
     "about 1 MiB when it opens."},
    {param_id::live_stats, "live_stats", param_type::boolean, 1, "", 0, 1, "",
     "1: every endpoint keeps a copy of its counters in /dev/shm/exanet-stats.<uid>.<pid>.<port> "
     "(4 KiB) for exanet-stats top, --json and --csv while the job runs; 0: no file.",
     "See COUNTERS and \\fBexanet\\-stats\\fR(1)."},
    {param_id::proto_info, "proto_info", param_type::boolean, 0, "", 0, 1, "",
     "1: every endpoint prints, when it opens, which protocol each operation takes by size and "
     "situation, to standard error whatever FI_LOG_LEVEL says.",
     "See PROTOCOL TABLE."},
    {param_id::progress, "progress", param_type::string, 0, "manual", 0, 0, "manual|auto",
     "Progress fi_getinfo answers where the hints leave control_progress or data_progress "
     "unset: manual (the application's calls progress), or auto (a progress thread per domain "
     "serves peers while the application computes). Hints that name one are always honoured.",
     "See PROGRESS."},
    {param_id::idle_yield, "idle_yield", param_type::integer, 64, "", 0, 65536, "",
     "Under manual progress, polls in a row that find nothing (fi_cq_read, fi_cntr_read and the "
     "like) before exanet gives the core away once (sched_yield), so that a process sharing its "
     "core with the peer it waits for lets that peer run; 0: never. 32 yields in a row that "
     "return at once (no other task wanted the core) double the count, up to 65536 and as long "
     "as yields stay under 125 us apart (yields over 500 us apart halve it); one that lets "
     "another task run sets it back.",
     "See PROGRESS."},
    {param_id::protocol, "protocol", param_type::string, 0, "write", 0, 0,
     "write|read|optimistic",
     "Rendezvous family: write (exanet's write-based rendezvous), read (the thesis baseline: "
     "sender-initiated, acknowledged) or optimistic (every message above FI_EXANET_MEDIUM_MAX "
     "waits for its receive's RTR). Another name makes fi_getinfo fail with FI_ENODATA.",
     "The variants reproduce the comparisons of the ExaNeST write\\-based MPI thesis on real "
     "applications.\n"
     "\\fIread\\fR: the clear\\-to\\-send stands for the emulated read the receiver asks of the "
     "sender's engine, and the receiver acknowledges every rendezvous, so the sender completes "
     "one packet later (the \\fIrndv_acked\\fR counter counts those).\n"
     "Eager and medium messages are the same in every family.\n"
     "\\fIoptimistic\\fR is the thesis's speculative variant: no message above "
     "\\fBFI_EXANET_MEDIUM_MAX\\fR is ever announced by the sender.\n"
     "Such a send waits at the sender until the receive's ready\\-to\\-receive (RTR) arrives, "
     "and a receive whose buffer is larger than that limit sends its RTR when posted and takes "
     "no place in the posted\\-receive queue; the sender pairs sends and RTRs in their posting "
     "orders (first send of a matching tag, first RTR matching the send's tag), so MPI's "
     "ordering holds per size class, with ignore bits allowed.\n"
     "There are no tickets, no sequence numbers on long sends and no suspensions.\n"
     "What the variant assumes, and the application must guarantee:\n"
     ".RS\n"
     ".IP \\(bu 2\n"
     "Every receive names its source.\n"
     "A receive from \\fBFI_ADDR_UNSPEC\\fR (or on an endpoint without \\fBFI_DIRECTED_RECV\\fR) "
     "fails with \\fB\\-FI_EOPNOTSUPP\\fR, and the log says why once per endpoint.\n"
     ".IP \\(bu 2\n"
     "A message and the receive that takes it are on the same side of "
     "\\fBFI_EXANET_MEDIUM_MAX\\fR: a message above it is only ever taken by a receive whose "
     "buffer is above it too, and one at or below it only by a receive at or below it (all "
     "processes use the same limit) (for MPI: the receive count matches the message, as in the "
     "thesis's evaluation).\n"
     "A program that breaks this waits forever; exanet cannot tell such a wait from a late "
     "send.\n"
     ".IP \\(bu 2\n"
     "No probing: \\fBFI_PEEK\\fR and \\fBFI_CLAIM\\fR fail with \\fB\\-FI_EOPNOTSUPP\\fR (a "
     "long message is not at the receiver before its receive asks for it).\n"
     "A receive above the limit in more than one buffer works: its RTR names one contiguous "
     "buffer of the provider's, which completion scatters into the iovecs (one extra copy).\n"
     ".RE\n"
     ".IP\n"
     "Truncation, \\fBfi_cancel\\fR (a handshake withdraws the RTR), remote CQ data, dead peers "
     "and \\fBFI_MULTI_RECV\\fR (a multi\\-receive buffer takes short messages) work as in the "
     "write family.\n"
     "Under Open MPI this suits programs like NetPIPE or mpiGraph; \\fBMPI_ANY_SOURCE\\fR or "
     "\\fBMPI_Iprobe\\fR make Open MPI abort on the refused call.\n"
     "Every process of a job must use the same family.\n"
     "An optimistic receiver's RTR sent to a process of another family is refused, and the "
     "receive fails with \\fBFI_EIO\\fR; the other way round the receive waits, and the "
     "sender's log says why."},
    {param_id::network, "network", param_type::string, 0, "off", 0, 0,
     "off|other_hosts|every_peer",
     "Which peers the network backend reaches (work in progress, issue 13): off (this host's "
     "peers only, through shared memory), other_hosts (peers of other hosts over "
     "FI_EXANET_NETWORK_PROVIDER, this host's through shared memory) or every_peer (all over the "
     "network, to test or measure that path on one host). Every process of a job must choose "
     "the same.",
     "With the network on, \\fBfi_getname\\fR gives network names: 32 bytes over tcp on IPv4 "
     "(version 3), else 64 (version 2; see \\fBAddressing\\fR). If the lower provider cannot "
     "be opened, the endpoint logs why and reaches the peers of its host only."},
    {param_id::network_provider, "network_provider", param_type::string, 0, "tcp", 0, 0, "",
     "The libfabric provider that carries the network backend (its fi_info prov_name: tcp, "
     "which libfabric layers under ofi_rxm, or net); never exanet itself.",
     "It must offer RDM endpoints with messages, multi\\-receive, RMA writes and send\\-after\\-write "
     "order, and take the keys exanet chooses without local registrations: tcp and net do. "
     "Providers that choose their own keys or want local buffers registered (FI_MR_PROV_KEY, "
     "FI_MR_LOCAL: verbs, efa, psm3, cxi) are not supported yet; the endpoint then logs why "
     "and reaches the peers of its host only (OTHER HOSTS). ofi_rxm's FI_OFI_RXM_BUFFER_SIZE "
     "(and over tcp FI_OFI_RXM_EAGER_LIMIT) sets the longest message exanet hands it; where the "
     "process sets none, exanet sets 34816, and FI_OFI_RXM_MSG_RX_SIZE 512, when it loads "
     "(OTHER HOSTS). net, "
     "libfabric 1.17's RDM provider over TCP without ofi_rxm, takes 64 KiB messages whole; its "
     "CQ wait fd misbehaves, and blocking waits over it nap (OTHER HOSTS)."},
    {param_id::network_node, "network_node", param_type::string, 0, "", 0, 0, "",
     "The local address the network backend binds (fi_getinfo's node with FI_SOURCE); empty: "
     "the lower provider's first.",
     ""},
    {param_id::network_lost_after_ms, "network_lost_after_ms", param_type::integer, 30000, "",
     1000, 86400000, "",
     "A peer on the network silent this long, with a ping unanswered, counts as lost (its "
     "operations fail). It must exceed the longest time a process computes without calling "
     "libfabric.",
     ""},
    {param_id::network_ring_bytes, "network_ring_bytes", param_type::size, 524288, "", 4096,
     std::int64_t{1} << 30, "",
     "Bytes of each per-sender ring at a receiver for peers over the network, rounded up to a "
     "power of two: the medium bytes a sender may have unconsumed at one receiver before further "
     "medium messages take the rendezvous. Processes may differ: a sender's hello announces its "
     "ring, and each receiver sizes that sender's ring by it.",
     "Each is allocated when a peer's first medium message comes (at the sender, a mirror the "
     "bytes leave from), in process memory: 1 MiB per peer medium messages go both ways with, "
     "at the default. The default is twice the shared-memory ring's: windows of 64 messages of "
     "8 and 16\\ KiB streamed 1.10-1.20 times as fast as with 256\\ KiB (BENCHMARKS.md)."},
    // The link and topology model of the emulated device (dev/link_model.hpp; issue 16).
    {param_id::link_model, "link_model", param_type::boolean, 0, "", 0, 1, "",
     "1: the emulated device holds every packet, DMA write and notification back until its "
     "arrival time on a modelled ExaNeST network (per-hop latency, link bandwidths, a torus of "
     "QFDBs); 0: as fast as shared memory.",
     "See LINK MODEL."},
    {param_id::link_hop_ns, "link_hop_ns", param_type::integer, 500, "", 0, 1000000000, "",
     "Link model: latency of one hop (nanoseconds).", ""},
    {param_id::link_intra_mbps, "link_intra_mbps", param_type::integer, 16000, "", 1, 100000000,
     "", "Link model: bandwidth of the links between the FPGAs of a QFDB (MB/s, 1e6 B/s).", ""},
    {param_id::link_inter_mbps, "link_inter_mbps", param_type::integer, 10000, "", 1, 100000000,
     "", "Link model: bandwidth of the torus links between QFDBs (MB/s).", ""},
    {param_id::link_inject_ns, "link_inject_ns", param_type::integer, 0, "", 0, 1000000000, "",
     "Link model: overhead of injecting one packet or DMA write (nanoseconds).", ""},
    {param_id::link_yield, "link_yield", param_type::boolean, 0, "", 0, 1, "",
     "Link model, 1: a process that polls and finds nothing due gives its core away "
     "(sched_yield) every 64 such polls, so that processes sharing cores wait for the modelled "
     "network rather than for the scheduler's tick; 0: it polls without pause.",
     "See LINK MODEL."},
    {param_id::link_torus, "link_torus", param_type::string, 0, "4x4x2", 0, 0, "",
     "Link model: QFDBs per dimension of the 3D torus, XxYxZ (each 1 to 255).", ""},
    {param_id::link_placement, "link_placement", param_type::string, 0, "rank", 0, 0, "",
     "Link model: where processes sit. rank: in the order of their rank from the job launcher "
     "(the port without one), four per QFDB; port: in the order of their endpoint's port; "
     "anything else: a placement file.",
     "See LINK MODEL."},
    {param_id::link_position, "link_position", param_type::string, 0, "none", 0, 0, "",
     "Link model: this process's place, X,Y,Z,FPGA (QFDB coordinates and FPGA 0 to 3); "
     "overrides FI_EXANET_LINK_PLACEMENT.",
     ""},
};

inline constexpr std::size_t param_count = std::size(g_params);

/// The table's row of a parameter (rows are in param_id order: checked below).
constexpr const param_spec& param(param_id id) noexcept {
  return g_params[static_cast<std::size_t>(id)];
}

constexpr bool params_in_id_order() noexcept {
  for (std::size_t i = 0; i < param_count; ++i)
    if (static_cast<std::size_t>(g_params[i].id) != i) return false;
  return param_count == static_cast<std::size_t>(param_id::link_position) + 1;
}
static_assert(params_in_id_order(), "g_params lists every param_id once, in order");

constexpr bool params_defaults_in_bounds() noexcept {
  for (const param_spec& p : g_params)
    if ((p.type == param_type::size || p.type == param_type::integer) &&
        (p.min > p.max || p.default_value < p.min || p.default_value > p.max))
      return false;
  return true;
}
static_assert(params_defaults_in_bounds(), "every numeric default lies within its bounds");

/// "size", "integer"...: as fi_exanet(7) and the README name the type.
constexpr std::string_view param_type_name(param_type t) noexcept {
  switch (t) {
    case param_type::size: return "size";
    case param_type::integer: return "integer";
    case param_type::boolean: return "boolean";
    case param_type::string: return "string";
  }
  return "?";
}

/// "default 8192; 0 to 536870912", "default auto; one of auto, libc, loop": what follows a
/// parameter's help in fi_info -e, the man page and the README, made from its row alone.
inline std::string param_bounds_text(const param_spec& p) {
  std::string s = "default ";
  s += p.default_text.empty() ? std::to_string(p.default_value) : std::string(p.default_text);
  switch (p.type) {
    case param_type::size:
    case param_type::integer:
      s += "; " + std::to_string(p.min) + " to " + std::to_string(p.max);
      break;
    case param_type::boolean: s += "; 0 or 1"; break;
    case param_type::string:
      if (!p.choices.empty()) {
        s += "; one of ";
        for (char c : p.choices) s += c == '|' ? std::string(", ") : std::string(1, c);
      }
      break;
  }
  return s;
}

/// FI_EXANET_MEDIUM_MAX for medium_max.
inline std::string param_variable(const param_spec& p) {
  std::string s = "FI_EXANET_";
  for (char c : p.name) s += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  return s;
}

}  // namespace exanet::fi
