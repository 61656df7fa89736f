// SPDX-License-Identifier: BSD-2-Clause
// FI_PROGRESS_AUTO (fi_exanet(7), PROGRESS): one thread per domain that progresses the domain's
// enabled endpoints, so a process computing without calling libfabric still answers its peers'
// RMA, atomics and rendezvous. It exists only in domains opened with data_progress
// FI_PROGRESS_AUTO; under FI_PROGRESS_MANUAL there is no thread and nothing here runs.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace exanet::fi {

class endpoint;

/// Owns the thread (RAII: the destructor stops and joins it). Endpoints are added when enabled
/// and removed before they close; remove() returns only once the thread is outside the
/// endpoint, so the endpoint may be freed right after. Thread-safe.
class progress_thread {
 public:
  /// period_ms: the longest sleep (the peer watch's period, FI_EXANET_DEAD_PEER_CHECK_MS).
  explicit progress_thread(unsigned period_ms) noexcept : period_ms_(period_ms ? period_ms : 1) {}
  progress_thread(const progress_thread&) = delete;
  progress_thread& operator=(const progress_thread&) = delete;
  ~progress_thread() { stop(); }

  /// Starts the thread on the first endpoint. 0, or -FI_ENOMEM / -FI_EOTHER if it could not be
  /// made (the endpoint is then not added, and its enable fails).
  int add(endpoint& ep) noexcept;
  void remove(endpoint& ep) noexcept;
  /// Stops and joins the thread (the domain's close); idempotent.
  void stop() noexcept;

 private:
  void run() noexcept;
  /// One round over every endpoint: how much was done; contended if the application held one.
  std::size_t round(bool& contended) noexcept;
  /// Sleeps until an endpoint gets an arrival, a kick, or the period ends; false if an endpoint
  /// has work to poll for (nothing slept). Under lock_.
  bool sleep() noexcept;
  /// Ends a sleep at once (add, remove, stop): they need lock_, which a sleep holds.
  void kick() noexcept;

  const unsigned period_ms_;
  std::mutex lock_;             // endpoints_; held for a whole round and a sleep, so remove()
                                // waits them out (kicking the sleep first)
  std::vector<endpoint*> endpoints_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint32_t> waiting_{0};  // add() and remove() calls waiting for lock_: do
                                           // not sleep
  std::atomic<std::uint32_t> kick_{0};     // futex word: bumped to end a sleep
  std::thread thread_;
};

}  // namespace exanet::fi
