// Waiting under manual progress: nothing completes unless someone calls into the provider, so a
// blocking read is a loop of progress and checks that backs off while idle. CQs, counters and
// EQs share this loop and the eventfd behind FI_GETWAIT.
#pragma once
#include <rdma/fabric.h>
#include <rdma/fi_eq.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "core/lock.hpp"
#include "fi/common.hpp"

namespace exanet::fi {

/// An eventfd owned RAII-style; opened only when the application asks for a wait fd. The fd is
/// atomic because FI_GETWAIT may open it in one thread while another signals or drains it
/// (FI_THREAD_SAFE): the first opener publishes it, a racing second one closes its own.
class wait_fd {
 public:
  wait_fd() = default;
  wait_fd(const wait_fd&) = delete;
  wait_fd& operator=(const wait_fd&) = delete;
  ~wait_fd();
  int open() noexcept;  // 0 or -FI_E*
  int fd() const noexcept { return fd_.load(std::memory_order_acquire); }
  void signal() noexcept;
  void drain() noexcept;

 private:
  std::atomic<int> fd_{-1};
};

/// The endpoints bound to a CQ or counter: reading it progresses them (manual progress). The
/// lock is held while they progress, so an endpoint cannot close under a reader.
class progress_list {
 public:
  void enable_lock(bool on) noexcept { lock_.enable(on); }
  void attach(progress_source s) {  // may throw std::bad_alloc: control path
    core::level_guard g(lock_);
    sources_.push_back(s);
  }
  void detach(progress_source s) noexcept {
    core::level_guard g(lock_);
    auto it = std::find(sources_.begin(), sources_.end(), s);
    if (it != sources_.end()) sources_.erase(it);
  }
  bool empty() noexcept {
    core::level_guard g(lock_);
    return sources_.empty();
  }
  void progress() noexcept {
    core::level_guard g(lock_);
    for (const progress_source& s : sources_)
      if (s.progress) s.progress(s.self);  // entries without one only hold the object open
  }

 private:
  core::level_lock lock_;
  std::vector<progress_source> sources_;
};

/// fi_control(FI_GETWAIT) for an object waiting with wait_obj: the eventfd, opened on first use.
int getwait(fi_wait_obj wait_obj, wait_fd& fd, int command, void* arg) noexcept;

/// fi_cq_strerror and fi_eq_strerror: exanet has no provider-specific error data, so the text is
/// libfabric's for the error number, copied into buf when one is given.
const char* strerror_into(int prov_errno, char* buf, std::size_t len) noexcept;

/// Milliseconds on a monotonic clock.
std::uint64_t now_ms() noexcept;

/// Sleeps a little longer each idle round (spin first, then yield, then up to 100 us naps), so
/// a waiting thread leaves the core to the peers it waits for.
void idle_backoff(unsigned& round) noexcept;

/// fi_trywait on one CQ, counter or EQ fid: 0 if the caller may block on its fd, -FI_EAGAIN if
/// something is already available.
int trywait_one(fid* f) noexcept;

}  // namespace exanet::fi
