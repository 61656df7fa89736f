// SPDX-License-Identifier: BSD-2-Clause
// medium (buffered eager): the sender copies the payload into its bounce ring at the receiver
// (receiver-owned shared memory, one ring per sender, credit-based), then publishes one medium
// packet naming the bytes. The send completes at once; the receiver copies out and returns the
// credit by advancing the ring tail. Owns: medium. Counters: medium_sent, medium_recv.
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <cstdlib>
#include <cstring>

#include "core/iov.hpp"
#include "core/log.hpp"
#include "proto/endpoint.hpp"

namespace exanet::proto {

core::status endpoint::medium_send(const send_args& a, std::size_t len) noexcept {
  // Placed like the source: the copy in is aligned, and so is the copy out when the receive
  // buffer sits where the send buffer does.
  dev::ring_space space;
  // No ring at this receiver, or no credit in it (the receiver has not drained it yet): the
  // caller uses the rendezvous, which needs only a mailbox slot, rather than refusing the send;
  // unless the device says the credit is on its way and worth waiting for (over a network):
  // then "again", and the application progresses and retries.
  if (!dev_.bounce_reserve(a.peer, len, core::first_byte(a.iov), space))
    return dev_.bounce_credit_coming(a.peer, len) ? core::status::again
                                                  : core::status::not_supported;
  // Claim the mailbox slot before touching the ring, so a full mailbox leaves the ring untouched.
  dev::mailbox_reservation slot;
  if (core::status s = dev_.mailbox_reserve(a.peer, slot); !core::ok(s)) return s;
  dev_.bounce_write(a.peer, space, a.iov, len);

  wire::medium p{};
  p.hdr = wire::make_header(
      wire::pkt_type::medium,
      (a.kind == queue_kind::tagged ? wire::flag_tagged : 0) | (a.has_cq_data ? wire::flag_cq_data : 0),
      static_cast<std::uint32_t>(len));
  p.tag = a.tag;
  p.cq_data = a.cq_data;
  p.ring_offset = space.offset;
  p.ring = space.ring;
  p.psn = next_psn(a.peer);
  wire::write(slot.data(), p);
  slot.reported = reported(a.completion);
  dev_.mailbox_publish(slot);
  if (prof_) [[unlikely]] prof_->note_issued();
  // The next medium message's room, made ready while we would wait anyway (dev/emu: its lines
  // taken from the receiver's cache now instead of during the next copy in).
  dev_.bounce_prepare(a.peer, len);
  commit_send(a.peer, a.kind, a.tag, false, 0);
  ++stats_.medium_sent;
  stats_.bytes_sent += len;

  complete_buffered_send(a, len);
  return core::status::ok;
}

void endpoint::on_medium(dev::peer_id from, const dev::packet& pkt) noexcept {
  const auto p = wire::read<wire::medium>(pkt);
  const std::size_t len = p.hdr.len;
  const std::byte* data = dev_.bounce_data(from, p.ring, p.ring_offset, len);
  if (!data) {
    ++stats_.drop_bad_field;
    EXANET_LOG_ONCE(warn, ep_data, "medium packet names bytes outside its sender's ring; dropped");
    return;
  }
  const auto kind = (p.hdr.flags & wire::flag_tagged) ? queue_kind::tagged : queue_kind::msg;
  const bool has_data = p.hdr.flags & wire::flag_cq_data;
  ++stats_.medium_recv;
  prof_recv(profile_phase::arrival, profile_proto::medium, len);
  if (recv_request* r = take_posted(kind, from, p.tag, len)) {
    prof_recv(profile_phase::match);
    deliver_recv(*r, from, p.tag, p.cq_data, has_data, data, len);
    dev_.bounce_consume(from, p.ring, p.ring_offset + len);
    return;
  }
  // Unexpected: copy out now so the sender's credit comes back without waiting for a receive.
  // The intake admitted it within the unexpected budget (intake.cpp).
  unexpected_msg* u = unexpected_.acquire();
  if (!u || !keep_unexpected_payload(*u, data, len)) {
    if (u) unexpected_.release(u);
    EXANET_LOG(warn, ep_data, "out of memory: unexpected medium message dropped");
    dev_.bounce_consume(from, p.ring, p.ring_offset + len);
    return;
  }
  dev_.bounce_consume(from, p.ring, p.ring_offset + len);
  u->type = wire::pkt_type::medium;
  u->peer = from;
  u->tag = p.tag;
  u->cq_data = p.cq_data;
  u->has_cq_data = has_data;
  u->len = len;
  (void)add_unexpected(kind, *u);  // on failure it logged and freed the record
}

}  // namespace exanet::proto
