// SPDX-License-Identifier: BSD-2-Clause
// How the protocols report finished operations upward without knowing the fi/ objects: a sink is
// a (object, function) pair fixed when the endpoint is bound, so the data path makes one indirect
// call through a table set at setup (STYLE.md rule 10) and no virtual dispatch.
#pragma once
#include <cstddef>
#include <cstdint>

namespace exanet::proto {

/// One finished operation. Flags use libfabric's completion flag values (FI_SEND, FI_RECV,
/// FI_TAGGED, FI_MSG, FI_REMOTE_CQ_DATA, FI_MULTI_RECV ...).
struct completion {
  void* context = nullptr;
  std::uint64_t flags = 0;
  std::size_t len = 0;        // bytes delivered (after truncation)
  void* buf = nullptr;        // FI_MULTI_RECV: where this message starts; else null
  std::uint64_t data = 0;     // remote CQ data when flags has FI_REMOTE_CQ_DATA
  std::uint64_t tag = 0;      // the sender's full tag
  std::uint64_t src = ~0ull;  // fi_addr_t of the sender, or FI_ADDR_NOTAVAIL
  int err = 0;                // positive FI_E* value; 0 for success
  int prov_errno = 0;
  std::size_t olen = 0;       // FI_ETRUNC: bytes that did not fit
};

/// Where completions of one direction go (a CQ). write() must not fail: CQs grow when full.
struct completion_sink {
  void* self = nullptr;
  void (*write)(void* self, const completion& c) noexcept = nullptr;
  explicit operator bool() const noexcept { return write != nullptr; }
};

/// A counter bound to an event class (FI_SEND, FI_RECV, ...).
struct counter_sink {
  void* self = nullptr;
  void (*add)(void* self, bool error) noexcept = nullptr;
  explicit operator bool() const noexcept { return add != nullptr; }
};

}  // namespace exanet::proto
