// FI_PROGRESS_AUTO (fi_exanet(7), PROGRESS): one thread per domain that progresses the domain's
// enabled endpoints, so a process computing without calling libfabric still answers its peers'
// RMA, atomics and rendezvous. It exists only in domains opened with data_progress
// FI_PROGRESS_AUTO; under FI_PROGRESS_MANUAL there is no thread and nothing here runs.
#pragma once
#include <atomic>
#include <cstddef>
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
  progress_thread() = default;
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
  /// One round over every endpoint; how much was done (an endpoint the application holds
  /// counts as work: it is in a call, the thread must not deepen its sleep).
  std::size_t round() noexcept;

  std::mutex lock_;             // endpoints_; held for a whole round, so remove() waits it out
  std::vector<endpoint*> endpoints_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace exanet::fi
