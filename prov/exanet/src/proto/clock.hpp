// SPDX-License-Identifier: BSD-2-Clause
// The clock of the watch over peers (lost peers, the rendezvous timeout). CLOCK_MONOTONIC_COARSE is read
// through the vDSO (no syscall), and its resolution (a few ms) is far finer than the periods it
// measures (hundreds of ms to tens of seconds).
#pragma once
#include <time.h>

#include <cstdint>

namespace exanet::proto {

inline std::uint64_t coarse_now_ms() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return std::uint64_t(ts.tv_sec) * 1000 + std::uint64_t(ts.tv_nsec) / 1000000;
}

}  // namespace exanet::proto
