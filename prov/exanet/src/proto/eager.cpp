// eager: the whole message rides in one mailbox packet with its envelope (env_data). The send
// completes at post time; the receiver copies the payload out of the mailbox slot, into the
// posted buffer or into the unexpected record. Owns: env_data. Counters: eager_sent, eager_recv.
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <cstring>

#include "core/iov.hpp"
#include "core/log.hpp"
#include "proto/endpoint.hpp"

namespace exanet::proto {

core::status endpoint::eager_send(const send_args& a, std::size_t len) noexcept {
  dev::mailbox_reservation slot;
  if (core::status s = dev_.mailbox_reserve(a.peer, slot); !core::ok(s)) return s;
  wire::env_data p;
  p.hdr = wire::make_header(
      wire::pkt_type::env_data,
      (a.kind == queue_kind::tagged ? wire::flag_tagged : 0) | (a.has_cq_data ? wire::flag_cq_data : 0),
      static_cast<std::uint32_t>(len));
  p.tag = a.tag;
  p.cq_data = a.cq_data;
  p.psn = next_psn(a.peer);
  core::copy_from_iov(p.payload, a.iov, 0, len);
  wire::write(slot.data(), p);
  dev_.mailbox_publish(slot);
  commit_send(a.peer, a.kind, a.tag, false, 0);
  ++stats_.eager_sent;

  complete_buffered_send(a, len);
  return core::status::ok;
}

void endpoint::on_env_data(dev::peer_id from, const dev::packet& pkt) noexcept {
  const auto p = wire::read<wire::env_data>(pkt);
  const std::size_t len = p.hdr.len;
  if (len > wire::eager_payload_max) return;  // malformed: a peer bug, never trusted
  const auto kind = (p.hdr.flags & wire::flag_tagged) ? queue_kind::tagged : queue_kind::msg;
  const bool has_data = p.hdr.flags & wire::flag_cq_data;
  ++stats_.eager_recv;
  if (recv_request* r = take_posted(kind, from, p.tag, len)) {
    deliver_recv(*r, from, p.tag, p.cq_data, has_data, p.payload, len);
    return;
  }
  unexpected_msg* u = unexpected_.acquire();
  if (!u) {
    EXANET_LOG(warn, ep_data, "out of memory: unexpected eager message dropped");
    return;
  }
  u->type = wire::pkt_type::env_data;
  u->peer = from;
  u->tag = p.tag;
  u->cq_data = p.cq_data;
  u->has_cq_data = has_data;
  u->len = len;
  std::memcpy(u->inline_payload, p.payload, len);
  (void)add_unexpected(kind, *u);  // on failure it logged and freed the record
}

}  // namespace exanet::proto
