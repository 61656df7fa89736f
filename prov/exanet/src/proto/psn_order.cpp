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
#include "core/log.hpp"
#include "proto/endpoint.hpp"

namespace exanet::proto {

peer_sequence* endpoint::sequence_of(dev::peer_id p) noexcept {
  if (p >= seq_.size()) {
    try {
      seq_.resize(std::size_t{p} + 1);  // cold: the first packet of a peer never connected to
    } catch (...) {
      return nullptr;
    }
  }
  return &seq_[p];
}

void endpoint::commit_send(dev::peer_id to, queue_kind k, std::uint64_t tag, bool rendezvous,
                           std::uint64_t send_id) noexcept {
  peer_sequence& q = seq_[to];
  if (k == queue_kind::msg) tag = 0;  // the untagged queue is one class per peer
  const wire::psn_t psn = q.next_psn++;
  q.log[psn & (send_log_len - 1)] = {psn, k, rendezvous, tag, send_id};
  // Optimistic RTRs are not counted down: only the long sends they wait for can serve them.
  if (optimistic() || stored_.empty(to)) [[likely]] return;
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

bool endpoint::admit_in_order(dev::peer_id from, const dev::packet& pkt) noexcept {
  peer_sequence* q = sequence_of(from);
  if (!q) return true;  // no memory for the peer's state: it cannot have RTRs either
  if (!q->parked.empty()) {
    park(from, pkt);  // FIFO per peer: nothing overtakes a parked packet
    return false;
  }
  if (!wire::is_message(static_cast<std::uint8_t>(pkt[0]))) return true;
  const wire::psn_t psn = wire::psn_of(pkt);
  if (!wire::psn_before(q->watermark, psn)) {
    drop_served(from, pkt);
    return false;
  }
  if (psn != q->watermark + 1) {
    park(from, pkt);
    return false;
  }
  q->watermark = psn;
  return true;
}

void endpoint::park(dev::peer_id from, const dev::packet& pkt) noexcept {
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
      dev_.bounce_consume(m.ring, m.ring_offset + m.hdr.len);  // give the credit back
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
