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
// What a sample is: the time from the post until the data is in the target's memory, as the
// initiator sees it. Cross-memory attach: the process_vm_writev calls (the data has landed when
// they return). Staging: from the first piece until the target has freed the chunk of the last
// one (it copies pieces out in order), taken only for a write that found the whole staging area
// free, so a stream's queueing is not counted as the engine's cost.
//
// No libfabric and no device here, so the policy is unit-tested alone (dev_dma_engine_test).
#pragma once
#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace exanet::dev::emu {

enum class dma_engine : std::uint8_t { staged, cross_memory_attach };

class dma_engine_choice {
 public:
  /// Size classes by powers of two: below 4 KiB, then [4 KiB, 8 KiB), ..., 64 MiB and above.
  static constexpr std::size_t classes = 16;
  static constexpr std::size_t smallest_class_bytes = 4096;
  /// Each engine is measured this many times in a class before the choice follows the costs,
  /// within at most warmup_writes writes: a staged write is timed only when it finds the
  /// staging area free, which a stream's may never do; then the measured engine is preferred
  /// and the other explored (it then finds the staging area free).
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

  /// The engine for the next write of len bytes. Counts the write in its class (exploration).
  dma_engine choose(std::size_t len) noexcept {
    size_class& c = classes_[class_of(len)];
    const engine_cost& s = c.cost[index(dma_engine::staged)];
    const engine_cost& x = c.cost[index(dma_engine::cross_memory_attach)];
    // Warm-up: by turns (staged first), then only the one still short of samples.
    if ((s.samples < warmup_samples || x.samples < warmup_samples) &&
        c.warmup < warmup_writes) {
      const bool turn_staged = c.warmup++ % 2 == 0;
      if (x.samples >= warmup_samples || (s.samples < warmup_samples && turn_staged))
        return dma_engine::staged;
      return dma_engine::cross_memory_attach;
    }
    const dma_engine best = preferred(c);
    const dma_engine other =
        best == dma_engine::staged ? dma_engine::cross_memory_attach : dma_engine::staged;
    // Not measured yet (see warmup_writes): explored at the short period.
    const bool far = c.cost[index(other)].samples > 0 &&
                     c.cost[index(other)].ps_per_byte > much_dearer * c.cost[index(best)].ps_per_byte;
    const std::uint32_t period = far ? explore_period_long : explore_period;
    if (++c.writes % period == 0) return other;
    return best;
  }

  /// What choose would answer without counting the write (reads follow the writes' choice).
  dma_engine preferred_for(std::size_t len) const noexcept {
    const size_class& c = classes_[class_of(len)];
    if (c.cost[0].samples + c.cost[1].samples == 0) return dma_engine::staged;
    return preferred(c);
  }

  /// A measured write: ns from post to landed, for len bytes (len > 0).
  void record(dma_engine e, std::size_t len, std::uint64_t ns) noexcept {
    if (len == 0) return;
    engine_cost& c = classes_[class_of(len)].cost[index(e)];
    c.recent[c.samples % recent_samples] =
        static_cast<float>(static_cast<double>(ns) * 1000.0 / static_cast<double>(len));
    ++c.samples;
    const std::size_t n = std::min<std::size_t>(c.samples, recent_samples);
    c.ps_per_byte = *std::min_element(c.recent.begin(), c.recent.begin() + static_cast<std::ptrdiff_t>(n));
  }

  /// Picoseconds per byte now estimated for e at len's class (0: not measured yet).
  double estimate(dma_engine e, std::size_t len) const noexcept {
    const engine_cost& c = classes_[class_of(len)].cost[index(e)];
    return c.samples ? c.ps_per_byte : 0.0;
  }
  std::uint32_t samples(dma_engine e, std::size_t len) const noexcept {
    return classes_[class_of(len)].cost[index(e)].samples;
  }

 private:
  struct engine_cost {
    double ps_per_byte = 0;  // the estimate: least of recent
    std::array<float, recent_samples> recent{};
    std::uint32_t samples = 0;
  };
  struct size_class {
    std::array<engine_cost, 2> cost{};
    std::uint32_t warmup = 0;  // writes chosen by the warm-up rule
    std::uint32_t writes = 0;  // writes chosen since (exploration)
  };
  static constexpr std::size_t index(dma_engine e) noexcept { return static_cast<std::size_t>(e); }
  /// The cheaper engine; one never measured counts as the dearer.
  static dma_engine preferred(const size_class& c) noexcept {
    const engine_cost& s = c.cost[index(dma_engine::staged)];
    const engine_cost& x = c.cost[index(dma_engine::cross_memory_attach)];
    if (s.samples == 0 || x.samples == 0)
      return x.samples > 0 ? dma_engine::cross_memory_attach : dma_engine::staged;
    return x.ps_per_byte < s.ps_per_byte ? dma_engine::cross_memory_attach : dma_engine::staged;
  }
  std::array<size_class, classes> classes_{};
};

}  // namespace exanet::dev::emu
