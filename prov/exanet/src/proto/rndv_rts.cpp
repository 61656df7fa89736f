// SPDX-License-Identifier: BSD-2-Clause
// Sender-initiated rendezvous (DESIGN.md §4): the sender announces the message with an RTS; the
// receiver, once it has matched a receive, answers with a CTS naming one destination segment and
// a notification slot; the sender's DMA engine writes the segment straight into the receive
// buffer and then posts the 16-byte notification. A receive made of several iovecs is served one
// CTS per segment; truncation simply asks for fewer bytes. The sender completes after the last
// segment's write, the receiver when the last notification lands.
//
//   sender                                   receiver
//     |---- RTS(tag, len, send_id) ------------>|  match (now or when the receive is posted)
//     |<--- CTS(send_id, off, addr, len, slot) -|
//     |==== DMA write [off, off+len) ==========>|
//     |---- notify(slot: bytes, send_id) ------>|  next CTS, or complete
//
// In the read variant (FI_EXANET_PROTOCOL=read, the thesis baseline) the CTS stands for the
// emulated read the receiver asks of the sender's engine, and the receiver acknowledges the
// complete message with an rndv_ack; the sender completes on that, not on its own last write.
//
// Owns: rts, cts, rndv_ack. Consumes: notifications. Counters: rndv_sent, rndv_recv.
#include <rdma/fi_errno.h>

#include <cstdlib>
#include <cstring>

#include "core/iov.hpp"
#include "core/log.hpp"
#include "proto/clock.hpp"
#include "proto/endpoint.hpp"

namespace exanet::proto {

send_request* endpoint::make_rendezvous_send(const send_args& a, std::size_t len) noexcept {
  send_request* s = sends_.acquire();
  if (!s) return nullptr;
  s->context = a.context;
  s->len = len;
  s->tag = a.kind == queue_kind::tagged ? a.tag : 0;
  s->cq_data = a.cq_data;
  s->has_cq_data = a.has_cq_data;
  s->peer = a.peer;
  s->kind = a.kind;
  s->completion = a.completion;
  if (a.inject) {
    // The caller may reuse its buffer on return: keep a private copy for the later DMA.
    s->owned = static_cast<std::byte*>(std::malloc(len ? len : 1));
    if (!s->owned) {
      sends_.release(s);
      return nullptr;
    }
    core::copy_from_iov(s->owned, a.iov, 0, len);
    s->iov[0] = {s->owned, len};
    s->iov_count = 1;
  } else {
    std::copy(a.iov.begin(), a.iov.end(), s->iov.begin());
    s->iov_count = a.iov.size();
  }
  return s;
}

core::status endpoint::rts_send(const send_args& a, std::size_t len, bool ack) noexcept {
  send_request* s = make_rendezvous_send(a, len);
  if (!s) return core::status::again;
  s->ack_wanted = ack;
  dev::mailbox_reservation slot;
  if (core::status st = dev_.mailbox_reserve(a.peer, slot); !core::ok(st)) {
    release_send(*s);
    return st;
  }
  wire::rts p{};
  p.hdr = wire::make_header(wire::pkt_type::rts,
                            (a.kind == queue_kind::tagged ? wire::flag_tagged : 0) |
                                (a.has_cq_data ? wire::flag_cq_data : 0) |
                                (s->ack_wanted ? wire::flag_ack_wanted : 0));
  p.tag = a.tag;
  p.cq_data = a.cq_data;
  p.msg_len = len;
  p.send_id = sends_.id_of(s);
  p.psn = s->psn = next_psn(a.peer);
  wire::write(slot.data(), p);
  dev_.mailbox_publish(slot);
  commit_send(a.peer, a.kind, a.tag, true, p.send_id);
  wait_cts_.push_back(*s);
  ++stats_.rndv_sent;
  return core::status::ok;
}

void endpoint::on_rts(dev::peer_id from, const dev::packet& pkt) noexcept {
  const auto p = wire::read<wire::rts>(pkt);
  if (from == dev::no_peer) {
    ++stats_.drop_bad_field;
    EXANET_LOG_ONCE(warn, ep_data, "RTS from an unreachable sender dropped");
    return;
  }
  const auto kind = (p.hdr.flags & wire::flag_tagged) ? queue_kind::tagged : queue_kind::msg;
  ++stats_.rndv_recv;
  prof_recv(profile_phase::arrival, profile_proto::rndv, p.msg_len);
  if (recv_request* r = take_posted(kind, from, p.tag, p.msg_len)) {
    prof_recv(profile_phase::match);
    if (r->rtr == rtr_state::sent || r->rtr == rtr_state::cancelling) {
      // The receive's RTR names this send: the sender writes when it sees the RTR (it serves as
      // this RTS's CTS), or answers NACK and then the CTS goes (rndv_rtr.cpp).
      r->rtr = rtr_state::waiting_rts;
      r->waiting_since_ms = r->asked_since_ms = coarse_now_ms();  // the probe period counts here
      r->rts_psn = p.psn;
      r->peer = from;
      r->msg_len = p.msg_len;
      r->tag = p.tag;
      r->cq_data = p.cq_data;
      r->has_cq_data = p.hdr.flags & wire::flag_cq_data;
      r->send_id = p.send_id;
      r->ack_wanted = p.hdr.flags & wire::flag_ack_wanted;
      return;
    }
    rndv_recv_start(*r, from, p);
    return;
  }
  unexpected_msg* u = unexpected_.acquire();
  if (!u) {
    EXANET_LOG(warn, ep_data, "out of memory: unexpected RTS dropped");
    return;
  }
  u->type = wire::pkt_type::rts;
  u->peer = from;
  u->tag = p.tag;
  u->cq_data = p.cq_data;
  u->has_cq_data = p.hdr.flags & wire::flag_cq_data;
  u->len = p.msg_len;
  u->send_id = p.send_id;
  u->ack_wanted = p.hdr.flags & wire::flag_ack_wanted;
  (void)add_unexpected(kind, *u);  // on failure it logged and freed the record
}

void endpoint::rndv_recv_start(recv_request& r, dev::peer_id from, const wire::rts& m) noexcept {
  r.peer = from;
  r.msg_len = m.msg_len;
  r.tag = m.tag;
  r.cq_data = m.cq_data;
  r.has_cq_data = m.hdr.flags & wire::flag_cq_data;
  r.send_id = m.send_id;
  r.ack_wanted = m.hdr.flags & wire::flag_ack_wanted;
  r.delivered = 0;
  r.notify_slot = recv_request::no_slot;
  wait_notify_.push_back(r);
  rndv_recv_next_segment(r);
}

// Asks for the next contiguous piece of the receive buffer. A truncating receive asks for no
// more than fits; an empty one still sends one zero-length CTS so the sender can complete.
void endpoint::rndv_recv_next_segment(recv_request& r) noexcept {
  if (!dev_.notify_alloc(r.notify_slot, r.notify_gen)) {
    r.notify_slot = recv_request::no_slot;  // poll_notifications retries when a slot frees
    slot_starved_ = true;
    return;
  }
  const std::size_t total = std::min<std::size_t>(r.msg_len, r.capacity);
  std::size_t skip = r.delivered;
  std::uint64_t addr = 0;
  std::size_t len = 0;
  for (std::size_t i = 0; i < r.iov_count; ++i) {
    const iovec& v = r.iov[i];
    if (skip >= v.iov_len) { skip -= v.iov_len; continue; }
    addr = reinterpret_cast<std::uint64_t>(v.iov_base) + skip;
    len = std::min(v.iov_len - skip, total - r.delivered);
    break;
  }
  // The only bytes the sender's write may touch. A device that cannot expose them now (a lower
  // provider refused the registration) is asked again at each progress call, like a receive
  // that found no free slot, until the rendezvous timeout gives up on it.
  if (!dev_.window_open(r.notify_slot, addr, len)) {
    dev_.notify_free(r.notify_slot);
    r.notify_slot = recv_request::no_slot;
    slot_starved_ = true;
    return;
  }
  r.segment_len = len;
  r.waiting_since_ms = r.asked_since_ms = coarse_now_ms();  // both clocks restart at each CTS
  wire::cts c{};
  c.hdr = wire::make_header(wire::pkt_type::cts,
                            static_cast<std::uint16_t>(r.delivered + len == total ? wire::flag_last : 0));
  c.send_id = r.send_id;
  c.msg_offset = r.delivered;
  c.buf_addr = addr;
  c.buf_len = len;
  c.notify_slot = r.notify_slot;
  c.notify_gen = r.notify_gen;
  dev::packet raw;
  wire::write(raw.data(), c);
  send_control(r.peer, raw);
}

std::size_t endpoint::poll_notifications() noexcept {
  std::size_t n = 0;
  slot_starved_ = false;  // set again below by a receive that still finds no slot
  wait_notify_.for_each([&](recv_request& r) {
    if (r.notify_slot == recv_request::no_slot) {
      rndv_recv_next_segment(r);
      return;
    }
    dev::notification raw;
    if (!dev_.notify_test(r.notify_slot, r.notify_gen, raw)) return;
    dev_.notify_free(r.notify_slot);
    r.notify_slot = recv_request::no_slot;
    ++n;
    // The receiver asked for segment_len bytes; that is what the engine wrote before notifying.
    r.delivered += r.segment_len;
    const std::size_t total = std::min<std::size_t>(r.msg_len, r.capacity);
    if (r.delivered < total) {
      rndv_recv_next_segment(r);
      return;
    }
    wait_notify_.remove(r);
    if (r.ack_wanted) {
      wire::rndv_ack ack{};
      ack.hdr = wire::make_header(wire::pkt_type::rndv_ack, 0);
      ack.send_id = r.send_id;
      dev::packet raw;
      wire::write(raw.data(), ack);
      send_control(r.peer, raw);
    }
    prof_recv(profile_phase::copy, profile_proto::rndv, r.msg_len);
    complete_recv(r, r.peer, r.tag, r.cq_data, r.has_cq_data, r.msg_len, r.delivered);
  });
  return n;
}

void endpoint::on_rndv_ack(dev::peer_id from, const dev::packet& pkt) noexcept {
  const auto a = wire::read<wire::rndv_ack>(pkt);
  send_request* s = sends_.from_id(a.send_id);
  if (!s || s->peer != from || !s->hook.linked() || !s->data_sent) {
    ++stats_.drop_bad_field;
    EXANET_LOG_ONCE(warn, ep_data, "stale or forged rendezvous ack for send %llu dropped",
                    static_cast<unsigned long long>(a.send_id));
    return;
  }
  wait_cts_.remove(*s);
  ++stats_.rndv_acked;
  complete_send(*s);
}

void endpoint::on_cts(dev::peer_id from, const dev::packet& pkt) noexcept {
  const auto c = wire::read<wire::cts>(pkt);
  send_request* s = sends_.from_id(c.send_id);
  if (!s || s->peer != from || !s->hook.linked() || s->data_sent || c.msg_offset > s->len) {
    ++stats_.drop_bad_field;
    EXANET_LOG_ONCE(warn, ep_data, "stale or forged CTS for send %llu dropped",
                    static_cast<unsigned long long>(c.send_id));
    return;
  }
  wait_cts_.remove(*s);
  s->cts_seen = true;
  s->dma = {};
  s->dma.peer = from;
  s->dma.src = {s->iov.data(), s->iov_count};
  s->dma.src_offset = c.msg_offset;
  s->dma.dst_addr = c.buf_addr;
  s->dma.dst_base = c.buf_addr;  // the window starts where the CTS says
  s->dma.len = std::min<std::uint64_t>(c.buf_len, s->len - c.msg_offset);
  s->dma.notify = true;
  s->dma.notify_slot = c.notify_slot;
  s->dma.notify_gen = c.notify_gen;
  const wire::rndv_notification note{s->dma.len, c.send_id};
  std::memcpy(s->dma.notify_data.data(), &note, sizeof note);
  s->dma_state = {};
  s->last_segment = c.hdr.flags & wire::flag_last;
  rndv_send_segment(*s);
}

bool endpoint::rndv_send_segment(send_request& s) noexcept {
  if (s.record_due) {
    // A receiver-initiated write's landing record goes ahead of it. Back-pressure (again: the
    // network side is out of credits for this peer; the emulation never is) waits in the DMA
    // backlog like a busy engine, in order, and retry_dma puts the record again.
    const wire::ri_record rec{s.tag, s.len};
    dev::notification raw;
    std::memcpy(raw.data(), &rec, sizeof rec);
    const core::status rs = dev_.notify_record_put(s.peer, s.dma.notify_slot, raw);
    if (rs == core::status::again) {
      dma_backlog_.push_back(s);
      return false;
    }
    if (!core::ok(rs)) {
      fail_send(s, rs == core::status::peer_dead ? FI_ECONNRESET : FI_EIO);
      return true;
    }
    s.record_due = false;
  }
  const core::status st = dev_.dma_post(s.dma, s.dma_state);
  if (st == core::status::again) {
    dma_backlog_.push_back(s);
    return false;
  }
  if (!core::ok(st)) {
    fail_send(s, -core::to_int(st));
  } else if (s.last_segment && !s.ack_wanted) {
    complete_send(s);
  } else {
    s.data_sent = s.last_segment;  // read variant: the ack completes it
    wait_cts_.push_back(s);
  }
  return true;
}

std::size_t endpoint::retry_dma() noexcept {
  std::size_t n = 0;
  // In order: a later write to the same peer must not overtake an earlier one's notification.
  for (std::size_t todo = dma_backlog_.size(); todo > 0; --todo) {
    send_request* s = dma_backlog_.pop_front();
    if (!rndv_send_segment(*s)) break;  // still blocked: the target has not freed staging yet
    ++n;
  }
  return n;
}

}  // namespace exanet::proto
