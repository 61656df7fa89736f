// SPDX-License-Identifier: BSD-2-Clause
// Stubs for ops-table slots exanet does not implement. libfabric's own fi_no_* helpers are not
// exported to external providers, and its inline wrappers call table entries without a NULL check,
// so every slot points somewhere; unsupported ones answer -FI_ENOSYS (documented in fi_exanet.7).
#pragma once
#include <rdma/fi_errno.h>

namespace exanet::fi {

template <class R, class... Args>
R enosys(Args...) noexcept {
  return static_cast<R>(-FI_ENOSYS);
}

}  // namespace exanet::fi

namespace exanet::fi {

/// The -FI_ENOSYS stub for a slot of type Fn, deduced from the ops struct field:
/// `.join = enosys_ptr<decltype(fi_ops_cm::join)>`.
template <class Fn>
struct enosys_of;
template <class R, class... Args>
struct enosys_of<R (*)(Args...)> {
  static R fn(Args...) noexcept { return static_cast<R>(-FI_ENOSYS); }
};
template <class Fn>
inline constexpr Fn enosys_ptr = &enosys_of<Fn>::fn;

}  // namespace exanet::fi
