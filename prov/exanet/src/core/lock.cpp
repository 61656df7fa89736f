// SPDX-License-Identifier: BSD-2-Clause
#include "core/lock.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace exanet::core {
namespace {

std::uint32_t* address_of(std::atomic<std::uint32_t>& w) noexcept {
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t) &&
                std::atomic<std::uint32_t>::is_always_lock_free);
  return reinterpret_cast<std::uint32_t*>(&w);
}

}  // namespace

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
    if (state_.load(std::memory_order_seq_cst) != 0) {
      const timespec limit{0, sleep_limit_us * 1000};
      syscall(SYS_futex, address_of(state_), FUTEX_WAIT_PRIVATE, 1u, &limit, nullptr, 0);
    }
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
    if (try_lock()) return;
  }
}

void adaptive_lock::wake_one() noexcept {
  syscall(SYS_futex, address_of(state_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

}  // namespace exanet::core
