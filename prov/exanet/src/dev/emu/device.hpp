// SPDX-License-Identifier: BSD-2-Clause
// The emulated ExaNeST device: one host is one node; each endpoint owns a shared segment
// (layout.hpp). Packets go through a multi-producer ring. A DMA write into user memory takes one
// of two engines: cross-memory attach (process_vm_writev), or staging chunks through the
// target's segment, which the target copies out when it polls (still FIFO with packets). By
// default each write takes the one measured cheaper for its size (dma_engine_choice.hpp);
// staging alone when the kernel refuses cross-memory attach.
#pragma once
#include <sys/types.h>
#include <time.h>

#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/iov.hpp"
#include "core/status.hpp"
#include "dev/device.hpp"
#include "dev/emu/dma_engine_choice.hpp"
#include "dev/emu/layout.hpp"
#include "dev/emu/segment.hpp"
#include "dev/link_model.hpp"

namespace exanet::dev::emu {

/// What open takes (dev/device.hpp); the name the emulation's tests and tools use.
using params = open_params;

/// The key of peer_index_: an endpoint's (node, port).
constexpr std::uint64_t peer_key(std::uint16_t node, std::uint32_t port) noexcept {
  return (std::uint64_t{node} << 32) | port;
}

class device {
 public:
  device() = default;
  device(const device&) = delete;
  device& operator=(const device&) = delete;
  ~device() { close(); }

  /// Creates this endpoint's segment; reclaims segments left by dead processes first.
  core::status open(const params& p) noexcept;
  void close() noexcept;
  /// Nothing to start: the mailbox is live from open, and its sleep support (a futex word) is
  /// kept whatever sleepers says.
  core::status enable(bool) noexcept { return core::status::ok; }

  const address& local_address() const noexcept { return self_; }
  caps capabilities() const noexcept {
    return {.dma_read = false, .direct_user_write = engine_mode_ != dma_engine_mode::staged};
  }

  /// Finds or maps the peer endpoint at a; status::unreachable if it does not exist,
  /// status::access if it belongs to another PDID.
  core::status connect(const address& a, peer_id& out) noexcept;
  const address& peer_address(peer_id p) const noexcept { return peers_[p].addr; }
  std::size_t peer_count() const noexcept { return peers_.size(); }

  // ---- packetizer -------------------------------------------------------------------------
  /// Claims a slot in p's mailbox; status::again when the mailbox is full.
  core::status mailbox_reserve(peer_id p, mailbox_reservation& r) noexcept;
  void mailbox_publish(const mailbox_reservation& r) noexcept {
    mailbox_slot& s = *static_cast<mailbox_slot*>(r.handle);
    // pdid and port side by side in both: one 8-byte copy (the compiler merged the two stores
    // only in some inlining contexts).
    static_assert(offsetof(mailbox_slot, src_port) == offsetof(mailbox_slot, pdid) + 4 &&
                  offsetof(address, port) == offsetof(address, pdid) + 4 &&
                  sizeof s.pdid + sizeof s.src_port == 8);
    std::memcpy(reinterpret_cast<std::byte*>(&s) + offsetof(mailbox_slot, pdid),
                reinterpret_cast<const std::byte*>(&self_) + offsetof(address, pdid), 8);
    s.src_node = self_.node;
    s.seq.store(r.position + 1, std::memory_order_release);
    wake_sleepers(*static_cast<segment_header*>(r.owner));
  }
  core::status mailbox_send(peer_id p, const packet& pk) noexcept {
    mailbox_reservation r;
    if (core::status s = mailbox_reserve(p, r); !core::ok(s)) return s;
    std::memcpy(r.data(), pk.data(), pk.size());
    mailbox_publish(r);
    return core::status::ok;
  }

  /// Hands up to budget packets from this endpoint's mailbox to on_packet(peer_id, const packet&)
  /// in arrival order. Packets of another PDID are dropped and counted (the packetizer's
  /// protection check). The sender of each packet is connected on first contact; if that fails
  /// the packet is delivered with no_peer.
  template <class F>
  [[gnu::always_inline]] std::size_t poll_mailbox(std::size_t budget, F&& on_packet) noexcept {
    // The link model's loop is a function of its own: off, it costs this one untaken branch per
    // poll, and the loop below stays small enough to be inlined into the caller's progress.
    if (probe_.landing) [[unlikely]]
      staged_probe_check();
    if (link_on_) [[unlikely]]
      return poll_mailbox_modelled(budget, on_packet);
    std::size_t n = 0;
    const std::uint64_t mask = geo_.mailbox_slots - 1;
    while (n < budget) {
      mailbox_slot& s = local_.mailbox[mb_head_ & mask];
      if (s.seq.load(std::memory_order_acquire) != mb_head_ + 1) break;
      take_head(s, on_packet);
      ++n;
    }
    return n;
  }

  /// True if a packet waits at the mailbox head, an event ring or a notification bell rang, or
  /// an operation found a peer dead: relaxed loads (the poll that follows acquires).
  bool has_arrivals() const noexcept {
    const mailbox_slot& s = local_.mailbox[mb_head_ & (geo_.mailbox_slots - 1)];
    // A staged write being timed counts too: its end is seen by polling (staged_probe_check).
    // With link_yield a poll always goes to the mailbox (poll_mailbox_modelled), which is
    // where an idle poller gives its core away.
    return s.seq.load(std::memory_order_relaxed) == mb_head_ + 1 || link_.yield_when_idle ||
           local_.doorbell->rings.load(std::memory_order_relaxed) != 0 ||
           local_.bells->summary.load(std::memory_order_relaxed) != 0 || dead_found_ ||
           probe_.landing;
  }

  // ---- sleeping while idle (layout.hpp: sleepers, wake_seq) ----------------------------------
  /// Announces a sleeper and gives the futex word to sleep on with its current value; false
  /// (nothing announced) if something arrived or is on its way (a mailbox slot claimed, not yet
  /// published). The caller sleeps on word == expected, then calls sleep_end(). Owner only.
  bool sleep_prepare(const std::atomic<std::uint32_t>*& word, std::uint32_t& expected) noexcept;
  void sleep_end() noexcept;
  /// Every arrival here changes the word: nothing else to poll.
  sleep_descriptor sleep_fd() const noexcept { return {}; }
  /// For a sleeper that polls(2) other fds too (the network side's) and cannot wait on the
  /// futex: a datagram socket, bound in /dev/shm beside the segment (wake_socket_name), that
  /// every waker of this host also sends a byte to while the flag in the header is set. Owner
  /// only, once after open; false (logged) if it cannot be made: sleepers then look at the word
  /// now and then instead.
  bool arm_wake_socket() noexcept;
  /// The armed wake socket, or -1. Readable after a wake since the last sleep_prepare.
  int wake_fd() const noexcept { return wake_fd_; }
  /// For a sleeper in the application's poll(2) (dev/device.hpp): the wake socket covers every
  /// arrival, since every waker of this host sends to it once it is armed.
  bool arm_poll_wake() noexcept { return arm_wake_socket(); }
  sleep_descriptor poll_fd() const noexcept { return {-1, false, wake_fd_}; }

  // ---- bounce rings (medium protocol; provider-owned memory at the receiver) ------------------
  /// Space for len bytes in p's bounce ring for this sender, without committing it. Returns
  /// nullptr if no ring could be claimed at p or it lacks credit. len <= ring size / 2. The
  /// space starts at place_like's offset within a cache line (up to 63 bytes are skipped), so
  /// the copy into or out of it that involves place_like is mutually aligned (core/copy.hpp).
  std::byte* bounce_acquire(peer_id p, std::size_t len, std::uintptr_t place_like,
                            std::uint32_t& ring, std::uint64_t& offset) noexcept;
  /// Makes the space from bounce_acquire used (the packet naming it is being published).
  void bounce_commit(peer_id p, std::uint64_t end) noexcept {
    peers_[p].bounce_head = end;
    peer_view(p).bounce[peers_[p].bounce_ring].head.store(end, std::memory_order_release);
  }
  /// The interface's form of the two (dev::device): room without a pointer, then the copy and
  /// the commit. The emulation copies straight into the receiver's mapped ring.
  bool bounce_reserve(peer_id p, std::size_t len, std::uintptr_t place_like,
                      ring_space& out) noexcept {
    out.handle = bounce_acquire(p, len, place_like, out.ring, out.offset);
    return out.handle != nullptr;
  }
  /// Never: here the rendezvous a medium message falls back to costs a round trip through
  /// shared memory, less than waiting for the receiver to drain its ring.
  bool bounce_credit_coming(peer_id, std::size_t) const noexcept { return false; }
  /// Never, likewise: a DMA write instead of a full mailbox's packet costs no round trip here.
  bool mailbox_credit_coming(peer_id) const noexcept { return false; }
  /// A published packet or ring byte is in the peer's memory already.
  std::uint64_t sent_mark(peer_id) const noexcept { return 0; }
  core::status sent_out(peer_id, std::uint64_t) noexcept { return core::status::ok; }
  void bounce_write(peer_id p, const ring_space& at, std::span<const iovec> src,
                    std::size_t len) noexcept {
    core::copy_from_iov(at.handle, src, 0, len);
    // Link model: the bytes occupy the link before the packet that announces them.
    if (link_on_) [[unlikely]]
      peers_[p].link.occupy(link_now_ns(), len);
    bounce_commit(p, at.offset + len);
  }
  /// After the packet naming a write was published: takes ownership of the cache lines that the
  /// next write of len bytes to p would fill, by storing into each. A ring line was last read
  /// by the receiver, whose cache still holds it while the ring is smaller than its L2, and
  /// writing it costs a cross-core invalidation; taken now, those are paid while the sender
  /// waits, not when the next message is copied in. Measured (BENCHMARKS.md, "Medium messages:
  /// the ring's next lines taken ahead"): a 4 KiB ping-pong 0.94 -> 0.46 us, streaming 4 KiB
  /// 6.7 -> 8.4 GB/s. Only lines wholly past the last write and within known credit: bytes the
  /// receiver may still read are never touched.
  void bounce_prepare(peer_id p, std::size_t len) noexcept;
  /// Receiver: the bytes a medium packet from `from` names, or nullptr unless the ring is the one
  /// `from` holds here and the range lies within one ring past what was consumed.
  const std::byte* bounce_data(peer_id from, std::uint32_t ring, std::uint64_t offset,
                               std::size_t len) const noexcept;
  /// Receiver: everything up to end in ring has been copied out. A ring its sender closed is
  /// freed once drained.
  void bounce_consume(peer_id /*from: the ring names its sender here*/, std::uint32_t ring,
                      std::uint64_t end) noexcept {
    bounce_consume(ring, end);
  }
  void bounce_consume(std::uint32_t ring, std::uint64_t end) noexcept {
    ring_desc& d = local_.bounce[ring];
    d.tail.store(end, std::memory_order_release);
    std::uint64_t owner = d.owner.load(std::memory_order_acquire);
    if ((owner & ring_closing) && ring_drained(end, d.head.load(std::memory_order_acquire)))
        [[unlikely]]
      d.owner.compare_exchange_strong(owner, 0, std::memory_order_acq_rel);
  }

  // ---- notification slots (targets of DMA notifications at this endpoint) --------------------
  /// Reserves a free local slot and a fresh generation for one expected notification. The slot
  /// admits that notification and no data until window_open widens it.
  bool notify_alloc(std::uint32_t& slot, std::uint32_t& gen) noexcept;
  /// Lets the DMA write that names (slot, its current generation) land in [va, va + len): the
  /// receive buffer or landing piece this endpoint just told a peer about. Replaces the slot's
  /// previous window; notify_free closes it. Never fails here (the window is a few stores in the
  /// segment); false only for a slot that is not armed, a bug of ours.
  bool window_open(std::uint32_t slot, std::uint64_t va, std::uint64_t len) noexcept;
  /// True once the notification for (slot, gen) landed; copies its data.
  bool notify_test(std::uint32_t slot, std::uint32_t gen, notification& out) const noexcept {
    const notify_slot& n = local_.notify[slot];
    if (n.gen.load(std::memory_order_acquire) != gen) return false;
    if (link_on_ && n.arrive_ns > link_now_ns()) [[unlikely]]
      return false;  // still in flight
    out = n.data;
    return true;
  }
  void notify_free(std::uint32_t slot) noexcept;
  /// A notification that reached this endpoint another way (the network backend beside this
  /// one, dev/hybrid): lands in (slot, gen) with its landing record exactly as a peer's DMA
  /// notification would, bell included. False when the slot does not expect that generation.
  bool notify_land(std::uint32_t slot, std::uint32_t gen, const notification& data,
                   const notification& record) noexcept {
    if (slot >= windows_.size() || gen == 0 || windows_[slot].gen != gen) return false;
    local_.notify[slot].record = record;
    notify_write(local_, slot, gen, data);
    return true;
  }
  /// Calls on_slot(slot) for every slot whose notification landed since the last call (a slot
  /// may be named again after its notification was taken another way: notify_test decides).
  /// False when nothing landed: one load.
  template <class F>
  bool take_notify_bells(F&& on_slot) noexcept {
    notify_bells& b = *local_.bells;
    if (b.summary.load(std::memory_order_relaxed) == 0) [[likely]] return false;
    std::uint64_t words = b.summary.exchange(0, std::memory_order_acquire);
    if (link_on_) [[unlikely]]
      return take_notify_bells_linked(words, on_slot);
    while (words) {
      const std::uint32_t w = static_cast<std::uint32_t>(__builtin_ctzll(words));
      words &= words - 1;
      std::uint64_t bits = b.words[w].exchange(0, std::memory_order_acquire);
      while (bits) {
        on_slot(w * 64 + static_cast<std::uint32_t>(__builtin_ctzll(bits)));
        bits &= bits - 1;
      }
    }
    return true;
  }
  /// The landing record a sender put beside (slot)'s notification; valid once notify_test
  /// returned true for it.
  notification notify_record(std::uint32_t slot) const noexcept { return local_.notify[slot].record; }
  /// Sender: writes the 16-byte landing record into p's slot before the DMA that notifies it,
  /// so it is in place when the notification arms the slot. (Hardware: one more small write of
  /// the engine, ordered before the notification.) status::invalid for a slot p does not have.
  core::status notify_record_put(peer_id p, std::uint32_t slot, const notification& rec) noexcept;

  // ---- DMA engine ---------------------------------------------------------------------------
  /// Moves w.len bytes of w.src (from w.src_offset) to w.dst_addr in w.peer, then posts the
  /// notification if asked. status::again: partly done (st records how far), call again after
  /// progress; status::access: the target range is not writable; status::peer_dead.
  core::status dma_post(const dma_write& w, dma_state& st) noexcept;

  // ---- RMA: protection table, reads, events (rma.cpp) ---------------------------------------
  /// Owner: exposes a registration to peers. status::exists if the key is already exposed here,
  /// status::no_memory when the table is full.
  core::status key_publish(const key_grant& g, std::uint32_t& slot) noexcept;
  /// Owner: after this, no new access through the slot passes rma_check.
  void key_revoke(std::uint32_t slot) noexcept;
  /// Owner: the grant a slot holds now; false if it was revoked.
  bool key_at(std::uint32_t slot, key_grant& out) const noexcept;
  /// Owner: the live grant for key; false if there is none.
  bool key_find(std::uint64_t key, key_grant& out) const noexcept;
  /// Initiator: the engine's protection check at p for [addr, addr + len) under key with the
  /// rma_access bits `need`; status::access when the key is unknown or revoked, the range falls
  /// outside the registration, or the right is missing.
  core::status rma_check(peer_id p, std::uint64_t key, std::uint64_t addr, std::uint64_t len,
                         std::uint32_t need, rma_target& out) noexcept;
  /// Owner: the same check for an access a peer asked this endpoint to carry out.
  core::status grant_check(std::uint64_t key, std::uint64_t addr, std::uint64_t len,
                           std::uint32_t need, rma_target& out) const noexcept;
  /// True when p's memory is read directly (CMA); otherwise p is asked to write the data back.
  /// Only when cross-memory attach was asked for: a read by request keeps the default mode's
  /// reads as they were (its answer is a write, which takes the measured engine).
  bool can_read(peer_id p) const noexcept {
    return peers_[p].cma && engine_mode_ == dma_engine_mode::cross_memory_attach;
  }
  /// Reads len bytes at va in p into dst from dst_offset. status::permission: the kernel refused
  /// (the peer now counts as unreadable).
  core::status dma_read(peer_id p, std::uint64_t va, std::span<const iovec> dst,
                        std::size_t dst_offset, std::size_t len) noexcept;
  /// Whether a staged write of p dropped since the last call found its range unmapped.
  bool take_write_fault(peer_id p) noexcept;
  /// Appends one event to the ring this endpoint holds at p, claiming one on first use.
  /// status::again: the ring is full; status::not_supported: p has no ring left for us.
  core::status event_post(peer_id p, const notification& n) noexcept;
  /// Whether a ring at this endpoint holds events. Read after a mailbox packet was taken (an
  /// acquire), it sees every event its sender posted before that packet: one load of a line
  /// that only event posts write.
  bool events_ahead() const noexcept {
    return local_.doorbell->rings.load(std::memory_order_relaxed) != 0;
  }
  /// Hands up to budget events from the rings at this endpoint to on_event(peer_id, const
  /// notification&). A single load when no ring rang.
  template <class F>
  std::size_t poll_events(std::size_t budget, F&& on_event) noexcept {
    if (local_.doorbell->rings.load(std::memory_order_relaxed) == 0) [[likely]] return 0;
    std::uint64_t bells = local_.doorbell->rings.exchange(0, std::memory_order_acq_rel);
    std::size_t n = 0;
    const std::uint64_t q = geo_.event_ring_entries;
    while (bells) {
      const auto ring = static_cast<std::uint32_t>(__builtin_ctzll(bells));
      bells &= bells - 1;
      ring_desc& d = local_.events[ring];
      const std::uint64_t head = d.head.load(std::memory_order_acquire);
      std::uint64_t tail = d.tail.load(std::memory_order_relaxed);
      const peer_id from = event_sender(d.owner.load(std::memory_order_acquire));
      for (; tail != head && n < budget; ++tail, ++n)
        on_event(from, local_.event_data[ring * q + (tail & (q - 1))]);
      d.tail.store(tail, std::memory_order_release);
      if (tail != head) local_.doorbell->rings.fetch_or(1ull << ring, std::memory_order_relaxed);
    }
    return n;
  }

  // ---- peers ----------------------------------------------------------------------------------
  /// Hands on_lost(peer_id) each peer found gone (its process exited, or it closed the
  /// endpoint) and not forgotten yet, once. The emulation learns it by asking: the lock each
  /// peer holds on its segment file (shm_segment::owner_alive) and its closed flag, at most once
  /// per params::liveness_period_ms by now_ms (the caller's coarse monotonic clock), and at once after an operation found a peer gone (the
  /// ranks of a job tend to die together). on_lost may forget the peer, and may call this again.
  template <class F>
  bool take_lost_peers(std::uint64_t now_ms, F&& on_lost) noexcept {
    if (death_since_check_ || now_ms - liveness_checked_ms_ >= liveness_period_ms_)
      check_liveness(now_ms);
    return report_lost_peers(peers_, on_lost);
  }
  /// True once forget_dead_peer ran for p.
  bool peer_forgotten(peer_id p) const noexcept { return peers_[p].forgotten; }
  /// Frees what this endpoint holds at a dead peer and unlinks its segment (stale reclaim).
  void forget_dead_peer(peer_id p) noexcept;
  /// True once after an operation found a peer dead (or closed) that is not forgotten yet: the
  /// protocol then fails everything of that peer at once and reclaims its segment, before the
  /// error it got is seen by the application. One load on the paths that ask.
  bool take_dead_found() noexcept {
    const bool f = dead_found_;
    dead_found_ = false;
    return f;
  }

  const drop_counts& drops() const noexcept { return drops_; }
  route_counts routes() const noexcept {
    return {.peers_shared_memory = peers_.size(),
            .dma_writes_direct = dma_writes_direct_,
            .dma_writes_staged = dma_writes_staged_};
  }
  /// The automatic mode's measurements (tests and tools).
  const dma_engine_choice& engine_choice() const noexcept { return engine_choice_; }
  /// Link model: whether it is on for this endpoint, where the endpoint sits, and the timing of
  /// the path to p (for tests and tools).
  bool link_model_on() const noexcept { return link_on_; }
  /// Times a modelled poll that took nothing gave the core away (link_params::yield_when_idle).
  std::uint64_t link_yields() const noexcept { return link_idle_polls_ / link_yield_every; }
  torus_position link_position() const noexcept { return link_pos_; }
  const link_timing& link_to(peer_id p) const noexcept { return peers_[p].link; }
  /// Receiver: tells senders to hold back message packets (layout.hpp, intake_held).
  void set_intake_held(bool held) noexcept {
    local_.header->intake_held.store(held ? 1 : 0, std::memory_order_release);
  }
  /// Sender: p asks for no new message packets now.
  bool peer_intake_held(peer_id p) const noexcept {
    // A departed sender (add_departed) has no mapping; sending to it fails as to any dead peer.
    const segment_header* h = peers_[p].view.header;
    return h && h->intake_held.load(std::memory_order_relaxed) != 0;
  }
  std::uint64_t foreign_pdid_drops() const noexcept { return drops_.foreign_pdid; }
  /// After a peer died (issue 12): a producer killed between claiming a slot of this mailbox
  /// and publishing it would stop the ring for every sender. Called once per liveness period
  /// while a death is recent: a head slot found claimed but unpublished on two calls in a row
  /// is skipped. False once the mailbox was seen empty (every claimed slot was published).
  bool mailbox_unstick() noexcept;
  std::uint64_t stuck_slots_skipped() const noexcept { return stuck_skipped_; }
  std::uint64_t mailbox_full_events() const noexcept { return mailbox_full_; }
  /// Bounce rings this endpoint claimed at peers but could not reserve (/dev/shm full).
  std::uint64_t ring_reserve_failures() const noexcept { return ring_reserve_failures_; }

 private:
  /// Hands the published head slot s to on_packet (or drops or consumes it), then frees it.
  template <class F>
  [[gnu::always_inline]] void take_head(mailbox_slot& s, F& on_packet) noexcept {
    const auto type = static_cast<std::uint8_t>(s.data[0]);
    if (s.pdid != self_.pdid) [[unlikely]] {
      ++drops_.foreign_pdid;
    } else if (type >= first_device_packet_type) [[unlikely]] {
      on_device_packet(s);
    } else {
      on_packet(sender_of(s), s.data);
    }
    s.seq.store(mb_head_ + geo_.mailbox_slots, std::memory_order_release);
    ++mb_head_;
  }
  /// poll_mailbox under the link model: the head packet is not there before its arrival time,
  /// and neither is anything behind it (FIFO per pair holds; across senders the head blocks the
  /// rest). The clock is read once per call, when a packet is there. The callback comes by value
  /// (a small closure, copied on this path only): by reference, the caller's closure would have
  /// to sit in memory on the path without the model too.
  template <class F>
  [[gnu::noinline]] std::size_t poll_mailbox_modelled(std::size_t budget, F on_packet) noexcept {
    std::size_t n = 0;
    std::uint64_t now = 0;
    const std::uint64_t mask = geo_.mailbox_slots - 1;
    while (n < budget) {
      mailbox_slot& s = local_.mailbox[mb_head_ & mask];
      if (s.seq.load(std::memory_order_acquire) != mb_head_ + 1) break;
      if (now == 0) now = link_now_ns();
      if (s.arrive_ns > now) break;
      take_head(s, on_packet);
      ++n;
    }
    if (n == 0 && link_.yield_when_idle) link_idle_poll();
    return n;
  }
  /// A modelled poll that took nothing: every link_yield_every such polls, sched_yield.
  void link_idle_poll() noexcept;
  static constexpr std::uint32_t link_yield_every = 64;
  std::uint64_t link_idle_polls_ = 0;
  /// After an arrival made visible at the peer whose header is h (by an atomic read-modify-write:
  /// the claim, a bell, a doorbell): wakes its owner's sleepers, if any (layout.hpp).
  static void wake_sleepers(segment_header& h) noexcept {
    if (h.sleepers.load(std::memory_order_seq_cst) != 0) [[unlikely]] wake_owner(h);
  }
  [[gnu::cold, gnu::noinline]] static void wake_owner(segment_header& h) noexcept;
  // Cache-line aligned: each peer starts a line, and the table's stride (a multiple of 64) is
  // indexed in two instructions where 352 bytes took three (every send and receive indexes it).
  struct alignas(64) peer {
    shm_segment seg;
    segment_view view{};
    geometry geo{};
    pid_t pid = 0;
    std::uint32_t bounce_ring = ~0u;  // ring claimed at this peer; ~0u none yet
    bool bounce_none = false;         // the peer had no free ring: do not try again each send
    std::uint64_t bounce_head = 0;
    std::uint64_t bounce_tail_seen = 0;  // the receiver's tail when last read: credit known
                                         // without touching the line the receiver writes
    std::uint32_t event_ring = ~0u;   // RMA event ring claimed at this peer; ~0u none yet
    bool event_none = false;          // the peer had no free event ring
    std::uint64_t event_head = 0;
    bool cma = true;  // cross-memory attach may be used (the mode allows it, the kernel did)
    bool dead = false;
    bool exited = false;  // the kernel said its process is gone (ESRCH), not only a lock or flag
    bool write_faulted = false;  // a staged write of it met an unmapped page (take_write_fault)
    bool forgotten = false;
    bool lost_reported = false;  // take_lost_peers handed it up
    link_timing link{};          // link model: the path to this peer and when it is free
    address addr{};  // last: the data path reads the fields above, not the name
  };

  /// What this endpoint armed for one notification slot: the authoritative copy, in private
  /// memory (the segment's copy is for initiators, and any process of the user can write it).
  struct window {
    std::uint32_t gen = 0;  // 0: closed
    std::uint64_t va = 0;
    std::uint64_t len = 0;
  };
  /// A registration as the owner granted it (the private copy of its key-table entry).
  struct grant {
    key_grant g{};
    bool live = false;  // release-stored after g (rma.cpp): read it with grant_live
  };
  static bool grant_live(const grant& gr) noexcept {
    return std::atomic_ref<bool>(const_cast<bool&>(gr.live)).load(std::memory_order_acquire);
  }

  /// The sender of a packet: most packets come from the sender of the one before (a ping-pong, a
  /// stream), which costs a compare instead of a hash lookup.
  peer_id sender_of(const mailbox_slot& s) noexcept {
    const std::uint64_t key = peer_key(s.src_node, s.src_port);
    if (key == last_sender_key_) [[likely]] return last_sender_;
    return sender_lookup(key, s);
  }
  peer_id sender_lookup(std::uint64_t key, const mailbox_slot& s) noexcept;
  /// A peer for a sender whose segment is gone: dead from the start, never mapped.
  peer_id add_departed(const address& a) noexcept;
  static constexpr std::uint32_t max_departed = 16384;
  std::uint32_t departed_ = 0;
  bool local_write_admitted(const staging_packet& sp, bool& may_fault) const noexcept;
  static bool remote_write_admitted(const segment_view& v, const geometry& g,
                                    const dma_write& w) noexcept;
  void publish_window(std::uint32_t slot) noexcept;
  peer_id event_sender(std::uint64_t owner) noexcept;
  segment_view& peer_view(peer_id p) noexcept { return peers_[p].view; }
  void on_device_packet(const mailbox_slot& s) noexcept;
  /// First medium message to pr: claims a bounce ring there and reserves its pages; on failure
  /// releases the claim and marks pr bounce_none. Cold: once per peer.
  [[gnu::cold, gnu::noinline]] bool claim_bounce_ring(peer& pr) noexcept;
  core::status dma_cma(peer& pr, const dma_write& w, dma_state& st) noexcept;
  core::status dma_staged(peer& pr, const dma_write& w, dma_state& st) noexcept;
  dma_engine engine_for(const peer& pr, const dma_write& w, dma_state& st) noexcept;
  /// A write the automatic mode timed ended (write_timed: its samples, and when it ended).
  void write_timed(dma_engine e, const dma_write& w, std::uint64_t start, std::uint64_t end) noexcept;
  void log_engine_choice() const noexcept;
  /// One staged write at a time is timed, from its first piece until the target frees the
  /// chunk of its last (it copies pieces out in order), for the automatic mode.
  struct staged_probe {
    bool landing = false;      // the last piece is out; its chunk not seen free yet
    const dma_state* owner = nullptr;  // the write being timed, while its pieces go out
    peer_id peer = no_peer;
    std::uint32_t chunk = 0;
    std::size_t len = 0;
    bool aliased = false;      // its class (dma_engine_choice::is_aliased)
    std::uint64_t start_ns = 0;
    std::uint64_t checked_ns = 0;  // the last look: a sample is kept only if the end was seen
                                   // soon after it happened
  };
  void staged_probe_start(const peer& pr, const dma_write& w, const dma_state& st,
                          std::uint64_t free_mask) noexcept;
  /// Polls the timed write's last chunk (poll_mailbox); records the sample once it is free.
  [[gnu::cold, gnu::noinline]] void staged_probe_check() noexcept;
  static void notify_write(segment_view& v, std::uint32_t slot, std::uint32_t gen,
                           const notification& data, std::uint64_t arrive_ns = 0) noexcept;
  /// The link model's clock: CLOCK_MONOTONIC, one clock for every process of the host.
  static std::uint64_t link_now_ns() noexcept {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
           static_cast<std::uint64_t>(ts.tv_nsec);
  }
  /// take_notify_bells under the link model: a slot whose notification is still in flight rings
  /// again, to be taken by a later call. The callback by value, as poll_mailbox_modelled's.
  template <class F>
  [[gnu::noinline]] bool take_notify_bells_linked(std::uint64_t words, F on_slot) noexcept {
    notify_bells& b = *local_.bells;
    const std::uint64_t now = link_now_ns();
    while (words) {
      const std::uint32_t w = static_cast<std::uint32_t>(__builtin_ctzll(words));
      words &= words - 1;
      std::uint64_t bits = b.words[w].exchange(0, std::memory_order_acquire);
      std::uint64_t later = 0;
      while (bits) {
        const std::uint32_t slot = w * 64 + static_cast<std::uint32_t>(__builtin_ctzll(bits));
        if (local_.notify[slot].arrive_ns > now)
          later |= bits & -bits;
        else
          on_slot(slot);
        bits &= bits - 1;
      }
      if (later) {
        b.words[w].fetch_or(later, std::memory_order_release);
        b.summary.fetch_or(1ull << w, std::memory_order_release);
      }
    }
    return true;
  }
  /// Link model: stamps the arrival time of a packet just reserved in s for pr (mailbox_reserve).
  [[gnu::cold, gnu::noinline]] core::status link_stamp(peer& pr, mailbox_slot& s) noexcept;
  /// Link model: a synchronous read of len bytes from p costs a request there and the data
  /// back; the caller waits for that.
  void link_wait_read(peer& pr, std::size_t len) noexcept;
  void reclaim_stale_segments() noexcept;

  address self_{};
  geometry geo_{};
  shm_segment seg_;
  segment_view local_{};
  std::uint64_t mb_head_ = 0;  // consumer position: private to this endpoint
  int wake_fd_ = -1;           // arm_wake_socket's socket; -1 unarmed
  std::uint64_t stuck_head_ = ~0ull;  // mailbox_unstick: the head position seen unpublished
  std::uint64_t stuck_skipped_ = 0;
  dma_engine_mode engine_mode_ = dma_engine_mode::cross_memory_attach;
  dma_engine_choice engine_choice_;
  staged_probe probe_;
  std::uint64_t last_write_end_ns_ = 0;  // the last timed write: when it ended, how long it took
  std::uint64_t last_write_ns_ = 0;
  std::uint64_t dma_writes_direct_ = 0;
  std::uint64_t dma_writes_staged_ = 0;
  std::vector<peer> peers_;
  std::unordered_map<std::uint64_t, peer_id> peer_index_;  // entries live until close
  bool dead_found_ = false;  // take_dead_found
  // take_lost_peers: when the peers were last asked about, how often they may be, and whether a
  // death was found since (then all are asked at the next call, whatever the period).
  std::uint64_t liveness_checked_ms_ = 0;
  std::uint32_t liveness_period_ms_ = 200;
  bool death_since_check_ = false;
  /// forget_dead_peer's wait for an exited peer's segment lock: at most 200 x 0.25 ms = 50 ms.
  static constexpr int exited_lock_wait_steps = 200;
  static constexpr long exited_lock_wait_step_ns = 250'000;
  void mark_dead(peer& pr) noexcept {
    pr.dead = true;
    if (!pr.forgotten) dead_found_ = death_since_check_ = true;
  }
  /// Marks dead every peer whose process is gone or whose endpoint closed.
  void check_liveness(std::uint64_t now_ms) noexcept;
  std::uint64_t last_sender_key_ = ~0ull;  // sender_of's cache of one index entry
  peer_id last_sender_ = no_peer;
  std::vector<std::uint32_t> free_notify_;
  std::vector<std::uint32_t> notify_gen_;
  std::vector<window> windows_;
  std::vector<grant> grants_;
  drop_counts drops_{};
  std::uint64_t mailbox_full_ = 0;
  bool link_on_ = false;  // the link model (dev/link_model.hpp); off: one untaken branch
  link_params link_{};
  torus_position link_pos_{};
  std::uint64_t ring_reserve_failures_ = 0;
};

static_assert(dev::device<device>);

}  // namespace exanet::dev::emu
