// SPDX-License-Identifier: BSD-2-Clause
// Sleeping on words in shared memory (futex(2)), for threads with nothing to do until a peer
// process makes something visible: the FI_PROGRESS_AUTO thread and blocking waits. The words
// live in shared segments mapped by several processes, so the operations are the shared
// (non-private) ones.
#pragma once
#include <atomic>
#include <cstdint>
#include <span>

namespace exanet::core {

/// One word to wait on, and the value it had when the caller decided to sleep.
struct futex_watch {
  const std::atomic<std::uint32_t>* word = nullptr;
  std::uint32_t expected = 0;
};

/// Sleeps until one of the words no longer holds its expected value, a wake, or timeout_ms
/// passes (spurious returns are allowed: callers look again). With several words it needs
/// futex_waitv (Linux 5.16); without it, it naps for at most 1 ms instead.
void futex_wait_any(std::span<const futex_watch> words, unsigned timeout_ms) noexcept;

/// Wakes every thread of any process sleeping on word.
void futex_wake_all(const std::atomic<std::uint32_t>& word) noexcept;

/// The same for a word of this process only (a lock's state; FUTEX_*_PRIVATE, which the
/// kernel hashes without looking up a shared mapping): sleeps while word holds expected, for
/// at most timeout_us, and wakes at most n sleepers.
void futex_wait_private(const std::atomic<std::uint32_t>& word, std::uint32_t expected,
                        unsigned timeout_us) noexcept;
void futex_wake_private(const std::atomic<std::uint32_t>& word, int n) noexcept;

}  // namespace exanet::core
