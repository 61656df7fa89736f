// SPDX-License-Identifier: BSD-2-Clause
// The order of work (STYLE.md rule 11): only this file decides it. Every phase is bounded, and
// nothing blocks. Incoming packets are dispatched through one table indexed by packet type.
#include <rdma/fi_errno.h>

#include <array>

#include "core/log.hpp"
#include "proto/clock.hpp"
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
    t[static_cast<std::size_t>(wire::pkt_type::rndv_probe)] = &endpoint::on_rndv_probe;
    t[static_cast<std::size_t>(wire::pkt_type::rndv_probe_reply)] = &endpoint::on_rndv_probe_reply;
    t[static_cast<std::size_t>(wire::pkt_type::atomic_req)] = &endpoint::on_atomic_req;
    t[static_cast<std::size_t>(wire::pkt_type::atomic_operands)] = &endpoint::on_atomic_operands;
    t[static_cast<std::size_t>(wire::pkt_type::eager_data)] = &endpoint::on_eager_data;
    return t;
  }
};

namespace {
constexpr auto g_rx_handlers = protocol_access::table();
constexpr std::size_t mailbox_budget = 64;

}  // namespace

// Inlined into the mailbox loop (with the loop's closure, drain_mailbox): its call frame cost 16
// instructions a packet.
[[gnu::always_inline]] inline void endpoint::handle_packet(dev::peer_id from,
                                                           const dev::packet& pkt) noexcept {
  const auto type = static_cast<std::uint8_t>(pkt[0]);
  const auto version = static_cast<std::uint8_t>(pkt[1]);
  if (type >= g_rx_handlers.size() || version != wire::version) [[unlikely]] {
    on_unknown(from, pkt);
    return;
  }
  if (from != dev::no_peer && !admit_in_order(from, pkt)) return;  // parked or already served
  if (type == static_cast<std::uint8_t>(wire::pkt_type::env_data)) [[likely]]
    on_env_data(from, pkt);  // the small message: a direct call, not through the table
  else
    (this->*g_rx_handlers[type])(from, pkt);
}

void endpoint::on_packet(dev::peer_id from, const dev::packet& pkt) noexcept {
  handle_packet(from, pkt);
}

void endpoint::dispatch(dev::peer_id from, const dev::packet& pkt) noexcept {
  (this->*g_rx_handlers[static_cast<std::uint8_t>(pkt[0])])(from, pkt);
}

void endpoint::on_unknown(dev::peer_id from, const dev::packet& pkt) noexcept {
  // Version skew or a peer bug: drop, say so, keep going (never assert on peer input).
  ++stats_.drop_unknown;
  EXANET_LOG_ONCE(warn, ep_data, "unknown packet type %u version %u from peer %u dropped",
             static_cast<unsigned>(pkt[0]), static_cast<unsigned>(pkt[1]), from);
}

// Out of line: the mailbox loop that asks for it keeps its registers.
[[gnu::noinline]] std::size_t endpoint::take_events() noexcept {
  return dev_.poll_events(mailbox_budget, [this](dev::peer_id from, const dev::notification& e) {
    on_rma_event(from, e);
  });
}

// progress_busy's first phase, inlined there (one call frame less per arriving packet).
[[gnu::always_inline]] inline std::size_t endpoint::drain_mailbox() noexcept {
  if (mailbox_held_) [[unlikely]] return 0;
  // Packets held at the unexpected bound go first, while receives have made room for them; then
  // no more new ones than the intake can hold (intake.cpp: back-pressure without deadlock).
  std::size_t n = held_count_ ? release_held() : 0;
  const std::size_t budget = std::min(mailbox_budget, intake_room());
  if (budget == 0) [[unlikely]] return n;  // the mailbox fills: senders see -FI_EAGAIN
  // The closure is inlined into the device's loop, so a small message goes from its slot to its
  // protocol handler in one frame (GCC's __attribute__ form: a [[...]] attribute in that place
  // would apply to the call operator's type, not to the function).
  auto take = [this](dev::peer_id from, const dev::packet& pkt) __attribute__((always_inline)) {
    // RMA events posted before this packet go first (with cross-memory attach a writedata's
    // CQ data comes as an event, beside the mailbox): its completion then precedes that of a
    // message sent after the write, the order shm and tcp give.
    if (dev_.events_ahead()) [[unlikely]] take_events();
    if (intake_clear()) [[likely]]
      handle_packet(from, pkt);
    else
      intake(from, pkt);
  };
  return n + dev_.poll_mailbox(budget, take);
}

std::size_t endpoint::progress_mailbox() noexcept { return drain_mailbox(); }

std::size_t endpoint::progress_busy() noexcept {
  // Reached when quiet() found something (the header's progress); the phases below each test
  // their own condition again, so an extra call is harmless.
  if (!open_) return 0;
  // First the mailbox: every arrival may complete or unblock something below.
  std::size_t n = drain_mailbox();
  if (dev_.events_ahead()) n += take_events();  // peers' RMA accesses this endpoint counts
  // Notifications: only the slots whose bells rang are looked at, so receives waiting for their
  // data cost nothing per progress call and nothing when another one's data lands.
  // What the bells did is summed in a member, not in n: a lambda holding n's address would keep
  // n in memory for the whole call (the device's link-model path takes the lambda out of line).
  const bool rang =
      dev_.take_notify_bells([this](std::uint32_t slot) { bell_work_ += on_ri_bell(slot); });
  if (rang) {
    n += bell_work_;
    bell_work_ = 0;
  }
  if (ri_deferred_ && !wait_ri_.empty()) n += poll_ri();  // one waits for an earlier psn
  if (!wait_notify_.empty() && (rang || slot_starved_))
    n += poll_notifications();  // sender-initiated rendezvous data that landed here
  if (!rma_active_.empty()) n += progress_rma();        // RMA waiting on the engine or a reply
  if (!atomic_active_.empty()) n += progress_atomic();  // atomics to send, replies owed or due
  if (!waiting_reports_.empty()) n += release_reports();  // sends whose packets had to leave
  if (!dma_backlog_.empty()) n += retry_dma();          // our writes that met a busy engine
  if (!backlog_.empty()) n += retry_backlog();          // control packets that met a full mailbox
  if (lift_due_) lift_suspended();                       // late RTRs, after this round's matches
  // Lost peers and the rendezvous timeout: one coarse clock read (vDSO, no syscall) every
  // watch_every calls, and only while something waits on a peer.
  if (++progress_calls_ % watch_every == 0 && waiting_on_peers()) watch_peers();
  // An operation above met a dead peer: everything of that peer fails now, and its segment is
  // reclaimed, before the application can see the first error.
  settle_found_dead();
  return n;
}

bool endpoint::only_replies_due() noexcept {
  // Not dev_.has_arrivals(): a network backend says "maybe" there for ever; the device's
  // sleep_prepare, called next, looks at its arrivals after announcing the sleeper.
  if (held_count_ != 0 || ri_deferred_ || slot_starved_ || lift_due_ ||
      !dma_backlog_.empty() || !backlog_.empty() || atomic_unsent_ != 0 ||
      !waiting_reports_.empty())
    return false;
  bool replies_only = true;
  // A read by request waiting for its reply slot (stage data with a slot armed) or any request
  // in wait_reply needs nothing polled; a write or read answer waiting for engine room does.
  rma_active_.for_each([&](const rma_request& r) {
    replies_only = replies_only && r.what != rma_request::role::read_response &&
                   (r.at == rma_request::stage::wait_reply ||
                    (r.at == rma_request::stage::data && r.what == rma_request::role::read &&
                     r.reply_slot != rma_request::no_slot));
  });
  atomic_active_.for_each([&](const atomic_request& r) {
    replies_only = replies_only && r.what == atomic_request::role::initiator;  // all sent: above
  });
  return replies_only;
}

bool endpoint::waiting_on_peers() const noexcept {
  // Posted receives count, any-source ones too: a survivor whose only business is a receive
  // (a ping-pong waiting for its next message) must learn that the peer died, and the watch
  // also reclaims dead peers' segments. Its cost is a clock read per watch_every calls, and per
  // dead_peer_check_ms a look at the device's lost peers (a backend that must ask about each
  // peer does so at most once per the period it was told at open).
  return !(wait_notify_.empty() && wait_cts_.empty() && dma_backlog_.empty() && backlog_.empty() &&
           rma_active_.empty() && atomic_active_.empty() && wait_ri_.empty() && matchers_[0].posted_count() == 0 &&
           matchers_[1].posted_count() == 0);
}

std::size_t endpoint::retry_backlog() noexcept {
  // In order per peer: a packet to a peer whose mailbox is still full keeps every later packet
  // to that peer behind it, and only those (a peer that never drains must not hold back the
  // answers to everybody else).
  std::size_t n = 0;
  ++backlog_pass_;
  backlog_.for_each([&](backlog_packet& b) {
    control_queue& q = control_queues_[b.peer];
    if (q.blocked_pass == backlog_pass_) return;
    if (dev_.mailbox_send(b.peer, b.pkt) == core::status::again) {
      q.blocked_pass = backlog_pass_;
      return;
    }
    backlog_.remove(b);
    backlog_pool_.release(&b);
    --q.queued;
    ++n;
  });
  return n;
}

void endpoint::watch_peers() noexcept {
  const std::uint64_t now = coarse_now_ms();
  if (now - last_watch_ms_ < cfg_.dead_peer_check_ms) return;
  last_watch_ms_ = now;
  // Only while something waits on a peer: the device's lost peers fail their transfers, and
  // their segments are reclaimed even when they died with nothing in flight.
  fail_lost_peers(now);
  expire_rendezvous(now);
}

void endpoint::fail_lost_peers(std::uint64_t now_ms) noexcept {
  bool settled = false;
  dev_.take_lost_peers(now_ms, [this, &settled](dev::peer_id p) {
    if (!settled) {
      settle_arrivals();
      settled = true;
    }
    fail_peer(p);
    unstick_due_ = true;
  });
  // A peer killed between claiming a slot of our mailbox and publishing it stops the ring for
  // every sender; the device skips such a slot once it stayed unpublished for a period.
  if (unstick_due_) unstick_due_ = dev_.mailbox_unstick();
}

void endpoint::fail_found_dead() noexcept { fail_lost_peers(coarse_now_ms()); }

void endpoint::settle_arrivals() noexcept {
  // What the dead process published before it died is still valid: its eager and medium
  // messages and the writes whose notifications landed complete the receives they match, as
  // they would have a moment later. Bounded: one mailbox's worth of packets.
  const std::size_t rounds = cfg_.mailbox_slots / mailbox_budget + 1;
  for (std::size_t i = 0; i < rounds && progress_mailbox() > 0; ++i) {
  }
  dev_.take_notify_bells([this](std::uint32_t slot) { on_ri_bell(slot); });
  if (ri_deferred_ && !wait_ri_.empty()) poll_ri();
  if (!wait_notify_.empty()) poll_notifications();
}

void endpoint::fail_peer(dev::peer_id p) noexcept {
  ++stats_.dead_peers;
  std::size_t failed = 0;  // operations of the application's that fail
  wait_notify_.for_each([&](recv_request& r) {
    if (r.peer != p) return;
    wait_notify_.remove(r);
    if (r.notify_slot != recv_request::no_slot) dev_.notify_free(r.notify_slot);
    fail_recv(r, FI_ECONNRESET);
    ++failed;
  });
  // Receives whose RTR went to the dead peer: no write can come any more, and no message
  // either (they name that peer as their source), so each fails; a cancel in progress
  // completes as cancelled.
  wait_ri_.for_each([&](recv_request& r) {
    if (r.entry.source != p) return;
    ++failed;
    if (r.rtr_only) {  // optimistic: never posted
      fail_recv(r, r.rtr == rtr_state::cancelling ? FI_ECANCELED : FI_ECONNRESET);
    } else if (r.rtr == rtr_state::waiting_rts) {
      fail_recv(r, FI_ECONNRESET);  // rtr_release takes it off wait_ri_
    } else {
      unpost(r);
      fail_recv(r, r.rtr == rtr_state::cancelling ? FI_ECANCELED : FI_ECONNRESET);
    }
  });
  failed += fail_posted_from(p);
  if (p < seq_.size()) {
    peer_sequence& q = seq_[p];
    while (backlog_packet* b = q.parked.pop_front()) backlog_pool_.release(b);
  }
  stored_.drop_peer(p);
  forget_held(p);
  forget_train(p);
  auto fail_sends = [&](auto& list) {
    list.for_each([&](send_request& s) {
      if (s.peer != p) return;
      list.remove(s);
      fail_send(s, FI_ECONNRESET);
      ++failed;
    });
  };
  fail_sends(wait_cts_);
  fail_sends(dma_backlog_);
  rma_active_.for_each([&](rma_request& r) {
    if (r.peer != p) return;
    rma_active_.remove(r);
    if (r.what == rma_request::role::read_response) r.reply_slot = rma_request::no_slot;
    else ++failed;  // a read it asked of us answers nobody: not the application's
    rma_finish(r, FI_ECONNRESET);
  });
  failed += fail_atomics_of(p);
  backlog_.for_each([&](backlog_packet& b) {
    if (b.peer != p) return;
    backlog_.remove(b);
    backlog_pool_.release(&b);
  });
  if (p < control_queues_.size()) control_queues_[p].queued = 0;
  // A peer that exits with nothing in flight with us (a finished job's rank, a spawned child
  // after its disconnect) is no warning.
  if (failed > 0)
    EXANET_LOG(warn, ep_data, "peer port %u died: %zu operations with it end in error",
               dev_.peer_address(p).port, failed);
  else
    EXANET_LOG(info, ep_data, "peer port %u is gone; nothing in flight with it",
               dev_.peer_address(p).port);
  dev_.forget_dead_peer(p);
}

std::size_t endpoint::fail_posted_from(dev::peer_id p) noexcept {
  std::size_t failed = 0;
  for (int k = 0; k < 2; ++k) {
    match::matcher& m = matchers_[k];
    m.for_each_posted_at(p, [&](match::posted_entry& e) {
      recv_request& r = recv_of(e);
      unpost(r);
      if (r.multi) {
        r.in_matcher = false;
        if (r.outstanding > 0) return;  // its last message in flight releases it
      }
      fail_recv(r, FI_ECONNRESET);
      ++failed;
    });
    // An announced rendezvous from the dead peer can never be served: a receive that matched
    // it later would wait for a write that cannot come. Its eager and medium messages are
    // complete and stay receivable.
    m.for_each_unexpected([&](match::unexpected_entry& e) {
      unexpected_msg& u = unexpected_of(e);
      if (u.peer != p || u.type != wire::pkt_type::rts) return;
      m.remove_unexpected(e);
      unexpected_.release(&u);
    });
  }
  return failed;
}

void endpoint::expire_rendezvous(std::uint64_t now) noexcept {
  // A receive matched to a rendezvous whose data has not come for rndv_timeout_ms asks its
  // sender whether the send exists (rndv_probe.cpp), and again every period. A live sender that
  // simply has not progressed (an MPI rank computing between Isend and Wait) is waited for; a
  // send it does not have (a forged or stale RTS) fails the receive.
  // With FI_EXANET_RNDV_DEADLINE_MS (opt-in) a receive fails with FI_ETIMEDOUT after that long
  // without data, whatever its sender says.
  const std::uint64_t limit = cfg_.rndv_timeout_ms, deadline = cfg_.rndv_deadline_ms;
  if (limit == 0 && deadline == 0) return;
  auto late = [&](const recv_request& r) { return limit != 0 && now - r.waiting_since_ms >= limit; };
  auto overdue = [&](const recv_request& r) {
    return deadline != 0 && now - r.asked_since_ms >= deadline;
  };
  auto expire = [&](recv_request& r) {
    ++stats_.rndv_deadlines;
    EXANET_LOG_ONCE(warn, ep_data, "rendezvous from peer port %u: no data for %llu ms "
                    "(FI_EXANET_RNDV_DEADLINE_MS), receive failed with FI_ETIMEDOUT",
                    dev_.peer_address(r.peer).port, static_cast<unsigned long long>(deadline));
    fail_recv(r, FI_ETIMEDOUT);
  };
  auto probe = [&](recv_request& r) {
    r.waiting_since_ms = now;
    rndv_probe_send(r);
  };
  // Data asked for by a CTS. A receive still looking for a free notification slot waits on
  // this endpoint, not on its sender, and is left alone.
  wait_notify_.for_each([&](recv_request& r) {
    if (r.notify_slot == recv_request::no_slot) return;
    if (overdue(r)) {
      wait_notify_.remove(r);
      dev_.notify_free(r.notify_slot);  // disarmed: a late write finds no window of this use
      r.notify_slot = recv_request::no_slot;
      expire(r);
    } else if (late(r)) {
      probe(r);
    }
  });
  // An RTS matched a receive whose RTR was out: only the sender's write (or a NACK) ends it.
  // Receives merely posted with an RTR out wait for a send that may come any time: not these.
  wait_ri_.for_each([&](recv_request& r) {
    if (r.rtr != rtr_state::waiting_rts || r.rtr_only) return;
    if (overdue(r))
      expire(r);  // rtr_release disarms the slot
    else if (late(r))
      probe(r);
  });
}

}  // namespace exanet::proto
