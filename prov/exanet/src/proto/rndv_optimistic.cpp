// SPDX-License-Identifier: BSD-2-Clause
// The optimistic variant (FI_EXANET_PROTOCOL=optimistic; seed 000 §3.14, DESIGN.md §4): every
// message above medium_max is receiver-initiated, with no RTS and no tickets. The application
// promises what makes that safe: receives name their source, a message and the receive that takes
// it are on the same side of medium_max, and nothing probes. A long receive in several buffers
// lands in one contiguous buffer of its own and is scattered at completion.
//
//   receiver                                            sender
//     post long recv -- RTR(tag, ignore, buf, cap, slot) -->  first waiting send of that tag,
//     (no posted-queue entry)                                 else stored
//     |<=== landing record, DMA write, notification (cq data) ===  send posted: first stored
//     complete                                                    RTR of its tag, else waits
//
// Matching happens at the sender: RTRs arrive in the receiver's posting order (one FIFO
// mailbox) and sends are taken in posting order, so pairing each with the first partner it
// matches is the matching rule, run where both sequences meet (prov/exanet/docs/model/
// optimistic.pml checks it, with cancels, over every interleaving). Ignore bits are fine for that
// (the full tag comes back in the landing record); a wildcard source is not (an RTR needs one
// sender). Long sends take no psn, so nothing at the receiver ever waits behind them: short
// messages keep the ordinary path (eager, medium, and the RTS of a short FI_DELIVERY_COMPLETE
// send or of a medium send without ring credit, all matched at the receiver), and the two
// classes never meet.
//
// Consumes: rtr packets with flag_optimistic (from on_rtr), rtr_cancel as in rndv_rtr.cpp.
#include <cstdlib>

#include "core/log.hpp"
#include "proto/endpoint.hpp"

namespace exanet::proto {
namespace {

queue_kind kind_of(const wire::rtr& m) noexcept {
  return (m.hdr.flags & wire::flag_tagged) ? queue_kind::tagged : queue_kind::msg;
}

}  // namespace

// ---- receiver -------------------------------------------------------------------------------

core::status endpoint::optimistic_refuse(const char* what) noexcept {
  if (!refusal_warned_) {
    refusal_warned_ = true;
    EXANET_LOG(warn, ep_data, "FI_EXANET_PROTOCOL=optimistic refuses %s (-FI_EOPNOTSUPP)", what);
  }
  return core::status::refused;
}

core::status endpoint::optimistic_recv(recv_request& r) noexcept {
  if (!dev_.notify_alloc(r.ri_slot, r.ri_gen)) return core::status::again;
  if (r.iov_count != 1) {
    r.landing = static_cast<std::byte*>(std::malloc(r.capacity));
    if (!r.landing) {
      dev_.notify_free(r.ri_slot);
      r.ri_slot = recv_request::no_slot;
      return core::status::again;
    }
  }
  const std::uint64_t buf_addr = reinterpret_cast<std::uint64_t>(r.landing ? r.landing : r.iov[0].iov_base);
  if (!dev_.window_open(r.ri_slot, buf_addr, r.capacity)) {
    std::free(r.landing);  // the device cannot expose the buffer, and this variant has no other way
    r.landing = nullptr;
    dev_.notify_free(r.ri_slot);
    r.ri_slot = recv_request::no_slot;
    return optimistic_refuse("a receive buffer the device cannot expose");
  }
  ri_by_slot_[r.ri_slot] = &r;
  const dev::peer_id to = r.entry.source;
  wire::rtr p{};
  p.hdr = wire::make_header(wire::pkt_type::rtr,
                            wire::flag_optimistic |
                                (r.kind == queue_kind::tagged ? wire::flag_tagged : 0));
  p.tag = r.entry.tag;
  p.ignore = r.entry.ignore;
  p.buf_addr = buf_addr;
  p.capacity = r.capacity;
  p.recv_id = recvs_.id_of(&r);
  p.notify_slot = r.ri_slot;
  p.notify_gen = r.ri_gen;
  dev::packet raw;
  wire::write(raw.data(), p);
  send_control(to, raw);
  r.rtr_only = true;
  r.rtr = rtr_state::sent;
  wait_ri_.push_back(r);  // poll_ri completes it; fi_cancel finds it there
  ++stats_.rtr_sent;
  return core::status::ok;
}

recv_request* endpoint::optimistic_find(void* context) noexcept {
  return wait_ri_.find([&](const recv_request& r) { return r.rtr_only && r.context == context; });
}

// ---- sender ---------------------------------------------------------------------------------

core::status endpoint::optimistic_send(const send_args& a, std::size_t len) noexcept {
  progress_mailbox();  // an RTR already in the mailbox makes this a fast receive
  const std::uint64_t tag = a.kind == queue_kind::tagged ? a.tag : 0;
  stored_rtr* st = stored_.oldest_match(a.peer, a.kind == queue_kind::tagged, tag,
                                        [](const stored_rtr&) { return true; });
  send_request* s = make_rendezvous_send(a, len);
  if (!s) return core::status::again;
  ++stats_.ri_sent;
  if (!st) {
    s->awaiting_rtr = true;  // no packet goes: the receive's RTR will find it
    wait_cts_.push_back(*s);
    return core::status::ok;
  }
  const wire::rtr m = st->rtr;
  stored_.remove(*st);
  ri_write(*s, m, true);
  return core::status::ok;
}

void endpoint::on_optimistic_rtr(dev::peer_id from, const wire::rtr& m) noexcept {
  if (!optimistic()) {
    // The processes of a job disagree on FI_EXANET_PROTOCOL: the receive fails rather than wait
    // for a send that will announce itself with an RTS it does not expect.
    EXANET_LOG(warn, ep_data, "RTR of the optimistic variant from peer %u, but this process "
                              "does not run FI_EXANET_PROTOCOL=optimistic; refused", from);
    rtr_answer(from, wire::pkt_type::rtr_nack, m.recv_id);
    return;
  }
  const queue_kind kind = kind_of(m);
  send_request* s = wait_cts_.find([&](const send_request& x) {
    return x.awaiting_rtr && x.peer == from && x.kind == kind &&
           match::tag_matches(m.tag, m.ignore, x.tag);
  });
  if (s) {
    wait_cts_.remove(*s);
    s->awaiting_rtr = false;
    ri_write(*s, m);
    return;
  }
  if (!stored_.add(from, m, 0)) {
    EXANET_LOG(warn, ep_data, "out of memory storing an RTR from peer %u; refused", from);
    rtr_answer(from, wire::pkt_type::rtr_nack, m.recv_id);
    return;
  }
  ++stats_.rtr_stored;
}

}  // namespace exanet::proto
