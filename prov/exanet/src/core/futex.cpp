// SPDX-License-Identifier: BSD-2-Clause
#include "core/futex.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <climits>

namespace exanet::core {
namespace {

// futex_waitv may be refused (a kernel before 5.16, or a seccomp filter): then it is not tried
// again in this process.
std::atomic<bool> g_waitv_refused{false};

void nap_ms(unsigned ms) noexcept {
  const timespec t{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1'000'000};
  nanosleep(&t, nullptr);
}

std::uint32_t* address_of(const std::atomic<std::uint32_t>* w) noexcept {
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t) &&
                std::atomic<std::uint32_t>::is_always_lock_free);
  return reinterpret_cast<std::uint32_t*>(const_cast<std::atomic<std::uint32_t>*>(w));
}

}  // namespace

void futex_wait_any(std::span<const futex_watch> words, unsigned timeout_ms) noexcept {
  if (words.empty()) {
    nap_ms(timeout_ms);
    return;
  }
  if (words.size() == 1) {
    const timespec rel{static_cast<time_t>(timeout_ms / 1000),
                       static_cast<long>(timeout_ms % 1000) * 1'000'000};
    syscall(SYS_futex, address_of(words[0].word), FUTEX_WAIT, words[0].expected, &rel, nullptr, 0);
    return;  // woken, changed already (EAGAIN), timed out or interrupted: the caller looks again
  }
#ifdef SYS_futex_waitv
  if (words.size() <= FUTEX_WAITV_MAX && !g_waitv_refused.load(std::memory_order_relaxed)) {
    std::array<futex_waitv, FUTEX_WAITV_MAX> v{};
    for (std::size_t i = 0; i < words.size(); ++i)
      v[i] = {words[i].expected, reinterpret_cast<std::uintptr_t>(address_of(words[i].word)),
              FUTEX_32, 0};
    timespec until{};
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += static_cast<long>(timeout_ms % 1000) * 1'000'000;
    if (until.tv_nsec >= 1'000'000'000) {
      until.tv_nsec -= 1'000'000'000;
      ++until.tv_sec;
    }
    if (syscall(SYS_futex_waitv, v.data(), static_cast<unsigned>(words.size()), 0, &until,
                CLOCK_MONOTONIC) >= 0 ||
        (errno != ENOSYS && errno != EPERM && errno != EINVAL))
      return;
    g_waitv_refused.store(true, std::memory_order_relaxed);
  }
#endif
  nap_ms(timeout_ms < 1 ? timeout_ms : 1);
}

void futex_wake_all(const std::atomic<std::uint32_t>& word) noexcept {
  syscall(SYS_futex, address_of(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void futex_wait_private(const std::atomic<std::uint32_t>& word, std::uint32_t expected,
                        unsigned timeout_us) noexcept {
  const timespec limit{static_cast<time_t>(timeout_us / 1'000'000),
                       static_cast<long>(timeout_us % 1'000'000) * 1000};
  syscall(SYS_futex, address_of(&word), FUTEX_WAIT_PRIVATE, expected, &limit, nullptr, 0);
}

void futex_wake_private(const std::atomic<std::uint32_t>& word, int n) noexcept {
  syscall(SYS_futex, address_of(&word), FUTEX_WAKE_PRIVATE, n, nullptr, nullptr, 0);
}

}  // namespace exanet::core
