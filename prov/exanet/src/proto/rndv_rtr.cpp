// SPDX-License-Identifier: BSD-2-Clause
// Receiver-initiated rendezvous (DESIGN.md §4; seed 000 §3.5-3.6): a receive posted before its
// send tells the sender where its buffer is (RTR). The send that the RTR names is then one DMA
// write straight into that buffer, followed by a notification that carries everything the
// completion needs; no packet is on the critical path.
//
//   receiver                                         sender
//     post recv ---- RTR(class, after psn w, nth, buf, cap, slot) ---->  stored, or
//     |                                                                  send found in the log
//     |<=== landing record (tag, length), DMA write, notification(psn, cq data) ===  send
//     complete (in psn order)                                            complete
//
// Tickets are class sums made relative: a receive's class is its source, queue, tag and ignore
// bits, and its ticket says "the nth send of my class after psn w", w being the receiver's psn
// watermark (psn_order.cpp). nth counts the earlier posted receives of the same class that can
// still take a message. The ticket is exact only while no earlier posted receive could take a
// message of the class without being of the class (a wildcard source, a multi-receive buffer or
// an overlapping different class): such a receive suspends the RTR until it leaves, and the
// late RTR goes out then. The sender resolves a ticket against its per-peer log of recent
// sends; when the log no longer reaches back to w it answers NACK and the receive goes
// sender-initiated.
//
// Crossings: an RTR whose target already went out as an RTS serves as that RTS's CTS (the
// receiver drops the RTS by psn, or its receive waits for the write); an RTR whose target went
// eager or medium is dropped (the packet serves the receive). fi_cancel of a receive with an RTR
// out asks the sender to withdraw it (rtr_cancel); only a withdrawn RTR lets the receive go.
//
// Owns: rtr, rtr_nack, rtr_cancel, rtr_cancel_reply. Consumes: the notifications of RTR slots.
#include <rdma/fi_errno.h>

#include <cstdlib>
#include <cstring>

#include "core/iov.hpp"
#include "core/log.hpp"
#include "proto/endpoint.hpp"

namespace exanet::proto {
namespace {

bool same_class(const match::posted_entry& a, const match::posted_entry& b) noexcept {
  return a.ignore == b.ignore && match::tag_matches(a.tag, a.ignore, b.tag);
}

bool overlaps(const match::posted_entry& a, const match::posted_entry& b) noexcept {
  return ((a.tag ^ b.tag) & ~(a.ignore | b.ignore)) == 0;
}

}  // namespace

// ---- receiver: deciding and sending RTRs -----------------------------------------------------

std::uint32_t endpoint::rtr_ticket(const recv_request& r) noexcept {
  match::matcher& m = matcher_for(r.kind);
  bool blocked = false;
  std::uint32_t nth = 1;
  auto earlier = [&](match::posted_entry& e) {
    if (blocked || e.seq >= r.entry.seq || !overlaps(e, r.entry)) return;
    recv_request& other = recv_of(e);
    // A wildcard or a multi-receive buffer may take a message of the class in any position.
    if (e.source == match::any_source || other.multi || !same_class(e, r.entry))
      blocked = true;
    else
      ++nth;
  };
  if (r.entry.ignore == 0) {
    // One tag: only its bucket, the source's wide receives and the wildcards can overlap it.
    m.for_each_posted_for(r.entry.source, r.entry.tag, earlier);
  } else {
    m.for_each_posted_at(match::any_source, earlier);
    m.for_each_posted_at(r.entry.source, earlier);
  }
  return blocked ? 0 : nth;
}

void endpoint::rtr_consider(recv_request& r) noexcept {
  // Which receives send an RTR is the protocol table's rule (recv/match+rtr); here only whether
  // the source is a peer this endpoint has sequence state for.
  if (r.entry.source >= seq_.size()) return;
  if (const std::uint32_t nth = rtr_ticket(r)) {
    rtr_send(r, nth);
    if (r.rtr == rtr_state::sent) ++stats_.rtr_sent;
    return;
  }
  r.rtr = rtr_state::suspended;
  ++suspended_[static_cast<int>(r.kind)];
  ++stats_.suspensions;
}

void endpoint::rtr_send(recv_request& r, std::uint32_t nth) noexcept {
  if (!dev_.notify_alloc(r.ri_slot, r.ri_gen)) {
    r.rtr = rtr_state::none;  // every slot is armed: this one goes sender-initiated
    return;
  }
  // One buffer (the protocol table's RTR rule): the write may land anywhere in it, nowhere else.
  if (!dev_.window_open(r.ri_slot, reinterpret_cast<std::uint64_t>(r.iov[0].iov_base), r.capacity)) {
    dev_.notify_free(r.ri_slot);  // the device cannot expose the buffer: sender-initiated
    r.ri_slot = recv_request::no_slot;
    r.rtr = rtr_state::none;
    return;
  }
  ri_by_slot_[r.ri_slot] = &r;
  const dev::peer_id to = r.entry.source;
  wire::rtr p{};
  p.hdr = wire::make_header(wire::pkt_type::rtr, r.kind == queue_kind::tagged ? wire::flag_tagged : 0);
  p.tag = r.entry.tag;
  p.ignore = r.entry.ignore;
  p.buf_addr = reinterpret_cast<std::uint64_t>(r.iov[0].iov_base);
  p.capacity = r.capacity;
  p.recv_id = recvs_.id_of(&r);
  p.after_psn = seq_[to].watermark;
  p.nth = nth;
  p.notify_slot = r.ri_slot;
  p.notify_gen = r.ri_gen;
  dev::packet raw;
  wire::write(raw.data(), p);
  // Reported: its receive completes only through a later read of our CQ or counter, which
  // polls first, and the sender never waits for it (without it the sender's RTS or eager
  // packet serves the receive). So the RTRs of a window of receives posted together leave
  // in few lower messages over the network (a poll sends what waits).
  send_control(to, raw, true);
  r.rtr = rtr_state::sent;
  wait_ri_.push_back(r);
}

void endpoint::lift_after(recv_request& r) noexcept {
  if (r.rtr == rtr_state::suspended) {
    --suspended_[static_cast<int>(r.kind)];
    r.rtr = rtr_state::none;
  }
  if (suspended_[static_cast<int>(r.kind)] > 0) lift_due_ = true;
}

void endpoint::lift_suspended() noexcept {
  lift_due_ = false;
  for (int k = 0; k < 2; ++k) {
    if (suspended_[k] == 0) continue;
    match::matcher& m = matchers_[k];
    // Posting order within each peer's queue; peers are independent of each other.
    for (dev::peer_id p = 0; p < seq_.size() && suspended_[k] > 0; ++p) {
      m.for_each_posted_at(p, [&](match::posted_entry& e) {
        recv_request& r = recv_of(e);
        if (r.rtr != rtr_state::suspended) return;
        const std::uint32_t nth = rtr_ticket(r);
        if (!nth) return;
        --suspended_[k];
        rtr_send(r, nth);
        if (r.rtr == rtr_state::sent) ++stats_.rtr_late;
      });
    }
  }
}

void endpoint::rtr_release(recv_request& r) noexcept {
  if (r.landing) [[unlikely]] {  // only optimistic long receives in several buffers have one
    std::free(r.landing);
    r.landing = nullptr;
  }
  switch (r.rtr) {
    case rtr_state::none:
      return;
    case rtr_state::suspended:
      --suspended_[static_cast<int>(r.kind)];
      break;
    case rtr_state::sent:
    case rtr_state::waiting_rts:
    case rtr_state::cancelling:
      wait_ri_.remove(r);
      ri_by_slot_[r.ri_slot] = nullptr;
      dev_.notify_free(r.ri_slot);
      r.ri_slot = recv_request::no_slot;
      break;
  }
  r.rtr = rtr_state::none;
}

// ---- receiver: the write landed ---------------------------------------------------------------

// A notification is taken only as the next psn from its peer (or as the write of the RTS its
// receive already matched), so what is matched is always a prefix of each peer's sends. Progress
// hands over the slots whose bells rang (on_ri_bell); a notification that must wait for an
// earlier psn makes progress scan every RTR'd receive (poll_ri) until it is taken.
// FI_EXANET_PROFILE: a write straight into the receive (its RTR named it) arrives, matches and
// lands at its notification; one for an RTS already matched (waiting_rts) only lands here.
void endpoint::profile_ri_landed(const recv_request& r, std::size_t msg_len) noexcept {
  if (r.rtr != rtr_state::waiting_rts) {
    prof_->mark_recv(profile_phase::arrival, profile_proto::rndv, msg_len);
    prof_->mark_recv(profile_phase::match);
  }
  prof_->mark_recv(profile_phase::copy, profile_proto::rndv, msg_len);
}

endpoint::ri_take endpoint::take_ri(recv_request& r) noexcept {
  dev::notification raw;
  if (!dev_.notify_test(r.ri_slot, r.ri_gen, raw)) return ri_take::waiting;
  wire::ri_notification note;
  std::memcpy(&note, raw.data(), sizeof note);
  const dev::notification rec_raw = dev_.notify_record(r.ri_slot);
  wire::ri_record rec;
  std::memcpy(&rec, rec_raw.data(), sizeof rec);
  const dev::peer_id from = r.entry.source;
  const std::size_t delivered = std::min<std::uint64_t>(rec.msg_len, r.capacity);
  if (r.rtr_only) {  // optimistic: long sends take no psn, nothing to order against
    if (r.landing) core::copy_to_iov({r.iov.data(), r.iov_count}, 0, r.landing, delivered);
    ++stats_.ri_recv;
    if (note.flags & wire::flag_rtr_first) ++stats_.fast_recv;
    if (prof_) [[unlikely]] profile_ri_landed(r, rec.msg_len);
    complete_recv(r, from, rec.tag, note.cq_data, note.flags & wire::flag_cq_data, rec.msg_len,
                  delivered);
    return ri_take::done;
  }
  peer_sequence& q = seq_[from];
  const bool own_rts = r.rtr == rtr_state::waiting_rts && note.psn == r.rts_psn;
  if (!own_rts && note.psn != q.watermark + 1) {
    if (wire::psn_before(q.watermark + 1, note.psn)) return ri_take::deferred;  // earlier send due
    ++stats_.drop_bad_field;
    EXANET_LOG_ONCE(warn, ep_data, "write notification with taken psn %u from peer %u", note.psn, from);
    if (r.rtr != rtr_state::waiting_rts) unpost(r);
    fail_recv(r, FI_EIO);
    return ri_take::done;
  }
  if (prof_) [[unlikely]] profile_ri_landed(r, rec.msg_len);
  if (r.rtr != rtr_state::waiting_rts) {  // still posted: the write is its match
    unpost(r);
    ++stats_.fast_recv;
    ++stats_.ri_recv;  // (a write for a matched RTS is counted as that RTS, concurrent)
  }
  complete_recv(r, from, rec.tag, note.cq_data, note.flags & wire::flag_cq_data, rec.msg_len,
                delivered);  // releases the slot and the request
  if (!own_rts) advance_watermark(from, note.psn);
  return ri_take::done;
}

std::size_t endpoint::on_ri_bell(std::uint32_t slot) noexcept {
  recv_request* r = slot < ri_by_slot_.size() ? ri_by_slot_[slot] : nullptr;
  if (!r) return 0;  // not an RTR's slot (a CTS's or an RMA reply's): their owners look
  switch (take_ri(*r)) {
    case ri_take::waiting:
      return 0;
    case ri_take::deferred:
      ri_deferred_ = true;
      return 0;
    case ri_take::done:
      return 1;
  }
  return 0;
}

std::size_t endpoint::poll_ri() noexcept {
  std::size_t n = 0;
  ri_deferred_ = false;
  for (bool again = true; again;) {
    again = false;
    for (recv_request* r = wait_ri_.front(); r;) {
      recv_request* next = wait_ri_.next(*r);
      const ri_take t = take_ri(*r);
      if (t == ri_take::done) {
        ++n;
        again = true;  // the lists may have changed under us; the next psn may be ready now
        break;
      }
      if (t == ri_take::deferred) ri_deferred_ = true;
      r = next;
    }
  }
  return n;
}

// ---- sender: serving RTRs ---------------------------------------------------------------------

stored_rtr* endpoint::ri_target(dev::peer_id to, queue_kind k, std::uint64_t tag) noexcept {
  if (stored_.empty(to)) [[likely]] return nullptr;
  if (k == queue_kind::msg) tag = 0;
  return stored_.oldest_match(to, k == queue_kind::tagged, tag,
                              [](const stored_rtr& st) { return st.remaining == 1; });
}

core::status endpoint::ri_send(const send_args& a, std::size_t len, stored_rtr& st) noexcept {
  send_request* s = make_rendezvous_send(a, len);
  if (!s) return core::status::again;
  const wire::rtr m = st.rtr;
  stored_.remove(st);
  s->psn = next_psn(a.peer);
  commit_send(a.peer, a.kind, a.tag, true, sends_.id_of(s));
  ++stats_.ri_sent;
  ri_write(*s, m);
  return core::status::ok;
}

void endpoint::ri_write(send_request& s, const wire::rtr& m, bool rtr_first) noexcept {
  s.cts_seen = true;
  s.psn_in_note = true;
  s.record_due = true;  // rndv_send_segment puts the landing record before the write
  s.dma = {};
  s.dma.peer = s.peer;
  s.dma.src = {s.iov.data(), s.iov_count};
  s.dma.dst_addr = m.buf_addr;
  s.dma.dst_base = m.buf_addr;  // the window starts at the buffer the RTR names
  s.dma.len = std::min<std::uint64_t>(s.len, m.capacity);
  s.dma.notify = true;
  s.dma.notify_slot = m.notify_slot;
  s.dma.notify_gen = m.notify_gen;
  s.dma.notify_ahead = true;  // the receiver answers nothing: its receive just completes
  const wire::ri_notification note{
      s.cq_data, s.psn,
      (s.has_cq_data ? std::uint32_t{wire::flag_cq_data} : 0u) |
          (rtr_first ? std::uint32_t{wire::flag_rtr_first} : 0u)};
  std::memcpy(s.dma.notify_data.data(), &note, sizeof note);
  s.dma_state = {};
  s.last_segment = true;
  s.ack_wanted = false;
  rndv_send_segment(s);
}

void endpoint::rtr_answer(dev::peer_id to, wire::pkt_type t, std::uint64_t recv_id,
                          std::uint16_t flags) noexcept {
  wire::rtr_answer a{};
  a.hdr = wire::make_header(t, flags);
  a.recv_id = recv_id;
  dev::packet raw;
  wire::write(raw.data(), a);
  send_control(to, raw);
}

void endpoint::on_rtr(dev::peer_id from, const dev::packet& pkt) noexcept {
  const auto m = wire::read<wire::rtr>(pkt);
  peer_sequence* q = from == dev::no_peer ? nullptr : sequence_of(from);
  if (!q) {
    ++stats_.drop_bad_field;
    EXANET_LOG_ONCE(warn, ep_data, "RTR from an unreachable receiver dropped");
    return;
  }
  if (m.hdr.flags & wire::flag_optimistic) {
    on_optimistic_rtr(from, m);
    return;
  }
  if (optimistic()) {
    // A ticket this process keeps no log for: the receive goes sender-initiated, and waits for
    // an RTS that an optimistic sender never sends. The log says why.
    EXANET_LOG(warn, ep_data, "RTR with a ticket from peer %u, but this process runs "
                              "FI_EXANET_PROTOCOL=optimistic; refused", from);
    rtr_answer(from, wire::pkt_type::rtr_nack, m.recv_id);
    return;
  }
  const wire::psn_t last = q->next_psn - 1;
  if (m.nth == 0 || wire::psn_before(last, m.after_psn)) {
    ++stats_.drop_bad_field;
    EXANET_LOG_ONCE(warn, ep_data, "malformed RTR from peer %u dropped", from);
    return;
  }
  const auto kind = (m.hdr.flags & wire::flag_tagged) ? queue_kind::tagged : queue_kind::msg;
  const wire::psn_t after = last - m.after_psn;  // sends the receiver had not taken
  if (after > send_log_len) {
    ++stats_.rtr_stale;
    rtr_answer(from, wire::pkt_type::rtr_nack, m.recv_id);
    return;
  }
  std::uint32_t seen = 0;
  for (wire::psn_t p = m.after_psn + 1; p != last + 1; ++p) {
    const sent_record& e = q->log[p & (send_log_len - 1)];
    if (e.kind != kind || !match::tag_matches(m.tag, m.ignore, e.tag) || ++seen < m.nth) continue;
    if (!e.rendezvous) {
      ++stats_.rtr_dropped;  // the eager or medium packet serves the receive
      return;
    }
    send_request* s = sends_.from_id(e.send_id);
    if (!s || s->psn != p || s->cts_seen || !s->hook.linked()) {
      // Its RTS was matched another way: the model shows this cannot happen; answer safely.
      ++stats_.rtr_stale;
      rtr_answer(from, wire::pkt_type::rtr_nack, m.recv_id);
      return;
    }
    wait_cts_.remove(*s);
    ++stats_.concurrent;
    ri_write(*s, m);
    return;
  }
  if (!stored_.add(from, m, m.nth - seen)) {
    ++stats_.rtr_stale;
    rtr_answer(from, wire::pkt_type::rtr_nack, m.recv_id);
    return;
  }
  ++stats_.rtr_stored;
}

void endpoint::on_rtr_cancel(dev::peer_id from, const dev::packet& pkt) noexcept {
  const auto a = wire::read<wire::rtr_answer>(pkt);
  if (from == dev::no_peer) return;
  stored_rtr* st = stored_.find_recv(from, a.recv_id);
  const bool withdrawn = st != nullptr;
  if (st) stored_.remove(*st);
  // Not stored: it was already written (the notification is ahead of this answer), served by
  // an eager or medium packet (in flight ahead of it), or NACKed.
  rtr_answer(from, wire::pkt_type::rtr_cancel_reply, a.recv_id, withdrawn ? wire::flag_withdrawn : 0);
}

// ---- receiver: the sender's answers -----------------------------------------------------------

void endpoint::on_rtr_nack(dev::peer_id from, const dev::packet& pkt) noexcept {
  const auto a = wire::read<wire::rtr_answer>(pkt);
  recv_request* r = recvs_.from_id(a.recv_id);
  if (!r || r->entry.source != from || r->rtr == rtr_state::none ||
      r->rtr == rtr_state::suspended)
    return;  // completed since (its message came another way), or stale
  const rtr_state was = r->rtr;
  rtr_release(*r);  // the sender will never write: the slot is free again
  if (r->rtr_only) {
    // Optimistic: the RTR was the receive's only way to a message. The sender logged why.
    fail_recv(*r, was == rtr_state::cancelling ? FI_ECANCELED : FI_EIO);
    return;
  }
  if (was == rtr_state::waiting_rts) {
    // The RTS it matched goes the sender-initiated way after all.
    wire::rts m{};
    m.tag = r->tag;
    m.cq_data = r->cq_data;
    m.msg_len = r->msg_len;
    m.send_id = r->send_id;
    m.hdr.flags = static_cast<std::uint16_t>((r->has_cq_data ? wire::flag_cq_data : 0) |
                                             (r->ack_wanted ? wire::flag_ack_wanted : 0));
    rndv_recv_start(*r, from, m);
  } else if (was == rtr_state::cancelling) {
    unpost(*r);
    fail_recv(*r, FI_ECANCELED);
  }
}

core::status endpoint::rtr_cancel(recv_request& r) noexcept {
  r.rtr = rtr_state::cancelling;
  ++stats_.rtr_cancels;
  rtr_answer(r.entry.source, wire::pkt_type::rtr_cancel, recvs_.id_of(&r));
  return core::status::ok;
}

void endpoint::on_rtr_cancel_reply(dev::peer_id from, const dev::packet& pkt) noexcept {
  const auto a = wire::read<wire::rtr_answer>(pkt);
  recv_request* r = recvs_.from_id(a.recv_id);
  if (!r || r->entry.source != from || r->rtr != rtr_state::cancelling) return;
  if (!(a.hdr.flags & wire::flag_withdrawn)) {
    // The sender already wrote, or its packet is on the way: the receive completes normally
    // and the cancel has lost the race, as fi_cancel allows.
    r->rtr = rtr_state::sent;
    return;
  }
  rtr_release(*r);
  unpost(*r);
  fail_recv(*r, FI_ECANCELED);
}

}  // namespace exanet::proto
