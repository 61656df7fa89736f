// SPDX-License-Identifier: BSD-2-Clause
// Intake: what this endpoint takes from its mailbox, and the bounds of what peers' packets make
// it keep (issue 12 part 5; fi_exanet(7), RESOURCE MANAGEMENT). Owns: the unexpected budget and
// the held queue. Counters: unexpected_max.
//
// The bounds. Unexpected messages take a record each (at most cfg.unexpected_max), which holds
// a payload up to unexpected_inline_max, and longer medium ones a copy of their payload (at most
// cfg.unexpected_bytes in all); stored RTRs are capped in their
// pool (cfg.stored_rtr_max) and refused beyond it (rndv_rtr.cpp). All three come from the
// endpoint's attributes (config.hpp, resolve_queue_bounds).
//
// Back-pressure, not growth, not loss. A message packet that no posted receive takes, arriving
// while the budget is spent, is not dispatched: it is held, exactly as if it were still in the
// mailbox, and the packets of its sender stay behind it (per-sender FIFO, which the psn order and
// the bounce ring's in-order credit rely on). It is taken when a receive frees room.
//
// Why a held queue and not simply "stop polling". The mailbox is one ring shared by every
// sender and packet type. Stopping at the first packet that needs room would also stop the
// packets behind it that need none and that the application may be waiting for: a CTS or an
// rndv_ack completing its own send, an RTR, a NACK or a cancel answer for its receive. An
// application that waits for its send before it posts the receives that would free room would
// then deadlock although MPI's progress rule says it must not. So the intake keeps taking:
//   * packets that answer or advance this endpoint's own operations (CTS, rndv_ack, RTR family),
//     whatever is held: they allocate nothing here (a stored RTR has its own bounded pool) and
//     relate to this endpoint's sends and RTRs, not to the held sender's message order;
//   * any packet of a sender with nothing held that needs no room (it matches a posted receive,
//     or it is not a message);
// and holds the others in a fixed array as large as the mailbox (allocated at open). Only when
// that array is full does it stop polling altogether: the mailbox then fills and senders see
// -FI_EAGAIN. A held message waits for the application to take an unexpected message (a posted
// receive consumes one, which frees room, and progress then takes the held ones in order).
// Once a mailbox's worth is held the endpoint says so in its segment (device set_intake_held) and
// senders send it no new message packets (-FI_EAGAIN, endpoint::send): the held array, twice the
// mailbox, then absorbs what was already in flight and the mailbox keeps draining, so staged DMA
// data (which travels through the mailbox) and control packets never wait behind a flood. Not at
// the first held packet: a sender that floods must not stop every other sender early, since the
// application may be waiting for another sender's message before it receives the flood (MPI's
// progress rule); until the signal, other senders' packets that need no room pass as before.
// What can still stall: an application that never receives the unexpected messages it was sent
// while it waits for a message held behind them, which MPI calls an unsafe program (it relies on
// buffering); fi_exanet(7) says so and names the parameters that raise the bounds.
#include <cstdlib>
#include <cstring>

#include "core/log.hpp"
#include "proto/endpoint.hpp"

namespace exanet::proto {
namespace {

/// Packets about this endpoint's own sends and RTRs: never held (see above).
constexpr bool answers_own_operation(std::uint8_t type) noexcept {
  switch (static_cast<wire::pkt_type>(type)) {
    case wire::pkt_type::cts:
    case wire::pkt_type::rndv_ack:
    case wire::pkt_type::rtr:
    case wire::pkt_type::rtr_nack:
    case wire::pkt_type::rtr_cancel:
    case wire::pkt_type::rtr_cancel_reply:
      return true;
    default:
      return false;
  }
}

}  // namespace

core::status endpoint::open_intake() noexcept {
  resolve_queue_bounds(cfg_);
  // A parked packet (psn_order.cpp) may still need a record when its gap closes after the intake
  // stopped: the pools keep that much above the soft bound the intake enforces.
  unexpected_.set_limit(cfg_.unexpected_max + cfg_.mailbox_slots);
  stored_.set_limit(cfg_.stored_rtr_max);
  try {
    // Twice the mailbox: senders are told to stop at one mailbox's worth (hold_signal_at), and
    // what was in flight then (at most a mailbox) still fits.
    held_.assign(2 * std::size_t{cfg_.mailbox_slots}, held_packet{});
  } catch (...) {
    return core::status::no_memory;
  }
  return core::status::ok;
}

bool endpoint::needs_room(dev::peer_id from, const dev::packet& pkt) noexcept {
  const auto type = static_cast<std::uint8_t>(pkt[0]);
  if (!wire::is_message(type)) return false;
  const bool records_full = unexpected_.in_use() >= cfg_.unexpected_max;
  bool bytes_full = false;
  std::uint64_t tag = 0;
  std::uint16_t flags = 0;
  if (static_cast<wire::pkt_type>(type) == wire::pkt_type::medium) {
    const auto m = wire::read<wire::medium>(pkt);
    tag = m.tag;
    flags = m.hdr.flags;
    // One message is always admitted when nothing is held, so a budget set below medium_max
    // slows the sender down but never stalls it. A short one fits in its record (no bytes).
    bytes_full = m.hdr.len > unexpected_inline_max && unexpected_bytes_ > 0 &&
                 unexpected_bytes_ + m.hdr.len > cfg_.unexpected_bytes;
  } else if (static_cast<wire::pkt_type>(type) == wire::pkt_type::env_data) {
    // Eager, or the end of a train: its bytes fit in the record (unexpected_inline_max).
    const auto m = wire::read<wire::env_data>(pkt);
    tag = m.tag;
    flags = m.hdr.flags;
  } else {
    const auto m = wire::read<wire::rts>(pkt);
    tag = m.tag;
    flags = m.hdr.flags;
  }
  if (!records_full && !bytes_full) return false;
  // A posted receive takes it without a record (a multi-receive buffer may still refuse it and
  // make a record: that one exceeds the soft bound by one, within the pool's limit).
  const auto kind = (flags & wire::flag_tagged) ? queue_kind::tagged : queue_kind::msg;
  const match::source_id src = from == dev::no_peer ? match::any_source - 1 : from;
  return matcher_for(kind).peek_posted(src, kind == queue_kind::tagged ? tag : 0) == nullptr;
}

std::uint32_t* endpoint::held_count_of(dev::peer_id p) noexcept {
  if (p == dev::no_peer) return &held_unknown_;
  if (p >= held_by_peer_.size()) {
    try {
      held_by_peer_.resize(std::size_t{p} + 1, 0);  // cold: a peer's first packet
    } catch (...) {
      return nullptr;
    }
  }
  return &held_by_peer_[p];
}

void endpoint::intake(dev::peer_id from, const dev::packet& pkt) noexcept {
  // The steady state, every packet of a program that keeps up: nothing is held and any message
  // would find room, so no packet can need holding and the per-peer books are not opened.
  if (intake_clear()) [[likely]] {
    on_packet(from, pkt);
    return;
  }
  const auto type = static_cast<std::uint8_t>(pkt[0]);
  if (!answers_own_operation(type)) {
    std::uint32_t* held = held_count_of(from);
    if (held && (*held > 0 || needs_room(from, pkt))) {
      // progress_mailbox polls no more packets than there is room for here.
      held_[(held_head_ + held_count_) % held_.size()] = {from, pkt};
      if (++held_count_ >= hold_signal_at() && !intake_signalled_) {
        intake_signalled_ = true;
        dev_.set_intake_held(true);
      }
      ++*held;
      ++stats_.intake_held;
      if (!bound_warned_) {
        bound_warned_ = true;
        EXANET_LOG(info, ep_data,
                   "unexpected-message bound reached (%zu messages, %zu bytes): packets are "
                   "held until the application receives; see fi_exanet(7) RESOURCE MANAGEMENT",
                   unexpected_.in_use(), unexpected_bytes_);
      }
      return;
    }
  }
  on_packet(from, pkt);
}

std::size_t endpoint::release_held() noexcept {
  std::size_t n = 0;
  while (held_count_ > 0) {
    const held_packet h = held_[held_head_];
    if (needs_room(h.peer, h.pkt)) break;  // FIFO: the rest waits behind it
    held_head_ = (held_head_ + 1) % held_.size();
    --held_count_;
    --*held_count_of(h.peer);  // exists: it was counted when held
    on_packet(h.peer, h.pkt);
    ++n;
  }
  if (intake_signalled_ && held_count_ <= hold_signal_at() / 2) {
    intake_signalled_ = false;  // with hysteresis: not a flag flip per message
    dev_.set_intake_held(false);
  }
  return n;
}

void endpoint::forget_held(dev::peer_id p) noexcept {
  // A dead peer's held packets go: compact the queue, keeping the others' order.
  std::size_t kept = 0;
  for (std::size_t i = 0; i < held_count_; ++i) {
    const held_packet h = held_[(held_head_ + i) % held_.size()];
    // Dropped like its parked packets: the device frees its bounce ring for other senders, so
    // a held medium's bytes are not its own any more (and the ring's credit is not ours to give).
    if (h.peer == p) continue;
    held_[(held_head_ + kept++) % held_.size()] = h;
  }
  held_count_ = kept;
  if (intake_signalled_ && held_count_ <= hold_signal_at() / 2) {
    intake_signalled_ = false;
    dev_.set_intake_held(false);
  }
  if (std::uint32_t* c = held_count_of(p)) *c = 0;
}

bool endpoint::keep_unexpected_payload(unexpected_msg& u, const std::byte* data,
                                       std::size_t len) noexcept {
  if (len <= unexpected_inline_max) {
    std::memcpy(u.inline_payload, data, len);  // the record holds it: no buffer, no bytes counted
    return true;
  }
  // The intake admitted this message within the byte budget (or it came from a parked queue,
  // which the pool limit bounds). A kept buffer of its size class when there is one: a program
  // whose messages keep arriving before their receives pays no allocation per message.
  std::byte* buf = payload_cache_.acquire(len);
  u.len = len;  // the size class the buffer goes back to (free_unexpected)
  if (!buf) return false;
  core::copy_bytes(buf, data, len);
  u.payload = buf;
  unexpected_bytes_ += len;
  return true;
}

void endpoint::free_unexpected(unexpected_msg& u) noexcept {
  if (u.payload) {
    unexpected_bytes_ -= u.len;
    payload_cache_.release(u.payload, u.len);
    u.payload = nullptr;
  }
  unexpected_.release(&u);
}

}  // namespace exanet::proto
