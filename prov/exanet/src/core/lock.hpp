// SPDX-License-Identifier: BSD-2-Clause
// Locks chosen by threading level. FI_THREAD_SAFE takes a real lock per object; lower levels
// promise the application serialises access, so the lock is compiled into one predictable branch
// and no atomic instruction (DESIGN.md §6: no lock the threading level does not need).
#pragma once
#include <atomic>
#include <mutex>

namespace exanet::core {

class spin_lock {
 public:
  void lock() noexcept {
    while (flag_.exchange(true, std::memory_order_acquire))
      while (flag_.load(std::memory_order_relaxed)) __builtin_ia32_pause();
  }
  bool try_lock() noexcept { return !flag_.exchange(true, std::memory_order_acquire); }
  void unlock() noexcept { flag_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> flag_{false};
};

/// A lock that exists only when the threading level needs it; enabled once at object creation.
class level_lock {
 public:
  explicit level_lock(bool enabled = false) noexcept : enabled_(enabled) {}
  void enable(bool on) noexcept { enabled_ = on; }
  bool enabled() const noexcept { return enabled_; }
  void lock() noexcept { if (enabled_) lock_.lock(); }
  void unlock() noexcept { if (enabled_) lock_.unlock(); }
  bool try_lock() noexcept { return !enabled_ || lock_.try_lock(); }

 private:
  spin_lock lock_;
  bool enabled_;
};

using level_guard = std::lock_guard<level_lock>;

}  // namespace exanet::core
