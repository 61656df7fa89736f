// The order of work (STYLE.md rule 11): only this file decides it. Every phase is bounded, and
// nothing blocks. Incoming packets are dispatched through one table indexed by packet type.
#include <rdma/fi_errno.h>

#include <time.h>

#include <array>

#include "core/log.hpp"
#include "proto/endpoint.hpp"

namespace exanet::proto {

struct protocol_access {
  using handler = void (endpoint::*)(dev::peer_id, const dev::packet&) noexcept;
  static constexpr std::array<handler, static_cast<std::size_t>(wire::pkt_type::count)> table() {
    std::array<handler, static_cast<std::size_t>(wire::pkt_type::count)> t{};
    t.fill(&endpoint::on_unknown);
    t[static_cast<std::size_t>(wire::pkt_type::env_data)] = &endpoint::on_env_data;
    t[static_cast<std::size_t>(wire::pkt_type::medium)] = &endpoint::on_medium;
    t[static_cast<std::size_t>(wire::pkt_type::rts)] = &endpoint::on_rts;
    t[static_cast<std::size_t>(wire::pkt_type::cts)] = &endpoint::on_cts;
    t[static_cast<std::size_t>(wire::pkt_type::rndv_ack)] = &endpoint::on_rndv_ack;
    t[static_cast<std::size_t>(wire::pkt_type::rma_read_req)] = &endpoint::on_rma_read_req;
    t[static_cast<std::size_t>(wire::pkt_type::rma_done)] = &endpoint::on_rma_done;
    t[static_cast<std::size_t>(wire::pkt_type::rma_write_inline)] = &endpoint::on_rma_write_inline;
    t[static_cast<std::size_t>(wire::pkt_type::rtr)] = &endpoint::on_rtr;
    t[static_cast<std::size_t>(wire::pkt_type::rtr_nack)] = &endpoint::on_rtr_nack;
    t[static_cast<std::size_t>(wire::pkt_type::rtr_cancel)] = &endpoint::on_rtr_cancel;
    t[static_cast<std::size_t>(wire::pkt_type::rtr_cancel_reply)] = &endpoint::on_rtr_cancel_reply;
    return t;
  }
};

namespace {
constexpr auto g_rx_handlers = protocol_access::table();
constexpr std::size_t mailbox_budget = 64;
constexpr std::uint32_t dead_check_every = 256;  // progress calls between clock reads

std::uint64_t now_ms() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return std::uint64_t(ts.tv_sec) * 1000 + std::uint64_t(ts.tv_nsec) / 1000000;
}
}  // namespace

void endpoint::on_packet(dev::peer_id from, const dev::packet& pkt) noexcept {
  const auto type = static_cast<std::uint8_t>(pkt[0]);
  const auto version = static_cast<std::uint8_t>(pkt[1]);
  if (type >= g_rx_handlers.size() || version != wire::version) [[unlikely]] {
    on_unknown(from, pkt);
    return;
  }
  if (from != dev::no_peer && !admit_in_order(from, pkt)) return;  // parked or already served
  dispatch(from, pkt);
}

void endpoint::dispatch(dev::peer_id from, const dev::packet& pkt) noexcept {
  (this->*g_rx_handlers[static_cast<std::uint8_t>(pkt[0])])(from, pkt);
}

void endpoint::on_unknown(dev::peer_id from, const dev::packet& pkt) noexcept {
  // Version skew or a peer bug: drop, say so, keep going (never assert on peer input).
  EXANET_LOG(warn, ep_data, "unknown packet type %u version %u from peer %u dropped",
             static_cast<unsigned>(pkt[0]), static_cast<unsigned>(pkt[1]), from);
}

std::size_t endpoint::progress_mailbox() noexcept {
  if (mailbox_held_) [[unlikely]] return 0;
  // Packets held at the unexpected bound go first, while receives have made room for them; then
  // no more new ones than the intake can hold (intake.cpp: back-pressure without deadlock).
  std::size_t n = held_count_ ? release_held() : 0;
  const std::size_t budget = std::min(mailbox_budget, intake_room());
  if (budget == 0) [[unlikely]] return n;  // the mailbox fills: senders see -FI_EAGAIN
  return n + dev_.poll_mailbox(
                 budget, [this](dev::peer_id from, const dev::packet& pkt) { intake(from, pkt); });
}

std::size_t endpoint::progress() noexcept {
  if (!open_) return 0;
  // First the mailbox: every arrival may complete or unblock something below.
  std::size_t n = progress_mailbox();
  n += dev_.poll_events(mailbox_budget, [this](dev::peer_id from, const dev::notification& e) {
    on_rma_event(from, e);  // peers' RMA accesses this endpoint counts
  });
  // Notifications: only the slots whose bells rang are looked at, so receives waiting for their
  // data cost nothing per progress call and nothing when another one's data lands.
  const bool rang = dev_.take_notify_bells([this, &n](std::uint32_t slot) { n += on_ri_bell(slot); });
  if (ri_deferred_ && !wait_ri_.empty()) n += poll_ri();  // one waits for an earlier psn
  if (!wait_notify_.empty() && (rang || slot_starved_))
    n += poll_notifications();  // sender-initiated rendezvous data that landed here
  if (!rma_active_.empty()) n += progress_rma();        // RMA waiting on the engine or a reply
  if (!dma_backlog_.empty()) n += retry_dma();          // our writes that met a busy engine
  if (!backlog_.empty()) n += retry_backlog();          // control packets that met a full mailbox
  if (lift_due_) lift_suspended();                       // late RTRs, after this round's matches
  if (++progress_calls_ % dead_check_every == 0 &&
      !(wait_notify_.empty() && wait_cts_.empty() && dma_backlog_.empty() && backlog_.empty() &&
        rma_active_.empty() && wait_ri_.empty()))
    check_dead_peers();
  return n;
}

std::size_t endpoint::retry_backlog() noexcept {
  std::size_t n = 0;
  while (backlog_packet* b = backlog_.front()) {
    const core::status s = dev_.mailbox_send(b->peer, b->pkt);
    if (s == core::status::again) break;  // in order: later packets wait behind this one
    backlog_.remove(*b);
    backlog_pool_.release(b);
    ++n;
  }
  return n;
}

void endpoint::check_dead_peers() noexcept {
  const std::uint64_t now = now_ms();
  if (now - last_dead_check_ms_ < cfg_.dead_peer_check_ms) return;
  last_dead_check_ms_ = now;
  // One kill(pid, 0) per known peer, only while something waits on a peer: cheap, and it also
  // reclaims the segments of peers that died with nothing in flight.
  for (dev::peer_id p = 0; p < dev_.peer_count(); ++p)
    if (!dev_.peer_forgotten(p) && !dev_.peer_alive(p)) fail_peer(p);
}

void endpoint::fail_peer(dev::peer_id p) noexcept {
  ++stats_.dead_peers;
  EXANET_LOG(warn, ep_data, "peer port %u died: failing its transfers",
             dev_.peer_address(p).port);
  wait_notify_.for_each([&](recv_request& r) {
    if (r.peer != p) return;
    wait_notify_.remove(r);
    if (r.notify_slot != recv_request::no_slot) dev_.notify_free(r.notify_slot);
    fail_recv(r, FI_ECONNRESET);
  });
  // Receives whose RTR went to the dead peer: no write can come any more. One matched to its
  // RTS fails; a cancel in progress completes; the others stay posted as plain receives.
  wait_ri_.for_each([&](recv_request& r) {
    if (r.entry.source != p) return;
    if (r.rtr_only) {  // optimistic: it had no other way to a message
      fail_recv(r, r.rtr == rtr_state::cancelling ? FI_ECANCELED : FI_ECONNRESET);
    } else if (r.rtr == rtr_state::waiting_rts) {
      fail_recv(r, FI_ECONNRESET);  // rtr_release takes it off wait_ri_
    } else if (r.rtr == rtr_state::cancelling) {
      unpost(r);
      fail_recv(r, FI_ECANCELED);
    } else {
      rtr_release(r);
    }
  });
  if (p < seq_.size()) {
    peer_sequence& q = seq_[p];
    while (backlog_packet* b = q.parked.pop_front()) backlog_pool_.release(b);
  }
  stored_.drop_peer(p);
  forget_held(p);
  auto fail_sends = [&](auto& list) {
    list.for_each([&](send_request& s) {
      if (s.peer != p) return;
      list.remove(s);
      fail_send(s, FI_ECONNRESET);
    });
  };
  fail_sends(wait_cts_);
  fail_sends(dma_backlog_);
  rma_active_.for_each([&](rma_request& r) {
    if (r.peer != p) return;
    rma_active_.remove(r);
    if (r.what == rma_request::role::read_response) r.reply_slot = rma_request::no_slot;
    rma_finish(r, FI_ECONNRESET);
  });
  backlog_.for_each([&](backlog_packet& b) {
    if (b.peer != p) return;
    backlog_.remove(b);
    backlog_pool_.release(&b);
  });
  dev_.forget_dead_peer(p);
}

}  // namespace exanet::proto
