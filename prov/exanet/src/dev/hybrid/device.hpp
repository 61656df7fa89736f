// SPDX-License-Identifier: BSD-2-Clause
// Both backends side by side (issue 13 part 3): the emulation (dev/emu) for the peers of this
// host, the network backend (dev/net) for the others, chosen per peer when it is connected.
//
// The emulation owns what a target exposes: notification slots and generations, windows, the
// protection table and bounce rings. The network side mirrors each window and registration
// under the same slot and generation (notify_adopt, key_publish_at), so a peer on another host
// names them exactly as a local one does; a notification that arrives over the network is landed
// in the emulation's slot (emu::device::notify_land) when the bells are taken, so protocols see
// one set of slots and one set of bells.
//
// Peer ids are the hybrid's own, dense from 0. With the network off (the default), they are the
// emulation's ids and every operation goes straight to it: one predictable branch on the data
// path, no table. With it on, a table says for each id which side it is and its id there.
//
// Every process of a job must choose the same network use (dev::open_params::network::reach):
// a peer is reached over one side only, and each end picks the side by the same rule (the host
// in its name), so the two ends agree.
#pragma once
#include <string_view>
#include <vector>

#include "core/status.hpp"
#include "dev/device.hpp"
#include "dev/emu/device.hpp"
#include "dev/net/device.hpp"

namespace exanet::dev::hybrid {

class device {
 public:
  device() = default;
  device(const device&) = delete;
  device& operator=(const device&) = delete;
  ~device() { close(); }

  /// Once per process, at provider load, when the network side may open later: what its lower
  /// provider must be told before libfabric initialises it (net::choose_lower_settings).
  static bool prepare_process(std::string_view lower_provider) noexcept {
    return net::choose_lower_settings(lower_provider);
  }
  /// Opens the emulation, and the network side unless p.net.reach is off. With the network on,
  /// our name is version 2: the emulation's, with this host and the network side's lower name.
  core::status open(const open_params& p) noexcept;
  void close() noexcept;
  /// The emulation has nothing to start; the network side starts its lower endpoint.
  core::status enable(bool sleepers) noexcept {
    return net_on_ ? remote_.enable(sleepers) : core::status::ok;
  }
  const address& local_address() const noexcept { return net_on_ ? self_ : local_.local_address(); }
  caps capabilities() const noexcept;

  // ---- peers ------------------------------------------------------------------------------
  /// A peer of this host (host 0 or ours) goes to the emulation, unless every peer is to be
  /// reached over the network; another host's to the network side (unreachable when it is off,
  /// or when the name carries no lower name).
  core::status connect(const address& a, peer_id& out) noexcept;
  /// The peer's name as an address vector holds it (with the network on, version 2, host set).
  const address& peer_address(peer_id p) const noexcept {
    return net_on_ ? names_[p] : local_.peer_address(p);
  }
  std::size_t peer_count() const noexcept { return net_on_ ? routes_.size() : local_.peer_count(); }

  // ---- mailbox ------------------------------------------------------------------------------
  core::status mailbox_reserve(peer_id p, mailbox_reservation& r) noexcept {
    if (!net_on_) [[likely]] return local_.mailbox_reserve(p, r);
    const route& rt = routes_[p];
    return rt.remote ? remote_.mailbox_reserve(rt.inner, r) : local_.mailbox_reserve(rt.inner, r);
  }
  void mailbox_publish(const mailbox_reservation& r) noexcept {
    if (net_on_ && remote_.reserved_here(r)) [[unlikely]] return remote_.mailbox_publish(r);
    local_.mailbox_publish(r);
  }
  core::status mailbox_send(peer_id p, const packet& pk) noexcept {
    if (!net_on_) [[likely]] return local_.mailbox_send(p, pk);
    const route& rt = routes_[p];
    return rt.remote ? remote_.mailbox_send(rt.inner, pk) : local_.mailbox_send(rt.inner, pk);
  }
  template <class F>
  [[gnu::always_inline]] std::size_t poll_mailbox(std::size_t budget, F&& on_packet) noexcept {
    if (!net_on_) [[likely]] return local_.poll_mailbox(budget, on_packet);
    return poll_mailbox_both(budget, on_packet);
  }
  bool has_arrivals() const noexcept {
    return local_.has_arrivals() || (net_on_ && remote_.has_arrivals());
  }
  bool mailbox_unstick() noexcept { return local_.mailbox_unstick(); }
  void set_intake_held(bool held) noexcept {
    local_.set_intake_held(held);
    if (net_on_) remote_.set_intake_held(held);
  }
  bool peer_intake_held(peer_id p) const noexcept {
    if (!net_on_) [[likely]] return local_.peer_intake_held(p);
    const route& rt = routes_[p];
    return rt.remote ? remote_.peer_intake_held(rt.inner) : local_.peer_intake_held(rt.inner);
  }

  // ---- bounce rings: each side's own (the network side's are per peer, carried as lower
  // messages; dev/net/device.hpp)
  bool bounce_reserve(peer_id p, std::size_t len, std::uintptr_t place, ring_space& out) noexcept {
    if (!net_on_) [[likely]] return local_.bounce_reserve(p, len, place, out);
    const route& rt = routes_[p];
    return rt.remote ? remote_.bounce_reserve(rt.inner, len, place, out)
                     : local_.bounce_reserve(rt.inner, len, place, out);
  }
  bool bounce_credit_coming(peer_id p, std::size_t len) noexcept {
    if (!net_on_) [[likely]] return local_.bounce_credit_coming(p, len);
    const route& rt = routes_[p];
    return rt.remote ? remote_.bounce_credit_coming(rt.inner, len)
                     : local_.bounce_credit_coming(rt.inner, len);
  }
  std::uint64_t sent_mark(peer_id p) const noexcept {
    if (!net_on_) [[likely]] return 0;
    const route& rt = routes_[p];
    return rt.remote ? remote_.sent_mark(rt.inner) : 0;
  }
  core::status sent_out(peer_id p, std::uint64_t mark) noexcept {
    if (!net_on_) [[likely]] return core::status::ok;
    const route& rt = routes_[p];
    return rt.remote ? remote_.sent_out(rt.inner, mark) : core::status::ok;
  }
  bool mailbox_credit_coming(peer_id p) noexcept {
    if (!net_on_) [[likely]] return local_.mailbox_credit_coming(p);
    const route& rt = routes_[p];
    return rt.remote ? remote_.mailbox_credit_coming(rt.inner)
                     : local_.mailbox_credit_coming(rt.inner);
  }
  void bounce_write(peer_id p, const ring_space& at, std::span<const iovec> src,
                    std::size_t len) noexcept {
    if (!net_on_) [[likely]] return local_.bounce_write(p, at, src, len);
    const route& rt = routes_[p];
    rt.remote ? remote_.bounce_write(rt.inner, at, src, len)
              : local_.bounce_write(rt.inner, at, src, len);
  }
  void bounce_prepare(peer_id p, std::size_t len) noexcept {
    if (!net_on_) [[likely]] return local_.bounce_prepare(p, len);
    const route& rt = routes_[p];
    rt.remote ? remote_.bounce_prepare(rt.inner, len) : local_.bounce_prepare(rt.inner, len);
  }
  const std::byte* bounce_data(peer_id from, std::uint32_t ring, std::uint64_t offset,
                               std::size_t len) const noexcept {
    if (!net_on_) [[likely]] return local_.bounce_data(from, ring, offset, len);
    if (from >= routes_.size()) return nullptr;
    const route& rt = routes_[from];
    return rt.remote ? remote_.bounce_data(rt.inner, ring, offset, len)
                     : local_.bounce_data(rt.inner, ring, offset, len);
  }
  void bounce_consume(peer_id from, std::uint32_t ring, std::uint64_t end) noexcept {
    if (!net_on_) [[likely]] return local_.bounce_consume(from, ring, end);
    if (from >= routes_.size()) return;
    const route& rt = routes_[from];
    rt.remote ? remote_.bounce_consume(rt.inner, ring, end)
              : local_.bounce_consume(rt.inner, ring, end);
  }

  // ---- notification slots: the emulation's, mirrored on the network side ---------------------
  bool notify_alloc(std::uint32_t& slot, std::uint32_t& gen) noexcept {
    if (!local_.notify_alloc(slot, gen)) return false;
    if (net_on_ && !remote_.notify_adopt(slot, gen)) [[unlikely]] {
      local_.notify_free(slot);
      return false;
    }
    return true;
  }
  bool window_open(std::uint32_t slot, std::uint64_t va, std::uint64_t len) noexcept {
    return local_.window_open(slot, va, len) && (!net_on_ || remote_.window_open(slot, va, len));
  }
  bool notify_test(std::uint32_t slot, std::uint32_t gen, notification& out) const noexcept {
    return local_.notify_test(slot, gen, out);
  }
  void notify_free(std::uint32_t slot) noexcept {
    local_.notify_free(slot);
    if (net_on_) remote_.notify_free(slot);
  }
  /// Network landings first go into the emulation's slots (data, record, bell), then the
  /// emulation's bells are taken: one set of bells for the protocols.
  template <class F>
  bool take_notify_bells(F&& on_slot) noexcept {
    if (net_on_)
      remote_.take_notify_bells([this](std::uint32_t slot) {
        std::uint32_t gen = 0;
        notification data, record;
        if (remote_.notify_landing(slot, gen, data, record))
          (void)local_.notify_land(slot, gen, data, record);
      });
    return local_.take_notify_bells(on_slot);
  }
  notification notify_record(std::uint32_t slot) const noexcept { return local_.notify_record(slot); }
  core::status notify_record_put(peer_id p, std::uint32_t slot, const notification& rec) noexcept {
    if (!net_on_) [[likely]] return local_.notify_record_put(p, slot, rec);
    const route& rt = routes_[p];
    return rt.remote ? remote_.notify_record_put(rt.inner, slot, rec)
                     : local_.notify_record_put(rt.inner, slot, rec);
  }

  // ---- DMA engine ---------------------------------------------------------------------------
  core::status dma_post(const dma_write& w, dma_state& st) noexcept {
    if (!net_on_) [[likely]] return local_.dma_post(w, st);
    const route& rt = routes_[w.peer];
    dma_write inner = w;
    inner.peer = rt.inner;
    return rt.remote ? remote_.dma_post(inner, st) : local_.dma_post(inner, st);
  }
  bool take_write_fault(peer_id p) noexcept {
    if (!net_on_) [[likely]] return local_.take_write_fault(p);
    const route& rt = routes_[p];
    return rt.remote ? remote_.take_write_fault(rt.inner) : local_.take_write_fault(rt.inner);
  }
  bool can_read(peer_id p) const noexcept {
    if (!net_on_) [[likely]] return local_.can_read(p);
    const route& rt = routes_[p];
    return rt.remote ? remote_.can_read(rt.inner) : local_.can_read(rt.inner);
  }
  core::status dma_read(peer_id p, std::uint64_t va, std::span<const iovec> dst,
                        std::size_t dst_offset, std::size_t len) noexcept {
    if (!net_on_) [[likely]] return local_.dma_read(p, va, dst, dst_offset, len);
    const route& rt = routes_[p];
    return rt.remote ? remote_.dma_read(rt.inner, va, dst, dst_offset, len)
                     : local_.dma_read(rt.inner, va, dst, dst_offset, len);
  }

  // ---- RMA: the emulation's table, mirrored on the network side ------------------------------
  core::status key_publish(const key_grant& g, std::uint32_t& slot) noexcept;
  void key_revoke(std::uint32_t slot) noexcept {
    local_.key_revoke(slot);
    if (net_on_) remote_.key_revoke(slot);
  }
  bool key_at(std::uint32_t slot, key_grant& out) const noexcept { return local_.key_at(slot, out); }
  core::status rma_check(peer_id p, std::uint64_t key, std::uint64_t addr, std::uint64_t len,
                         std::uint32_t need, rma_target& out) noexcept {
    if (!net_on_) [[likely]] return local_.rma_check(p, key, addr, len, need, out);
    const route& rt = routes_[p];
    return rt.remote ? remote_.rma_check(rt.inner, key, addr, len, need, out)
                     : local_.rma_check(rt.inner, key, addr, len, need, out);
  }
  core::status grant_check(std::uint64_t key, std::uint64_t addr, std::uint64_t len,
                           std::uint32_t need, rma_target& out) const noexcept {
    return local_.grant_check(key, addr, len, need, out);
  }
  core::status event_post(peer_id p, const notification& n) noexcept {
    if (!net_on_) [[likely]] return local_.event_post(p, n);
    const route& rt = routes_[p];
    return rt.remote ? remote_.event_post(rt.inner, n) : local_.event_post(rt.inner, n);
  }
  template <class F>
  std::size_t poll_events(std::size_t budget, F&& on_event) noexcept {
    if (!net_on_) [[likely]] return local_.poll_events(budget, on_event);
    std::size_t n = local_.poll_events(budget, [&](peer_id from, const notification& e) {
      on_event(from == no_peer ? no_peer : of_local(from), e);
    });
    if (n < budget)
      n += remote_.poll_events(budget - n, [&](peer_id from, const notification& e) {
        on_event(from == no_peer ? no_peer : of_remote(from), e);
      });
    return n;
  }

  /// Only the shared-memory side keeps events beside its mailbox.
  bool events_ahead() const noexcept { return local_.events_ahead(); }

  // ---- lost peers ---------------------------------------------------------------------------
  template <class F>
  bool take_lost_peers(std::uint64_t now_ms, F&& on_lost) noexcept {
    if (!net_on_) [[likely]] return local_.take_lost_peers(now_ms, on_lost);
    const bool a = local_.take_lost_peers(now_ms, [&](peer_id p) { on_lost(of_local(p)); });
    const bool b = remote_.take_lost_peers(now_ms, [&](peer_id p) { on_lost(of_remote(p)); });
    return a || b;
  }
  bool take_dead_found() noexcept {
    const bool a = local_.take_dead_found();
    return (net_on_ && remote_.take_dead_found()) || a;
  }
  bool peer_forgotten(peer_id p) const noexcept {
    if (!net_on_) [[likely]] return local_.peer_forgotten(p);
    const route& rt = routes_[p];
    return rt.remote ? remote_.peer_forgotten(rt.inner) : local_.peer_forgotten(rt.inner);
  }
  void forget_dead_peer(peer_id p) noexcept {
    if (!net_on_) [[likely]] return local_.forget_dead_peer(p);
    const route& rt = routes_[p];
    rt.remote ? remote_.forget_dead_peer(rt.inner) : local_.forget_dead_peer(rt.inner);
  }

  /// Both sides' refusals, summed.
  const drop_counts& drops() const noexcept;
  route_counts routes() const noexcept;

  // ---- sleeping while idle: the emulation's word, and with the network on the network
  // side's fd beside it (each side announces, then makes its own last look: the emulation its
  // mailbox and bells, the network side fi_trywait). Out of line with the network on: the
  // network-off sleep stays what it was.
  bool sleep_prepare(const std::atomic<std::uint32_t>*& word, std::uint32_t& expected) noexcept {
    if (!net_on_) [[likely]] return local_.sleep_prepare(word, expected);
    return sleep_prepare_both(word, expected);
  }
  void sleep_end() noexcept {
    local_.sleep_end();
    if (net_on_) remote_.sleep_end();
  }
  /// Peers of this host wake the sleeper through the emulation's wake socket, armed at open,
  /// which the sleeper polls beside the network's fd. Without it (it could not be made) the
  /// word is looked at now and then, once the emulation has a peer. With every peer over the
  /// network no peer rings the word (every process of a job reaches its peers the same way).
  sleep_descriptor sleep_fd() const noexcept {
    if (!net_on_) return {};
    const bool by_socket = local_.wake_fd() >= 0;
    const sleep_descriptor r = remote_.sleep_fd();
    return {r.fd,
            !by_socket && reach_ != open_params::network::use::every_peer &&
                local_.peer_count() != 0,
            local_.wake_fd(), r.look_again_ms};
  }

  /// For a sleeper in the application's poll(2): the emulation's wake socket (bound on first
  /// use when the network is off) and, with the network on, the network side's fd.
  bool arm_poll_wake() noexcept {
    if (!net_on_) return local_.arm_poll_wake();
    // With every peer over the network no peer of this host rings the emulation's word.
    return (reach_ == open_params::network::use::every_peer || local_.arm_poll_wake()) &&
           remote_.arm_poll_wake();
  }
  sleep_descriptor poll_fd() const noexcept {
    if (!net_on_) return local_.poll_fd();
    const sleep_descriptor r = remote_.poll_fd();
    return {r.fd, false, local_.wake_fd(), r.look_again_ms};
  }

  /// The sides, for tests and tools (the protocols see only dev::device's operations).
  const emu::device& local_side() const noexcept { return local_; }
  const net::device& network_side() const noexcept { return remote_; }

 private:
  struct route {
    bool remote = false;
    peer_id inner = no_peer;  // the peer's id on its side
  };
  /// poll_mailbox with the network on: out of line, so that the network-off path above stays
  /// small enough to be inlined into the caller's progress (one branch per poll). The callback by
  /// value (a small closure, copied here only), so the caller's need not sit in memory.
  template <class F>
  [[gnu::noinline]] std::size_t poll_mailbox_both(std::size_t budget, F on_packet) noexcept {
    std::size_t n = local_.poll_mailbox(budget, [&](peer_id from, const packet& pk) {
      on_packet(from == no_peer ? no_peer : of_local(from), pk);
    });
    if (n < budget)
      n += remote_.poll_mailbox(budget - n, [&](peer_id from, const packet& pk) {
        on_packet(from == no_peer ? no_peer : of_remote(from), pk);
      });
    else
      (void)remote_.poll_mailbox(0, [](peer_id, const packet&) {});  // progress, deliver nothing
    return n;
  }
  /// The hybrid id of a side's peer, given one on first sight (a sender that connected to us).
  peer_id of_local(peer_id inner) noexcept {
    if (inner < by_local_.size() && by_local_[inner] != no_peer) [[likely]] return by_local_[inner];
    return adopt(false, inner);
  }
  peer_id of_remote(peer_id inner) noexcept {
    if (inner < by_remote_.size() && by_remote_[inner] != no_peer) [[likely]] return by_remote_[inner];
    return adopt(true, inner);
  }
  peer_id adopt(bool remote, peer_id inner) noexcept;
  [[gnu::cold]] bool sleep_prepare_both(const std::atomic<std::uint32_t>*& word,
                                        std::uint32_t& expected) noexcept;
  /// A name as the address vector holds it: version 2, with the host it lives on.
  address full_name(const address& a) const noexcept;

  emu::device local_;
  net::device remote_;
  bool net_on_ = false;
  open_params::network::use reach_ = open_params::network::use::off;
  address self_{};
  std::vector<route> routes_;       // by hybrid id (network on)
  std::vector<address> names_;      // by hybrid id (network on)
  std::vector<peer_id> by_local_;   // the emulation's id -> hybrid id
  std::vector<peer_id> by_remote_;  // the network side's id -> hybrid id
  mutable drop_counts drops_sum_{};
};
static_assert(dev::device<device>, "the hybrid offers every operation of dev::device");

}  // namespace exanet::dev::hybrid
