// SPDX-License-Identifier: BSD-2-Clause
// Which emulated DMA engine takes a write of a given size: cross-memory attach (one copy by the
// initiator's core, in the kernel) or staging (the initiator copies pieces into the target's
// staging area while the target copies earlier pieces out: two copies, on two cores at once).
//
// Neither wins everywhere, and the winner is not a property of the code: on one machine staging
// was 3-6 times faster from 64 KiB; on the same VM a day later, with core-to-core copies 3.5
// times dearer, cross-memory attach was 1.5 times faster from 64 KiB and staging still won at
// 16 KiB (BENCHMARKS.md, 2026-11-24 and 2026-11-25). So in the automatic mode each endpoint
// measures both engines on its own writes, per size class, and sends each write the way that is
// cheaper now; every so often a write takes the other way, so a change of the machine's state
// is noticed.
//
// What a sample is. Cross-memory attach: the process_vm_writev calls (the data has landed when
// they return, and the initiator could not start another write before). Staging, a write alone:
// from its first piece until the target has freed the chunk of its last (it copies pieces out
// in order), taken only for a write that found the whole staging area free, so a stream's
// queueing is not counted; staging in a stream: from its first piece until its last went in
// (waits for chunks included), what the write holds the initiator. A write counts as one of a
// stream when it starts soon after the previous one ended (device.cpp).
//
// Samples are kept apart by the write's placement too: a destination 1-63 bytes ahead of its
// source modulo a page ("aliased") makes the kernel's copy, and so cross-memory attach, 5-20
// times slower on the machine of BENCHMARKS.md (2026-11-27), while the staged engine picks its
// own addresses (core/copy.hpp avoids the same trap in user space). A class that mixed the two
// would judge one placement by the other's samples.
//
// No libfabric and no device here, so the policy is unit-tested alone (dev_dma_engine_test).
#pragma once
#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "core/copy.hpp"

namespace exanet::dev::emu {

enum class dma_engine : std::uint8_t { staged, cross_memory_attach };
/// What a write's cost means to the application: a write alone (a ping-pong: the time until it
/// landed) or one of a stream (the time it holds the initiator before the next can start: the
/// staging engine copies a write in while the target copies the previous one out, so a stream
/// goes at the slower of the two copies, not at their sum).
enum class dma_use : std::uint8_t { alone, stream };

class dma_engine_choice {
 public:
  /// Size classes by powers of two: below 4 KiB, then [4 KiB, 8 KiB), ..., 64 MiB and above.
  static constexpr std::size_t classes = 16;
  static constexpr std::size_t smallest_class_bytes = 4096;
  /// Each engine is measured this many times in a class before the choice follows the costs,
  /// within at most warmup_writes writes: a staged write alone is timed only when it finds the
  /// staging area free; then the measured engine is preferred and the other explored.
  static constexpr std::uint32_t warmup_samples = 2;
  static constexpr std::uint32_t warmup_writes = 8;
  /// One write in this many of a class takes the engine that is not chosen, to measure it again
  /// (the machine's state changes); one in the long period when it was found much dearer.
  static constexpr std::uint32_t explore_period = 16;
  static constexpr std::uint32_t explore_period_long = 64;
  static constexpr double much_dearer = 1.5;
  /// An engine's cost is the least of its last few samples: what disturbs a write here (a
  /// preempted target, the page faults of a buffer's first use, a neighbour's copies) only
  /// makes it slower, and a change of the machine's state shows after this many samples.
  static constexpr std::size_t recent_samples = 4;

  static std::size_t class_of(std::size_t len) noexcept {
    if (len < smallest_class_bytes) return 0;
    const std::size_t k = static_cast<std::size_t>(std::bit_width(len / smallest_class_bytes));
    return std::min(k, classes - 1);
  }

  /// The engine for the next write of len bytes used as u. Counts the write in its class.
  dma_engine choose(std::size_t len, dma_use u = dma_use::alone, bool aliased = false) noexcept {
    size_class& c = class_for(len, aliased);
    const std::uint32_t s = samples_in(c, dma_engine::staged, u);
    const std::uint32_t x = samples_in(c, dma_engine::cross_memory_attach, u);
    // Warm-up: by turns (staged first), then only the one still short of samples.
    if ((s < warmup_samples || x < warmup_samples) && c.warmup < warmup_writes) {
      const bool turn_staged = c.warmup++ % 2 == 0;
      if (x >= warmup_samples || (s < warmup_samples && turn_staged)) return dma_engine::staged;
      return dma_engine::cross_memory_attach;
    }
    const dma_engine best = preferred(c, u);
    const dma_engine other =
        best == dma_engine::staged ? dma_engine::cross_memory_attach : dma_engine::staged;
    // Not measured yet (see warmup_writes): explored at the short period.
    const double other_cost = cost_in(c, other, u);
    const bool far = other_cost > 0 && other_cost > much_dearer * cost_in(c, best, u);
    const std::uint32_t period = far ? explore_period_long : explore_period;
    if (++c.writes % period == 0) return other;
    return best;
  }

  /// What choose would answer for a write alone, without counting it (logs, tests).
  dma_engine preferred_for(std::size_t len, dma_use u = dma_use::alone,
                           bool aliased = false) const noexcept {
    return preferred(class_for(len, aliased), u);
  }

  /// A measured write of len bytes (len > 0): ns from its post to what u counts.
  void record(dma_engine e, dma_use u, std::size_t len, std::uint64_t ns,
              bool aliased = false) noexcept {
    if (len == 0) return;
    estimator& m = class_for(len, aliased).cost[index(u)][index(e)];
    m.recent[m.samples % recent_samples] =
        static_cast<float>(static_cast<double>(ns) * 1000.0 / static_cast<double>(len));
    ++m.samples;
    const std::size_t n = std::min<std::size_t>(m.samples, recent_samples);
    m.ps_per_byte =
        *std::min_element(m.recent.begin(), m.recent.begin() + static_cast<std::ptrdiff_t>(n));
  }

  /// Picoseconds per byte now estimated for e at len's class used as u (0: not measured yet;
  /// a use with no sample of e borrows the other use's).
  double estimate(dma_engine e, std::size_t len, dma_use u = dma_use::alone,
                  bool aliased = false) const noexcept {
    return cost_in(class_for(len, aliased), e, u);
  }
  std::uint32_t samples(dma_engine e, std::size_t len, dma_use u = dma_use::alone,
                        bool aliased = false) const noexcept {
    return class_for(len, aliased).cost[index(u)][index(e)].samples;
  }

  /// True when a write from src to dst is "aliased": dst lies 1-63 bytes ahead of src modulo a
  /// page (see above).
  static bool is_aliased(std::uintptr_t src, std::uintptr_t dst) noexcept {
    return core::page_aliased(dst, src);
  }

 private:
  struct estimator {
    double ps_per_byte = 0;  // the least of recent
    std::array<float, recent_samples> recent{};
    std::uint32_t samples = 0;
  };
  struct size_class {
    std::array<std::array<estimator, 2>, 2> cost{};  // [use][engine]
    std::uint32_t warmup = 0;  // writes chosen by the warm-up rule
    std::uint32_t writes = 0;  // writes chosen since (exploration)
  };
  template <class E>
  static constexpr std::size_t index(E e) noexcept {
    return static_cast<std::size_t>(e);
  }
  static dma_use other_use(dma_use u) noexcept {
    return u == dma_use::alone ? dma_use::stream : dma_use::alone;
  }
  static std::uint32_t samples_in(const size_class& c, dma_engine e, dma_use u) noexcept {
    const std::uint32_t n = c.cost[index(u)][index(e)].samples;
    return n ? n : c.cost[index(other_use(u))][index(e)].samples;
  }
  static double cost_in(const size_class& c, dma_engine e, dma_use u) noexcept {
    const estimator& m = c.cost[index(u)][index(e)];
    if (m.samples) return m.ps_per_byte;
    const estimator& o = c.cost[index(other_use(u))][index(e)];
    return o.samples ? o.ps_per_byte : 0.0;
  }
  /// The cheaper engine; one never measured counts as the dearer.
  static dma_engine preferred(const size_class& c, dma_use u) noexcept {
    const double s = cost_in(c, dma_engine::staged, u);
    const double x = cost_in(c, dma_engine::cross_memory_attach, u);
    if (s == 0 || x == 0) return x > 0 ? dma_engine::cross_memory_attach : dma_engine::staged;
    return x < s ? dma_engine::cross_memory_attach : dma_engine::staged;
  }
  size_class& class_for(std::size_t len, bool aliased) noexcept {
    return classes_[aliased][class_of(len)];
  }
  const size_class& class_for(std::size_t len, bool aliased) const noexcept {
    return classes_[aliased][class_of(len)];
  }
  std::array<std::array<size_class, classes>, 2> classes_{};  // [aliased][size class]
};

}  // namespace exanet::dev::emu
