// SPDX-License-Identifier: BSD-2-Clause
// One endpoint's protocol engine: requests, matching, the device, and the progress loop. It is
// one independent context (DESIGN.md §6): its own queues, pools and device; the fi/ layer wraps
// it with the lock the threading level needs. Protocol code is split by packet family:
// eager.cpp (env_data), medium.cpp (bounce ring), rndv_rts.cpp (sender-initiated: RTS/CTS/DMA
// write), rndv_rtr.cpp (receiver-initiated: RTR/DMA write), psn_order.cpp (per-peer sequence
// numbers that keep both rendezvous exact), and progress.cpp owns the order of work.
#pragma once
#include <sys/uio.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext_exanet.h>

#include "core/buffer_cache.hpp"
#include "core/intrusive_list.hpp"
#include "core/iov.hpp"
#include "core/pool.hpp"
#include "core/status.hpp"
#include "dev/backend.hpp"
#include "match/matcher.hpp"
#include "proto/completion.hpp"
#include "proto/config.hpp"
#include "proto/profile.hpp"
#include "proto/protocol_select.hpp"
#include "proto/stored_rtrs.hpp"
#include "proto/wire.hpp"

namespace exanet::proto {

inline constexpr std::size_t max_iov = 8;
/// Times an RMA write checks its ranges again when the owner closed a registration under it
/// (dev/net: core::status::stale); then it fails with FI_EACCES. Each recheck asks the owner.
inline constexpr std::uint8_t max_rechecks = 4;
inline constexpr std::size_t atomics_max_bytes = 4096;  // atomics::max_bytes (atomic_ops.hpp)
inline constexpr std::uint64_t unknown_source = ~0ull;  // FI_ADDR_NOTAVAIL

enum class queue_kind : std::uint8_t { msg = 0, tagged = 1 };

/// What fi/ hands down for a send (already validated there).
struct send_args {
  std::span<const iovec> iov;
  std::uint64_t tag = 0;
  std::uint64_t cq_data = 0;
  bool has_cq_data = false;
  dev::peer_id peer = dev::no_peer;
  void* context = nullptr;
  bool inject = false;       // the buffer is the caller's again at return: copy now
  bool completion = true;    // write a CQ entry on success
  bool delivery_complete = false;  // complete only once the data is in the receive buffer
  queue_kind kind = queue_kind::tagged;
};

/// How a send of one buffer (endpoint::send_one) completes: an inject (no completion, the buffer
/// is the caller's again at return), or an ordinary send with its context and whether a
/// successful completion is written (FI_SELECTIVE_COMPLETION).
struct one_send {
  void* context = nullptr;
  bool inject = true;
  bool completion = false;
};

struct recv_args {
  std::span<const iovec> iov;
  std::uint64_t tag = 0;
  std::uint64_t ignore = 0;
  dev::peer_id peer = dev::no_peer;  // no_peer: any source
  void* context = nullptr;
  bool completion = true;
  bool multi_recv = false;  // FI_MULTI_RECV (FI_MSG only; one buffer)
  queue_kind kind = queue_kind::tagged;
};

/// One remote range of an RMA operation, as the application names it (fi_rma_iov).
struct remote_range {
  std::uint64_t addr = 0, len = 0, key = 0;
};

/// What fi/ hands down for fi_write* / fi_read* (already validated there).
struct rma_args {
  std::span<const iovec> iov;  // local buffers: the source of a write, the result of a read
  std::span<const remote_range> remote;
  dev::peer_id peer = dev::no_peer;
  void* context = nullptr;
  std::uint64_t cq_data = 0;
  bool has_cq_data = false;  // writes only: a completion with the data at the target
  bool read = false;
  bool inject = false;       // the buffer is the caller's again at return
  bool completion = true;
  bool delivery_complete = false;  // complete only once the data is visible at the target
};

/// An RMA operation in flight at its initiator, or a read this endpoint answers for a peer.
struct rma_request {
  enum class role : std::uint8_t { write, read, read_response };
  // check: a backend that asks the target about a key (dev/net) has not had every answer yet.
  enum class stage : std::uint8_t { check, data, events, wait_reply };
  core::list_hook hook;  // rma_active_
  role what = role::write;
  stage at = stage::data;
  void* context = nullptr;
  dev::peer_id peer = dev::no_peer;
  std::array<iovec, max_iov> iov{};
  std::size_t iov_count = 0;
  std::array<remote_range, max_iov> remote{};
  std::array<dev::rma_target, max_iov> target{};
  std::size_t remote_count = 0;
  std::size_t total = 0;
  std::size_t seg = 0;         // current remote range
  std::size_t seg_offset = 0;  // local byte offset where that range starts
  std::size_t seg_done = 0;    // read by request: bytes of the range already landed
  std::size_t checked = 0;     // stage check: ranges the engine's protection check passed
  std::uint8_t rechecks = 0;   // times a range's check went stale under a write (rma_write_data)
  dev::dma_state dma{};
  bool staged_any = false;  // a write of this request had not landed when dma_post returned
  bool report_delivered = false;  // its rma_done went with the data (dma_write::deliver_if_landed)
  bool may_fault = false;   // a range is in a grant not known to be backed (key_grant::may_fault)
  // Reads: ranges [0, direct_ranges) are read by the engine (rma/read-direct), the others by
  // request (rma/read-request). Chosen once, as the ranges pass the check (read_direct: the peer
  // and the placement); lowered to the current range only when the kernel refuses CMA midway.
  // The data, the events and the completion all follow it, never the peer's state of the moment.
  std::uint8_t direct_ranges = 0;
  static_assert(max_iov <= 255, "direct_ranges counts ranges in a byte");
  std::uint64_t cq_data = 0;
  bool has_cq_data = false, completion = true, delivery_complete = false;
  std::byte* owned = nullptr;  // inject that could not finish at post: the copied payload
  std::uint32_t reply_slot = no_slot, reply_gen = 0;  // a reply this request waits for
  // read_response: where the data goes at the asking peer, and what to report.
  std::uint64_t reply_addr = 0;
  std::int64_t reply_status = 0;
  static constexpr std::uint32_t no_slot = ~0u;
};

/// What fi/ hands down for fi_atomic*, fi_fetch_atomic* and fi_compare_atomic* (validated there:
/// a valid op and datatype, counts that agree and fit atomics::max_count).
struct atomic_args {
  std::span<const iovec> operand;  // elements as iovecs (bytes); empty for FI_ATOMIC_READ
  std::span<const iovec> compare;  // compare family only
  std::span<const iovec> result;   // fetch and compare families: the initial values land here
  std::span<const remote_range> remote;  // len in elements
  int op = 0, datatype = 0;
  bool fetch = false;               // fetch or compare family: results and FI_READ accounting
  dev::peer_id peer = dev::no_peer;
  void* context = nullptr;
  std::uint64_t cq_data = 0;
  bool has_cq_data = false;
  bool completion = true;
};

/// An atomic operation in flight at its initiator (one request packet per remote range, sent in
/// order, each answered), or the answer this endpoint owes a peer for one it performed.
struct atomic_request {
  atomic_request() noexcept {}  // data stays uninitialized: acquire() must not clear 4 KiB
  enum class role : std::uint8_t { initiator, response };
  core::list_hook hook;  // atomic_active_
  role what = role::initiator;
  int op = 0, datatype = 0;
  bool fetch = false;
  bool has_cq_data = false, completion = true;
  void* context = nullptr;
  dev::peer_id peer = dev::no_peer;
  std::uint64_t cq_data = 0;
  std::array<remote_range, max_iov> remote{};  // len in elements
  std::size_t remote_count = 0;
  std::size_t count = 0;     // elements in all
  std::size_t sent = 0;      // ranges whose request packet went
  std::size_t train_sent = 0;  // operand bytes of range `sent` gone as atomic_operands packets
  bool by_train = false;       // range `sent` goes by atomic_operands (its ring could not take it)
  std::size_t answered = 0;  // ranges whose reply landed
  std::array<std::uint32_t, max_iov> slot{}, gen{};  // each range's reply slot
  std::array<iovec, max_iov> result{};
  std::size_t result_count = 0;
  int err = 0;               // the first failure a reply reported
  // response: the peer's window and slot, and what to tell it
  std::uint64_t reply_addr = 0;
  std::uint32_t reply_slot = 0, reply_gen = 0;
  std::size_t reply_bytes = 0;
  std::int64_t reply_status = 0;
  dev::dma_state dma{};
  // initiator: the operand elements, then the compare elements, copied at post (the caller's
  // buffers are free at return); each range's initial values land over its own operands, which
  // left with its packet. response: the initial values going back.
  alignas(16) std::array<std::byte, atomics_max_bytes> data;
};

struct send_request {
  core::list_hook hook;  // waiting for CTS, or in the DMA backlog
  void* context = nullptr;
  std::array<iovec, max_iov> iov{};
  std::size_t iov_count = 0;
  std::size_t len = 0;
  std::uint64_t tag = 0;
  std::uint64_t cq_data = 0;
  bool has_cq_data = false;
  wire::psn_t psn = 0;
  bool cts_seen = false;  // a CTS or an RTR named it: no RTR can serve it any more
  bool awaiting_rtr = false;  // optimistic: in wait_cts_ until an RTR of its tag arrives
  dev::peer_id peer = dev::no_peer;
  queue_kind kind = queue_kind::tagged;
  bool completion = true;
  std::byte* owned = nullptr;  // inject above the bounce path: payload copied here
  // Current rendezvous segment (one CTS at a time).
  dev::dma_write dma{};
  dev::dma_state dma_state{};
  bool last_segment = false;
  bool ack_wanted = false;  // read variant: after the last write, wait (in wait_cts_) for the ack
  bool data_sent = false;   // read variant: the last segment is written, the ack is due
  bool psn_in_note = false; // a receiver-initiated write: its notification carries its psn, so
                            // the receiver parks what follows until it lands (psn_window_open)
  bool record_due = false;  // a receiver-initiated write whose landing record met back-pressure
                            // (the network's credits): rndv_send_segment puts it first
};

/// Where a receive stands in the receiver-initiated rendezvous (rndv_rtr.cpp).
enum class rtr_state : std::uint8_t {
  none,         // sends no RTR: not eligible, NACKed, or matched at post
  suspended,    // eligible but for an earlier receive that could take its message: late RTR
  sent,         // RTR out; still posted; its slot waits for the write
  waiting_rts,  // an RTS matched it: the write (notification) or a NACK decides
  cancelling,   // fi_cancel asked the sender to withdraw the RTR; still posted
};

struct recv_request {
  // Not value-initialized: the pool constructs one per receive, and zeroing the iovec array
  // (128 bytes) cost more than the rest of posting a receive. Every other member has its
  // initializer; iov holds only what make_recv or carve put there (iov_count entries, and
  // iov[0] always, which the rendezvous paths read as the buffer's start).
  recv_request() noexcept {}
  match::posted_entry entry;
  core::list_hook hook;  // rendezvous receives waiting for a notification (wait_notify_ or
                         // wait_ri_)
  void* context = nullptr;
  std::array<iovec, max_iov> iov;  // the first iov_count entries, and iov[0], are set
  std::size_t iov_count = 0;
  std::size_t capacity = 0;
  queue_kind kind = queue_kind::tagged;
  bool completion = true;
  bool discard = false;  // FI_DISCARD: consume the message, report nothing but success
  // FI_MULTI_RECV: the posted buffer is a parent that stays matchable while at least
  // min_multi_recv bytes are free; each message gets a child request carved out of it.
  bool multi = false;
  bool in_matcher = false;     // parent: still takes messages (posted, or being posted)
  std::size_t used = 0;        // parent: bytes handed to children
  std::size_t outstanding = 0; // parent: children not completed yet
  recv_request* parent = nullptr;  // child: the multi-receive buffer it lives in
  // child: in the endpoint's multi_order_ from carve to completion. Children complete in the
  // order they were carved; one that finishes early keeps its result here until then.
  core::list_hook order_hook;
  bool finished = false;
  int err = 0;
  // Filled once matched to a rendezvous message.
  dev::peer_id peer = dev::no_peer;
  std::uint64_t msg_len = 0, tag = 0, cq_data = 0, send_id = 0;
  bool has_cq_data = false;
  std::size_t delivered = 0;  // bytes landed so far
  std::size_t segment_len = 0;  // bytes the outstanding CTS asked for
  std::uint64_t waiting_since_ms = 0;  // matched to a rendezvous: when it last asked for data
                                       // (CTS) or matched its RTS, or last probed (rndv_timeout_ms)
  std::uint64_t asked_since_ms = 0;    // when it last asked for data or matched its RTS
                                       // (rndv_deadline_ms counts here; probes do not reset it)
  std::uint32_t notify_slot = no_slot, notify_gen = 0;
  bool ack_wanted = false;  // read variant: acknowledge the rendezvous once complete
  // Receiver-initiated rendezvous.
  rtr_state rtr = rtr_state::none;
  std::uint32_t ri_slot = no_slot, ri_gen = 0;
  wire::psn_t rts_psn = 0;  // waiting_rts: the RTS that matched it
  bool rtr_only = false;    // optimistic long receive: never posted, its RTR is its only match
  // An optimistic long receive in several buffers: an RTR names one contiguous range, so the
  // sender writes here and completion scatters it into the iovecs (one extra copy, off the
  // common path: MPI receives are contiguous). Freed by rtr_release.
  std::byte* landing = nullptr;
  static constexpr std::uint32_t no_slot = ~0u;
};

/// The payload an unexpected record holds in itself: every eager message and train, and medium
/// messages as short as the longest train. Those take no buffer from the payload cache (its
/// acquire and release cost more than such a copy) and are bounded by the record count alone;
/// longer medium messages take a buffer counted in the payload budget (intake.cpp).
inline constexpr std::size_t unexpected_inline_max = wire::eager_train_limit;
static_assert(unexpected_inline_max >= wire::eager_payload_max);

struct unexpected_msg {
  // Not value-initialized (as recv_request): zeroing inline_payload's 276 bytes cost each
  // unexpected message about 50 instructions. It is written before it is read (len bytes);
  // every other member has its initializer.
  unexpected_msg() noexcept {}
  match::unexpected_entry entry;
  wire::pkt_type type = wire::pkt_type::env_data;
  dev::peer_id peer = dev::no_peer;
  std::uint64_t tag = 0, cq_data = 0, len = 0, send_id = 0;
  bool has_cq_data = false;
  bool ack_wanted = false;  // an RTS of the read variant
  std::byte* payload = nullptr;  // a medium message longer than inline_payload: a copy out of
                                 // the bounce ring in a buffer of the endpoint's payload cache,
                                 // counted in unexpected_bytes_ (intake.cpp)
  std::byte inline_payload[unexpected_inline_max];
};

/// The record a matcher entry belongs to.
inline recv_request& recv_of(match::posted_entry& e) noexcept {
  return *reinterpret_cast<recv_request*>(reinterpret_cast<char*>(&e) -
                                          offsetof(recv_request, entry));
}
inline unexpected_msg& unexpected_of(match::unexpected_entry& e) noexcept {
  return *reinterpret_cast<unexpected_msg*>(reinterpret_cast<char*>(&e) -
                                            offsetof(unexpected_msg, entry));
}

/// A mailbox packet taken out of the ring but not yet dispatched: held at the unexpected bound
/// (intake.cpp). To the protocol it is still in the mailbox.
struct held_packet {
  dev::peer_id peer = dev::no_peer;
  dev::packet pkt{};
};

/// A control packet that met a full mailbox, retried in order by progress.
struct backlog_packet {
  core::list_hook hook;
  dev::peer_id peer = dev::no_peer;
  dev::packet pkt{};
};

/// A send as the sender's log remembers it, so an RTR that arrives after the send can find it.
struct sent_record {
  wire::psn_t psn = 0;
  queue_kind kind = queue_kind::tagged;
  bool rendezvous = false;  // announced by an RTS (else eager or medium)
  std::uint64_t tag = 0;
  std::uint64_t send_id = 0;  // rendezvous: the send request while it waits for a CTS
};

inline constexpr std::size_t send_log_len = 64;  // power of two

/// Per-peer sequencing state (psn_order.cpp, rndv_rtr.cpp).
struct peer_sequence {
  // As a sender to the peer.
  wire::psn_t next_psn = 1;
  std::array<sent_record, send_log_len> log{};
  // As a receiver from the peer: every psn up to the watermark has been taken in order.
  wire::psn_t watermark = 0;
  core::intrusive_list<backlog_packet, &backlog_packet::hook> parked;
};

/// Resolves a sender's device address to the fi_addr the application knows it by.
struct source_resolver {
  void* self = nullptr;
  std::uint64_t (*resolve)(void* self, const dev::address& a) noexcept = nullptr;
};

/// A remote peer accessed memory this endpoint exposes (FI_RMA_EVENT counting, remote CQ data).
struct rma_target_event {
  std::uint64_t key = 0;    // a live registration: events for any other are dropped
  bool remote_read = false;
  bool atomic = false;      // an atomic the target performed (else an RMA access)
  bool op_end = true;      // the operation's last range: endpoint counters count operations
  bool region_end = true;  // its last range in this registration: MR counters count once each
  std::size_t len = 0;
  std::uint64_t cq_data = 0;
  bool has_cq_data = false;
  std::uint64_t src = ~0ull;  // fi_addr of the initiator, or FI_ADDR_NOTAVAIL
};

struct rma_target_sink {
  void* self = nullptr;
  void (*on_access)(void* self, const rma_target_event& e) noexcept = nullptr;
  explicit operator bool() const noexcept { return on_access != nullptr; }
};

struct endpoint_sinks {
  completion_sink tx, rx;
  counter_sink send_cntr, recv_cntr, read_cntr, write_cntr;
  rma_target_sink rma_target;
  source_resolver resolver;
};

/// Counters kept per endpoint: the public struct of <rdma/fi_ext_exanet.h>, so what the
/// protocols count is what applications and the exanet-stats tool read, field for field.
using endpoint_stats = fi_exanet_counters;

class endpoint {
 public:
  endpoint() = default;
  endpoint(const endpoint&) = delete;
  endpoint& operator=(const endpoint&) = delete;
  ~endpoint() { close(); }

  /// src.port == 0 picks a free port.
  core::status open(const config& cfg, const dev::address& src) noexcept;
  void close() noexcept;
  void set_sinks(const endpoint_sinks& s) noexcept {
    sinks_ = s;
    reported_by_ = {static_cast<bool>(s.send_cntr),
                    static_cast<bool>(s.tx) || static_cast<bool>(s.send_cntr)};
  }
  const dev::address& address() const noexcept { return dev_.local_address(); }
  const config& cfg() const noexcept { return cfg_; }
  /// Which protocol each operation takes, by size and situation; built at open.
  const protocol_table& protocols() const noexcept { return protocols_; }

  /// The endpoint is complete (fi_enable): sleepers says whether anything may ever sleep on it
  /// (dev::device's enable).
  core::status enable(bool sleepers) noexcept { return dev_.enable(sleepers); }
  /// Maps a peer address to a device peer (cold: first use of each peer).
  core::status connect(const dev::address& a, dev::peer_id& out) noexcept;
  /// Forgets every cached sender fi_addr (the AV removed an entry).
  void invalidate_sources() noexcept;

  core::status send(const send_args& a) noexcept {
    if (prof_) [[unlikely]] return send_profiled(a);
    return send_settled(a);
  }
  /// A send of one buffer (fi_send, fi_senddata, fi_inject, fi_injectdata and their tagged
  /// forms), already validated by fi/, without delivery-complete semantics. The same as send()
  /// with those arguments; a message the protocol table sends eager goes straight into the
  /// packet, then completes (MPI libraries' small sends, blocking and not, take this path).
  core::status send_one(dev::peer_id to, const void* buf, std::size_t len, std::uint64_t tag,
                        std::uint64_t cq_data, bool has_cq_data, queue_kind kind,
                        const one_send& how) noexcept {
    if (prof_) [[unlikely]]
      return send_one_profiled(to, buf, len, tag, cq_data, has_cq_data, kind, how);
    return send_one_now(to, buf, len, tag, cq_data, has_cq_data, kind, how);
  }
  /// FI_EXANET_PROFILE (profile.hpp): the lines this endpoint's profile reports (with its
  /// stamps, or the sums alone), empty when it is off. May throw std::bad_alloc.
  std::string profile_report(bool with_stamps) const;
  /// Posts a receive, or completes it with a message already here (inline below the class).
  core::status recv(const recv_args& a) noexcept;
  /// fi_write* / fi_read*: protection-checked at the target before any byte moves; a refused
  /// access is an FI_EACCES error completion.
  core::status rma(const rma_args& a) noexcept;
  /// fi_atomic family (atomic.cpp): performed by the target, in arrival order, after its own
  /// protection check; every refusal is an error completion and leaves the target unchanged.
  core::status atomic(const atomic_args& a) noexcept;
  /// Exposes a registration to peers through this endpoint's protection table.
  core::status expose(const dev::key_grant& g, std::uint32_t& slot) noexcept {
    return dev_.key_publish(g, slot);
  }
  void withdraw(std::uint32_t slot) noexcept { dev_.key_revoke(slot); }
  /// FI_OPT_MIN_MULTI_RECV: a multi-receive buffer is released when less than this is free.
  void set_min_multi_recv(std::size_t bytes) noexcept { min_multi_recv_ = bytes; }
  std::size_t min_multi_recv() const noexcept { return min_multi_recv_; }
  /// FI_PEEK: reports through the rx sink whether a matching message has arrived (FI_ENOMSG if
  /// not). With claim, the message is taken out of matching and its handle stored in *handle
  /// for a later claim(); with discard (and no claim), the message is dropped.
  core::status peek(const recv_args& a, bool claim, bool discard, void** handle) noexcept;
  /// FI_CLAIM: receives (or, with discard, drops) the message an earlier peek claimed.
  core::status claim(const recv_args& a, void* handle, bool discard) noexcept;
  /// Removes a posted receive with this context; writes an FI_ECANCELED error completion.
  core::status cancel(void* context) noexcept;
  /// One round of the work in progress.cpp's order; returns how much was done. Inline: a caller
  /// polling an idle endpoint (nothing arrived, nothing waiting) pays a few loads, no call.
  std::size_t progress() noexcept {
    if (!open_) [[unlikely]] return 0;
    if (quiet()) [[likely]] {
      if (++progress_calls_ % watch_every != 0) [[likely]] return 0;
      // The peer watch runs on idle calls too: a receive waiting for a dead peer's message
      // must learn of the death (progress.cpp, waiting_on_peers).
      if (waiting_on_peers()) watch_peers();
      settle_found_dead();
      return 0;
    }
    return progress_busy();
  }
  /// Sleeping while idle (FI_PROGRESS_AUTO's thread, blocking waits): true if a progress round
  /// would find nothing to do and the device announced a sleeper, who sleeps on word ==
  /// expected and then calls sleep_end(); false: progress instead. Under the caller's lock.
  bool sleep_prepare(const std::atomic<std::uint32_t>*& word, std::uint32_t& expected) noexcept {
    return open_ && (quiet() || only_replies_due()) && dev_.sleep_prepare(word, expected);
  }
  void sleep_end() noexcept { dev_.sleep_end(); }
  /// After sleep_prepare said true: what to poll beside the word (a network backend's fd).
  dev::sleep_descriptor sleep_fd() const noexcept { return dev_.sleep_fd(); }
  /// A sleeper in the application's own poll(2) (fi_trywait): arm_poll_wake() before
  /// sleep_prepare, poll_fd() after it (dev/device.hpp). look_again_ms(): how soon that
  /// sleeper must come back for the periodic checks (lost peers, rendezvous timeouts), 0 if
  /// none is due while it sleeps.
  bool arm_poll_wake() noexcept { return open_ && dev_.arm_poll_wake(); }
  dev::sleep_descriptor poll_fd() const noexcept { return dev_.poll_fd(); }
  std::uint32_t look_again_ms() const noexcept {
    return waiting_on_peers() ? cfg_.dead_peer_check_ms : 0;
  }
  /// What an idle progress() does every watch_every calls, now: for a caller that slept
  /// (lost peers, rendezvous probes; each still at most once per its period).
  void progress_timers() noexcept {
    if (!open_) return;
    if (waiting_on_peers()) watch_peers();
    settle_found_dead();
  }

  /// The protocol's counters with the device's drop counts folded in.
  endpoint_stats stats() const noexcept {
    endpoint_stats s = stats_;
    const dev::drop_counts& d = dev_.drops();
    s.drop_foreign_pdid = d.foreign_pdid;
    s.drop_bad_field += d.bad_field;
    s.drop_dma_refused += d.dma_refused;
    s.drop_notify_refused = d.notify_refused;
    const dev::route_counts r = dev_.routes();
    s.peers_shared_memory = r.peers_shared_memory;
    s.peers_network = r.peers_network;
    s.network_bytes_sent = r.network_bytes_sent;
    s.network_messages_sent = r.network_messages_sent;
    s.dma_writes_direct = r.dma_writes_direct;
    s.dma_writes_staged = r.dma_writes_staged;
    s.network_sleepable = r.network_sleepable;
    return s;
  }
  /// What peers' packets make this endpoint hold now (intake.cpp; tests and exanet-stats).
  std::size_t unexpected_in_use() const noexcept { return unexpected_.in_use(); }
  std::size_t unexpected_bytes() const noexcept { return unexpected_bytes_; }
  std::size_t stored_rtrs() const noexcept { return stored_.size(); }
  std::size_t held_packets() const noexcept { return held_count_; }
  /// Testing (FI_EXANET_TESTING_OPS): while held, no packet is taken from the mailbox.
  void hold_mailbox(bool hold) noexcept { mailbox_held_ = hold; }

 private:
  friend struct protocol_access;
  // dispatch (progress.cpp)
  /// One packet taken from the mailbox: checked, admitted in psn order, handed to its protocol.
  void on_packet(dev::peer_id from, const dev::packet& pkt) noexcept;
  /// on_packet's body, inlined into the mailbox loop (progress.cpp only).
  void handle_packet(dev::peer_id from, const dev::packet& pkt) noexcept;
  void on_unknown(dev::peer_id from, const dev::packet& pkt) noexcept;
  // eager.cpp
  core::status eager_send(const send_args& a, std::size_t len) noexcept;
  /// The packet of an eager message from one buffer (eager_send and inject share it). Inlined
  /// into both: a call would spill its eight arguments on every message.
  [[gnu::always_inline]] inline core::status eager_post(dev::peer_id to, const void* buf,
                                                        std::size_t len, std::uint64_t tag,
                                                        std::uint64_t cq_data, bool has_cq_data,
                                                        queue_kind kind,
                                                        std::span<const iovec> iov,
                                                        bool reported) noexcept;
  /// Whether the application hears of a buffered send only through a later read (its
  /// completion, or the send counter): its packets may then wait for the device's next poll
  /// (dev::mailbox_reservation::reported).
  bool reported(bool completion) const noexcept { return reported_by_[completion]; }
  void on_env_data(dev::peer_id from, const dev::packet& pkt) noexcept;
  // eager_train.cpp
  core::status train_send(const send_args& a, std::size_t len) noexcept;
  void on_eager_data(dev::peer_id from, const dev::packet& pkt) noexcept;
  /// An env_data longer than one packet: delivered if its train arrived whole, else dropped.
  void on_env_train(dev::peer_id from, const wire::env_data& p) noexcept;
  /// A sender's train in progress at this receiver (eager_train.cpp).
  struct train_assembly {
    wire::psn_t psn = 0;       // the message it belongs to
    std::uint32_t filled = 0;  // bytes arrived, in order from offset 0
    bool open = false;         // a train is in progress
    std::array<std::byte, wire::eager_train_limit> bytes;  // the train, then the env_data's part
  };
  /// The peer's train buffer, made on its first train (cold); nullptr without memory.
  train_assembly* train_of(dev::peer_id p) noexcept;
  [[gnu::cold, gnu::noinline]] void drop_train_packet(dev::peer_id from, const char* why) noexcept;
  /// A dead peer's unfinished train goes with it.
  void forget_train(dev::peer_id p) noexcept;
  // medium.cpp
  core::status medium_send(const send_args& a, std::size_t len) noexcept;
  /// medium_send, or, when the receiver has no ring or no credit in it (not_supported), the
  /// rendezvous `fallback` (the table's for the size), which needs neither: what every medium
  /// send does. Inline: the direct path (send_one_now) pays no extra frame for it.
  core::status medium_or_rendezvous(const send_args& a, std::size_t len,
                                    protocol fallback) noexcept {
    const core::status s = medium_send(a, len);
    if (s != core::status::not_supported) [[likely]] return s;
    return rendezvous_send(a, len, fallback);
  }
  void on_medium(dev::peer_id from, const dev::packet& pkt) noexcept;
  // FI_ORDER_SAW (rma.cpp): a message leaves after every RMA and atomic write posted before it
  // to the same peer. Writes that have not yet handed everything to the device (waiting for a
  // key's answer, for the engine, or to send their report) hold sends to their peer: they say
  // again. One test of two fields when nothing is outstanding.
  bool sends_held_by_writes(dev::peer_id to) const noexcept {
    if (rma_active_.empty() && atomic_unsent_ == 0) [[likely]] return false;
    return writes_unissued_to(to);
  }
  [[gnu::noinline]] bool writes_unissued_to(dev::peer_id to) const noexcept;
  // rendezvous sends (endpoint.cpp): p is the table's rendezvous protocol for this send
  core::status send_now(const send_args& a) noexcept;
  core::status send_settled(const send_args& a) noexcept;
  core::status send_one_now(dev::peer_id to, const void* buf, std::size_t len, std::uint64_t tag,
                            std::uint64_t cq_data, bool has_cq_data, queue_kind kind,
                            const one_send& how) noexcept;
  // FI_EXANET_PROFILE: the send calls again, between the post and issued stamps (endpoint.cpp).
  [[gnu::cold, gnu::noinline]] core::status send_profiled(const send_args& a) noexcept;
  [[gnu::cold, gnu::noinline]] core::status send_one_profiled(dev::peer_id to, const void* buf,
                                                              std::size_t len, std::uint64_t tag,
                                                              std::uint64_t cq_data,
                                                              bool has_cq_data, queue_kind kind,
                                                              const one_send& how) noexcept;
  /// The protocol a send just took, from the counters it moved (medium may fall back to the
  /// rendezvous): eager and train sends count in eager_sent and train_sent, medium in medium_sent.
  void profile_send(std::uint64_t t_post, std::size_t len, std::uint64_t eager_before,
                    std::uint64_t medium_before) noexcept;
  /// Receive-side stamps (profile.hpp): one test of prof_ when the profile is off.
  void prof_recv(profile_phase ph, profile_proto p, std::size_t len) noexcept {
    if (prof_) [[unlikely]] prof_->mark_recv(ph, p, len);
  }
  [[gnu::cold, gnu::noinline]] void profile_ri_landed(const recv_request& r,
                                                     std::size_t msg_len) noexcept;
  void prof_recv(profile_phase ph) noexcept {
    if (prof_) [[unlikely]] prof_->mark_recv(ph);
  }
  core::status rma_now(const rma_args& a) noexcept;
  core::status rendezvous_send(const send_args& a, std::size_t len, protocol p) noexcept;
  // rndv_rts.cpp
  /// ack: the read family's rendezvous, completed by the receiver's acknowledgement.
  core::status rts_send(const send_args& a, std::size_t len, bool ack) noexcept;
  /// A send request for a rendezvous (RTS or RTR), with a private copy of an injected payload.
  send_request* make_rendezvous_send(const send_args& a, std::size_t len) noexcept;
  void on_rts(dev::peer_id from, const dev::packet& pkt) noexcept;
  void on_cts(dev::peer_id from, const dev::packet& pkt) noexcept;
  void on_rndv_ack(dev::peer_id from, const dev::packet& pkt) noexcept;
  void on_rndv_probe(dev::peer_id from, const dev::packet& pkt) noexcept;
  void on_rndv_probe_reply(dev::peer_id from, const dev::packet& pkt) noexcept;
  void rndv_probe_send(recv_request& r) noexcept;
  void rndv_recv_start(recv_request& r, dev::peer_id from, const wire::rts& m) noexcept;
  void rndv_recv_next_segment(recv_request& r) noexcept;
  bool rndv_send_segment(send_request& s) noexcept;  // false: blocked, queued for retry
  std::size_t poll_notifications() noexcept;
  std::size_t retry_dma() noexcept;
  // rndv_rtr.cpp
  stored_rtr* ri_target(dev::peer_id to, queue_kind k, std::uint64_t tag) noexcept;
  core::status ri_send(const send_args& a, std::size_t len, stored_rtr& st) noexcept;
  /// rtr_first: the RTR was waiting when the send was posted (the receive was fast).
  void ri_write(send_request& s, const wire::rtr& m, bool rtr_first = false) noexcept;
  void on_rtr(dev::peer_id from, const dev::packet& pkt) noexcept;
  void on_rtr_nack(dev::peer_id from, const dev::packet& pkt) noexcept;
  void on_rtr_cancel(dev::peer_id from, const dev::packet& pkt) noexcept;
  void on_rtr_cancel_reply(dev::peer_id from, const dev::packet& pkt) noexcept;
  void rtr_answer(dev::peer_id to, wire::pkt_type t, std::uint64_t recv_id,
                  std::uint16_t flags = 0) noexcept;
  /// At post, for a receive the table makes recv/match+rtr: sends its RTR, or suspends it.
  void rtr_consider(recv_request& r) noexcept;
  /// 0: the receive may not send an RTR now; else its ticket (the nth class send).
  std::uint32_t rtr_ticket(const recv_request& r) noexcept;
  void rtr_send(recv_request& r, std::uint32_t nth) noexcept;
  void lift_suspended() noexcept;
  enum class ri_take : std::uint8_t { waiting, deferred, done };
  /// Takes r's notification if it landed and its psn is next (done), or says why not.
  ri_take take_ri(recv_request& r) noexcept;
  /// A notification bell rang for slot: takes it if an RTR'd receive armed that slot.
  std::size_t on_ri_bell(std::uint32_t slot) noexcept;
  /// Every RTR'd receive, while a notification waits for an earlier psn.
  std::size_t poll_ri() noexcept;
  /// A receive that was still posted left the matcher: suspended receives may lift.
  void posted_left(recv_request& r) noexcept {
    // Inline for the common case: no receive of this kind is suspended (rndv_rtr.cpp).
    if (r.rtr == rtr_state::suspended || suspended_[static_cast<int>(r.kind)] > 0) [[unlikely]]
      lift_after(r);
  }
  /// posted_left with suspended receives about: r's own suspension ends, and the others may lift.
  void lift_after(recv_request& r) noexcept;
  /// Takes a posted receive out of its matcher (cancel, a write that matched it, dead peer).
  void unpost(recv_request& r) noexcept {
    if (r.rtr_only) return;  // never was posted
    matcher_for(r.kind).remove_posted(r.entry);
    posted_left(r);
  }
  /// A completed or failed receive gives back what its RTR held.
  void rtr_release(recv_request& r) noexcept;
  core::status rtr_cancel(recv_request& r) noexcept;
  // rndv_optimistic.cpp
  bool optimistic() const noexcept { return cfg_.protocol == protocol_family::optimistic; }
  /// A receive the table sends as recv/rtr-only: only an RTR, no posted-queue entry.
  core::status optimistic_recv(recv_request& r) noexcept;
  /// A send the table sends as rndv/opt: written into the first stored RTR of its tag, or
  /// waits in wait_cts_ for one.
  core::status optimistic_send(const send_args& a, std::size_t len) noexcept;
  void on_optimistic_rtr(dev::peer_id from, const wire::rtr& m) noexcept;
  /// The long receive with this context, for fi_cancel (it is in no matcher).
  recv_request* optimistic_find(void* context) noexcept;
  /// An any-source receive or FI_PEEK under the variant: refused, and said once per endpoint.
  core::status optimistic_refuse(const char* what) noexcept;
  // psn_order.cpp
  peer_sequence* sequence_of(dev::peer_id p) noexcept {
    if (p < seq_.size()) [[likely]] return &seq_[p];
    return grow_sequence(p);
  }
  /// sequence_of for a peer never seen: makes its state (cold); nullptr without memory.
  [[gnu::cold, gnu::noinline]] peer_sequence* grow_sequence(dev::peer_id p) noexcept;
  /// The psn the next message to `to` carries; commit_send makes it used.
  wire::psn_t next_psn(dev::peer_id to) noexcept { return seq_[to].next_psn; }
  void commit_send(dev::peer_id to, queue_kind k, std::uint64_t tag, bool rendezvous,
                   std::uint64_t send_id) noexcept {
    peer_sequence& q = seq_[to];
    if (k == queue_kind::msg) tag = 0;  // the untagged queue is one class per peer
    const wire::psn_t psn = q.next_psn++;
    q.log[psn & (send_log_len - 1)] = {psn, k, rendezvous, tag, send_id};
    // Optimistic RTRs are not counted down: only the long sends they wait for can serve them.
    if (optimistic() || stored_.empty(to)) [[likely]] return;
    count_stored_rtrs(to, k, tag, rendezvous);
  }
  /// commit_send with RTRs stored for the peer: those of the send's class count it.
  void count_stored_rtrs(dev::peer_id to, queue_kind k, std::uint64_t tag, bool rendezvous) noexcept;
  /// False: the packet was parked or dropped; true: dispatch it now.
  bool admit_in_order(dev::peer_id from, const dev::packet& pkt) noexcept {
    // Inline for the steady state: nothing parked, and a message is the very next psn.
    if (from < seq_.size()) [[likely]] {
      peer_sequence& q = seq_[from];
      if (q.parked.empty()) [[likely]] {
        if (!wire::is_message(static_cast<std::uint8_t>(pkt[0]))) return true;
        const wire::psn_t psn = wire::psn_of(pkt);
        if (psn == q.watermark + 1) [[likely]] {
          q.watermark = psn;
          return true;
        }
      }
    }
    return admit_out_of_order(from, pkt);
  }
  /// admit_in_order's whole rule (psn_order.cpp): windows, parking, served psns.
  bool admit_out_of_order(dev::peer_id from, const dev::packet& pkt) noexcept;
  /// Reorder window: how far past the watermark a message psn may be, and how many packets a
  /// sender may have parked here; beyond either the packet is dropped (psn_order.cpp says why).
  std::uint32_t psn_window() const noexcept;
  std::size_t parked_max() const noexcept;
  /// Sender side of the window: false while `to` already has a window's worth of messages
  /// behind a receiver-initiated write of ours that the DMA engine has not finished.
  bool psn_window_open(dev::peer_id to) noexcept;
  /// True if a receive of ours waits for a write from `from` (its RTR out): only such a write's
  /// notification can fill a gap in that sender's psns.
  bool gap_fillable(dev::peer_id from) noexcept;
  void drop_out_of_window(dev::peer_id from, const dev::packet& pkt, const char* why) noexcept;
  void park(dev::peer_id from, const dev::packet& pkt) noexcept;
  void drop_served(dev::peer_id from, const dev::packet& pkt) noexcept;
  /// The psn after the watermark was taken by a notification: the packets behind it go now.
  void advance_watermark(dev::peer_id from, wire::psn_t psn) noexcept;
  void dispatch(dev::peer_id from, const dev::packet& pkt) noexcept;
  // rma_inline.cpp
  /// r's one range by the bounce ring (r's ranges passed the check): ok, again (credit on its
  /// way; nothing started) or not_supported (no ring room: the DMA path).
  core::status rma_write_inline(const rma_request& r) noexcept;
  /// A write whose ranges all passed the check, inline if the protocol table says so: ok
  /// (completed and released), again (credit on its way; nothing started), anything else
  /// (take the DMA path). rma.cpp.
  core::status rma_write_inline_checked(rma_request& r) noexcept;
  void on_rma_write_inline(dev::peer_id from, const dev::packet& pkt) noexcept;
  // rma.cpp
  /// Where an access the application named by key and address lands now: the key's current
  /// registration (tried at slot_hint, where the initiator found it, first), checked for
  /// range and the rights in need (dev::rma_access).
  bool access_granted(std::uint64_t key, std::uint64_t addr, std::size_t len, std::uint32_t need,
                      std::uint32_t slot_hint, dev::rma_target& t) const noexcept;
  void on_rma_read_req(dev::peer_id from, const dev::packet& pkt) noexcept;
  void on_rma_done(dev::peer_id from, const dev::packet& pkt) noexcept;
  void on_rma_event(dev::peer_id from, const dev::notification& n) noexcept;
  void rma_access_landed(dev::peer_id from, std::uint32_t key_slot, bool remote_read,
                         std::uint8_t ends, std::size_t len, bool has_cq_data,
                         std::uint64_t cq_data) noexcept;
  bool rma_advance(rma_request& r) noexcept;  // true: finished and released
  enum class rma_step : std::uint8_t { blocked, next, released };
  rma_step rma_write_data(rma_request& r) noexcept;
  rma_step rma_read_data(rma_request& r) noexcept;
  rma_step rma_post_events(rma_request& r) noexcept;
  /// Stage check: the ranges whose key the target has not answered yet. next: all passed.
  rma_step rma_check_ranges(rma_request& r) noexcept;
  void log_refused(const rma_request& r, std::size_t i) noexcept;
  core::status rma_post_event(rma_request& r, std::size_t seg, bool last) noexcept;
  /// Whether r's data may still be on its way when its events are posted: a write the engine
  /// staged (it lands when the target polls, behind its packets). Events then go by packet, in
  /// order behind the data. A read posts events only for the ranges it read directly, which
  /// are in place by then (the target counts a range read by request as it answers).
  bool landed_late(const rma_request& r) const noexcept {
    return r.what == rma_request::role::write && r.staged_any;
  }
  /// Whether write r waits for the target's acknowledgement behind its staged data: asked for
  /// (delivery complete), or the only way a fault in a may_fault grant comes back to us (a
  /// direct write sees it at once, as EFAULT).
  bool write_wants_ack(const rma_request& r) const noexcept {
    return landed_late(r) && (r.delivery_complete || r.may_fault);
  }
  /// Whether range seg of read r goes by request (rma_request::direct_ranges).
  static bool read_by_request(const rma_request& r, std::size_t seg) noexcept {
    return r.what == rma_request::role::read && seg >= r.direct_ranges;
  }
  bool rma_answer_read(rma_request& r) noexcept;
  /// The answer to a peer's request (read, atomic): the bytes, if any, into the window it armed,
  /// then an rma_reply notification with status and length. again: call again.
  core::status post_reply(dev::peer_id peer, std::span<const iovec> src, std::uint64_t reply_addr,
                          std::uint32_t slot, std::uint32_t gen, std::int64_t status,
                          std::uint64_t bytes, dev::dma_state& st) noexcept;
  /// A request that answers a peer's slot (read data or an ack), or nullptr without memory.
  rma_request* rma_reply_to(dev::peer_id from, std::uint32_t slot, std::uint32_t gen) noexcept;
  void rma_finish(rma_request& r, int err) noexcept;
  std::size_t progress_rma() noexcept;
  // atomic.cpp
  void on_atomic_req(dev::peer_id from, const dev::packet& pkt) noexcept;
  void on_atomic_operands(dev::peer_id from, const dev::packet& pkt) noexcept;
  /// Sends the rest of r's current range's operands as atomic_operands; false: blocked or failed.
  bool atomic_send_train(atomic_request& r, std::span<const iovec> operands, std::size_t len) noexcept;
  /// Sends what it can of r's range requests (in order); false: blocked on a resource.
  bool atomic_send(atomic_request& r) noexcept;
  bool atomic_advance(atomic_request& r, bool may_send) noexcept;  // true: finished, released
  void atomic_finish(atomic_request& r, int err) noexcept;
  std::size_t progress_atomic() noexcept;
  /// The peer died: its atomics fail (FI_ECONNRESET), answers owed to it are dropped.
  std::size_t fail_atomics_of(dev::peer_id p) noexcept;  // how many it failed
  // intake.cpp: the bounds of what peers' packets make this endpoint keep
  /// Sizes the pools from cfg_ (resolve_queue_bounds) and allocates the held queue.
  core::status open_intake() noexcept;
  /// A packet polled from the mailbox: dispatched (on_packet), or held at the bound.
  void intake(dev::peer_id from, const dev::packet& pkt) noexcept;
  /// intake's steady state: nothing is held and any message would find room, so a packet goes
  /// straight to on_packet (the poll loop tests this inline).
  bool intake_clear() const noexcept {
    return held_count_ == 0 && unexpected_.in_use() < cfg_.unexpected_max &&
           unexpected_bytes_ + cfg_.medium_max <= cfg_.unexpected_bytes;
  }
  /// Dispatches held packets, in order, while there is room for them.
  std::size_t release_held() noexcept;
  /// How many packets the next poll may take: the intake can hold each of them.
  std::size_t intake_room() const noexcept { return held_.size() - held_count_; }
  /// True: a message packet no posted receive takes, while the unexpected budget is spent.
  bool needs_room(dev::peer_id from, const dev::packet& pkt) noexcept;
  std::uint32_t* held_count_of(dev::peer_id p) noexcept;
  /// A dead peer's held packets are dropped, like its parked ones.
  void forget_held(dev::peer_id p) noexcept;
  /// Copies an unexpected medium payload out of the bounce ring into u: into the record up to
  /// unexpected_inline_max, else into a payload buffer; false without memory. (Eager messages
  /// and trains always fit the record: on_env_data and on_env_train copy straight into it.)
  [[nodiscard]] bool keep_unexpected_payload(unexpected_msg& u, const std::byte* data,
                                             std::size_t len) noexcept;
  /// Frees an unexpected record (already out of the matcher) and its payload.
  void free_unexpected(unexpected_msg& u) noexcept;
  // progress.cpp
  static constexpr std::uint32_t watch_every = 256;  // progress calls between clock reads
  /// True when a progress round would find nothing to do: the device has nothing to hand over
  /// and no phase of progress_busy has work queued.
  bool quiet() const noexcept {
    return held_count_ == 0 && !dev_.has_arrivals() && !ri_deferred_ && !slot_starved_ &&
           !lift_due_ && rma_active_.empty() && atomic_active_.empty() && dma_backlog_.empty() &&
           backlog_.empty() && waiting_reports_.empty();
  }
  std::size_t progress_busy() noexcept;
  /// quiet() but for RMA reads and atomics that only wait for their replies: each reply lands as
  /// a notification, whose bell wakes a sleeper, so the owner may sleep (progress.cpp). The
  /// device's arrivals are left to dev_.sleep_prepare's own last look.
  bool only_replies_due() noexcept;
  std::size_t progress_mailbox() noexcept;
  std::size_t drain_mailbox() noexcept;  // progress_mailbox's body (progress.cpp)
  std::size_t take_events() noexcept;    // peers' RMA access events (progress.cpp)
  std::size_t retry_backlog() noexcept;
  /// True while something waits on a peer: a transfer, a posted receive (directed or not).
  bool waiting_on_peers() const noexcept;
  /// Once per dead_peer_check_ms while waiting on peers: lost peers, rendezvous timeouts.
  void watch_peers() noexcept;
  void fail_lost_peers(std::uint64_t now_ms) noexcept;  // each peer the device reports lost
  /// What an operation that met a dead peer calls (cold: once per death found).
  [[gnu::cold, gnu::noinline]] void fail_found_dead() noexcept;
  /// After an operation that may have found a peer dead (the device says so once): fail that
  /// peer's operations and reclaim its segment before the caller sees any error.
  void settle_found_dead() noexcept {
    if (dev_.take_dead_found()) [[unlikely]] fail_found_dead();
  }
  /// Takes what a peer that just died had already delivered, before its operations fail.
  void settle_arrivals() noexcept;
  void fail_peer(dev::peer_id p) noexcept;
  /// Receives posted for p (never matched) fail; any-source receives stay posted.
  std::size_t fail_posted_from(dev::peer_id p) noexcept;  // receives failed
  /// Rendezvous receives whose data is late probe their sender (rndv_timeout_ms), and fail at
  /// rndv_deadline_ms when one is set.
  void expire_rendezvous(std::uint64_t now) noexcept;

  // shared helpers (endpoint.cpp)
  /// reported: the packet may wait for the device's next poll (dev::mailbox_reservation::
  /// reported), as a burst of sends does; an RTR, whose receive completes only through a later
  /// read of this endpoint's CQ or counter, and which nothing of the sender's waits for.
  void send_control(dev::peer_id to, const dev::packet& pkt, bool reported = false) noexcept;
  /// Control packets waiting for one peer's mailbox (send_control, retry_backlog).
  struct control_queue {
    std::uint32_t queued = 0;
    std::uint32_t blocked_pass = 0;  // the retry pass that found its mailbox full
    std::uint32_t responses = 0;     // RMA requests of the peer being answered (rma_reply_to)
  };
  /// The peer's entry, made on first use (cold); nullptr without memory.
  control_queue* control_queue_of(dev::peer_id p) noexcept;
  std::size_t control_queue_cap() const noexcept { return 2 * cfg_.notify_slots + cfg_.tx_size; }
  /// The fi_addr of peer p (FI_ADDR_NOTAVAIL if the application does not know it). Inline: every
  /// receive completion asks; an unknown or unresolved peer is asked about again (cold).
  std::uint64_t source_of(dev::peer_id p) noexcept {
    if (p < source_cache_.size() && source_cache_[p] < unknown_source - 1) [[likely]]
      return source_cache_[p];
    return resolve_source(p);
  }
  [[gnu::cold, gnu::noinline]] std::uint64_t resolve_source(dev::peer_id p) noexcept;
  match::matcher& matcher_for(queue_kind k) noexcept { return matchers_[static_cast<int>(k)]; }
  /// The receive a message of msg_len bytes goes to (removed from matching), or nullptr. For a
  /// multi-receive buffer, a child carved out of it.
  /// Inline (below the class): every arriving message asks.
  recv_request* take_posted(queue_kind k, dev::peer_id from, std::uint64_t tag,
                            std::size_t msg_len) noexcept;
  /// take_posted's multi-receive case: a child carved out of the buffer r.
  [[gnu::noinline]] recv_request* take_posted_multi(recv_request& r, std::size_t msg_len) noexcept;
  recv_request* carve(recv_request& parent, std::size_t msg_len) noexcept;
  /// A child finished: returns the FI_MULTI_RECV flag if its parent is now released and done.
  std::uint64_t child_done(recv_request& child) noexcept;
  core::status post_multi_recv(recv_request& parent) noexcept;
  void child_finished(recv_request& child) noexcept;  // in order: completes it and those after
  void emit_child(recv_request& child) noexcept;
  /// False if the message could not be recorded (out of memory); the caller frees it.
  [[nodiscard]] bool add_unexpected(queue_kind k, unexpected_msg& u) noexcept;
  /// Gives an unexpected message (already out of the matcher) to a receive and frees it.
  void take_unexpected(recv_request& r, unexpected_msg& u) noexcept;
  recv_request* make_recv(const recv_args& a, std::size_t capacity) noexcept;
  /// Whether read r takes rma/read-direct (else rma/read-request): the engine must reach the
  /// peer, and a read to just ahead of its source (core::page_aliased, the DMA engine's
  /// placement class; measured at the first byte, as it measures a write) takes the row whose
  /// larger sizes go by request. Needs r's ranges checked (target[0].va); called once per read.
  bool read_direct(const rma_request& r) const noexcept {
    situation s = situation::peer_unreadable;
    if (dev_.can_read(r.peer)) {
      const std::uintptr_t first = core::first_byte({r.iov.data(), r.iov_count});
      s = core::page_aliased(first, r.target[0].va) ? situation::peer_readable_aliased
                                                    : situation::peer_readable;
    }
    return protocols_.choose(op_kind::rma_read, s, r.total) == protocol::rma_read_direct;
  }
  /// Copies what fits of a message that arrived whole into a receive's buffers; returns the
  /// bytes copied.
  std::size_t copy_payload(std::span<const iovec> iov, std::size_t capacity,
                           const std::byte* data, std::size_t len) noexcept {
    const std::size_t n = std::min(len, capacity);
    if (n == 0) {
    } else if (iov.size() == 1) [[likely]] {  // MPI's receives: one buffer, and n fits it
      if (n <= 64)
        core::copy_small(iov[0].iov_base, data, n);  // an eager payload: no library call
      else
        core::copy_bytes(iov[0].iov_base, data, n);
    } else {
      core::copy_to_iov(iov, 0, data, n);
    }
    prof_recv(profile_phase::copy);
    return n;
  }
  /// Copies a message that arrived whole (eager, medium, unexpected) into r and completes it.
  [[gnu::always_inline]] void deliver_recv(recv_request& r, dev::peer_id from, std::uint64_t tag,
                                           std::uint64_t cq_data, bool has_cq_data,
                                           const std::byte* data, std::size_t len) noexcept {
    const std::size_t n = copy_payload({r.iov.data(), r.iov_count}, r.capacity, data, len);
    complete_recv(r, from, tag, cq_data, has_cq_data, len, n);
  }
  /// A receive that finds its eager, train or medium message waiting completes within its post:
  /// no request record (the record's pool acquire, fill and release were about 130 of the 550
  /// instructions of an unexpected 8 B post). Rendezvous messages still take one (their receive
  /// lives on).
  void take_unexpected_at_post(const recv_args& a, std::size_t capacity,
                               unexpected_msg& u) noexcept;
  /// The receive's message if it is already here (completed, or a rendezvous started); nullopt:
  /// nothing waiting matches it, post it.
  std::optional<core::status> recv_waiting(const recv_args& a, std::size_t capacity,
                                           match::matcher& m) noexcept;
  /// Counts, writes and frees a finished receive (inline below the class: every receive's path).
  void complete_recv(recv_request& r, dev::peer_id from, std::uint64_t tag, std::uint64_t cq_data,
                     bool has_cq_data, std::size_t msg_len, std::size_t delivered) noexcept;
  /// complete_recv of a multi-receive child: its completion waits for those carved before it.
  [[gnu::cold, gnu::noinline]] void complete_child(recv_request& r, dev::peer_id from,
                                                  std::uint64_t tag, std::uint64_t cq_data,
                                                  bool has_cq_data, std::size_t msg_len,
                                                  std::size_t delivered) noexcept;
  void fail_recv(recv_request& r, int err) noexcept;
  completion recv_success(const recv_request& r, dev::peer_id from, std::uint64_t tag,
                          std::uint64_t cq_data, bool has_cq_data, std::size_t msg_len,
                          std::size_t delivered) noexcept;
  /// recv_success for a receive named by its context and kind (truncation an error unless
  /// discard: a peeked message claimed with FI_DISCARD).
  completion received(void* context, queue_kind kind, bool discard, dev::peer_id from,
                      std::uint64_t tag, std::uint64_t cq_data, bool has_cq_data,
                      std::size_t msg_len, std::size_t delivered) noexcept;
  completion recv_failure(const recv_request& r, int err) noexcept;
  /// Writes c (a success only if asked for one; errors always) and counts it.
  void emit_recv(bool wanted, const completion& c) noexcept;
  void finish_recv(recv_request& r, const completion& c) noexcept;
  void complete_send(send_request& s) noexcept;
  /// Eager and medium sends complete as soon as the payload is copied out of the user buffer
  /// and, over a transport with a queue of its own, has left this process (report_sent).
  void complete_buffered_send(const send_args& a, std::size_t len) noexcept;
  /// The successful completion of a send to `to`, written (report_sent) to the transmit CQ if
  /// `to_cq`, and counted.
  void report_send_done(dev::peer_id to, void* context, queue_kind kind, std::size_t len,
                        bool to_cq) noexcept;

  // ---- reports of what completes when handed over (endpoint.cpp) ---------------------------
  // A send or RMA write completes when its bytes are out of the user's buffer: eager, train,
  // medium and inline RMA when posted, a rendezvous or DMA write once its data and
  // notification are handed to the device. Its report (CQ entry, counter) waits until the
  // device says what was published to the peer left this process (dev::device::sent_out):
  // under manual progress the application may stop calling us once it has the completion (a
  // barrier of its own, a socket), and a network transport's own queue empties only with our
  // progress (net.mr_reuse: an inline write reported done stayed in tcp's queue behind a full
  // socket, and never came). The emulation says "out" at once: the report is written at once.
  enum class report_counter : std::uint8_t { none, send, write };
  struct waiting_report {
    completion c;
    bool to_cq = false;
    report_counter counter = report_counter::none;
    dev::peer_id peer = dev::no_peer;
    std::uint64_t mark = 0;
  };
  /// Bounded by what a peer holds unconsumed (its packet credits) and what our polls have not
  /// read the lower completions of yet: each report waits for one peer's packets.
  std::deque<waiting_report> waiting_reports_;
  void report_sent(dev::peer_id to, const completion& c, bool to_cq,
                   report_counter counter) noexcept {
    const std::uint64_t mark = dev_.sent_mark(to);
    const core::status s = dev_.sent_out(to, mark);
    if (s == core::status::ok) [[likely]] return write_report(c, to_cq, counter);
    wait_report(to, mark, c, to_cq, counter, s);
  }
  void write_report(const completion& c, bool to_cq, report_counter counter) noexcept {
    if (to_cq && sinks_.tx) sinks_.tx.write(c);
    const counter_sink& n = counter == report_counter::send    ? sinks_.send_cntr
                            : counter == report_counter::write ? sinks_.write_cntr
                                                               : counter_sink{};
    if (n) n.add(n.self, c.err != 0);
  }
  [[gnu::cold, gnu::noinline]] void wait_report(dev::peer_id to, std::uint64_t mark,
                                                const completion& c, bool to_cq,
                                                report_counter counter, core::status s) noexcept;
  /// Writes the waiting reports whose peers' packets have left (progress_busy); the count.
  std::size_t release_reports() noexcept;
  void fail_send(send_request& s, int err) noexcept;
  void release_send(send_request& s) noexcept;

  config cfg_{};
  protocol_table protocols_{};
  /// Takes t as the endpoint's protocol table, with the limits the fast paths read from it.
  void use_protocols(const protocol_table& t) noexcept;
  /// Per queue kind: messages shorter than this go eager when transmit-complete is enough (the
  /// first size class of the send row, when it is eager; 0 otherwise). Set at open.
  std::array<std::size_t, 2> eager_below_{};
  /// Likewise for eager trains: messages from eager_below_ and shorter than this (the second
  /// class, when it is eager/train; else 0).
  std::array<std::size_t, 2> train_below_{};
  /// Messages shorter than this that eager does not take go by send_one_now's direct paths: a
  /// train below train_below_, medium from there when the table's next class is medium (then
  /// this is its end; otherwise it equals train_below_). medium_fallback_: the rendezvous a
  /// medium send without ring credit takes instead (the class's fallback).
  std::array<std::size_t, 2> direct_below_{};
  std::array<protocol, 2> medium_fallback_{};
  /// reported(), by whether the send asks for a completion: set with the sinks, so a send on
  /// the shared-memory path (which ignores it) pays one load (mpi_instructions.sh: computed per
  /// send from the sinks it cost 10 instructions).
  std::array<bool, 2> reported_by_{};
  std::size_t bell_work_ = 0;  // progress_busy: the work its notification bells did (progress.cpp)
  dev::selected_device dev_;  // the backend, through dev::device only (dev/backend.hpp)
  endpoint_sinks sinks_{};
  std::array<match::matcher, 2> matchers_;
  core::pool<send_request> sends_{64};
  core::pool<recv_request> recvs_{64};
  core::pool<unexpected_msg> unexpected_{256};
  core::pool<backlog_packet> backlog_pool_{16};
  core::intrusive_list<send_request, &send_request::hook> wait_cts_, dma_backlog_;
  core::intrusive_list<recv_request, &recv_request::hook> wait_notify_;
  // Multi-receive children in the order they took their messages (carve): their completions
  // leave in that order, so a buffer's FI_MULTI_RECV comes after all its messages and before
  // any of the next buffer's, even when an earlier message went by rendezvous (a medium message
  // without ring credit does) and a later one was copied at once.
  core::intrusive_list<recv_request, &recv_request::order_hook> multi_order_;
  core::intrusive_list<recv_request, &recv_request::hook> wait_ri_;  // RTR out, slot armed
  std::vector<peer_sequence> seq_;  // by peer
  stored_rtr_index stored_;  // RTRs waiting for their send, as the sender
  std::array<std::size_t, 2> suspended_{};  // suspended receives per queue kind
  bool lift_due_ = false;
  std::vector<recv_request*> ri_by_slot_;  // notification slot -> the RTR'd receive armed there
  bool ri_deferred_ = false;      // a landed notification waits for an earlier psn
  bool slot_starved_ = false;     // a rendezvous receive waits for a free notification slot
  bool refusal_warned_ = false;  // optimistic_refuse said why once
  bool mailbox_held_ = false;
  core::intrusive_list<backlog_packet, &backlog_packet::hook> backlog_;
  std::vector<control_queue> control_queues_;  // by peer
  std::uint32_t backlog_pass_ = 0;
  // intake.cpp: held packets (a ring of mailbox_slots entries), per sender counts.
  std::vector<held_packet> held_;
  std::size_t held_head_ = 0, held_count_ = 0;
  bool intake_signalled_ = false;  // senders were told to hold back (device set_intake_held)
  /// Held packets at which senders are told to stop: one mailbox's worth (intake.cpp).
  std::size_t hold_signal_at() const noexcept { return cfg_.mailbox_slots; }
  std::vector<std::uint32_t> held_by_peer_;
  std::uint32_t held_unknown_ = 0;  // from senders the device could not identify
  std::size_t unexpected_bytes_ = 0;  // medium payload held by unexpected records
  core::buffer_cache payload_cache_;   // their buffers, kept for reuse (at most 1 MiB idle)
  bool bound_warned_ = false;
  core::pool<rma_request> rmas_{64};
  core::pool<atomic_request> atomics_{16};
  std::size_t atomic_unsent_ = 0;  // initiator requests with ranges still to send
  /// Target: per sender, operand bytes that came as atomic_operands for its next atomic_req
  /// (made on first use: 8 KiB, one request's operands), and how many have arrived.
  struct operand_assembly {
    std::vector<std::byte> bytes;
    std::size_t filled = 0;
  };
  std::vector<operand_assembly> assembly_;
  std::vector<train_assembly> trains_;  // by sender (eager_train.cpp)
  // In post order: a request sends its ranges only once every earlier one has sent all of its
  // own, so the target performs one initiator's atomics in the order they were posted.
  core::intrusive_list<atomic_request, &atomic_request::hook> atomic_active_;
  core::intrusive_list<rma_request, &rma_request::hook> rma_active_;
  std::vector<std::uint64_t> source_cache_;  // peer -> fi_addr; unknown_source + 1 = unresolved
  std::size_t min_multi_recv_ = 64;
  std::uint32_t progress_calls_ = 0;
  std::uint64_t last_watch_ms_ = 0;  // watch_peers
  bool unstick_due_ = false;  // a peer died: watch the mailbox head for a slot it never published
  endpoint_stats stats_{};
  bool open_ = false;
  std::unique_ptr<profile> prof_;  // FI_EXANET_PROFILE; null (the default): no stamps
};

// ---- the receive path's common case, inline ---------------------------------------------------
// Defined here rather than in endpoint.cpp so that the protocol handlers (eager.cpp, medium.cpp,
// ...) and fi's receive calls inline them: an 8 B MPI message's arrival went through four call
// frames between the mailbox and the CQ, and its receive's post through three. Inline, the
// receiver of Open MPI's 8 B stream executes 641 of exanet's instructions a message where it
// executed 757 (BENCHMARKS.md, "the receive path in fewer frames").

inline std::uint64_t recv_flags(queue_kind k, bool has_cq_data) noexcept {
  return FI_RECV | (k == queue_kind::tagged ? FI_TAGGED : FI_MSG) |
         (has_cq_data ? FI_REMOTE_CQ_DATA : 0);
}

[[gnu::always_inline]] inline recv_request* endpoint::take_posted(queue_kind k, dev::peer_id from,
                                                                  std::uint64_t tag,
                                                                  std::size_t msg_len) noexcept {
  const match::source_id src = from == dev::no_peer ? match::any_source - 1 : from;
  match::matcher& m = matcher_for(k);
  match::posted_entry* e = m.peek_posted(src, k == queue_kind::tagged ? tag : 0);
  if (!e) return nullptr;
  recv_request* r = &recv_of(*e);
  ++stats_.fast_recv;
  if (r->multi) [[unlikely]]
    return take_posted_multi(*r, msg_len);
  unpost(*r);
  return r;
}

[[gnu::always_inline]] inline completion endpoint::received(
    void* context, queue_kind kind, bool discard, dev::peer_id from, std::uint64_t tag,
    std::uint64_t cq_data, bool has_cq_data, std::size_t msg_len, std::size_t delivered) noexcept {
  completion c;
  c.context = context;
  c.flags = recv_flags(kind, has_cq_data);
  c.len = delivered;
  c.data = has_cq_data ? cq_data : 0;
  c.tag = kind == queue_kind::tagged ? tag : 0;
  c.src = source_of(from);
  if (delivered < msg_len && !discard) {
    c.err = FI_ETRUNC;
    c.olen = msg_len - delivered;
  }
  return c;
}

[[gnu::always_inline]] inline completion endpoint::recv_success(
    const recv_request& r, dev::peer_id from, std::uint64_t tag, std::uint64_t cq_data,
    bool has_cq_data, std::size_t msg_len, std::size_t delivered) noexcept {
  return received(r.context, r.kind, r.discard, from, tag, cq_data, has_cq_data, msg_len,
                  delivered);
}

[[gnu::always_inline]] inline void endpoint::emit_recv(bool wanted, const completion& c) noexcept {
  if ((wanted || c.err) && sinks_.rx) sinks_.rx.write(c);
  if (sinks_.recv_cntr) sinks_.recv_cntr.add(sinks_.recv_cntr.self, c.err != 0);
}

// Writes and counts c, and frees the request.
[[gnu::always_inline]] inline void endpoint::finish_recv(recv_request& r,
                                                         const completion& c) noexcept {
  emit_recv(r.completion, c);
  if (r.rtr != rtr_state::none || r.landing) rtr_release(r);  // eager and medium: nothing held
  recvs_.release(&r);
}

[[gnu::always_inline]] inline void endpoint::complete_recv(recv_request& r, dev::peer_id from,
                                                           std::uint64_t tag, std::uint64_t cq_data,
                                                           bool has_cq_data, std::size_t msg_len,
                                                           std::size_t delivered) noexcept {
  stats_.bytes_recv += delivered;
  if (r.parent) [[unlikely]] {  // a multi-receive child: waits for those carved before it
    complete_child(r, from, tag, cq_data, has_cq_data, msg_len, delivered);
    return;
  }
  finish_recv(r, recv_success(r, from, tag, cq_data, has_cq_data, msg_len, delivered));
  prof_recv(profile_phase::done);
}

[[gnu::always_inline]] inline recv_request* endpoint::make_recv(const recv_args& a,
                                                                std::size_t capacity) noexcept {
  recv_request* r = recvs_.acquire();
  if (!r) return nullptr;
  r->context = a.context;
  r->iov_count = a.iov.size();
  if (a.iov.size() == 1) [[likely]]  // no library call for the common case
    r->iov[0] = a.iov[0];
  else if (a.iov.empty())
    r->iov[0] = {};  // a receive of no buffer still names a start: null
  else
    std::copy(a.iov.begin(), a.iov.end(), r->iov.begin());
  r->capacity = capacity;
  r->kind = a.kind;
  r->completion = a.completion;
  r->multi = a.multi_recv;
  r->entry.source = a.peer == dev::no_peer ? match::any_source : a.peer;
  r->entry.tag = a.kind == queue_kind::tagged ? a.tag : 0;
  r->entry.ignore = a.kind == queue_kind::tagged ? a.ignore : 0;
  return r;
}

// Inlined into recv, behind its test of an empty queue (a call here cost 13 instructions per
// unexpected receive; computing the lookup's arguments ahead of the test cost a posted one 7).
[[gnu::always_inline]] inline std::optional<core::status> endpoint::recv_waiting(
    const recv_args& a, std::size_t capacity, match::matcher& m) noexcept {
  const bool tagged = a.kind == queue_kind::tagged;
  match::unexpected_entry* e =
      m.find_unexpected(a.peer == dev::no_peer ? match::any_source : a.peer,
                        tagged ? a.tag : 0, tagged ? a.ignore : 0);
  if (!e) return std::nullopt;
  unexpected_msg& u = unexpected_of(*e);
  if (u.type != wire::pkt_type::rts) {
    m.remove_unexpected(*e);
    take_unexpected_at_post(a, capacity, u);
    return core::status::ok;
  }
  recv_request* r = make_recv(a, capacity);
  if (!r) return core::status::again;  // the message stays, for the retry
  m.remove_unexpected(*e);
  take_unexpected(*r, u);
  return core::status::ok;
}

// Inline (fi's receive calls take it whole): its call frame and the arguments' trip through
// memory were 16 of the 254 instructions of posting a receive.
[[gnu::always_inline]] inline core::status endpoint::recv(const recv_args& a) noexcept {
  if (a.multi_recv && (a.kind != queue_kind::msg || a.iov.size() != 1)) return core::status::invalid;
  const situation where = a.peer == dev::no_peer ? situation::any_source
                          : a.multi_recv         ? situation::multi_recv
                          : a.iov.size() != 1    ? situation::directed_iov
                                                 : situation::directed;
  const std::size_t capacity = a.iov.size() == 1 ? a.iov[0].iov_len : core::iov_length(a.iov);
  const protocol p = protocols_.choose(op_kind::recv, where, capacity);
  if (p == protocol::refused) [[unlikely]]  // the optimistic family's any-source receive
    return optimistic_refuse("receives from any source (FI_ADDR_UNSPEC)");
  // A source that died can send nothing more (progress.cpp, fail_peer); what it sent before
  // is still matched below.
  auto source_dead = [&] { return a.peer != dev::no_peer && dev_.peer_forgotten(a.peer); };
  if (a.multi_recv || p == protocol::recv_rtr_only) [[unlikely]] {
    if (!a.multi_recv && source_dead()) [[unlikely]]
      return core::status::peer_dead;
    recv_request* r = make_recv(a, capacity);
    if (!r) return core::status::again;
    if (r->multi) return post_multi_recv(*r);
    const core::status s = optimistic_recv(*r);
    if (!core::ok(s)) recvs_.release(r);
    return s;
  }
  match::matcher& m = matcher_for(a.kind);
  // Apart, so that a program that keeps up (nothing unexpected) pays one test for it.
  if (m.has_unexpected())
    if (const std::optional<core::status> s = recv_waiting(a, capacity, m)) return *s;
  if (source_dead()) [[unlikely]]
    return core::status::peer_dead;
  recv_request* r = make_recv(a, capacity);
  if (!r) return core::status::again;
  try {
    m.post(r->entry);
  } catch (...) {
    recvs_.release(r);
    return core::status::no_memory;
  }
  if (p == protocol::recv_rtr) rtr_consider(*r);
  return core::status::ok;
}

}  // namespace exanet::proto
