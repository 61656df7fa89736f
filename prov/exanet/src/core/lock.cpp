// SPDX-License-Identifier: BSD-2-Clause
#include "core/lock.hpp"

#include "core/futex.hpp"

namespace exanet::core {

void adaptive_lock::lock_contended() noexcept {
  for (;;) {
    for (unsigned i = 0; i < spin_limit; ++i) {
      __builtin_ia32_pause();
      if (state_.load(std::memory_order_relaxed) == 0 && try_lock()) return;
    }
    // Counted in before the last look: an unlock that reads the count after this increment
    // wakes us. One that read it before while freeing the lock (its store may still be on its
    // way) is caught by the look, by the kernel's comparison of the word with 1 before it
    // sleeps, or at worst by the next look after sleep_limit_us.
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    if (state_.load(std::memory_order_seq_cst) != 0) futex_wait_private(state_, 1u, sleep_limit_us);
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
    if (try_lock()) return;
  }
}

void adaptive_lock::wake_one() noexcept { futex_wake_private(state_, 1); }

}  // namespace exanet::core
