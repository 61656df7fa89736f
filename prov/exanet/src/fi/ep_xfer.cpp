// SPDX-License-Identifier: BSD-2-Clause
// The FI_MSG and FI_TAGGED data-path calls. Both ops tables are generated from one template over
// the queue kind (STYLE.md rule 9), and every call funnels into post_send / post_recv, which
// validate, resolve the address and hand a proto::send_args / recv_args down.
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "core/iov.hpp"
#include "fi/attr.hpp"
#include "fi/common.hpp"
#include "fi/ep.hpp"

namespace exanet::fi {
namespace {

using proto::queue_kind;

constexpr std::uint64_t send_flags_known = FI_COMPLETION | FI_MORE | FI_INJECT | FI_REMOTE_CQ_DATA |
                                           FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE |
                                           FI_DELIVERY_COMPLETE | FI_MATCH_COMPLETE;
constexpr std::uint64_t recv_flags_known = FI_COMPLETION | FI_MORE | FI_MULTI_RECV;
constexpr std::uint64_t match_flags = FI_PEEK | FI_CLAIM | FI_DISCARD;

endpoint& ep_of(fid_ep* f) noexcept { return from_fid<endpoint>(&f->fid); }

template <queue_kind K>
ssize_t post_send(fid_ep* f, const iovec* iov, size_t count, fi_addr_t dest, std::uint64_t tag,
                  std::uint64_t data, std::uint64_t flags, void* context,
                  call_family family = call_family::ordinary) noexcept {
  endpoint& ep = ep_of(f);
  if (!ep.enabled) [[unlikely]] return -FI_EOPBADSTATE;
  if (flags & ~send_flags_known) [[unlikely]] return -FI_EBADFLAGS;
  std::size_t len = 0;
  if (int rc = check_iov(iov, count, ep.tx_iov_limit, max_msg_size, len); rc != 0) [[unlikely]]
    return rc;
  proto::send_args a;
  a.iov = {iov, count};
  a.tag = tag;
  a.cq_data = data;
  a.has_cq_data = flags & FI_REMOTE_CQ_DATA;
  a.context = context;
  a.inject = flags & FI_INJECT;
  a.completion = family == call_family::ordinary && (!ep.tx_selective || (flags & FI_COMPLETION));
  a.delivery_complete = flags & (FI_DELIVERY_COMPLETE | FI_MATCH_COMPLETE);
  a.kind = K;
  if (a.inject && len > ep.inject_size) [[unlikely]] return -FI_EMSGSIZE;

  core::level_guard g(ep.lock);
  if (int rc = ep.peer_of(dest, a.peer); rc != 0) [[unlikely]] return rc;
  core::status s = ep.proto.send(a);
  if (s == core::status::again) {
    // The peer's mailbox or ring is full: make what progress we can, then try once more before
    // handing the back-pressure to the caller.
    ep.proto.progress();
    s = ep.proto.send(a);
  }
  return core::to_int(s);
}

template <queue_kind K>
ssize_t post_recv(fid_ep* f, const iovec* iov, size_t count, fi_addr_t src, std::uint64_t tag,
                  std::uint64_t ignore, std::uint64_t flags, void* context) noexcept {
  endpoint& ep = ep_of(f);
  if (!ep.enabled) [[unlikely]] return -FI_EOPBADSTATE;
  // FI_MULTI_RECV is a message-queue feature; peek/claim/discard are tagged ones.
  const std::uint64_t allowed = K == queue_kind::tagged ? (recv_flags_known & ~FI_MULTI_RECV) | match_flags
                                                        : recv_flags_known;
  if (flags & ~allowed) [[unlikely]] return -FI_EBADFLAGS;
  std::size_t capacity = 0;
  if (int rc = check_iov(iov, count, ep.rx_iov_limit, SIZE_MAX, capacity); rc != 0) [[unlikely]]
    return rc;
  proto::recv_args a;
  a.iov = {iov, count};
  a.tag = tag;
  a.ignore = ignore;
  a.context = context;
  a.completion = !ep.rx_selective || (flags & FI_COMPLETION);
  a.multi_recv = flags & FI_MULTI_RECV;
  a.kind = K;
  if (a.multi_recv && count != 1) [[unlikely]] return -FI_EINVAL;  // one buffer per multi-receive

  core::level_guard g(ep.lock);
  // Without FI_DIRECTED_RECV the source address is ignored (fi_msg(3)).
  if (src != FI_ADDR_UNSPEC && (ep.caps & FI_DIRECTED_RECV)) {
    if (int rc = ep.peer_of(src, a.peer); rc != 0) return rc;
  }
  if (flags & match_flags) [[unlikely]] {
    // The claimed message's handle lives in the caller's fi_context (fi_tagged(3), FI_CLAIM).
    auto* ctx = static_cast<fi_context*>(context);
    const bool claim = flags & FI_CLAIM, discard = flags & FI_DISCARD;
    if ((claim || discard) && !ctx) return -FI_EINVAL;
    if (flags & FI_PEEK)
      return core::to_int(ep.proto.peek(a, claim, discard, claim ? &ctx->internal[0] : nullptr));
    if (!claim) return -FI_EBADFLAGS;  // FI_DISCARD alone names no message
    return core::to_int(ep.proto.claim(a, ctx->internal[0], discard));
  }
  return core::to_int(ep.proto.recv(a));
}

iovec one(const void* buf, size_t len) noexcept { return {const_cast<void*>(buf), len}; }

// The calls with one buffer (send, senddata, inject, injectdata): what post_send would check,
// in one test, then straight to the protocol's send_one (no send_args, no iovec walk). Anything
// unusual (a delivery-complete flag among the endpoint's defaults included) takes post_send,
// which gives the same answer with its error. Inject is FI_INJECT with no completion.
template <queue_kind K, bool Inject>
ssize_t send_one(fid_ep* f, const void* buf, size_t len, fi_addr_t dest, std::uint64_t tag,
                 std::uint64_t data, bool has_data, void* context) noexcept {
  endpoint& ep = ep_of(f);
  const std::uint64_t flags = Inject ? FI_INJECT | (has_data ? FI_REMOTE_CQ_DATA : 0)
                                     : (ep.tx_op_flags & send_flags_known & ~FI_INJECT) |
                                           (has_data ? FI_REMOTE_CQ_DATA : 0);
  constexpr std::uint64_t needs_post_send = FI_DELIVERY_COMPLETE | FI_MATCH_COMPLETE;
  if (!ep.enabled || len > (Inject ? ep.inject_size : max_msg_size) || (len && !buf) ||
      ep.tx_iov_limit == 0 || (flags & needs_post_send)) [[unlikely]] {
    const iovec v = one(buf, len);
    return post_send<K>(f, &v, 1, dest, tag, data, flags, context,
                        Inject ? call_family::inject : call_family::ordinary);
  }
  proto::one_send how;
  if constexpr (!Inject) {
    how.context = context;
    how.inject = false;
    how.completion = !ep.tx_selective || (flags & FI_COMPLETION);
  }
  core::level_guard g(ep.lock);
  dev::peer_id peer = dev::no_peer;
  if (int rc = ep.peer_of(dest, peer); rc != 0) [[unlikely]] return rc;
  core::status s = ep.proto.send_one(peer, buf, len, tag, data, has_data, K, how);
  if (s == core::status::again) {
    ep.proto.progress();  // as post_send: what progress we can, then once more
    s = ep.proto.send_one(peer, buf, len, tag, data, has_data, K, how);
  }
  return core::to_int(s);
}

// ---- FI_MSG -----------------------------------------------------------------------------------

// The calls with one buffer (fi_recv, fi_trecv): what post_recv checks, in one test, then
// straight to the protocol. MPI's receive: no peek/claim, no multi-receive; anything unusual
// (a multi-receive among the endpoint's default flags included) goes to post_recv for its
// answer.
template <queue_kind K>
ssize_t recv_one(fid_ep* f, void* buf, size_t len, fi_addr_t src, std::uint64_t tag,
                 std::uint64_t ignore, void* ctx) noexcept {
  const iovec v = one(buf, len);
  endpoint& ep = ep_of(f);
  const std::uint64_t flags =
      ep.rx_op_flags & recv_flags_known & (K == queue_kind::tagged ? ~FI_MULTI_RECV : ~0ull);
  if (!ep.enabled || (len && !buf) || ep.rx_iov_limit == 0 || (flags & FI_MULTI_RECV)) [[unlikely]]
    return post_recv<K>(f, &v, 1, src, tag, ignore, flags, ctx);
  proto::recv_args a;
  a.iov = {&v, 1};
  a.tag = tag;
  a.ignore = ignore;
  a.context = ctx;
  a.completion = !ep.rx_selective || (flags & FI_COMPLETION);
  a.kind = K;
  core::level_guard g(ep.lock);
  // Without FI_DIRECTED_RECV the source address is ignored (fi_msg(3)).
  if (src != FI_ADDR_UNSPEC && (ep.caps & FI_DIRECTED_RECV)) {
    if (int rc = ep.peer_of(src, a.peer); rc != 0) return rc;
  }
  return core::to_int(ep.proto.recv(a));
}

ssize_t msg_recv(fid_ep* ep, void* buf, size_t len, void*, fi_addr_t src, void* ctx) noexcept {
  return recv_one<queue_kind::msg>(ep, buf, len, src, 0, 0, ctx);
}
ssize_t msg_recvv(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t src,
                  void* ctx) noexcept {
  return post_recv<queue_kind::msg>(ep, iov, count, src, 0, 0, ep_of(ep).rx_op_flags & recv_flags_known, ctx);
}
ssize_t msg_recvmsg(fid_ep* ep, const fi_msg* m, std::uint64_t flags) noexcept {
  if (!m) return -FI_EINVAL;
  return post_recv<queue_kind::msg>(ep, m->msg_iov, m->iov_count, m->addr, 0, 0, flags, m->context);
}
ssize_t msg_send(fid_ep* ep, const void* buf, size_t len, void*, fi_addr_t dest, void* ctx) noexcept {
  return send_one<queue_kind::msg, false>(ep, buf, len, dest, 0, 0, false, ctx);
}
ssize_t msg_sendv(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t dest,
                  void* ctx) noexcept {
  return post_send<queue_kind::msg>(ep, iov, count, dest, 0, 0, ep_of(ep).tx_op_flags & send_flags_known & ~FI_INJECT, ctx);
}
ssize_t msg_sendmsg(fid_ep* ep, const fi_msg* m, std::uint64_t flags) noexcept {
  if (!m) return -FI_EINVAL;
  return post_send<queue_kind::msg>(ep, m->msg_iov, m->iov_count, m->addr, 0, m->data, flags, m->context);
}
ssize_t msg_inject(fid_ep* ep, const void* buf, size_t len, fi_addr_t dest) noexcept {
  return send_one<queue_kind::msg, true>(ep, buf, len, dest, 0, 0, false, nullptr);
}
ssize_t msg_senddata(fid_ep* ep, const void* buf, size_t len, void*, std::uint64_t data,
                     fi_addr_t dest, void* ctx) noexcept {
  return send_one<queue_kind::msg, false>(ep, buf, len, dest, 0, data, true, ctx);
}
ssize_t msg_injectdata(fid_ep* ep, const void* buf, size_t len, std::uint64_t data,
                       fi_addr_t dest) noexcept {
  return send_one<queue_kind::msg, true>(ep, buf, len, dest, 0, data, true, nullptr);
}

// ---- FI_TAGGED --------------------------------------------------------------------------------

ssize_t tagged_recv(fid_ep* f, void* buf, size_t len, void*, fi_addr_t src, std::uint64_t tag,
                    std::uint64_t ignore, void* ctx) noexcept {
  return recv_one<queue_kind::tagged>(f, buf, len, src, tag, ignore, ctx);
}
ssize_t tagged_recvv(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t src,
                     std::uint64_t tag, std::uint64_t ignore, void* ctx) noexcept {
  return post_recv<queue_kind::tagged>(ep, iov, count, src, tag, ignore, ep_of(ep).rx_op_flags & recv_flags_known & ~FI_MULTI_RECV, ctx);
}
ssize_t tagged_recvmsg(fid_ep* ep, const fi_msg_tagged* m, std::uint64_t flags) noexcept {
  if (!m) return -FI_EINVAL;
  return post_recv<queue_kind::tagged>(ep, m->msg_iov, m->iov_count, m->addr, m->tag, m->ignore,
                                       flags, m->context);
}
ssize_t tagged_send(fid_ep* ep, const void* buf, size_t len, void*, fi_addr_t dest,
                    std::uint64_t tag, void* ctx) noexcept {
  return send_one<queue_kind::tagged, false>(ep, buf, len, dest, tag, 0, false, ctx);
}
ssize_t tagged_sendv(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t dest,
                     std::uint64_t tag, void* ctx) noexcept {
  return post_send<queue_kind::tagged>(ep, iov, count, dest, tag, 0, ep_of(ep).tx_op_flags & send_flags_known & ~FI_INJECT, ctx);
}
ssize_t tagged_sendmsg(fid_ep* ep, const fi_msg_tagged* m, std::uint64_t flags) noexcept {
  if (!m) return -FI_EINVAL;
  return post_send<queue_kind::tagged>(ep, m->msg_iov, m->iov_count, m->addr, m->tag, m->data,
                                       flags, m->context);
}
ssize_t tagged_inject(fid_ep* ep, const void* buf, size_t len, fi_addr_t dest,
                      std::uint64_t tag) noexcept {
  return send_one<queue_kind::tagged, true>(ep, buf, len, dest, tag, 0, false, nullptr);
}
ssize_t tagged_senddata(fid_ep* ep, const void* buf, size_t len, void*, std::uint64_t data,
                        fi_addr_t dest, std::uint64_t tag, void* ctx) noexcept {
  return send_one<queue_kind::tagged, false>(ep, buf, len, dest, tag, data, true, ctx);
}
ssize_t tagged_injectdata(fid_ep* ep, const void* buf, size_t len, std::uint64_t data,
                          fi_addr_t dest, std::uint64_t tag) noexcept {
  return send_one<queue_kind::tagged, true>(ep, buf, len, dest, tag, data, true, nullptr);
}

}  // namespace

constinit fi_ops_msg g_msg_ops = {
    .size = sizeof(fi_ops_msg),
    .recv = &msg_recv,
    .recvv = &msg_recvv,
    .recvmsg = &msg_recvmsg,
    .send = &msg_send,
    .sendv = &msg_sendv,
    .sendmsg = &msg_sendmsg,
    .inject = &msg_inject,
    .senddata = &msg_senddata,
    .injectdata = &msg_injectdata,
};

constinit fi_ops_tagged g_tagged_ops = {
    .size = sizeof(fi_ops_tagged),
    .recv = &tagged_recv,
    .recvv = &tagged_recvv,
    .recvmsg = &tagged_recvmsg,
    .send = &tagged_send,
    .sendv = &tagged_sendv,
    .sendmsg = &tagged_sendmsg,
    .inject = &tagged_inject,
    .senddata = &tagged_senddata,
    .injectdata = &tagged_injectdata,
};

}  // namespace exanet::fi
