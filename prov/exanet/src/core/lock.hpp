// SPDX-License-Identifier: BSD-2-Clause
// Locks chosen by threading level. FI_THREAD_SAFE takes a real lock per object; lower levels
// promise the application serialises access, so the lock is compiled into one predictable branch
// and no atomic instruction (DESIGN.md §6: no lock the threading level does not need).
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>

namespace exanet::core {

/// A process-private mutual exclusion lock that spins briefly, then sleeps. Pure spinning lost
/// to oversubscription: fi_rdm_stress's server runs 32 threads on one endpoint, and on 2 cores
/// the holder of the endpoint's lock (inside a multi-megabyte RMA write) got a sliver of CPU
/// while 31 spinners burnt theirs; 5.6 MB writes to 16 clients took 0.2-2 s, past the test's
/// 2 s deadline under CI load.
///
/// Uncontended it costs what a spin lock does: an exchange to take it, a plain store and one
/// load of a word on the same line to give it back. An exchange there instead (the usual
/// three-state futex mutex) cost fi_pingpong 0.13 -> 0.16 us at 8 B under FI_THREAD_SAFE. The
/// price is that an unlock may miss a sleeper that counted itself in the instant the lock was
/// freed; the kernel's own look at the word before sleeping catches all but a store still in
/// flight, and each sleep is bounded by sleep_limit_us, so a missed wake costs at most that.
class adaptive_lock {
 public:
  void lock() noexcept {
    if (!state_.exchange(1, std::memory_order_acquire)) [[likely]] return;
    lock_contended();
  }
  bool try_lock() noexcept { return !state_.exchange(1, std::memory_order_acquire); }
  void unlock() noexcept {
    state_.store(0, std::memory_order_release);
    if (sleepers_.load(std::memory_order_relaxed) != 0) [[unlikely]] wake_one();
  }

  /// Pauses a contended lock() spins through before it sleeps: about as long as a short
  /// critical section (a CQ entry, a matching step), far less than a time slice.
  static constexpr unsigned spin_limit = 128;
  /// The longest one sleep lasts before the sleeper looks again.
  static constexpr long sleep_limit_us = 1000;

 private:
  void lock_contended() noexcept;  // core/lock.cpp: out of line, off the uncontended path
  void wake_one() noexcept;
  std::atomic<std::uint32_t> state_{0};     // 0 free, 1 held
  std::atomic<std::uint32_t> sleepers_{0};  // threads in (or about to enter) a futex wait
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
  adaptive_lock lock_;
  bool enabled_;
};

using level_guard = std::lock_guard<level_lock>;

}  // namespace exanet::core
