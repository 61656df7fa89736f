// SPDX-License-Identifier: BSD-2-Clause
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

inline core::status endpoint::eager_post(dev::peer_id to, const void* buf, std::size_t len,
                                         std::uint64_t tag, std::uint64_t cq_data,
                                         bool has_cq_data, queue_kind kind,
                                         std::span<const iovec> iov, bool reported) noexcept {
  dev::mailbox_reservation slot;
  if (core::status s = dev_.mailbox_reserve(to, slot); !core::ok(s)) return s;
  // Built here, then copied into the slot: the bytes the receiver reads (wire::write_prefix).
  alignas(64) wire::env_data p{};
  p.hdr = wire::make_header(
      wire::pkt_type::env_data,
      (kind == queue_kind::tagged ? wire::flag_tagged : 0) | (has_cq_data ? wire::flag_cq_data : 0),
      static_cast<std::uint32_t>(len));
  p.tag = tag;
  p.cq_data = cq_data;
  p.psn = next_psn(to);
  static_assert(wire::eager_payload_max <= 64, "copy_small takes at most 64 bytes");
  if (buf)
    core::copy_small(p.payload, buf, len);  // len <= 36
  else
    core::copy_from_iov(p.payload, iov, 0, len);
  wire::write_prefix(slot.data(), p, offsetof(wire::env_data, payload) + len);
  slot.reported = reported;
  dev_.mailbox_publish(slot);
  if (prof_) [[unlikely]] prof_->note_issued();
  commit_send(to, kind, tag, false, 0);
  ++stats_.eager_sent;
  stats_.bytes_sent += len;
  return core::status::ok;
}

core::status endpoint::eager_send(const send_args& a, std::size_t len) noexcept {
  const core::status s = eager_post(a.peer, nullptr, len, a.tag, a.cq_data, a.has_cq_data, a.kind,
                                    a.iov, reported(a.completion));
  if (core::ok(s)) complete_buffered_send(a, len);
  return s;
}

core::status endpoint::send_one_now(dev::peer_id to, const void* buf, std::size_t len,
                                    std::uint64_t tag, std::uint64_t cq_data, bool has_cq_data,
                                    queue_kind kind, const one_send& how) noexcept {
  // The checks of send_now, in its order, for the case the table sends eager; anything else
  // (a DMA backlog that may close the psn window, a larger message) takes send().
  if (sends_held_by_writes(to)) [[unlikely]] return core::status::again;
  if (len < eager_below_[static_cast<int>(kind)] && dma_backlog_.empty()) [[likely]] {
    if (dev_.peer_intake_held(to)) [[unlikely]] return core::status::again;
    const core::status s =
        eager_post(to, buf, len, tag, cq_data, has_cq_data, kind, {}, reported(how.completion));
    if (core::ok(s)) [[likely]] {
      if (reported(how.completion)) report_send_done(to, how.context, kind, len, how.completion);
    } else if (s == core::status::peer_dead) {
      settle_found_dead();
    }
    return s;
  }
  const iovec v{const_cast<void*>(buf), len};
  send_args a;
  a.iov = {&v, 1};
  a.tag = tag;
  a.cq_data = cq_data;
  a.has_cq_data = has_cq_data;
  a.peer = to;
  a.context = how.context;
  a.inject = how.inject;
  a.completion = how.completion;
  a.kind = kind;
  // The sizes an eager train carries (MPI's 64-byte sends), then those the bounce ring carries:
  // the same checks, then the protocol, without send_now's general walk and table lookup.
  if (len < direct_below_[static_cast<int>(kind)] && dma_backlog_.empty()) {
    if (dev_.peer_intake_held(to)) [[unlikely]] return core::status::again;
    const int k = static_cast<int>(kind);
    const core::status s = len < train_below_[k]
                               ? train_send(a, len)
                               : medium_or_rendezvous(a, len, medium_fallback_[k]);
    if (s == core::status::peer_dead) [[unlikely]] settle_found_dead();
    return s;
  }
  return send_settled(a);  // not send(): a profiled send is stamped once, by send_one_profiled
}

void endpoint::on_env_data(dev::peer_id from, const dev::packet& pkt) noexcept {
  // The header alone, then the payload's len bytes straight from the packet: a small message's
  // bytes are all the receiver loads (wire::read_head). len is checked before it bounds a copy.
  constexpr std::size_t head = offsetof(wire::env_data, payload);
  const auto p = wire::read_head<wire::env_data, head>(pkt);
  const std::size_t len = p.hdr.len;
  if (len > wire::eager_payload_max) [[unlikely]] {
    on_env_train(from, wire::read<wire::env_data>(pkt));  // a train's end, or malformed (dropped)
    return;
  }
  const std::byte* const payload = pkt.data() + head;
  const auto kind = (p.hdr.flags & wire::flag_tagged) ? queue_kind::tagged : queue_kind::msg;
  const bool has_data = p.hdr.flags & wire::flag_cq_data;
  ++stats_.eager_recv;
  prof_recv(profile_phase::arrival, profile_proto::eager, len);
  if (recv_request* r = take_posted(kind, from, p.tag, len)) {
    prof_recv(profile_phase::match);
    deliver_recv(*r, from, p.tag, p.cq_data, has_data, payload, len);
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
  std::memcpy(u->inline_payload, payload, len);
  (void)add_unexpected(kind, *u);  // on failure it logged and freed the record
}

}  // namespace exanet::proto
