// SPDX-License-Identifier: BSD-2-Clause
// Memory registration: keys, access rights and ranges of registered memory. Messaging needs no
// registration (mr_mode 0). For RMA a region is exposed in the protection table of each endpoint
// it may be reached through: every endpoint of the domain, or with FI_MR_ENDPOINT the one it is
// bound to. The engine checks initiators' keys against those tables.
#pragma once
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <sys/uio.h>

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/lock.hpp"
#include "proto/completion.hpp"

namespace exanet::proto {
class endpoint;
}

namespace exanet::fi {

class endpoint;
class cntr;

struct registered_region {
  fid_mr mr_fid{};  // first member
  fid_domain* domain = nullptr;
  iovec iov{};
  std::uint64_t access = 0;
  std::uint64_t offset = 0;  // FI_MR_VIRT_ADDR off: remote addresses count from this
  bool may_fault = false;    // some page was unmapped at registration (dev::key_grant::may_fault)
  endpoint* bound_ep = nullptr;  // FI_MR_ENDPOINT
  bool enabled = true;
  // fi_mr_bind(counter): counts remote accesses. The counter progresses every endpoint the region
  // is exposed through (manual progress), and cannot close while bound.
  cntr* remote_cntr = nullptr;
  std::uint64_t remote_cntr_events = 0;  // FI_REMOTE_WRITE | FI_REMOTE_READ
  std::vector<std::pair<endpoint*, std::uint32_t>> exposed;  // (endpoint, protection slot)
};

class mr_registry {
 public:
  void init(std::uint64_t mr_mode, bool thread_safe) noexcept {
    mr_mode_ = mr_mode;
    lock_.enable(thread_safe);
  }
  std::uint64_t mr_mode() const noexcept { return mr_mode_; }
  /// Registers r under requested_key, or a fresh key with FI_MR_PROV_KEY; -FI_ENOKEY if taken.
  /// Without FI_MR_ENDPOINT the region is exposed through every endpoint at once.
  int add(registered_region& r, std::uint64_t requested_key) noexcept;
  /// Withdraws r from every endpoint and forgets its key.
  void remove(registered_region& r) noexcept;
  /// FI_MR_ENDPOINT: exposes r through the endpoint it was bound to (fi_mr_enable).
  int enable(registered_region& r) noexcept;
  /// A new endpoint: domain-wide regions become reachable through it.
  int attach(endpoint& ep) noexcept;
  void detach(endpoint& ep) noexcept;
  /// Counts a remote access to the region with this key on the counter bound to it, if any.
  void count_remote_access(std::uint64_t key, std::uint64_t event) noexcept;
  /// fi_mr_bind(counter, FI_REMOTE_WRITE/READ).
  int set_remote_cntr(registered_region& r, cntr& c, std::uint64_t events) noexcept;

 private:
  int expose(registered_region& r, endpoint& ep) noexcept;
  void withdraw_all(registered_region& r) noexcept;
  core::level_lock lock_;
  std::uint64_t mr_mode_ = 0;
  std::uint64_t next_key_ = 1;
  std::unordered_map<std::uint64_t, registered_region*> regions_;
  std::vector<endpoint*> endpoints_;
};

extern fi_ops_mr g_mr_ops;

}  // namespace exanet::fi
