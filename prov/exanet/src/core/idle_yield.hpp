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
//     quick one doubles the streak, up to longest_streak, but only while yields come less than
//     widest_gap_ns / 2 apart, and a gap above twice widest_gap_ns halves it again. A core of
//     its own then pays one system call per widest_gap_ns of waiting, and a poller that finds
//     the core shared again waits at most about that long for its next yield. The bound is in
//     time because a poll's cost is not fixed: over the network backend a poll is a system call
//     of its own (1.5-2 us), and 65536 of them were 100 ms without a yield (an HPCC run across
//     two namespaces, 4 ranks on 2 cores, ran as slowly as with no yield at all in 2 runs of 4
//     without the bound, 35 s; 3-4 s in 3 runs of 3 with it).
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
  static constexpr std::uint64_t widest_gap_ns = 250000;

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

  /// One yield: how long it took, and when it ended (CLOCK_MONOTONIC, ns).
  struct yield_time {
    std::uint64_t took_ns = 0;
    std::uint64_t end_ns = 0;
  };
  /// Gives the core away once, timed.
  static yield_time timed_yield() noexcept {
    timespec a{}, b{};
    clock_gettime(CLOCK_MONOTONIC, &a);
    sched_yield();
    clock_gettime(CLOCK_MONOTONIC, &b);
    const auto ns = [](const timespec& t) {
      return static_cast<std::uint64_t>(t.tv_sec) * 1000000000u +
             static_cast<std::uint64_t>(t.tv_nsec);
    };
    const std::uint64_t start = ns(a), end = ns(b);
    return {end > start ? end - start : 0, end};
  }

  /// What a yield says about the core (see the policy above).
  void learn(yield_time y) noexcept {
    const std::uint64_t gap = last_end_ns_ && y.end_ns > last_end_ns_ ? y.end_ns - last_end_ns_ : 0;
    last_end_ns_ = y.end_ns;
    idle_ = 0;
    ++yields_;
    if (y.took_ns >= shared_ns) {
      ++shared_;
      quick_ = 0;
      limit_ = short_;
      return;
    }
    if (quick_ < quick_before_backoff) {
      ++quick_;
      return;
    }
    if (gap > 2 * widest_gap_ns)
      limit_ = std::max(limit_ / 2, short_);
    else if (gap < widest_gap_ns / 2)
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
  std::uint64_t last_end_ns_ = 0;  // when the last yield ended (0: none yet)
};

}  // namespace exanet::core
