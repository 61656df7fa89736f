// Memory registration: keys, access rights and ranges of registered memory. Messaging needs no
// registration (mr_mode 0); the registry is what RMA will check keys against.
#pragma once
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <sys/uio.h>

#include <array>
#include <cstdint>
#include <unordered_map>

#include "core/lock.hpp"

namespace exanet::fi {

struct registered_region {
  fid_mr mr_fid{};  // first member
  fid_domain* domain = nullptr;
  std::array<iovec, 8> iov{};
  std::size_t iov_count = 0;
  std::uint64_t access = 0;
  std::uint64_t offset = 0;  // FI_MR_VIRT_ADDR off: remote addresses are offsets from here
  fid* bound_ep = nullptr;   // FI_MR_ENDPOINT
  bool enabled = true;
};

class mr_registry {
 public:
  void init(std::uint64_t mr_mode, bool thread_safe) noexcept {
    mr_mode_ = mr_mode;
    lock_.enable(thread_safe);
  }
  std::uint64_t mr_mode() const noexcept { return mr_mode_; }
  /// Registers r under requested_key, or a fresh key with FI_MR_PROV_KEY; -FI_ENOKEY if taken.
  int add(registered_region& r, std::uint64_t requested_key) noexcept;
  void remove(std::uint64_t key) noexcept;
  /// The live region with this key, or nullptr.
  const registered_region* find(std::uint64_t key) noexcept;

 private:
  core::level_lock lock_;
  std::uint64_t mr_mode_ = 0;
  std::uint64_t next_key_ = 1;
  std::unordered_map<std::uint64_t, registered_region*> regions_;
};

extern fi_ops_mr g_mr_ops;

}  // namespace exanet::fi
