// SPDX-License-Identifier: BSD-2-Clause
// Per-peer packet sequence numbers (psn). Every message a sender sends to one receiver takes the
// next psn: eager and medium packets and RTSes carry it, and a receiver-initiated write carries
// it in its notification. The write and the mailbox are not ordered with each other, so the
// receiver restores the send order: it takes messages, whichever way they came, in psn order.
//
//   * A mailbox packet whose psn is already taken is the RTS of a send an RTR served: dropped.
//   * A mailbox packet beyond a gap (an earlier write's notification not taken yet) is parked,
//     and so is everything behind it from that peer, until the gap closes.
//   * A write's notification is taken only when it is the next psn (rndv_rtr.cpp, poll_ri).
//
// Then every message up to the watermark is matched or unexpected, and an RTR's ticket ("the
// nth send of my class after psn w") names exactly the send the receive would match. These are
// the corrections C1 and C2 of the class-sum model; prov/exanet/docs/model has the SPIN model
// of the form implemented here.
//
// The window (issue 12). A gap below a psn is made of writes whose notifications are not taken
// yet and of messages parked behind them. The first are at most this endpoint's notification
// slots (each RTR arms one). The second are bounded by the sender: it sends at most
// mailbox_slots messages to a peer while a receiver-initiated write of its own to that peer is
// still in its DMA backlog (psn_window_open); a write the engine has finished has its
// notification ahead of later packets (the staged engine writes it from the mailbox, in FIFO
// order; CMA before the post returns), and progress takes notifications right after each
// mailbox batch. So a correct peer never sends a psn more than
//     notify_slots + 2 * mailbox_slots
// past the watermark (one mailbox_slots for the sender's bound, one covering a mailbox batch),
// and a psn beyond it is a forged or corrupt packet: dropped and counted (psn_window_drops),
// never allowed to park its sender's traffic for ever. Nor is a packet that opens a gap while no
// receive of ours waits for a write from that sender (nothing could ever fill the gap). The
// parked queue is bounded too: message
// packets by the window, control packets (CTS, RTR, answers: each arms a slot at its sender)
// by two more notify_slots. The bound on the sender is no tighter than the mailbox itself: a
// receiver that does not progress stops the sender after mailbox_slots packets anyway.
#include "core/log.hpp"
#include "proto/endpoint.hpp"

namespace exanet::proto {

std::uint32_t endpoint::psn_window() const noexcept {
  return static_cast<std::uint32_t>(cfg_.notify_slots + 2 * cfg_.mailbox_slots);
}

std::size_t endpoint::parked_max() const noexcept {
  return psn_window() + 2 * cfg_.notify_slots;
}

bool endpoint::psn_window_open(dev::peer_id to) noexcept {
  // Only called with a non-empty DMA backlog (endpoint::send): a short scan, off the fast path.
  if (to >= seq_.size()) return true;
  bool found = false;
  wire::psn_t oldest = 0;
  dma_backlog_.for_each([&](send_request& s) {
    if (s.peer != to || !s.psn_in_note) return;
    if (!found || wire::psn_before(s.psn, oldest)) oldest = s.psn;
    found = true;
  });
  return !found || seq_[to].next_psn - oldest < cfg_.mailbox_slots;
}

bool endpoint::gap_fillable(dev::peer_id from) noexcept {
  bool found = false;
  wait_ri_.for_each([&](recv_request& r) {
    found = found || (r.entry.source == from && !r.rtr_only);
  });
  return found;
}

void endpoint::drop_out_of_window(dev::peer_id from, const dev::packet& pkt,
                                  const char* why) noexcept {
  const std::uint64_t n = ++stats_.psn_window_drops;
  if ((n & (n - 1)) == 0)  // rate-limited: the 1st, 2nd, 4th... drop
    EXANET_LOG(warn, ep_data, "packet type %u from peer port %u dropped: %s (%llu so far)",
               static_cast<unsigned>(pkt[0]), dev_.peer_address(from).port, why,
               static_cast<unsigned long long>(n));
}

peer_sequence* endpoint::grow_sequence(dev::peer_id p) noexcept {
  try {
    seq_.resize(std::size_t{p} + 1);  // the first packet of a peer never connected to
  } catch (...) {
    return nullptr;
  }
  return &seq_[p];
}

void endpoint::count_stored_rtrs(dev::peer_id to, queue_kind k, std::uint64_t tag,
                                 bool rendezvous) noexcept {
  // Stored RTRs of this send's class count it. One that reaches its target here is served by
  // the packet itself (a rendezvous send takes its RTR before, in ri_target/ri_send).
  stored_.for_each_match(to, k == queue_kind::tagged, tag, [&](stored_rtr& st) {
    if (--st.remaining > 0) return;
    if (rendezvous) {
      // Not taken by ri_target before this RTS: the receive must not wait for a write.
      ++stats_.rtr_stale;
      rtr_answer(to, wire::pkt_type::rtr_nack, st.rtr.recv_id);
    } else {
      ++stats_.rtr_dropped;  // the eager or medium packet serves the receive
    }
    stored_.remove(st);
  });
}

bool endpoint::admit_out_of_order(dev::peer_id from, const dev::packet& pkt) noexcept {
  peer_sequence* q = sequence_of(from);
  if (!q) return true;  // no memory for the peer's state: it cannot have RTRs either
  const bool message = wire::is_message(static_cast<std::uint8_t>(pkt[0]));
  if (message) {
    const wire::psn_t psn = wire::psn_of(pkt);
    if (wire::psn_before(q->watermark, psn) && psn - q->watermark > psn_window()) {
      drop_out_of_window(from, pkt, "psn beyond the reorder window");
      return false;
    }
  }
  if (!q->parked.empty()) {
    park(from, pkt);  // FIFO per peer: nothing overtakes a parked packet
    return false;
  }
  if (!message) return true;
  const wire::psn_t psn = wire::psn_of(pkt);
  if (!wire::psn_before(q->watermark, psn)) {
    drop_served(from, pkt);
    return false;
  }
  if (psn != q->watermark + 1) {
    // A gap opens. Only the notification of a write answering one of our RTRs to this sender
    // can fill it (its mailbox packets arrive in psn order): with none of those waiting, the
    // packet is out of order and would park the sender's traffic for ever.
    if (!gap_fillable(from)) {
      drop_out_of_window(from, pkt, "a psn gap that no write of the sender can fill");
      return false;
    }
    park(from, pkt);
    return false;
  }
  q->watermark = psn;
  return true;
}

void endpoint::park(dev::peer_id from, const dev::packet& pkt) noexcept {
  if (seq_[from].parked.size() >= parked_max()) {
    drop_out_of_window(from, pkt, "its sender's parked queue is full");
    return;
  }
  backlog_packet* b = backlog_pool_.acquire();
  if (!b) {
    // Cannot hold it, cannot take it out of order: the message is lost, and says so.
    EXANET_LOG(warn, ep_data, "out of memory parking a packet from peer %u; dropped", from);
    return;
  }
  b->peer = from;
  b->pkt = pkt;
  seq_[from].parked.push_back(*b);
  ++stats_.parked;
}

void endpoint::drop_served(dev::peer_id from, const dev::packet& pkt) noexcept {
  if (static_cast<wire::pkt_type>(pkt[0]) == wire::pkt_type::rts) {
    ++stats_.served_drops;  // its receive got the data by RTR
    return;
  }
  // Only an RTS can have been served another way; anything else is a peer bug.
  EXANET_LOG(warn, ep_data, "message packet type %u with an already taken psn %u dropped",
             static_cast<unsigned>(pkt[0]), wire::psn_of(pkt));
  if (static_cast<wire::pkt_type>(pkt[0]) == wire::pkt_type::medium) {
    const auto m = wire::read<wire::medium>(pkt);
    if (dev_.bounce_data(from, m.ring, m.ring_offset, m.hdr.len))
      dev_.bounce_consume(from, m.ring, m.ring_offset + m.hdr.len);  // give the credit back
  }
}

void endpoint::advance_watermark(dev::peer_id from, wire::psn_t psn) noexcept {
  peer_sequence& q = seq_[from];
  q.watermark = psn;
  while (backlog_packet* b = q.parked.front()) {
    if (wire::is_message(static_cast<std::uint8_t>(b->pkt[0]))) {
      const wire::psn_t p = wire::psn_of(b->pkt);
      if (wire::psn_before(q.watermark, p)) {
        if (p != q.watermark + 1) break;  // another write's notification is still due
        q.watermark = p;
      } else {
        q.parked.remove(*b);
        drop_served(from, b->pkt);
        backlog_pool_.release(b);
        continue;
      }
    }
    q.parked.remove(*b);
    const dev::packet pkt = b->pkt;
    backlog_pool_.release(b);
    dispatch(from, pkt);
  }
}

}  // namespace exanet::proto
