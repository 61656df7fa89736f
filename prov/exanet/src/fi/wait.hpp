// SPDX-License-Identifier: BSD-2-Clause
// Waiting under manual progress: nothing completes unless someone calls into the provider, so a
// blocking read is a loop of progress and checks that backs off while idle. CQs, counters and
// EQs share this loop and the eventfd behind FI_GETWAIT.
#pragma once
#include <rdma/fabric.h>
#include <rdma/fi_eq.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "core/futex.hpp"
#include "core/lock.hpp"
#include "fi/common.hpp"

namespace exanet::fi {

class progress_list;

/// The wait fd of a CQ, counter, EQ or wait set (FI_GETWAIT), opened on first use: an epoll set
/// that holds the object's own eventfd (signal: a completion, an event, fi_cq_signal) and, while
/// an application blocks on it after fi_trywait, what readies it on an arrival (watch_arrivals).
/// The fds are atomic because FI_GETWAIT may open them in one thread while another signals or
/// drains (FI_THREAD_SAFE).
class wait_fd {
 public:
  wait_fd() = default;
  wait_fd(const wait_fd&) = delete;
  wait_fd& operator=(const wait_fd&) = delete;
  ~wait_fd();
  int open() noexcept;  // 0 or -FI_E*
  int fd() const noexcept { return set_.load(std::memory_order_acquire); }
  void signal() noexcept;
  void drain() noexcept;

  /// fi_trywait under manual progress, once the object's own look found nothing: no one but the
  /// application calls the provider, so the arrivals themselves must ready the fd (fi_poll(3):
  /// FI_SUCCESS means blocking is safe). Announces a sleeper at every endpoint of `lists`, whose
  /// peers then ring descriptors that join the set (the emulation's wake socket, the network
  /// side's lower CQ fd), with a timer while an endpoint's periodic checks are due (lost peers,
  /// rendezvous timeouts). False, nothing left announced, if an endpoint has work or cannot
  /// (the caller says -FI_EAGAIN, and the application reads instead of blocking). True at once
  /// if no fd was handed out: nobody can block on it.
  bool watch_arrivals(std::span<progress_list* const> lists) noexcept;
  /// The application is back (it reads or waits again, or an endpoint closes): the
  /// announcements are withdrawn. One load when there are none.
  void end_watch() noexcept {
    if (watching_.load(std::memory_order_acquire)) [[unlikely]] end_watch_now(true);
  }
  /// The same for an endpoint that closes under a blocked application: the fd is signaled too,
  /// so that the application looks again (and watches the other endpoints anew).
  void end_watch_waking() noexcept {
    if (watching_.load(std::memory_order_acquire)) {
      end_watch_now(false);
      signal();
    }
  }

 private:
  // timers: run the endpoints' periodic checks first (the application slept through them).
  [[gnu::cold, gnu::noinline]] void end_watch_now(bool timers) noexcept;
  void release_locked(bool timers = false) noexcept;
  bool arm_timer_locked(std::uint32_t ms) noexcept;
  static constexpr std::size_t max_watched = 16;
  std::atomic<int> event_{-1};  // the object's eventfd
  std::atomic<int> set_{-1};    // the epoll set handed out
  int timer_ = -1;              // a timerfd in the set, made on first need
  std::mutex lock_;             // opening, watching (control path)
  std::atomic<bool> watching_{false};
  std::array<progress_source, max_watched> watched_{};
  std::size_t watched_used_ = 0;
};

/// Puts a thread that found nothing to do to sleep until a peer gives one of its endpoints
/// something (dev: sleep_prepare), another word it watches changes, or a timeout. The one
/// sleeping mechanism of exanet: the FI_PROGRESS_AUTO thread and blocking waits (fi_cq_sread,
/// fi_cntr_wait) both use it. Sources stay referenced (endpoint::sleep_refs) until release().
///
/// Two ways to sleep. Peers on this host only (the network off, the default): futex_wait_any on
/// every word, as ever. An endpoint with its network side on also gives an fd (the lower
/// provider's CQ wait object, after fi_trywait); a futex cannot be polled, so the sleep is then
/// poll(2) on those fds and this thread's bell, an eventfd that wake_all_sleepers() rings for a
/// thread that registered it on the word being woken: the words of this process (a CQ's or
/// counter's wake word, the progress thread's kick) are rung that way. The emulation's word,
/// which other processes of this host change, comes with its wake socket (the endpoint's
/// word_fd), polled too. A word only another process changes and that comes without one rings
/// no bell: it is looked at every foreign_word_look_ms instead (fi_exanet(7), PROGRESS).
class arrival_sleep {
 public:
  arrival_sleep() = default;
  arrival_sleep(const arrival_sleep&) = delete;
  arrival_sleep& operator=(const arrival_sleep&) = delete;
  ~arrival_sleep() { release(); }
  /// False if the source has work now, cannot sleep, or there are too many: do not sleep.
  bool add(const progress_source& s) noexcept;
  /// Another word to wake on (a CQ's or counter's, the progress thread's kick): one of this
  /// process, whose wakers call wake_all_sleepers().
  bool add(core::futex_watch w) noexcept;
  /// Sleeps at most timeout_ms, then withdraws every announcement and runs the sources' timers.
  void sleep(unsigned timeout_ms) noexcept;
  void release() noexcept;

  /// How often a poll(2) sleep looks at words another process changes (see above).
  static constexpr unsigned foreign_word_look_ms = 1;

 private:
  [[gnu::cold, gnu::noinline]] void poll_sleep(unsigned timeout_ms) noexcept;
  bool words_changed() const noexcept;
  static constexpr std::size_t max_words = 16;
  std::array<core::futex_watch, max_words> words_{};
  std::array<progress_source, max_words> sources_{};
  std::array<int, 2 * max_words> fds_{};  // a source's fd and its word's
  std::size_t words_used_ = 0, sources_used_ = 0, fds_used_ = 0;
  unsigned look_again_ms_ = 0;  // the shortest a source asked for (sleep_target): 0, none
  bool foreign_words_ = false;  // a source's word that another process changes and that
                                // matters beside an fd (see above)
  bool wordless_sources_ = false;  // a source without fd: its word is another process's
};

/// Wakes every thread asleep on word, a word of this process that the caller has just changed
/// with a sequentially consistent operation: its futex sleepers, and the bells of poll(2)
/// sleepers that registered on it (arrival_sleep). Cold: call it only when someone sleeps.
void wake_all_sleepers(const std::atomic<std::uint32_t>& word) noexcept;

/// A word a sleeping wait is woken through when its object changes without an arrival at an
/// endpoint (fi_cq_signal, fi_cntr_add, a completion another thread wrote). The writer makes the
/// change with a sequentially consistent operation (or under the lock the sleeper takes to look)
/// and then calls wake(): a load, and a system call only while someone sleeps.
class wake_word {
 public:
  /// Sleepers are counted in `also` too, after sleepers_ (a CQ's ring: its pushes then call
  /// back, and wake() sees this sleeper). Set before any sleep.
  void count_also(std::atomic<std::uint32_t>* also) noexcept { also_ = also; }
  void announce() noexcept {
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    if (also_) also_->fetch_add(1, std::memory_order_seq_cst);
  }
  void withdraw() noexcept {
    if (also_) also_->fetch_sub(1, std::memory_order_seq_cst);
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
  }
  core::futex_watch watch() const noexcept { return {&word_, word_.load(std::memory_order_seq_cst)}; }
  void wake() noexcept {
    if (sleepers_.load(std::memory_order_seq_cst) != 0) [[unlikely]] wake_now();
  }

 private:
  [[gnu::cold, gnu::noinline]] void wake_now() noexcept;
  std::atomic<std::uint32_t> sleepers_{0};
  std::atomic<std::uint32_t> word_{0};
  std::atomic<std::uint32_t>* also_ = nullptr;
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
  /// Calls f(source) for every endpoint under the lock, until one returns false.
  template <class F>
  bool all_of(F&& f) noexcept {
    core::level_guard g(lock_);
    for (const progress_source& s : sources_)
      if (s.progress && !f(s)) return false;
    return true;
  }
  /// Announces a sleeper at every endpoint; false if one has work (sleep is then released).
  bool prepare_sleep(arrival_sleep& sleep) noexcept {
    core::level_guard g(lock_);
    for (const progress_source& s : sources_)
      if (s.progress && !sleep.add(s)) return false;
    return true;
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
/// Idle rounds of re-polling and yielding (idle_backoff's first phases) before a waiter sleeps:
/// an answer that comes within a few microseconds is taken without a system call.
inline constexpr unsigned spin_rounds = 256;
/// The longest sleep of a blocking wait before it looks again (and runs the timers): bounds how
/// long an endpoint's close waits for a thread asleep on it.
inline constexpr unsigned wait_sleep_max_ms = 20;

/// One idle round of a blocking wait on a CQ's or counter's endpoints: re-polls and yields for
/// the first spin_rounds, then sleeps until an arrival, the object's own wake word, or
/// min(wait_sleep_max_ms, until the deadline), after `ready()` (a last look, made after the
/// announcement) says nothing came. Naps instead when an endpoint has work it must poll for.
template <class Ready>
void wait_idle(progress_list& sources, wake_word& own, unsigned& round, std::uint64_t deadline_ms,
               Ready&& ready) noexcept {
  if (round < spin_rounds) {
    idle_backoff(round);
    return;
  }
  arrival_sleep sleep;
  own.announce();
  const bool can_sleep = sleep.add(own.watch()) && sources.prepare_sleep(sleep);
  if (can_sleep && !ready()) {
    const std::uint64_t now = now_ms();
    const std::uint64_t left = deadline_ms > now ? deadline_ms - now : 0;
    sleep.sleep(static_cast<unsigned>(std::min<std::uint64_t>(left, wait_sleep_max_ms)));
  } else if (!can_sleep) {
    idle_backoff(round);
  }
  own.withdraw();
}

/// fi_trywait on one CQ, counter or EQ fid: 0 if the caller may block on its fd, -FI_EAGAIN if
/// something is already available.
int trywait_one(fid* f) noexcept;

}  // namespace exanet::fi
