// The domain's progress thread (FI_PROGRESS_AUTO). It drives the same progress an application's
// CQ read would, under the endpoint's lock (which FI_PROGRESS_AUTO turns on whatever the
// threading level: domain.cpp), and sleeps while nothing happens.
#include "fi/progress_thread.hpp"

#include <rdma/fi_errno.h>

#include <algorithm>
#include <system_error>

#include "core/log.hpp"
#include "fi/ep.hpp"
#include "fi/wait.hpp"

namespace exanet::fi {

int progress_thread::add(endpoint& ep) noexcept {
  std::lock_guard g(lock_);
  try {
    endpoints_.push_back(&ep);
  } catch (...) {
    return -FI_ENOMEM;
  }
  if (thread_.joinable()) return 0;
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::system_error& e) {
    endpoints_.pop_back();
    EXANET_LOG(warn, core, "FI_PROGRESS_AUTO: the progress thread could not start (%s)", e.what());
    return -FI_EOTHER;
  } catch (...) {
    endpoints_.pop_back();
    return -FI_ENOMEM;
  }
  return 0;
}

void progress_thread::remove(endpoint& ep) noexcept {
  // Taking the lock waits for the round in progress: once it is ours the thread is outside ep.
  std::lock_guard g(lock_);
  endpoints_.erase(std::remove(endpoints_.begin(), endpoints_.end(), &ep), endpoints_.end());
}

void progress_thread::stop() noexcept {
  stopping_.store(true, std::memory_order_release);
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

std::size_t progress_thread::round() noexcept {
  std::lock_guard g(lock_);
  std::size_t n = 0;
  for (endpoint* ep : endpoints_) n += ep->try_progress();
  return n;
}

void progress_thread::run() noexcept {
  // Idle, the thread backs off as a blocked fi_cq_sread does (fi/wait.cpp, idle_backoff): a
  // short re-poll, then yields, then naps of at most 100 us. A round that finds work starts the
  // back-off again, so a stream of requests is served at polling speed; the naps' cost when idle
  // is measured in fi_exanet(7), PROGRESS.
  unsigned idle = 0;
  while (!stopping_.load(std::memory_order_acquire)) {
    if (round() != 0) {
      idle = 0;
      continue;
    }
    idle_backoff(idle);
  }
}

}  // namespace exanet::fi
