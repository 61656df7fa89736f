// SPDX-License-Identifier: BSD-2-Clause
// Internal result codes. Values are positive errno numbers negated, the same numbers libfabric
// uses for its -FI_E* codes (fi/ checks that with static_asserts), so the C boundary converts
// without a table while core/, dev/ and match/ never include <rdma/...>.
#pragma once
#include <cerrno>

namespace exanet::core {

enum class [[nodiscard]] status : int {
  ok = 0,
  again = -EAGAIN,            // resource busy or full: retry after progress (back-pressure)
  invalid = -EINVAL,          // bad argument from the caller
  no_memory = -ENOMEM,
  no_entry = -ENOENT,         // nothing to find (unknown segment, key, peer)
  exists = -EEXIST,
  access = -EACCES,           // protection check failed (PDID, key, range)
  permission = -EPERM,        // the OS refused (for example CMA under ptrace restrictions)
  peer_dead = -ECONNRESET,    // the peer process is gone
  unreachable = -EHOSTUNREACH,// no such peer endpoint (never created)
  io = -EIO,
  not_supported = -ENOSYS,
  refused = -EOPNOTSUPP,      // supported in general, not in this configuration (FI_EOPNOTSUPP)
  truncated = -265,           // FI_ETRUNC
  no_msg = -ENOMSG,
  canceled = -ECANCELED,
  stale = -ESTALE,            // what the caller checked is gone since (a registration closed):
                              // check again (dev/net's dma_post; never reaches the application)
};

constexpr bool ok(status s) noexcept { return s == status::ok; }
constexpr int to_int(status s) noexcept { return static_cast<int>(s); }

}  // namespace exanet::core
