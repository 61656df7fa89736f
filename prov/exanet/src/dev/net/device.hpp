// SPDX-License-Identifier: BSD-2-Clause
// The ExaNeST primitives carried across hosts by one of libfabric's own network providers (issue
// 13 part 2): the "lower" provider, `tcp` (tcp;ofi_rxm) by default, opened as an RDM endpoint of
// its own. exanet never selects itself as the lower provider.
//
// How each primitive travels:
//  - Mailbox packets are lower messages of exactly 64 bytes, sent with fi_injectdata (or several
//    in one bundle, below); the 8 bytes
//    of remote CQ data carry the sender's incarnation (a random 64-bit id chosen at open), which
//    the receiver maps to the peer it learned from that sender's hello packet. They land in
//    multi-receive buffers the receiver keeps posted. FIFO per pair is the lower endpoint's
//    FI_ORDER_SAS. Every packet a sender sends takes one of its credits at that receiver; the
//    receiver gives credits back in batches once it has consumed them, so what one sender can
//    have in flight at a receiver is bounded and a full receiver means "again", never loss.
//  - A DMA write is a lower RMA write (fi_writemsg) into memory the target registered with the
//    lower provider. A receive window (window_open: slot, generation, range) is registered under
//    a key derived from its slot and generation, so a write naming a stale generation or a range
//    outside the window is refused by the lower provider at the target, and the initiator gets
//    the error. The 16-byte notification follows as a device packet on the mailbox path: the
//    lower endpoint's FI_ORDER_SAW (a send is not processed before an earlier write) makes the
//    data visible at the target before the notification, as ExaNeST's engine guarantees. For a
//    write whose caller allows it (dma_write::notify_ahead: the RTR path) the notification, with
//    the slot's landing record, leaves right after the write is posted, not after the lower
//    provider's delivery acknowledgement: the target has everything one trip after the post.
//
//  - RMA protection is checked at the target: a registration is a lower registration with
//    exactly the grant's range and rights, under a lower key the owner chose (slot and
//    generation). An initiator learns it by asking the owner (key_query/key_answer device
//    packets) on the key's first use, keeps the answer for early errors and address
//    translation, and writes through the lower key; the owner's lower provider refuses a write
//    the grant does not cover, or one through a registration revoked since.
//
//  - A lost peer is an event (take_lost_peers). tcp;ofi_rxm hides a dead peer: sends to it
//    are accepted, writes never complete, and the connection is retried for ever. So the device
//    watches silence: a peer silent for a quarter of lost_after_ms is pinged (ping/pong take no
//    credit), and one that stays silent with a ping unanswered is lost. An endpoint that closes
//    says bye, and is lost at once.
//
//  - A bounce ring (medium messages, inline RMA writes, atomics' operands) is one per sender at
//    each receiver, in the receiver's memory, credits in bytes as on ExaNeST. The sender copies
//    the bytes into its mirror of that ring (the same offsets); they leave with the packet that
//    names them, as one lower message (a bundle, dev/net/wire.hpp: a bounce header, the bytes,
//    then the packet), landing in the receive buffers like any packet; the receiver copies the
//    bytes to the ring before it reads the packet. So the sender's operation needs nothing
//    more from the sender: a send or an inject completes at post, as over shared memory (a
//    rendezvous would need the sender's progress to answer its CTS). The receiver gives ring
//    credit back with ring_credit packets, every quarter ring consumed; a message is at most
//    half a ring and a quarter of a receive buffer, so a drained ring always has room for the
//    largest (bounce_max). Every lower message is at most what the lower provider sends whole
//    when posted (lower_whole_bytes): bytes that continue a waiting bundle to the same peer
//    fill it (a burst of medium messages then costs a lower message per lower_whole_bytes, not
//    one or two per message), and a message with more bytes than fit one beside its packets
//    (piece_bytes) sends the leading ones first, in full bundles without packets.
//  - Bundles. One lower message per exanet message, as the lower provider sends one: the
//    packets of an eager train (published with mailbox_reservation::more) and bounce bytes wait
//    in a bundle and leave with the next packet to that peer published without `more`, as one
//    lower message. Anything else this device sends (to any peer), a poll, or a bundle that is
//    full sends the bundle first, as it is: FIFO per pair holds, and nothing waits for a call
//    that may not come (the protocol publishes the last packet in the same call). Each packet
//    of a bundle takes its credit at publish, as a lone packet does.
//  - Bursts. A reported packet (mailbox_reservation::reported: the application hears of its
//    message only by a later read) to a peer that a lower message went to since the last poll
//    waits in the bundle for that poll, with the packets (and medium bytes) that follow it to
//    the same peer: a window of small sends (or a window of receives' RTRs, which proto
//    publishes as reported) leaves in few lower messages, each of which costs
//    the lower provider a system call and a completion. While a bundle waits, dev::held_for_poll
//    makes every CQ read poll before it hands out completions, and sleep_prepare refuses, so
//    a kept packet leaves before its completion can be seen (docs/protocol.md, "Bursts").
//  - Sleeping (sleep_prepare, sleep_fd): the lower CQ's fd wait object, after fi_trywait. The
//    lower CQ has one only if enable was told something may sleep (an fd costs tcp work on
//    every arrival); without it, sleep_prepare says false and sleepers poll.
//
// It offers every operation of dev::device (checked below). What ExaNeST has and it does not:
// reads (a read is a request the target answers with a write). It is not yet the endpoint's backend (dev/backend.hpp) and is
// exercised by its own tests (prov/exanet/test/dev/net_device_test.cpp), also across network
// namespaces.
#pragma once
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.hpp"
#include "dev/device.hpp"
#include "dev/net/wire.hpp"

namespace exanet::dev::net {

/// An endpoint of this backend is named by dev::address version 2: the PDID, the host and port
/// its name on that host has (for the provider's address vector), the incarnation that stamps
/// its packets, and the lower provider's name for its lower endpoint (lower_name).

/// What the target's checks refused, by reason: dev::drop_counts (foreign_pdid: a hello of
/// another protection domain; bad_field; dma_refused, which the lower provider counts here;
/// notify_refused) and what only this backend can refuse.
struct net_drops : drop_counts {
  std::uint64_t unknown_sender = 0;  // a packet from an incarnation that sent no hello
  std::uint64_t from_lost = 0;       // a packet from a peer we had counted lost
  std::uint64_t withdrawn = 0;       // a write's report withdrawn: the write missed (not bad input)
  std::uint64_t unanswered = 0;      // a question (write_check, key_gone, ping) from a peer that
                                     // holds answers_per_peer answers of ours unread: dropped
};

/// What a lower message may be long and still leave whole when posted, for the lower provider
/// prov_name (fi_info's, e.g. "tcp;ofi_rxm"), given the values of FI_OFI_RXM_BUFFER_SIZE and
/// FI_OFI_RXM_EAGER_LIMIT in this process (nullptr: unset). ofi_rxm reads those itself once,
/// when libfabric initialises it; exanet follows what it read (and may have chosen the buffer
/// size before that: choose_lower_settings).
///  - Over ofi_rxm: its eager size, the buffer size (16384 by default); over tcp an eager limit
///    above the buffer size counts too (rxm then sends such messages whole, measured with
///    fi_pingpong: 20000 bytes at FI_OFI_RXM_EAGER_LIMIT=32768 as fast as 16384).
///  - A provider with RDM endpoints of its own over a byte stream (`net` in libfabric 1.17,
///    `tcp` without ofi_rxm in later ones) sends every message whole: native_whole_bytes.
///  - Anything else: whole_message_default, the size the layered providers use by default.
/// The result is clamped to [whole_message_min, most]; most is what a receive buffer's
/// multi-receive takes whole (a quarter of it).
std::size_t lower_whole_message_bytes(std::string_view prov_name, const char* rxm_buffer_size,
                                      const char* rxm_eager_limit, std::size_t most) noexcept;
inline constexpr std::size_t whole_message_default = 16384;
inline constexpr std::size_t native_whole_bytes = 65536;
/// The shortest whole message the bundles assume: a medium piece beside an eager train.
inline constexpr std::size_t whole_message_min = 4096;
static_assert(whole_message_min > wire::bundle_bytes(0, wire::max_bundle_packets));

/// The ofi_rxm buffer size exanet chooses where the process set none: two 16 KiB medium
/// messages with their header and an eager train's packets, so that such a message always leaves
/// whole as one rxm eager message (with rxm's default 16384 it took two lower messages,
/// BENCHMARKS.md 2026-12-04 20:31) and a stream of them shares lower messages two by two; a
/// burst of smaller ones shares lower messages up to that size.
/// Not more: rxm allocates and touches its send buffers 1024 at a time, at a process's first
/// send, under our endpoint's lock: 36 MB at this size. 66560 (64 KiB bundles, exanet's choice
/// from 2026-12-06 to 2026-12-07) made that 68 MB, taken by every process at once when a job
/// starts: with 16 clients and a server on two cores the server's first send took 1.0-2.4 s,
/// and fi_rdm_stress's clients missed their 2 s deadline in about one run in five of
/// upstream.named_netns. 17408 (one 16 KiB message, 18 MB) passed that test, but streamed
/// 16 KiB messages across two namespaces at 0.88-0.92x tcp;ofi_rxm; this size moved 1.20-1.47x
/// and passed it 50 runs in 50 (BENCHMARKS.md 2026-12-07). A user who streams medium messages and can spare the
/// memory sets FI_OFI_RXM_BUFFER_SIZE=66560 and FI_OFI_RXM_MSG_RX_SIZE=512 (fi_exanet(7), OTHER
/// HOSTS); one who counts every megabyte, 17408.
inline constexpr std::size_t rxm_buffer_choice = 34816;
static_assert(rxm_buffer_choice >= wire::bundle_bytes(2 * 16384, wire::train_room));
/// The receive buffers ofi_rxm posts to its shared receive context where the process set
/// FI_OFI_RXM_MSG_RX_SIZE to none and exanet chose the buffer size. rxm grows its receive pool
/// 1024 buffers at a time (36 MB at 34816 bytes each, 68 MB at 66560) and posts this many when
/// the endpoint opens. With 1024 posted, the first buffer rxm needed beyond them grew the pool
/// during the run: fi_rma_bw -S 4096 across two namespaces lost about 50 ms to it (66560-byte
/// buffers). 512 leaves half the first chunk for the buffers in flight (2026-12-06); rxm's own
/// default, 4096, posts four chunks.
inline constexpr std::size_t rxm_msg_rx_choice = 512;

/// Called once, when the provider loads (fi_prov_ini), if the network backend is on: when the
/// lower provider is one libfabric layers under ofi_rxm (tcp, verbs, or a name with ";ofi_rxm")
/// and FI_OFI_RXM_BUFFER_SIZE is unset, sets it to rxm_buffer_choice in this process's
/// environment, and FI_OFI_RXM_MSG_RX_SIZE to rxm_msg_rx_choice if that is unset too, and logs
/// it. libfabric loads external providers such as exanet before it initialises its own,
/// ofi_rxm among them, so rxm reads the values afterwards (test net.rxm_buffer_choice reads
/// rxm's own log). Every process of a job that turns the network on makes the same choice, as
/// rxm requires (it refuses a peer of another eager size); a value the user set is kept.
/// Returns whether it set the buffer size.
bool choose_lower_settings(std::string_view lower_provider) noexcept;

class device {
 public:
  device() = default;
  device(const device&) = delete;
  device& operator=(const device&) = delete;
  ~device() { close(); }

  /// Opens the lower provider's fabric, domain, endpoint, CQ and AV (p.net), and posts the
  /// receive buffers; p.geo gives the notification and key slots, p.self the PDID, node, port and
  /// host our name carries (an incarnation of 0 is chosen at random). not_supported: no such lower
  /// provider with what this backend needs, or names longer than dev::lower_name_bytes (logged);
  /// invalid: the lower provider is exanet itself.
  core::status open(const open_params& p) noexcept;
  void close() noexcept;
  /// The endpoint above is complete (its completion queues and counters bound): the lower
  /// endpoint starts (its CQ is opened and bound, it is enabled, the receive buffers posted).
  /// sleepers: whether anything may sleep on this device (sleep_prepare, arm_poll_wake); if not,
  /// the lower CQ gets no wait object, which makes every arrival cheaper (start). A device used
  /// before enable (connect, poll_mailbox) starts as if something would sleep. Later calls
  /// change nothing.
  core::status enable(bool sleepers) noexcept { return start(sleepers); }
  /// Whether the lower CQ has a wait fd (routes().network_sleepable).
  bool sleepable() const noexcept { return wait_fd_ >= 0; }

  const address& local_address() const noexcept { return self_; }
  caps capabilities() const noexcept {
    return {.dma_read = false, .direct_user_write = true, .bounce_max = bounce_max_};
  }
  const std::string& lower_provider() const noexcept { return lower_name_; }

  // ---- peers ------------------------------------------------------------------------------
  /// Inserts a's lower name and queues our hello to it. access: another PDID; invalid: a has no
  /// lower name (a version 1 name, or an endpoint without network backend).
  core::status connect(const address& a, peer_id& out) noexcept;
  const address& peer_address(peer_id p) const noexcept { return peers_[p].addr; }
  std::size_t peer_count() const noexcept { return peers_.size(); }

  // ---- packetizer -> mailbox ---------------------------------------------------------------
  /// A packet to p: again when p has no credit left for us (or the lower endpoint is busy).
  core::status mailbox_send(peer_id p, const packet& pk) noexcept;
  core::status mailbox_reserve(peer_id p, mailbox_reservation& r) noexcept;
  void mailbox_publish(const mailbox_reservation& r) noexcept;
  /// Whether r is a reservation of this device (dev/hybrid publishes through the right one).
  bool reserved_here(const mailbox_reservation& r) const noexcept { return r.handle == &reserved_; }

  /// Drives the lower provider and hands up to budget protocol packets, in arrival order per
  /// sender, to on_packet(peer_id, const packet&). Device packets (hello, credit, notification)
  /// are handled here; write completions are recorded for dma_post. A call with budget 0 (or
  /// one that reads more than its budget) only makes progress: the packets it read wait, in
  /// order, for the next call. They are bounded: each holds a credit its sender gets back only
  /// when the packet is delivered.
  template <class F>
  std::size_t poll_mailbox(std::size_t budget, F&& on_packet) noexcept {
    // Polled before enable (a CQ read before fi_enable; a caller of this device alone): started
    // as connect does, so that peers' packets come in.
    if (!started_) [[unlikely]]
      if (!core::ok(start(true))) return 0;
    if (gone_due_.load(std::memory_order_relaxed)) [[unlikely]] announce_gone();
    if (bundle_) flush_bundle();  // what waited for a later packet goes now
    burst_to_ = no_peer;          // and the next packet to any peer leaves at once
    // A packet handled here may send, and a send the lower endpoint cannot take drives it by
    // a poll of its own (push_queued): a receive buffer that poll gives back is reposted only
    // when this outer one is done with the buffers it is reading.
    const poll_depth depth(*this);
    std::size_t n = 0;
    for (; n < budget && !held_.empty(); ++n) {
      const held_packet h = held_.front();
      held_.pop_front();
      consumed(h.from);
      on_packet(h.from, h.pk);
    }
    do {
      fi_cq_data_entry e[16];
      const ssize_t got = fi_cq_read(cq_, e, 16);
      if (got == -FI_EAGAIN) break;
      if (got < 0) {
        on_cq_error();
        continue;
      }
      lower_entries_ += static_cast<std::uint64_t>(got);
      for (ssize_t i = 0; i < got; ++i) {
        // fi_cq(3): a provider may say a multi-receive buffer is released on its last message's
        // completion or in a completion of its own, with FI_MULTI_RECV and no message (rxm does
        // both). Missing the second kind left the buffer unposted: after two, nothing arrived.
        if ((e[i].flags & FI_RECV) && e[i].len != 0) {
          // Delivered now while the budget lasts and nothing is held before it, else held.
          auto take = [&](peer_id from, const packet& pk) {
            if (n < budget && held_.empty()) {
              consumed(from);
              on_packet(from, pk);
              ++n;
            } else {
              held_.push_back({from, pk});
            }
          };
          if (e[i].len == packet_bytes && e[i].buf) [[likely]] {
            packet pk;
            peer_id from = no_peer;
            std::memcpy(pk.data(), e[i].buf, packet_bytes);
            if (take_received(e[i].data, pk, from)) take(from, pk);
          } else {
            // A bundle: its ring bytes first, then its packets in order, each as if alone.
            const std::size_t k = open_bundle(e[i]);
            const auto* at = k ? static_cast<const std::byte*>(e[i].buf) + e[i].len - k * packet_bytes
                               : nullptr;
            for (std::size_t j = 0; j < k; ++j, at += packet_bytes) {
              packet pk;
              peer_id from = no_peer;
              std::memcpy(pk.data(), at, packet_bytes);
              if (take_received(e[i].data, pk, from)) take(from, pk);
            }
            if (staged_.bytes) settle_staged();
          }
        } else if (!(e[i].flags & (FI_RECV | FI_MULTI_RECV))) {
          on_tx_done(e[i].op_context, 0);
        }
        if (e[i].flags & FI_MULTI_RECV) repost_later(e[i].op_context);
      }
      // A short read emptied the lower CQ: another read now would find nothing but would cost
      // the lower provider's whole progress (tcp: an epoll_wait system call), between the packet
      // and its completion. The next poll reads again.
      if (got < 16) break;
    } while (n < budget);
    flush_pending();
    if (credits_due_) send_due_credits();
    if (!answers_due_.empty()) send_due_answers();
    if (intake_due_) send_intake();
    burst_to_ = no_peer;  // what this poll sent starts no burst: the application's next send goes
    return n;
  }

  // ---- notification slots ------------------------------------------------------------------
  bool notify_alloc(std::uint32_t& slot, std::uint32_t& gen) noexcept;
  /// Registers [va, va + len) with the lower provider for this use of the slot: the only range a
  /// write naming (slot, gen) may land in. false: the lower provider refused the registration.
  bool window_open(std::uint32_t slot, std::uint64_t va, std::uint64_t len) noexcept;
  bool notify_test(std::uint32_t slot, std::uint32_t gen, notification& out) const noexcept {
    if (slot >= slots_.size() || slots_[slot].landed != gen || gen == 0) return false;
    out = slots_[slot].data;
    return true;
  }
  void notify_free(std::uint32_t slot) noexcept;
  /// For a device beside this one that owns the notification slots (dev/hybrid): arms slot
  /// with that device's generation, so windows and notifications name the same (slot, gen) over
  /// both. false: no such slot.
  bool notify_adopt(std::uint32_t slot, std::uint32_t gen) noexcept;
  /// The notification and landing record that landed in slot for its armed generation (gen).
  bool notify_landing(std::uint32_t slot, std::uint32_t& gen, notification& data,
                      notification& record) const noexcept {
    if (slot >= slots_.size() || slots_[slot].gen == 0 || slots_[slot].landed != slots_[slot].gen)
      return false;
    gen = slots_[slot].gen;
    data = slots_[slot].data;
    record = slots_[slot].record;
    return true;
  }

  // ---- DMA engine --------------------------------------------------------------------------
  /// A write into a window the target armed (w.notify_slot, w.notify_gen), then its
  /// notification. again: in flight (the lower write has not completed, so the source buffers
  /// are still in use) or no credit for the notification; call again after poll_mailbox.
  /// access: the target refused the range (stale generation, outside the window); peer_dead.
  /// An RMA write (w.key_slot, from rma_check) goes through the registration the target's
  /// lower provider holds for that slot; access when the target refused it (revoked since).
  core::status dma_post(const dma_write& w, dma_state& st) noexcept;

  // ---- RMA: registrations, checked at the target -------------------------------------------
  /// Owner: exposes g. The lower provider registers [g.va, g.va + g.len) with exactly g's
  /// rights under a key of its own (slot and generation), so the target's lower provider
  /// refuses any access the grant does not cover. exists: g.key is exposed already;
  /// no_memory: no free slot; io: the lower provider refused the registration.
  core::status key_publish(const key_grant& g, std::uint32_t& slot) noexcept;
  /// The same in a slot the caller chose (a device beside this one owns the key slots,
  /// dev/hybrid). exists: the slot is taken; io: the lower provider refused.
  core::status key_publish_at(const key_grant& g, std::uint32_t slot) noexcept;
  /// Owner: the lower registration is closed; no access through the slot lands from now on.
  /// Every peer we answered about it is told (key_gone) before anything else we send it from
  /// the next send or poll on: it forgets that answer, so its next access under the key asks
  /// again and finds a registration made since (MPICH reuses its keys). Callable from any
  /// thread (fi_close of a registration holds no endpoint lock): it only raises a flag.
  void key_revoke(std::uint32_t slot) noexcept;
  bool key_at(std::uint32_t slot, key_grant& out) const noexcept;
  /// Owner: an access a peer asked us to carry out, checked at our own table.
  core::status grant_check(std::uint64_t key, std::uint64_t addr, std::uint64_t len,
                           std::uint32_t need, rma_target& out) const noexcept;
  /// Initiator: the check of an access at p's table. The table is p's, so the first use of a
  /// key asks p (a key_query packet) and says again until p answered; the answer is kept, and
  /// later accesses are checked against it here. An access the kept answer refuses asks again
  /// (the owner may have registered the key anew since, as MPICH does with the keys of its
  /// large-message registrations); only a fresh answer refuses. The target still has the last
  /// word: its lower provider refuses what it no longer grants (a write through a key revoked since fails
  /// with access, and the kept answer is dropped). A "no such key" answer is given once and
  /// not kept: the key may be registered later.
  core::status rma_check(peer_id p, std::uint64_t key, std::uint64_t addr, std::uint64_t len,
                         std::uint32_t need, rma_target& out) noexcept;

  // ---- lost peers, as events (dev::device's contract) --------------------------------------
  /// Hands on_lost(peer) each peer found lost (it said bye, or stayed silent lost_after_ms while
  /// pinged) and not forgotten yet, once. Looks at most once per liveness_period_ms by now_ms
  /// (the caller's monotonic clock), and at once after an operation found a peer lost.
  template <class F>
  bool take_lost_peers(std::uint64_t now_ms, F&& on_lost) noexcept {
    if (death_since_check_ || now_ms - liveness_checked_ms_ >= params_.liveness_period_ms)
      check_liveness(now_ms);
    return report_lost_peers(peers_, on_lost);
  }
  bool take_dead_found() noexcept {
    const bool f = dead_found_;
    dead_found_ = false;
    return f;
  }
  bool peer_forgotten(peer_id p) const noexcept { return peers_[p].forgotten; }
  /// A lost peer is forgotten: its answers and queued packets go; what it sends is dropped.
  void forget_dead_peer(peer_id p) noexcept;

  const drop_counts& drops() const noexcept { return drops_; }
  route_counts routes() const noexcept {
    return {.peers_network = peers_.size(), .network_bytes_sent = bytes_sent_,
            .network_messages_sent = lower_sends_,
            .network_sleepable = sleepable() ? 1u : 0u};
  }
  const net_drops& net_drop_counts() const noexcept { return drops_; }
  /// Answers to p that the lower provider holds or we queue (answers_per_peer at most).
  std::uint32_t answers_unread(peer_id p) const noexcept {
    return p < peers_.size() ? peers_[p].answers_out + peers_[p].answers_queued : 0;
  }
  static constexpr std::uint32_t answer_bound() noexcept { return answers_per_peer; }
  /// Writes through an answer that went stale before they landed (dma_post said stale).
  std::uint64_t stale_writes() const noexcept { return stale_writes_; }
  /// Peers named by network address alone whose hello then told the rest of their name.
  std::uint64_t adopted_peers() const noexcept { return adopted_; }
  /// Live peers named by address alone whose hello has not come yet.
  std::size_t peers_awaiting_hello() const noexcept { return awaiting_hello_; }
  /// Closed registrations whose lower key still leads to a sink (leave_sink).
  std::size_t sinks() const noexcept { return sinks_count_.load(std::memory_order_relaxed); }
  /// Lower messages (packets and bundles, not RMA writes) the lower provider accepted to send:
  /// with the protocol's counters, how many lower messages an exanet message took.
  std::uint64_t lower_messages_sent() const noexcept { return lower_sends_; }

  // ---- bounce rings: one per sender at each receiver, carried as lower messages ---------------
  /// Room for len bytes in our ring at p (false: p is lost, len is above bounce_max(), no
  /// credit until p consumes, or no lower operation free: the caller takes another protocol).
  /// The first use of a peer's ring allocates our mirror of it (ring_bytes).
  bool bounce_reserve(peer_id p, std::size_t len, std::uintptr_t place_like,
                      ring_space& out) noexcept;
  /// After bounce_reserve said false: true while only credit is short (bytes of ours p has not
  /// given credit for would make room) and our wait for it has lasted under credit_wait_us.
  /// Over a network a medium message that takes the rendezvous instead costs an RTS round
  /// trip and an RMA write (BENCHMARKS.md 2026-12-04: 10-13 us more than a message at 16 KiB),
  /// and in a stream the credit is usually on its way: 20 % of a window of 64 x 16 KiB took
  /// the RTS. The bound keeps a sender whose receiver does not progress (computing, or its
  /// intake held) from waiting on it: the rendezvous then lets the send go.
  bool bounce_credit_coming(peer_id p, std::size_t len) noexcept;
  /// After mailbox_reserve said again: true while p has our packets it has not given credit
  /// for (or the lower endpoint holds a backlog to it), however long that lasts. An RMA write
  /// that takes the DMA path instead costs the target's verdict, a round trip, and holds a
  /// lower operation until then, and it too needs p's progress (fi_rma_bw across two hosts,
  /// both sides writing: 1 KiB writes streamed 2-3 times as fast with a 1 ms wait, and 64 B
  /// writes twice as fast again under CPU contention with no bound, 2026-12-06).
  bool mailbox_credit_coming(peer_id p) noexcept;
  /// What was published to p has left this process once the lower provider completed a send
  /// to p handed at or after it: the lower connection carries our sends to p in the order they
  /// were handed, and a lower send completes once the transport took all of it (tcp: in the
  /// kernel's socket). Until then a packet, a bundle or an inject may wait in the lower
  /// provider's own queue (a full socket), which only our progress empties. The mark counts
  /// what is handed and what waits here to be (queued, or in the bundle), in that order.
  std::uint64_t sent_mark(peer_id p) const noexcept {
    const peer& pr = peers_[p];
    return pr.handed + pr.queued + (bundle_ && bundle_->to == p ? 1u : 0u);
  }
  /// ok once a completed lower send covers the mark; again while not, after posting an empty
  /// bundle with a completion behind the mark if nothing handed or waiting would bring one (an
  /// inject was the last); peer_dead if the peer died before all of it was handed.
  core::status sent_out(peer_id p, std::uint64_t mark) noexcept;
  static constexpr std::uint64_t credit_wait_us = 1000;
  /// After a wait ran out, the operations behind it take the fallback for this long, then the
  /// next shortage waits again. Not until a reserve succeeds: the fallback can keep the
  /// shortage alive. DMA writes hold lower operations until their verdicts, and their questions
  /// queue ahead of any packet to the peer. So once one wait ran out, every later write took
  /// DMA and nothing ever freed the way (fi_rma_bw -S 64 across two hosts, both sides writing:
  /// in some runs nearly every write of a side went by DMA, at a third of the all-inline
  /// rate). A receiver that does not progress costs a sender at most a tenth of its time
  /// in such waits.
  static constexpr std::uint64_t credit_fallback_us = 9000;
  /// A wait for credit that began at from_us (0: begins now, and is recorded) is under
  /// credit_wait_us, or has been over for credit_fallback_us (a new wait then begins).
  static bool still_waiting(std::uint64_t& from_us) noexcept;
  /// Too few lower operations free for a bounce write of len bytes: one per piece
  /// (bounce_write), beyond the share bounce_ops_reserved leaves the DMA writes.
  bool bounce_ops_short(std::size_t len) const noexcept {
    return free_ops_.size() <= bounce_ops_reserved + len / piece_bytes();
  }
  /// Copies the bytes into the mirror and sends them to p, ahead of the packet that names them.
  void bounce_write(peer_id p, const ring_space& at, std::span<const iovec> src,
                    std::size_t len) noexcept;
  /// Nothing to prepare: the mirror is ours, and the receiver's ring is written by its own
  /// progress when the bytes arrive.
  void bounce_prepare(peer_id, std::size_t) noexcept {}
  /// Receiver: the bytes `from` sent for [offset, offset + len) of its ring here (ring is
  /// always 0 over this backend: one ring per sender), or nullptr if it did not send them or
  /// they were consumed.
  const std::byte* bounce_data(peer_id from, std::uint32_t ring, std::uint64_t offset,
                               std::size_t len) const noexcept;
  void bounce_consume(peer_id from, std::uint32_t ring, std::uint64_t end) noexcept;
  /// The largest bounce message: half a ring, a quarter of a receive buffer (the lower
  /// provider's multi-receive must take it whole; FI_OPT_MIN_MULTI_RECV says so), and what the
  /// lower provider sends in one piece when posted (lower_whole_bytes with our header).
  std::size_t bounce_max() const noexcept { return bounce_max_; }
  /// The longest lower message the lower provider sends whole when posted (lower_whole_bytes):
  /// every bundle is at most this long. Longer ones would take the lower provider's own
  /// segmentation or rendezvous, which wait for our later progress (tcp;ofi_rxm: a 16512-byte
  /// message with its default 16 KiB buffers took 3 times a 16384-byte one's latency).
  std::size_t lower_whole_bytes() const noexcept { return lower_whole_; }

  // ---- what ExaNeST has and this backend does not (yet) --------------------------------------
  /// Writes land through the lower provider, which reports its own faults to the writer.
  bool take_write_fault(peer_id) noexcept { return false; }
  /// No reads: a read is a request the target answers with a write, as on ExaNeST.
  bool can_read(peer_id) const noexcept { return false; }
  core::status dma_read(peer_id, std::uint64_t, std::span<const iovec>, std::size_t,
                        std::size_t) noexcept {
    return core::status::not_supported;
  }
  /// Whether a poll may find something. Packets wait in the lower provider's CQ, which only a
  /// read can see: always true, so every progress call polls (the emulation answers in loads).
  bool has_arrivals() const noexcept { return true; }
  /// Nothing can be claimed and left unpublished in a lower provider's receive buffer.
  bool mailbox_unstick() noexcept { return false; }
  /// Sleeping on arrivals: the lower CQ is opened with an fd wait object where the lower
  /// provider has one (tcp;ofi_rxm does), and a sleeper polls that fd (sleep_fd). True if
  /// nothing waits here (packets, events or bells not handed over, queued sends, key answers)
  /// or in the lower provider (no write or bounce message in flight, which may need our
  /// progress to go out), and fi_trywait on the lower CQ says the fd may be waited on: from
  /// then on, any arrival makes it readable. No fd: false, and the owner polls. The word is one
  /// nothing changes (this backend has no futex word); the fd is the whole signal.
  bool sleep_prepare(const std::atomic<std::uint32_t>*& word, std::uint32_t& expected) noexcept;
  void sleep_end() noexcept {}
  sleep_descriptor sleep_fd() const noexcept {
    if (!stuck_) return {wait_fd_, false};
    return {quiet_at_arm_ ? wait_fd_ : -1, false, -1, nap_ms_};  // judge_wait_fd
  }
  /// Every arrival readies the lower CQ's fd already (sleep_prepare asked fi_trywait).
  bool arm_poll_wake() noexcept { return wait_fd_ >= 0 && cq_ != nullptr; }
  sleep_descriptor poll_fd() const noexcept { return sleep_fd(); }

  // ---- landing records, bells, access events, intake ---------------------------------------
  /// Calls on_slot for each slot whose notification landed since the last call; false if none.
  template <class F>
  bool take_notify_bells(F&& on_slot) noexcept {
    if (bells_.empty()) [[likely]] return false;
    rung_.swap(bells_);
    bells_.clear();
    for (std::uint32_t s : rung_) on_slot(s);
    rung_.clear();
    return true;
  }
  notification notify_record(std::uint32_t slot) const noexcept {
    return slot < slots_.size() ? slots_[slot].record : notification{};
  }
  /// The landing record of the write that follows, as a packet: FIFO per pair puts it in place
  /// before the notification. It waits in the bundle: with a notify_ahead write it leaves after
  /// the data, with the notification, as one lower message; else before anything else sent.
  core::status notify_record_put(peer_id p, std::uint32_t slot, const notification& rec) noexcept;
  /// None over the network: an event names the owner's slot only, and the answer an
  /// initiator holds may be older than the registration the write landed in (key registered
  /// anew). The access is reported by a packet that names key and address instead (proto's
  /// rma_done), resolved at the owner on arrival.
  core::status event_post(peer_id, const notification&) noexcept {
    return core::status::not_supported;
  }
  template <class F>
  std::size_t poll_events(std::size_t, F&&) noexcept {
    return 0;
  }
  /// Events arrive in line with the packets, as packets (none wait beside them).
  bool events_ahead() const noexcept { return false; }
  /// Receiver: tells every peer to hold back (or resume) message packets. Sent reliably: a
  /// peer not told yet is told at the next poll.
  void set_intake_held(bool held) noexcept {
    if (intake_held_ == held) return;
    intake_held_ = held;
    intake_due_ = true;
    send_intake();
  }
  bool peer_intake_held(peer_id p) const noexcept { return peers_[p].intake_held; }

 private:
  /// What a peer answered about one of its keys.
  struct remote_grant {
    enum class state : std::uint8_t { asked, known, refused } st = state::asked;
    std::uint32_t slot = 0;  // the owner's slot and generation
    std::uint32_t gen = 0;
    std::uint64_t lower_key = 0;  // of the owner's lower registration
    key_grant g{};
    bool fresh = false;  // known from an answer no access has been checked against yet
  };
  struct peer {
    address addr{};
    std::vector<remote_grant> grants;  // by g.key; bounded by max_remote_grants
    bool heard = true;            // a packet came since the last look (connect counts as one)
    std::uint64_t heard_ms = 0;    // when a look last found it heard
    std::uint64_t ping_out_ms = 0;  // when the first ping it has not answered went (0: none)
    std::uint64_t pinged_ms = 0;    // when we last pinged it
    bool dead = false, lost_reported = false, forgotten = false;
    bool intake_held = false;      // it asked us to hold message packets
    bool intake_sent = false;      // what it was last told of ours
    fi_addr_t fa = FI_ADDR_UNSPEC;
    std::uint32_t credits = 0;    // packets we may still send it
    std::uint64_t write_bytes_out = 0;  // of lower writes to it posted and not completed
    std::uint32_t consumed = 0;   // its packets we consumed and have not given credit for
    bool hello_due = true;        // our hello has not been sent yet
    std::uint32_t queued = 0;     // our packets to it waiting in pending_ (FIFO behind them)
    std::uint32_t answers_out = 0;     // answers to it sent with a completion, not completed yet
    std::uint32_t answers_queued = 0;  // answers to it in pending_
    // Its write_check said its next protocol packet is the write's report: deliver it (the
    // write landed) or withdraw it (it missed). none: a packet like any other.
    enum class next_report : std::uint8_t { none, deliver, withdraw } report = next_report::none;
    // Our bounce ring at it: the mirror we send from (empty until first used), how far we
    // produced, and how far it told us it consumed.
    std::vector<std::byte> ring_out;
    std::uint64_t ring_head = 0, ring_tail = 0;
    std::uint64_t credit_wait_from_us = 0;  // bounce_credit_coming: when this wait began; 0 none
    // Its bounce ring here: the bytes it sent, how far they reach, how far we consumed, and
    // how far we told it.
    // Sized by the ring its hello announced (ring_in_bytes; ours if it announced none).
    std::vector<std::byte> ring_in;
    std::uint64_t ring_in_bytes = 0;
    std::uint64_t ring_in_head = 0, ring_in_tail = 0, ring_in_told = 0;
    bool ring_credit_due = false;  // a ring_credit the lower endpoint did not take yet
    bool packet_credit_due = false;  // a packet credit the lower endpoint did not take yet
    // Our lower sends to it in the order the connection carries them (sent_out): how many were
    // handed to the lower provider, the last one whose completion came (it and every one
    // before it left this process), and whether the last one handed comes with a completion
    // (an inject does not). Control packets that overtake our queue to it are not counted.
    std::uint64_t handed = 0, handed_out = 0;
    bool last_handed_completes = true;
  };
  struct held_packet {
    peer_id from = 0;
    packet pk{};
  };
  struct op_context;
  struct pending_packet {
    peer_id to = 0;
    packet pk{};
    op_context* bounce = nullptr;  // a bounce message (pk is its header): sent with its bytes
    bool answer = false;           // counted in its peer's answers_queued
    bool reported = false;         // the application learns of its message by a read: it goes
                                   // with a completion (send_reported)
  };
  struct grant_slot {
    key_grant g{};
    std::uint32_t gen = 0;  // of the current registration; 0: free. Release-stored after g:
                            // the progress thread reads it with live_gen
    fid_mr* mr = nullptr;
    std::uint64_t lower_key = 0;  // mr's key (answers carry it); written before gen
    // Someone was answered about the live registration: its close leaves a sink (key_revoke).
    // Set (seq_cst) before on_key_query looks at gen again; read by key_revoke after gen.
    std::uint8_t told_any = 0;
    // Peers we answered about this slot, with the generation they were told: told key_gone
    // when it is revoked. Only under the endpoint's lock (on_key_query, announce_gone).
    std::vector<std::pair<peer_id, std::uint32_t>> told;
  };
  /// Tells every peer told of a generation that is no longer its slot's live one that it is
  /// gone (key_gone: takes no credit; queued FIFO when the lower endpoint is busy, and later
  /// packets to that peer wait behind the queue).
  void announce_gone() noexcept;
  void on_key_gone(peer_id from, const packet& pk) noexcept;
  /// A closed registration's lower key, kept registered over memory of our own until every
  /// peer told of it has answered its key_gone. A write through an answer that went stale
  /// meanwhile lands there, not in memory the application may have freed, and is not refused:
  /// a refused write costs the pair its lower connection (tcp closes it), and the packets in
  /// flight on it. The writer learns where its write went from the write_check behind it.
  /// Only with offset addressing (the sink answers the same offsets); under sinks_lock_.
  struct sink {
    std::uint32_t slot = 0, gen = 0;  // the closed registration's
    std::uint64_t lower_key = 0;
    std::uint64_t len = 0;
    fid_mr* mr = nullptr;
    void* memory = nullptr;  // len bytes, reserved, not backed until written
    bool announced = false;  // its key_gone went to every peer in waiting
    std::vector<peer_id> waiting;
  };
  /// key_revoke: closes slot's lower registration (gen, now closed) and leaves a sink in its place.
  void leave_sink(std::uint32_t slot, std::uint32_t gen) noexcept;
  /// Drops the sinks no peer can write through any more (every peer answered, or lost).
  void reap_sinks() noexcept;
  static void release(sink& k) noexcept;
  /// key_publish_at: a sink under key: released if g covers every write an old answer admits
  /// (true: g may take the key), else kept (false: g takes a key of its own).
  bool sink_yields(std::uint64_t key, const key_grant& g) noexcept;
  void on_write_check(peer_id from, const packet& pk) noexcept;
  void on_write_verdict(peer_id from, const packet& pk) noexcept;
  /// A device packet that takes no credit (a question: write_check, key_gone), now or FIFO
  /// behind what is queued to p.
  void send_uncredited(peer_id p, const packet& pk) noexcept;
  /// An answer to such a question (see answer_slot): bounded per peer, else as send_uncredited.
  void send_answer(peer_id p, const packet& pk) noexcept;
  void queue_uncredited(peer_id p, const packet& pk, bool answer) noexcept;
  static std::uint32_t live_gen(const grant_slot& gs) noexcept {
    return std::atomic_ref<std::uint32_t>(const_cast<std::uint32_t&>(gs.gen))
        .load(std::memory_order_acquire);
  }
  struct slot {
    std::uint32_t gen = 0;     // current use, 0: free
    std::uint32_t landed = 0;  // generation whose notification arrived
    notification data{};
    notification record{};
    fid_mr* mr = nullptr;
  };
  /// A lower operation in flight; its fi_context2 must come first (FI_CONTEXT2 mode).
  struct op_context {
    fi_context2 ctx{};
    enum class kind : std::uint8_t { free, receive, write, bounce } what = kind::free;
    bool done = false;
    bool orphan = false;  // its peer was lost while it was in flight: freed when it completes
    // A write through an answer (dma_post): its write_check's verdict, 0 while awaited.
    enum class verdict : std::uint8_t { none, awaited, landed, missed } check = verdict::none;
    int err = 0;
    std::uint32_t index = 0;
    std::uint32_t gen = 0;  // counts its uses: a verdict for an earlier one is ignored
    std::size_t len = 0;  // a write's bytes
    // A bundle (kind bounce): its header, where its ring bytes sit in the peer's mirror (len,
    // offset), and its packets, which must stay put until the lower send completes.
    packet header{};
    peer_id to = 0;
    std::uint64_t offset = 0;
    std::uint8_t count = 0;  // packets
    std::uint64_t handed_index = 0;  // a bundle: its place among its peer's sends (peer::handed)
    std::array<packet, wire::max_bundle_packets> packets;
  };

  /// One packet received from the sender whose incarnation is `incarnation`: handles device
  /// packets here; true (and its sender in from) if it is the protocol's.
  bool take_received(std::uint64_t incarnation, const packet& pk, peer_id& from) noexcept;
  /// A lower message longer than a packet: checks it is a bundle of a known sender, makes its
  /// ring bytes that sender's (staged: read where they arrived while its packets are handled),
  /// and gives the number of packets it carries (0: dropped).
  std::size_t open_bundle(const fi_cq_data_entry& e) noexcept;
  /// After a bundle's packets: its ring bytes not consumed yet are copied into the sender's
  /// ring here, before the receive buffer they arrived in is reused.
  void settle_staged() noexcept;
  /// A receive buffer the lower provider gave back, posted again once no poll reads it.
  void repost_later(void* ctx) noexcept {
    if (depth_ == 1 || reposts_due_ == reposts_.size()) return repost(ctx);
    reposts_[reposts_due_++] = ctx;
  }
  struct poll_depth {
    explicit poll_depth(device& d) noexcept : d_(d) { ++d_.depth_; }
    ~poll_depth() {
      if (--d_.depth_ == 0 && d_.reposts_due_ != 0) [[unlikely]] d_.repost_due();
    }
    device& d_;
  };
  void repost_due() noexcept;
  void on_device_packet(peer_id from, const packet& pk) noexcept;
  /// Logs (info) what stands between us and a silent peer: credits, queues, rings, operations.
  void log_silence(peer_id p) const noexcept;
  void on_hello(std::uint64_t incarnation, const packet& pk) noexcept;
  /// enable's work (also the first connect's, and open's for a lower provider that names an
  /// endpoint only once enabled).
  core::status start(bool sleepers) noexcept;
  bool started_ = false;
  void on_cq_error() noexcept;
  /// An answer to a question that takes no credit (write_verdict, key_gone ack, pong). It goes
  /// with a completion, unlike an inject, so that what a peer leaves unread is seen: the lower
  /// provider completes a send once the peer's connection took it, and stops taking more when
  /// the peer does not read. A peer holding answers_per_peer answers (sent and not completed,
  /// or queued) gets no more: its further questions are dropped (drops_.unanswered). An honest
  /// peer stays far below: each of its write_checks waits for its verdict (one per lower
  /// operation, 256 at most), and it pings once per quarter of lost_after_ms. Without a free
  /// slot (many askers at once) an answer goes as an inject, as before slots existed.
  struct answer_slot {
    fi_context2 ctx{};
    packet pk{};  // the lower provider reads it until the send completes
    peer_id to = no_peer;
    std::uint64_t handed_index = 0;  // its place among the peer's sends (peer::handed)
  };
  static constexpr std::uint32_t answers_per_peer = 320;
  static constexpr std::size_t answer_slot_count = 1024;
  std::vector<answer_slot> answer_slots_;
  std::vector<std::uint32_t> free_answer_slots_;
  /// ctx's answer slot, if it is one (nullptr: an op_context).
  answer_slot* answer_of(void* ctx) noexcept {
    auto* a = static_cast<answer_slot*>(ctx);
    return !answer_slots_.empty() && a >= answer_slots_.data() &&
                   a < answer_slots_.data() + answer_slots_.size()
               ? a
               : nullptr;
  }
  void on_answer_done(answer_slot& a) noexcept;
  void on_tx_done(void* ctx, int err) noexcept;
  void repost(void* ctx) noexcept;
  core::status post_receive(std::uint32_t buffer) noexcept;
  /// One packet as one lower message, after the bundle waiting (FIFO per pair: it was first).
  core::status inject(peer_id p, const packet& pk) noexcept {
    if (bundle_) [[unlikely]] flush_bundle();
    return inject_now(p, pk);
  }
  core::status inject_now(peer_id p, const packet& pk) noexcept;
  /// A packet whose message the application learns of only by a later read (reported): sent
  /// with a completion, which tells sent_out it left (an inject would need an empty bundle
  /// behind it for that: a second lower message per message sent and waited for). Its context
  /// is a lower operation of kind bounce holding the packet; without one free, an inject.
  core::status send_reported(peer_id p, const packet& pk) noexcept;
  bool posting_head_ = false;  // flush_pending hands the head of the queue (inject_now counts it)
  /// Sends a pending packet: an inject, or a bounce message with its bytes.
  core::status post(const pending_packet& q) noexcept;
  core::status send_bounce(op_context& op) noexcept;
  /// The bundle waiting for a later packet to its peer (nullptr: none); at most one, to one peer.
  /// Changed only through set_bundle, which keeps dev::held_for_poll: while a bundle exists, a
  /// CQ read polls before it hands out completions (the bundle may hold their messages).
  op_context* bundle_ = nullptr;
  void set_bundle(op_context* op) noexcept {
    if (!bundle_ != !op)
      held_for_poll.fetch_add(op ? 1u : ~0u, std::memory_order_relaxed);  // ~0u: minus one
    bundle_ = op;
  }
  /// The peer our last lower message went to since the last poll (no_peer: none). A reported
  /// packet to it waits in the bundle for the next poll (a burst: several messages posted
  /// between two polls leave in few lower messages, where each would pay the lower provider's
  /// system call and completion); the first packet after a poll leaves at once (a ping-pong
  /// loses nothing).
  peer_id burst_to_ = no_peer;
  /// A bundle to p to add to (bundle_ to another peer, or full, is sent first); nullptr: no
  /// lower operation free, nothing was changed.
  op_context* bundle_for(peer_id p) noexcept;
  /// Sends bundle_ (or queues it behind its peer's queued packets) and clears it.
  void flush_bundle() noexcept;
  void send_ring_credit(peer_id p) noexcept;
  /// Sends the ring and packet credits the lower endpoint did not take when they were due.
  void send_due_credits() noexcept;
  bool credits_due_ = false;  // some peer has a ring or packet credit due
  std::size_t bounce_max_ = 0;
  std::size_t lower_whole_ = whole_message_default;  // open(): lower_whole_message_bytes
  /// Ring bytes one bundle carries beside its packets: a lower message of lower_whole_ with
  /// room for an eager train's packets (wire::train_room). A medium message longer than this
  /// goes in pieces (bounce_write).
  std::size_t piece_bytes() const noexcept {
    return lower_whole_ - wire::bundle_bytes(0, wire::train_room);
  }
  bool bundling_ = false;  // the lower provider takes the three iovecs of a bundle
  /// more: a packet of the same message to p follows in this call (mailbox_reservation::more):
  /// it may wait in the bundle. reported (mailbox_reservation::reported): a packet of a burst to
  /// p may wait there for the next poll.
  core::status send_or_queue(peer_id p, const packet& pk, bool more = false,
                             bool reported = false) noexcept;
  void flush_pending() noexcept;
  void push_queued(peer_id p) noexcept;
  void drive() noexcept;
  /// close's goodbye: what is queued leaves, then a bye to each peer told of us, confirmed by
  /// its send completion, for at most bye_linger_ms.
  void say_bye() noexcept;
  static constexpr unsigned bye_linger_ms = 2000;
  bool pushing_ = false;  // push_queued is driving the lower provider (no nested push)
  core::status ready_to_send(peer_id p) noexcept;
  static constexpr unsigned push_limit_ms = 50;
  void give_credit(peer_id p) noexcept;
  static packet credit_for(const peer& pr) noexcept;
  /// p's consumed packets' credit, into the bundle the packet we are sending p leaves in.
  void credit_along(peer_id p) noexcept;
  /// A packet of p's was delivered or handled: its credit may go back.
  void consumed(peer_id p) noexcept {
    ++peers_[p].consumed;
    give_credit(p);
  }
  /// A packet to pr may go now: one credit for it, and one more for our hello if it is due.
  static bool can_send(const peer& pr) noexcept { return pr.credits >= 1u + (pr.hello_due ? 1u : 0u); }
  core::status send_hello(peer_id p) noexcept;
  /// The live peer whose network name is a's (lower name, PDID and port), or no_peer.
  peer_id live_peer_at(const address& a) const noexcept;
  /// The port the lower endpoint listens on, in info_'s source address (0: any).
  void set_lower_port(std::uint16_t port) noexcept;
  /// w's notification packet, to w.peer (the caller made sure of the credit).
  core::status send_notify(const dma_write& w) noexcept;
  void check_liveness(std::uint64_t now_ms) noexcept;
  void mark_dead(peer_id p) noexcept {
    settle_dead(peers_[p]);
    if (!peers_[p].forgotten) dead_found_ = death_since_check_ = true;
  }
  /// Marks pr dead; a peer named by address that dies before its hello no longer keeps
  /// connect walking the peers for it (awaiting_hello_).
  void settle_dead(peer& pr) noexcept {
    if (!pr.dead && pr.addr.incarnation == 0 && awaiting_hello_ > 0) --awaiting_hello_;
    pr.dead = true;
  }
  void send_signal(peer_id p, device_packet type, std::uint8_t arg = 0) noexcept;
  void send_intake() noexcept;
  void on_key_query(peer_id from, const packet& pk) noexcept;
  void on_key_answer(peer_id from, const packet& pk) noexcept;
  void send_due_answers() noexcept;
  /// quiet: a refusal is not logged (a key the lower provider holds already; the caller
  /// tries another).
  fid_mr* register_lower(std::uint64_t va, std::uint64_t len, std::uint64_t access,
                         std::uint64_t key, bool quiet = false) noexcept;
  /// Bytes of lower RMA writes to one peer that may be in flight at once; a longer write goes
  /// in pieces. A packet to that peer (a pong, a credit, a message) leaves behind what is
  /// posted before it on the same connection, and the peer counts us lost if our pongs stay
  /// away for three quarters of lost_after_ms: one 2 GiB write over tcp took 12-17 s here, and
  /// its reader counted the writer lost mid-message with a 3 or 10 s bound, 4 GiB with the
  /// default 30 s (net.large_messages). 64 MiB crosses even a 1 Gb/s link in 0.6 s, and a
  /// write window of 64 x 1 MiB still goes at once. Smaller bounds (2-8 MiB) sped up writes
  /// both ways at once, whose verdicts wait behind the other side's writes, by 6-24 %, but
  /// slowed a one-way stream of 1-16 MiB messages by 6-9 % (BENCHMARKS.md 2026-12-07 11:54).
  static constexpr std::uint64_t write_bytes_ahead = std::uint64_t{64} << 20;
  static constexpr std::size_t max_remote_grants = 64;
  op_context* op_acquire() noexcept;
  void free_op(op_context& op) noexcept {
    op.what = op_context::kind::free;
    free_ops_.push_back(op.index);
  }
  /// Lower operations bounce messages leave to DMA writes (a write needs one to progress).
  static constexpr std::size_t bounce_ops_reserved = 32;
  // Lower keys. A window's: bit 63 set, bit 62 clear, its slot and generation. An RMA
  // registration's: the user's own key where what the initiator sends is resolved against
  // the key's current registration at the target (key_is_lower_key) and the lower provider
  // takes it (rxm takes keys of its own in the same domain), else bits 63 and 62 set with its
  // slot and generation (grant_fallback_key). The answer about a key names its lower key.
  // Generations take 30 bits: two windows (or registrations) of one slot are never open
  // together, so a key is never live twice.
  static std::uint64_t window_key(std::uint32_t slot, std::uint32_t gen) noexcept {
    return (std::uint64_t{1} << 63) | (std::uint64_t{gen & 0x3fffffffu} << 32) | slot;
  }
  static std::uint64_t grant_fallback_key(std::uint32_t slot, std::uint32_t gen) noexcept {
    return (std::uint64_t{3} << 62) | (std::uint64_t{gen & 0x3fffffffu} << 32) | slot;
  }
  /// The user's key can name g's lower registration: below 2^63 (never a window's or a
  /// fallback key), and the address an initiator computes from g is the one any later
  /// registration under the key gives the same application address. So a write through an
  /// answer that has gone stale lands where the key's current registration says, or is
  /// refused by the lower provider; and only registrations for which this holds take the
  /// user's key. With offsets (tcp): g's offsets count from 0 (fi_mr_attr.offset 0 with
  /// exanet's offset addressing), and the initiator sends the offset. With virtual addresses:
  /// g names memory by its address, and the initiator sends it.
  bool key_is_lower_key(const key_grant& g) const noexcept {
    return (g.key >> 63) == 0 && (offset_addressing_ ? g.addr_base == 0 : g.addr_base == g.va);
  }

  open_params params_{};
  std::string lower_name_;
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_ep* ep_ = nullptr;
  fid_cq* cq_ = nullptr;
  int wait_fd_ = -1;  // the lower CQ's wait fd (FI_GETWAIT); -1: it has none, never sleep
  std::atomic<std::uint32_t> no_word_{0};  // sleep_prepare's word: never changes
  // A wait fd that stays readable with nothing to read (libfabric 1.17's `net`: fi_trywait says
  // 0, and poll(2) returns at once, every time) would make every sleep a spin. judge_wait_fd()
  // tells it from arrivals racing the arm: readable at the arm in stuck_after_arms sleeps in a
  // row while the lower CQ gave nothing for stuck_after_us. From then on a sleep naps instead
  // of polling the fd (sleep_descriptor::look_again_ms): 1 ms after the lower CQ gave
  // something, twice as long after each nap that found nothing, at most stuck_nap_max_ms; the
  // sleep that finds the fd quiet at the arm watches it as well, and stuck_after_arms of them
  // in a row trust it again.
  static constexpr std::uint32_t stuck_after_arms = 32;
  static constexpr std::uint64_t stuck_after_us = 50'000;
  static constexpr std::uint32_t stuck_nap_max_ms = 16;
  /// Updates stuck_ at a sleep's arm (after fi_trywait said 0).
  void judge_wait_fd() noexcept;
  std::uint64_t lower_entries_ = 0;       // lower CQ entries read, ever
  std::uint64_t entries_at_arm_ = 0;      // lower_entries_ when judge_wait_fd last looked
  std::uint64_t entries_moved_us_ = 0;    // when it last saw them move
  std::uint32_t readable_at_arm_ = 0;     // sleeps in a row whose fd was readable at the arm
  std::uint32_t nap_ms_ = 1;              // the next nap's length, while stuck_
  std::uint32_t quiet_at_arm_ = 0;        // while stuck_: sleeps in a row whose fd was quiet
  bool stuck_ = false;                    // the fd is not to be trusted (it has not been
                                          // quiet at stuck_after_arms arms in a row since it
                                          // was found stuck): sleeps nap
  bool stuck_logged_ = false;
  fid_av* av_ = nullptr;
  address self_{};
  // A deque: a packet sent from inside a send drives the lower provider (push_queued), whose
  // hellos may add a peer; the references the outer send holds must stay valid (a vector
  // reallocated under them: ASan found it in net.stress_random).
  std::deque<peer> peers_;
  std::unordered_map<std::uint64_t, peer_id> by_incarnation_;
  std::deque<pending_packet> pending_;  // bounded: each holds one of the receiver's credits,
                                        // or is a key_gone (one per answer given)
  std::deque<held_packet> held_;        // read, not yet delivered; bounded by the senders' credits
  std::vector<slot> slots_;
  std::uint32_t next_gen_ = 1;
  std::vector<grant_slot> grants_;
  std::uint32_t next_grant_gen_ = 1;
  // A revocation (key_revoke, any thread) whose askers the endpoint's next send or poll tells;
  // the only thing the send and poll paths look at while there is none.
  std::atomic<bool> gone_due_{false};
  std::mutex sinks_lock_;     // key_revoke and key_publish run on the application's threads
  std::vector<sink> sinks_;   // at most grants_.size()
  std::atomic<std::size_t> sinks_count_{0};  // sinks_.size(), read without the lock
  std::vector<std::uint32_t> told_slots_;  // slots whose told is not empty (endpoint's lock):
                                           // what announce_gone looks at
  std::deque<pending_packet> answers_due_;  // key answers waiting for a credit at their asker;
                                            // an honest asker has max_remote_grants questions out
  std::vector<std::vector<std::byte>> receive_buffers_;
  std::vector<op_context> ops_;  // receives first (one per buffer), then writes
  std::vector<std::uint32_t> free_ops_;
  packet reserved_{};            // mailbox_reserve's packet, sent by publish
  peer_id reserved_for_ = no_peer;
  std::vector<std::uint32_t> bells_, rung_;  // slots whose notification landed; at most one entry
                                            // per slot and generation
  bool intake_held_ = false, intake_due_ = false;
  bool dead_found_ = false;
  bool death_since_check_ = false;
  std::uint64_t liveness_checked_ms_ = 0;
  std::size_t iov_limit_ = 1;
  bool offset_addressing_ = false;  // the lower provider names remote memory by offset
  net_drops drops_{};
  // The ring bytes of the bundle being handled, where they arrived (its receive buffer): a
  // packet handled at once (a medium message to a posted receive) copies them out from there,
  // one copy fewer than through the ring; settle_staged() keeps what is left.
  struct staged_bytes {
    const std::byte* bytes = nullptr;  // nullptr: none
    peer_id from = no_peer;
    std::uint64_t offset = 0, end = 0;  // [offset, end) of from's ring
  } staged_{};
  unsigned depth_ = 0;  // poll_mailbox calls under way (a nested one: see poll_depth)
  std::array<void*, 4> reposts_{};  // receive buffers to post again when the outer poll ends
  std::size_t reposts_due_ = 0;
  std::uint64_t stale_writes_ = 0;
  std::uint64_t adopted_ = 0;  // adopted_peers()
  std::size_t awaiting_hello_ = 0;  // peers named by address alone, their hello not yet in
  std::uint64_t bytes_sent_ = 0;  // routes(): what the lower provider accepted to send
  std::uint64_t lower_sends_ = 0;  // lower_messages_sent(): messages it accepted (writes apart)
};
static_assert(dev::device<device>, "the network backend offers every operation of dev::device");

}  // namespace exanet::dev::net
