// SPDX-License-Identifier: BSD-2-Clause
// rndv_probe: a receive matched to a rendezvous whose data has not come for
// FI_EXANET_RNDV_TIMEOUT_MS asks the sender whether it has the send the RTS named (progress.cpp,
// expire_rendezvous). The sender answers only "no such send": a forged RTS, or one whose send is
// gone; the receive then fails with FI_EIO instead of holding its buffer for ever (issue 12).
// A sender that has the send says nothing and writes when it progresses, however late; one that
// died is found by the liveness check. No false failure is possible from ordering: the reply
// travels behind whatever the sender wrote for that send (FIFO per pair), so a receive whose data
// was on its way completes before the reply is read. Owns: rndv_probe, rndv_probe_reply.
// Counters: rndv_timeouts (probes sent), drop_bad_field (answers naming nothing waiting).
#include <rdma/fi_errno.h>

#include "core/log.hpp"
#include "proto/endpoint.hpp"

namespace exanet::proto {

void endpoint::rndv_probe_send(recv_request& r) noexcept {
  ++stats_.rndv_timeouts;
  wire::rndv_probe p{};
  p.hdr = wire::make_header(wire::pkt_type::rndv_probe, 0);
  p.send_id = r.send_id;
  p.recv_id = recvs_.id_of(&r);
  dev::packet raw;
  wire::write(raw.data(), p);
  send_control(r.peer, raw);
}

void endpoint::on_rndv_probe(dev::peer_id from, const dev::packet& pkt) noexcept {
  if (from == dev::no_peer) return;  // nobody to answer
  const auto p = wire::read<wire::rndv_probe>(pkt);
  const send_request* s = sends_.from_id(p.send_id);
  if (s && s->peer == from && s->hook.linked()) return;  // ours, and it will be written
  wire::rndv_probe reply = p;
  reply.hdr = wire::make_header(wire::pkt_type::rndv_probe_reply, 0);
  dev::packet raw;
  wire::write(raw.data(), reply);
  send_control(from, raw);
}

void endpoint::on_rndv_probe_reply(dev::peer_id from, const dev::packet& pkt) noexcept {
  const auto p = wire::read<wire::rndv_probe>(pkt);
  recv_request* r = recvs_.from_id(p.recv_id);
  // Either its RTR was out when the RTS came (wait_ri_), or it sent a CTS and waits for that
  // segment's data (wait_notify_: the only list whose receives hold notify_slot).
  const bool rts_wait = r && r->rtr == rtr_state::waiting_rts && !r->rtr_only;
  const bool cts_wait = r && !rts_wait && r->hook.linked() && r->notify_slot != recv_request::no_slot;
  if (!r || r->peer != from || r->send_id != p.send_id || !(cts_wait || rts_wait)) {
    ++stats_.drop_bad_field;  // completed since, or not ours
    return;
  }
  EXANET_LOG_ONCE(warn, ep_data, "peer port %u has no send %llu for the RTS a receive matched "
                  "(forged or stale): the receive fails with FI_EIO",
                  dev_.peer_address(from).port, static_cast<unsigned long long>(p.send_id));
  if (cts_wait) {
    wait_notify_.remove(*r);
    dev_.notify_free(r->notify_slot);  // disarmed: nothing lands here any more
    r->notify_slot = recv_request::no_slot;
  }
  fail_recv(*r, FI_EIO);  // an RTR'd receive: rtr_release takes it off wait_ri_ and its slot
}

}  // namespace exanet::proto
