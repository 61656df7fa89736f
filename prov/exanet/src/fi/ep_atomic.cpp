// SPDX-License-Identifier: BSD-2-Clause
// The FI_ATOMIC calls (fi_atomic(3)) and fi_query_atomic. The twelve data-path calls funnel into
// post_atomic, which validates (the op and datatype exist together, the counts agree and fit the
// limit, the flags are known), resolves the address and hands a proto::atomic_args down; the
// target performs the operation and checks the key, range, rights and alignment itself
// (proto/atomic.cpp).
#include <rdma/fi_atomic.h>
#include <rdma/fi_errno.h>

#include <array>

#include "fi/attr.hpp"
#include "fi/common.hpp"
#include "fi/domain.hpp"
#include "fi/ep.hpp"
#include "proto/atomic_ops.hpp"

namespace exanet::fi {
namespace {

namespace atomics = proto::atomics;

constexpr std::uint64_t atomic_flags_known = FI_COMPLETION | FI_MORE | FI_INJECT |
                                             FI_REMOTE_CQ_DATA | FI_INJECT_COMPLETE |
                                             FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE;
constexpr std::uint64_t rma_directions = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

endpoint& ep_of(fid_ep* f) noexcept { return from_fid<endpoint>(&f->fid); }

bool allowed(const endpoint& ep, bool fetch) noexcept {
  if (!(ep.caps & FI_ATOMIC)) return false;
  // FI_ATOMIC alone means every direction (fi_getinfo(3)); named directions restrict it. Fetch
  // and compare atomics return data: they are reads, as fi_cntr(3) counts them.
  if (!(ep.caps & rma_directions)) return true;
  return ep.caps & (fetch ? FI_READ : FI_WRITE);
}

/// One side's fi_ioc list as byte iovecs; -FI_EINVAL when it is too long.
int to_iov(const fi_ioc* ioc, size_t n, std::size_t limit, std::size_t size,
           std::array<iovec, proto::max_iov>& out, std::size_t& elements) noexcept {
  elements = 0;
  if (n > limit || n > out.size() || (n && !ioc)) return -FI_EINVAL;
  for (size_t i = 0; i < n; ++i) {
    if (ioc[i].count > atomics::max_bytes) return -FI_EINVAL;  // keeps the sums small
    out[i] = {ioc[i].addr, ioc[i].count * size};
    elements += ioc[i].count;
  }
  return 0;
}

struct atomic_call {
  const fi_ioc* operand = nullptr;
  size_t operand_count = 0;
  const fi_ioc* compare = nullptr;
  size_t compare_count = 0;
  const fi_ioc* result = nullptr;
  size_t result_count = 0;
  fi_addr_t dest = FI_ADDR_UNSPEC;
  const fi_rma_ioc* remote = nullptr;
  size_t remote_count = 0;
  int datatype = 0, op = 0;
  atomics::family fam = atomics::family::base;
  std::uint64_t data = 0, flags = 0;
  void* context = nullptr;
  call_family family = call_family::ordinary;
};

ssize_t post_atomic(fid_ep* f, const atomic_call& c) noexcept {
  endpoint& ep = ep_of(f);
  if (!ep.enabled) [[unlikely]] return -FI_EOPBADSTATE;
  const bool fetch = c.fam != atomics::family::base;
  if (!allowed(ep, fetch)) [[unlikely]] return -FI_EOPNOTSUPP;
  if (c.flags & ~atomic_flags_known) [[unlikely]] return -FI_EBADFLAGS;
  if (!atomics::valid(c.datatype, c.op, c.fam)) [[unlikely]] return -FI_EOPNOTSUPP;
  const std::size_t size = atomics::datatype_size(c.datatype);

  std::array<iovec, proto::max_iov> operand{}, compare{}, result{};
  std::size_t n_operand = 0, n_compare = 0, n_result = 0;
  if (int rc = to_iov(c.operand, c.operand_count, ep.tx_iov_limit, size, operand, n_operand))
    return rc;
  if (int rc = to_iov(c.compare, c.compare_count, ep.tx_iov_limit, size, compare, n_compare))
    return rc;
  if (int rc = to_iov(c.result, c.result_count, ep.tx_iov_limit, size, result, n_result))
    return rc;
  if (!c.remote || c.remote_count == 0 || c.remote_count > ep.rma_iov_limit) [[unlikely]]
    return -FI_EINVAL;
  std::array<proto::remote_range, proto::max_iov> remote;
  std::size_t count = 0;
  for (size_t i = 0; i < c.remote_count; ++i) {
    // Each remote ioc is one request the target performs: an empty one has nothing to do.
    if (c.remote[i].count == 0 || c.remote[i].count > atomics::max_bytes) [[unlikely]]
      return -FI_EINVAL;
    remote[i] = {c.remote[i].addr, c.remote[i].count, c.remote[i].key};
    count += c.remote[i].count;
  }
  // fi_atomic(3): the sides agree, and no more than fi_query_atomic's count moves at once.
  if (count == 0 || count > atomics::max_count(c.datatype, c.op, c.fam)) [[unlikely]]
    return -FI_EINVAL;
  if (n_operand != count && c.op != FI_ATOMIC_READ) [[unlikely]] return -FI_EINVAL;
  if (c.fam == atomics::family::compare && n_compare != count) [[unlikely]] return -FI_EINVAL;
  if (fetch && n_result != count) [[unlikely]] return -FI_EINVAL;
  if ((c.flags & FI_INJECT) && count * size > ep.inject_size) [[unlikely]] return -FI_EMSGSIZE;

  proto::atomic_args a;
  a.operand = {operand.data(), c.op == FI_ATOMIC_READ ? 0 : c.operand_count};
  a.compare = {compare.data(), c.compare_count};
  a.result = {result.data(), c.result_count};
  a.remote = {remote.data(), c.remote_count};
  a.op = c.op;
  a.datatype = c.datatype;
  a.fetch = fetch;
  a.context = c.context;
  a.cq_data = c.data;
  a.has_cq_data = c.flags & FI_REMOTE_CQ_DATA;
  a.completion = c.family == call_family::ordinary && (!ep.tx_selective || (c.flags & FI_COMPLETION));

  core::level_guard g(ep.lock);
  if (int rc = ep.peer_of(c.dest, a.peer); rc != 0) [[unlikely]] return rc;
  core::status s = ep.proto.atomic(a);
  if (s == core::status::again) {
    ep.proto.progress();
    s = ep.proto.atomic(a);
  }
  return core::to_int(s);
}

std::uint64_t op_flags(fid_ep* f) noexcept {
  return ep_of(f).tx_op_flags & atomic_flags_known & ~(FI_INJECT | FI_REMOTE_CQ_DATA);
}

// ---- base ---------------------------------------------------------------------------------

ssize_t atomic_write(fid_ep* f, const void* buf, size_t count, void*, fi_addr_t dest,
                     uint64_t addr, uint64_t key, fi_datatype dt, fi_op op, void* ctx) noexcept {
  const fi_ioc v{const_cast<void*>(buf), count};
  const fi_rma_ioc r{addr, count, key};
  return post_atomic(f, {.operand = &v, .operand_count = 1, .dest = dest, .remote = &r,
                         .remote_count = 1, .datatype = dt, .op = op, .flags = op_flags(f),
                         .context = ctx});
}
ssize_t atomic_writev(fid_ep* f, const fi_ioc* iov, void**, size_t count, fi_addr_t dest,
                      uint64_t addr, uint64_t key, fi_datatype dt, fi_op op, void* ctx) noexcept {
  std::size_t n = 0;
  for (size_t i = 0; iov && i < count; ++i) n += iov[i].count;
  const fi_rma_ioc r{addr, n, key};
  return post_atomic(f, {.operand = iov, .operand_count = count, .dest = dest, .remote = &r,
                         .remote_count = 1, .datatype = dt, .op = op, .flags = op_flags(f),
                         .context = ctx});
}
ssize_t atomic_writemsg(fid_ep* f, const fi_msg_atomic* m, uint64_t flags) noexcept {
  if (!m) return -FI_EINVAL;
  return post_atomic(f, {.operand = m->msg_iov, .operand_count = m->iov_count, .dest = m->addr,
                         .remote = m->rma_iov, .remote_count = m->rma_iov_count,
                         .datatype = m->datatype, .op = m->op, .data = m->data, .flags = flags,
                         .context = m->context});
}
ssize_t atomic_inject(fid_ep* f, const void* buf, size_t count, fi_addr_t dest, uint64_t addr,
                      uint64_t key, fi_datatype dt, fi_op op) noexcept {
  const fi_ioc v{const_cast<void*>(buf), count};
  const fi_rma_ioc r{addr, count, key};
  return post_atomic(f, {.operand = &v, .operand_count = 1, .dest = dest, .remote = &r,
                         .remote_count = 1, .datatype = dt, .op = op, .flags = FI_INJECT,
                         .family = call_family::inject});
}

// ---- fetch --------------------------------------------------------------------------------

ssize_t atomic_readwrite(fid_ep* f, const void* buf, size_t count, void*, void* result, void*,
                         fi_addr_t dest, uint64_t addr, uint64_t key, fi_datatype dt, fi_op op,
                         void* ctx) noexcept {
  const fi_ioc v{const_cast<void*>(buf), count};
  const fi_ioc res{result, count};
  const fi_rma_ioc r{addr, count, key};
  return post_atomic(f, {.operand = &v, .operand_count = 1, .result = &res, .result_count = 1,
                         .dest = dest, .remote = &r, .remote_count = 1, .datatype = dt, .op = op,
                         .fam = atomics::family::fetch, .flags = op_flags(f), .context = ctx});
}
ssize_t atomic_readwritev(fid_ep* f, const fi_ioc* iov, void**, size_t count, fi_ioc* resultv,
                          void**, size_t result_count, fi_addr_t dest, uint64_t addr,
                          uint64_t key, fi_datatype dt, fi_op op, void* ctx) noexcept {
  std::size_t n = 0;
  for (size_t i = 0; resultv && i < result_count; ++i) n += resultv[i].count;
  const fi_rma_ioc r{addr, n, key};
  return post_atomic(f, {.operand = iov, .operand_count = count, .result = resultv,
                         .result_count = result_count, .dest = dest, .remote = &r,
                         .remote_count = 1, .datatype = dt, .op = op,
                         .fam = atomics::family::fetch, .flags = op_flags(f), .context = ctx});
}
ssize_t atomic_readwritemsg(fid_ep* f, const fi_msg_atomic* m, fi_ioc* resultv, void**,
                            size_t result_count, uint64_t flags) noexcept {
  if (!m) return -FI_EINVAL;
  return post_atomic(f, {.operand = m->msg_iov, .operand_count = m->iov_count, .result = resultv,
                         .result_count = result_count, .dest = m->addr, .remote = m->rma_iov,
                         .remote_count = m->rma_iov_count, .datatype = m->datatype, .op = m->op,
                         .fam = atomics::family::fetch, .data = m->data, .flags = flags,
                         .context = m->context});
}

// ---- compare ------------------------------------------------------------------------------

ssize_t atomic_compwrite(fid_ep* f, const void* buf, size_t count, void*, const void* compare,
                         void*, void* result, void*, fi_addr_t dest, uint64_t addr, uint64_t key,
                         fi_datatype dt, fi_op op, void* ctx) noexcept {
  const fi_ioc v{const_cast<void*>(buf), count};
  const fi_ioc cmp{const_cast<void*>(compare), count};
  const fi_ioc res{result, count};
  const fi_rma_ioc r{addr, count, key};
  return post_atomic(f, {.operand = &v, .operand_count = 1, .compare = &cmp, .compare_count = 1,
                         .result = &res, .result_count = 1, .dest = dest, .remote = &r,
                         .remote_count = 1, .datatype = dt, .op = op,
                         .fam = atomics::family::compare, .flags = op_flags(f), .context = ctx});
}
ssize_t atomic_compwritev(fid_ep* f, const fi_ioc* iov, void**, size_t count,
                          const fi_ioc* comparev, void**, size_t compare_count, fi_ioc* resultv,
                          void**, size_t result_count, fi_addr_t dest, uint64_t addr,
                          uint64_t key, fi_datatype dt, fi_op op, void* ctx) noexcept {
  std::size_t n = 0;
  for (size_t i = 0; iov && i < count; ++i) n += iov[i].count;
  const fi_rma_ioc r{addr, n, key};
  return post_atomic(f, {.operand = iov, .operand_count = count, .compare = comparev,
                         .compare_count = compare_count, .result = resultv,
                         .result_count = result_count, .dest = dest, .remote = &r,
                         .remote_count = 1, .datatype = dt, .op = op,
                         .fam = atomics::family::compare, .flags = op_flags(f), .context = ctx});
}
ssize_t atomic_compwritemsg(fid_ep* f, const fi_msg_atomic* m, const fi_ioc* comparev, void**,
                            size_t compare_count, fi_ioc* resultv, void**, size_t result_count,
                            uint64_t flags) noexcept {
  if (!m) return -FI_EINVAL;
  return post_atomic(f, {.operand = m->msg_iov, .operand_count = m->iov_count,
                         .compare = comparev, .compare_count = compare_count, .result = resultv,
                         .result_count = result_count, .dest = m->addr, .remote = m->rma_iov,
                         .remote_count = m->rma_iov_count, .datatype = m->datatype, .op = m->op,
                         .fam = atomics::family::compare, .data = m->data, .flags = flags,
                         .context = m->context});
}

// ---- validity -----------------------------------------------------------------------------

int answer_valid(fi_datatype dt, fi_op op, atomics::family fam, size_t* count) noexcept {
  const std::size_t n = atomics::max_count(dt, op, fam);
  if (n == 0) return -FI_EOPNOTSUPP;
  if (count) *count = n;
  return 0;
}
int atomic_writevalid(fid_ep*, fi_datatype dt, fi_op op, size_t* count) noexcept {
  return answer_valid(dt, op, atomics::family::base, count);
}
int atomic_readwritevalid(fid_ep*, fi_datatype dt, fi_op op, size_t* count) noexcept {
  return answer_valid(dt, op, atomics::family::fetch, count);
}
int atomic_compwritevalid(fid_ep*, fi_datatype dt, fi_op op, size_t* count) noexcept {
  return answer_valid(dt, op, atomics::family::compare, count);
}

}  // namespace

/// fi_query_atomic (the domain's query_atomic): FI_FETCH_ATOMIC and FI_COMPARE_ATOMIC pick the
/// family; -FI_EOPNOTSUPP for a pair exanet does not perform, else the element size and the
/// largest count of one operation.
int domain_query_atomic(fid_domain*, fi_datatype dt, fi_op op, fi_atomic_attr* attr,
                        uint64_t flags) noexcept {
  if (!attr) return -FI_EINVAL;
  if ((flags & FI_FETCH_ATOMIC) && (flags & FI_COMPARE_ATOMIC)) return -FI_EINVAL;
  if (flags & ~(FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC)) return -FI_EOPNOTSUPP;  // FI_COLLECTIVE
  const atomics::family fam = (flags & FI_FETCH_ATOMIC)     ? atomics::family::fetch
                              : (flags & FI_COMPARE_ATOMIC) ? atomics::family::compare
                                                            : atomics::family::base;
  const std::size_t n = atomics::max_count(dt, op, fam);
  if (n == 0) return -FI_EOPNOTSUPP;
  attr->size = atomics::datatype_size(dt);
  attr->count = n;
  return 0;
}

constinit fi_ops_atomic g_atomic_ops = {
    .size = sizeof(fi_ops_atomic),
    .write = &atomic_write,
    .writev = &atomic_writev,
    .writemsg = &atomic_writemsg,
    .inject = &atomic_inject,
    .readwrite = &atomic_readwrite,
    .readwritev = &atomic_readwritev,
    .readwritemsg = &atomic_readwritemsg,
    .compwrite = &atomic_compwrite,
    .compwritev = &atomic_compwritev,
    .compwritemsg = &atomic_compwritemsg,
    .writevalid = &atomic_writevalid,
    .readwritevalid = &atomic_readwritevalid,
    .compwritevalid = &atomic_compwritevalid,
};

}  // namespace exanet::fi
