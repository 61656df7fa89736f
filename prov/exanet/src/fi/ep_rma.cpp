// SPDX-License-Identifier: BSD-2-Clause
// The FI_RMA data-path calls. All nine funnel into post_rma, which validates, resolves the address
// and hands a proto::rma_args down; the protocol (proto/rma.cpp) checks keys at the target.
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <array>

#include "core/iov.hpp"
#include "fi/attr.hpp"
#include "fi/common.hpp"
#include "fi/ep.hpp"

namespace exanet::fi {
namespace {

// FI_FENCE is not advertised: operations already complete in order at the initiator's engine,
// but a client that asks for a fence gets told rather than silently ignored.
constexpr std::uint64_t rma_flags_known = FI_COMPLETION | FI_MORE | FI_INJECT | FI_REMOTE_CQ_DATA |
                                          FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE |
                                          FI_DELIVERY_COMPLETE;
constexpr std::uint64_t rma_directions = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

endpoint& ep_of(fid_ep* f) noexcept { return from_fid<endpoint>(&f->fid); }

bool allowed(const endpoint& ep, bool read) noexcept {
  if (!(ep.caps & FI_RMA)) return false;
  // FI_RMA alone means every direction (fi_getinfo(3)); named directions restrict it.
  if (!(ep.caps & rma_directions)) return true;
  return ep.caps & (read ? FI_READ : FI_WRITE);
}

ssize_t post_rma(fid_ep* f, bool read, const iovec* iov, size_t count, fi_addr_t dest,
                 const fi_rma_iov* rma, size_t rma_count, std::uint64_t data,
                 std::uint64_t flags, void* context,
                 call_family family = call_family::ordinary) noexcept {
  endpoint& ep = ep_of(f);
  if (!ep.enabled) [[unlikely]] return -FI_EOPBADSTATE;
  if (!allowed(ep, read)) [[unlikely]] return -FI_EOPNOTSUPP;
  if (flags & ~rma_flags_known) [[unlikely]] return -FI_EBADFLAGS;
  if (read && (flags & (FI_INJECT | FI_REMOTE_CQ_DATA))) [[unlikely]] return -FI_EBADFLAGS;
  std::size_t len = 0;
  if (int rc = check_iov(iov, count, ep.tx_iov_limit, max_msg_size, len); rc != 0) [[unlikely]]
    return rc;
  if (!rma || rma_count == 0 || rma_count > ep.rma_iov_limit) [[unlikely]] return -FI_EINVAL;
  std::size_t remote_len = 0;
  for (size_t i = 0; i < rma_count; ++i) {
    if (rma[i].len > SIZE_MAX - remote_len) [[unlikely]] return -FI_EINVAL;  // the sum would wrap
    remote_len += rma[i].len;
  }
  if (remote_len != len) [[unlikely]] return -FI_EINVAL;  // fi_rma(3): the two sides agree
  std::array<proto::remote_range, proto::max_iov> remote;
  for (size_t i = 0; i < rma_count; ++i) remote[i] = {rma[i].addr, rma[i].len, rma[i].key};

  proto::rma_args a;
  a.iov = {iov, count};
  a.remote = {remote.data(), rma_count};
  a.context = context;
  a.read = read;
  a.cq_data = data;
  a.has_cq_data = flags & FI_REMOTE_CQ_DATA;
  a.inject = flags & FI_INJECT;
  a.completion = family == call_family::ordinary && (!ep.tx_selective || (flags & FI_COMPLETION));
  a.delivery_complete = flags & FI_DELIVERY_COMPLETE;
  if (a.inject && len > ep.inject_size) [[unlikely]] return -FI_EMSGSIZE;

  core::level_guard g(ep.lock);
  if (int rc = ep.peer_of(dest, a.peer); rc != 0) [[unlikely]] return rc;
  core::status s = ep.proto.rma(a);
  if (s == core::status::again) {
    ep.proto.progress();
    s = ep.proto.rma(a);
  }
  return core::to_int(s);
}

std::uint64_t op_flags(fid_ep* f) noexcept {
  return ep_of(f).tx_op_flags & rma_flags_known & ~(FI_INJECT | FI_REMOTE_CQ_DATA);
}

ssize_t rma_read(fid_ep* f, void* buf, size_t len, void*, fi_addr_t src, uint64_t addr,
                 uint64_t key, void* ctx) noexcept {
  const iovec v{buf, len};
  const fi_rma_iov r{addr, len, key};
  return post_rma(f, true, &v, 1, src, &r, 1, 0, op_flags(f), ctx);
}
ssize_t rma_readv(fid_ep* f, const iovec* iov, void**, size_t count, fi_addr_t src,
                  uint64_t addr, uint64_t key, void* ctx) noexcept {
  const fi_rma_iov r{addr, core::iov_length({iov, iov ? count : 0}), key};
  return post_rma(f, true, iov, count, src, &r, 1, 0, op_flags(f), ctx);
}
ssize_t rma_readmsg(fid_ep* f, const fi_msg_rma* m, uint64_t flags) noexcept {
  if (!m) return -FI_EINVAL;
  return post_rma(f, true, m->msg_iov, m->iov_count, m->addr, m->rma_iov, m->rma_iov_count, 0,
                  flags, m->context);
}
ssize_t rma_write(fid_ep* f, const void* buf, size_t len, void*, fi_addr_t dest, uint64_t addr,
                  uint64_t key, void* ctx) noexcept {
  const iovec v{const_cast<void*>(buf), len};
  const fi_rma_iov r{addr, len, key};
  return post_rma(f, false, &v, 1, dest, &r, 1, 0, op_flags(f), ctx);
}
ssize_t rma_writev(fid_ep* f, const iovec* iov, void**, size_t count, fi_addr_t dest,
                   uint64_t addr, uint64_t key, void* ctx) noexcept {
  const fi_rma_iov r{addr, core::iov_length({iov, iov ? count : 0}), key};
  return post_rma(f, false, iov, count, dest, &r, 1, 0, op_flags(f), ctx);
}
ssize_t rma_writemsg(fid_ep* f, const fi_msg_rma* m, uint64_t flags) noexcept {
  if (!m) return -FI_EINVAL;
  return post_rma(f, false, m->msg_iov, m->iov_count, m->addr, m->rma_iov, m->rma_iov_count,
                  m->data, flags, m->context);
}
ssize_t rma_inject(fid_ep* f, const void* buf, size_t len, fi_addr_t dest, uint64_t addr,
                   uint64_t key) noexcept {
  const iovec v{const_cast<void*>(buf), len};
  const fi_rma_iov r{addr, len, key};
  return post_rma(f, false, &v, 1, dest, &r, 1, 0, FI_INJECT, nullptr, call_family::inject);
}
ssize_t rma_writedata(fid_ep* f, const void* buf, size_t len, void*, uint64_t data,
                      fi_addr_t dest, uint64_t addr, uint64_t key, void* ctx) noexcept {
  const iovec v{const_cast<void*>(buf), len};
  const fi_rma_iov r{addr, len, key};
  return post_rma(f, false, &v, 1, dest, &r, 1, data, op_flags(f) | FI_REMOTE_CQ_DATA, ctx);
}
ssize_t rma_injectdata(fid_ep* f, const void* buf, size_t len, uint64_t data, fi_addr_t dest,
                       uint64_t addr, uint64_t key) noexcept {
  const iovec v{const_cast<void*>(buf), len};
  const fi_rma_iov r{addr, len, key};
  return post_rma(f, false, &v, 1, dest, &r, 1, data, FI_INJECT | FI_REMOTE_CQ_DATA, nullptr, call_family::inject);
}

}  // namespace

constinit fi_ops_rma g_rma_ops = {
    .size = sizeof(fi_ops_rma),
    .read = &rma_read,
    .readv = &rma_readv,
    .readmsg = &rma_readmsg,
    .write = &rma_write,
    .writev = &rma_writev,
    .writemsg = &rma_writemsg,
    .inject = &rma_inject,
    .writedata = &rma_writedata,
    .injectdata = &rma_injectdata,
};

}  // namespace exanet::fi
