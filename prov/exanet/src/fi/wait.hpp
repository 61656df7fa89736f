// Waiting under manual progress: nothing completes unless someone calls into the provider, so a
// blocking read is a loop of progress and checks that backs off while idle. CQs, counters and
// EQs share this loop and the eventfd behind FI_GETWAIT.
#pragma once
#include <rdma/fabric.h>

#include <atomic>
#include <cstdint>

namespace exanet::fi {

/// An eventfd owned RAII-style; opened only when the application asks for a wait fd.
class wait_fd {
 public:
  wait_fd() = default;
  wait_fd(const wait_fd&) = delete;
  wait_fd& operator=(const wait_fd&) = delete;
  ~wait_fd();
  int open() noexcept;  // 0 or -FI_E*
  int fd() const noexcept { return fd_; }
  void signal() noexcept;
  void drain() noexcept;

 private:
  int fd_ = -1;
};

/// Milliseconds on a monotonic clock.
std::uint64_t now_ms() noexcept;

/// Sleeps a little longer each idle round (spin first, then yield, then up to 100 us naps), so
/// a waiting thread leaves the core to the peers it waits for.
void idle_backoff(unsigned& round) noexcept;

/// fi_trywait on one CQ, counter or EQ fid: 0 if the caller may block on its fd, -FI_EAGAIN if
/// something is already available.
int trywait_one(fid* f) noexcept;

}  // namespace exanet::fi
