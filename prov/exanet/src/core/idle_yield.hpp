// SPDX-License-Identifier: BSD-2-Clause
// When a poller that keeps finding nothing gives its core away (sched_yield).
//
// Why. Under manual progress the application's polls are the only thing that moves a transfer.
// Open MPI's mtl ofi waits for a blocking send in a loop of fi_cq_read that never yields; when
// more ranks than cores share the machine, the peer whose answer that send waits for (the CTS
// of a rendezvous) may be waiting for the same core. The loop then held the core until the
// scheduler took it away: about 4 ms per rendezvous at 2 to 4 ranks a core, 100 ms under
// SCHED_RR (BENCHMARKS.md, 2026-12-07). Open MPI's own progress loop yields when it finds
// nothing (mpi_yield_when_idle, set when oversubscribed); that loop is not the one waiting here.
//
// The policy. After `streak` empty polls in a row the poller yields once, and times the yield:
//   * a yield of shared_ns or more means another task ran: the core is shared, so the next
//     yield comes after the short streak again;
//   * quick_before_backoff quick yields in a row mean nobody else wants the core: each further
//     quick one doubles the streak, up to longest_streak, so a core of its own pays one system
//     call every millisecond or so of waiting, not one every few microseconds.
// No clock read and no system call on a poll that finds work; one compare on one that does not.
#pragma once
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cstdint>

namespace exanet::core {

class idle_yield {
 public:
  static constexpr std::uint64_t shared_ns = 3000;
  static constexpr std::uint32_t quick_before_backoff = 32;
  static constexpr std::uint32_t longest_streak = 65536;

  idle_yield() = default;  // never yields
  /// streak: empty polls in a row before a yield; 0: never yield. Clamped to longest_streak.
  explicit idle_yield(std::uint32_t streak) noexcept
      : short_(std::min(streak, longest_streak)), limit_(short_) {}

  /// After one poll: true when the caller should yield now (outside its locks: timed_yield,
  /// then learn under them again).
  bool after_poll(bool did_work) noexcept {
    if (did_work) {
      idle_ = 0;
      return false;
    }
    return short_ != 0 && ++idle_ >= limit_;
  }

  /// Gives the core away once; returns how long that took (ns, CLOCK_MONOTONIC).
  static std::uint64_t timed_yield() noexcept {
    timespec a{}, b{};
    clock_gettime(CLOCK_MONOTONIC, &a);
    sched_yield();
    clock_gettime(CLOCK_MONOTONIC, &b);
    const std::int64_t ns = (b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec);
    return ns > 0 ? static_cast<std::uint64_t>(ns) : 0;
  }

  /// What a yield of `ns` says about the core (see the policy above).
  void learn(std::uint64_t ns) noexcept {
    idle_ = 0;
    ++yields_;
    if (ns >= shared_ns) {
      ++shared_;
      quick_ = 0;
      limit_ = short_;
      return;
    }
    if (quick_ < quick_before_backoff) {
      ++quick_;
      return;
    }
    limit_ = std::min(limit_ * 2, longest_streak);
  }

  std::uint32_t streak() const noexcept { return limit_; }  // empty polls before the next yield
  std::uint64_t yields() const noexcept { return yields_; }
  std::uint64_t shared_yields() const noexcept { return shared_; }  // another task ran

 private:
  std::uint32_t short_ = 0;  // the configured streak (0: never)
  std::uint32_t limit_ = 0;  // the streak in force
  std::uint32_t idle_ = 0;   // empty polls since the last work or yield
  std::uint32_t quick_ = 0;  // quick yields in a row, up to quick_before_backoff
  std::uint64_t yields_ = 0, shared_ = 0;
};

}  // namespace exanet::core
