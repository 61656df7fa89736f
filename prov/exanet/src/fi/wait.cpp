// SPDX-License-Identifier: BSD-2-Clause
#include "fi/wait.hpp"

#include <rdma/fi_errno.h>
#include <sched.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>

#include "fi/cntr.hpp"
#include "fi/cq.hpp"
#include "fi/eq.hpp"
#include "fi/poll.hpp"

namespace exanet::fi {

wait_fd::~wait_fd() {
  // Nothing is watched by now (the object closes only once its endpoints have, and each
  // withdrew what it held); released all the same, without the endpoints' timers.
  if (watching_.load(std::memory_order_acquire)) end_watch_now(false);
  for (const int f : {event_.load(), set_.load(), timer_})
    if (f >= 0) ::close(f);
}

int wait_fd::open() noexcept {
  if (fd() >= 0) return 0;
  std::lock_guard g(lock_);
  if (fd() >= 0) return 0;
  const int ev = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  const int set = epoll_create1(EPOLL_CLOEXEC);
  epoll_event e{};
  e.events = EPOLLIN;
  if (ev < 0 || set < 0 || epoll_ctl(set, EPOLL_CTL_ADD, ev, &e) != 0) {
    if (ev >= 0) ::close(ev);
    if (set >= 0) ::close(set);
    return -FI_EMFILE;
  }
  event_.store(ev, std::memory_order_release);
  set_.store(set, std::memory_order_release);
  return 0;
}

void wait_fd::signal() noexcept {
  const int f = event_.load(std::memory_order_acquire);
  if (f < 0) return;
  const std::uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(f, &one, sizeof one);
}

void wait_fd::drain() noexcept {
  const int f = event_.load(std::memory_order_acquire);
  if (f < 0) return;
  std::uint64_t v;
  [[maybe_unused]] ssize_t r = ::read(f, &v, sizeof v);
}

bool wait_fd::watch_arrivals(std::span<progress_list* const> lists) noexcept {
  std::lock_guard g(lock_);
  release_locked();  // one left from an earlier fi_trywait
  const int set = fd();
  if (set < 0) return true;
  std::uint32_t look_ms = 0;
  const auto watch = [&](const progress_source& s) noexcept {
    if (!s.sleep_prepare || watched_used_ == max_watched) return false;
    sleep_target t;
    t.app_polls = true;
    if (!s.sleep_prepare(s.self, t)) return false;
    if (t.served) return true;
    watched_[watched_used_++] = s;
    if (t.word_in_use) return false;  // an arrival that readies no descriptor
    for (const int f : {t.fd, t.word_fd}) {
      epoll_event e{};
      e.events = EPOLLIN;
      if (f >= 0 && epoll_ctl(set, EPOLL_CTL_ADD, f, &e) != 0 && errno != EEXIST) return false;
    }
    look_ms = sooner_look(look_ms, t.look_again_ms);
    return true;
  };
  bool ok = true;
  for (progress_list* l : lists)
    if (!(ok = l->all_of(watch))) break;
  if (ok && look_ms) ok = arm_timer_locked(look_ms);
  if (!ok) {
    release_locked();
    return false;
  }
  watching_.store(watched_used_ != 0, std::memory_order_release);
  return true;
}

bool wait_fd::arm_timer_locked(std::uint32_t ms) noexcept {
  if (timer_ < 0) {
    const int t = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (t < 0) return false;
    epoll_event e{};
    e.events = EPOLLIN;
    if (epoll_ctl(fd(), EPOLL_CTL_ADD, t, &e) != 0) {
      ::close(t);
      return false;
    }
    timer_ = t;
  }
  itimerspec when{};
  when.it_value.tv_sec = ms / 1000;
  when.it_value.tv_nsec = static_cast<long>(ms % 1000) * 1'000'000;
  return timerfd_settime(timer_, 0, &when, nullptr) == 0;
}

void wait_fd::release_locked(bool timers) noexcept {
  for (std::size_t i = 0; i < watched_used_; ++i) {
    const progress_source& s = watched_[i];
    if (timers && s.timers) s.timers(s.self);  // still held open: before sleep_end
    s.sleep_end(s.self);
  }
  watched_used_ = 0;
  watching_.store(false, std::memory_order_release);
  if (timer_ >= 0) {
    const itimerspec off{};
    (void)timerfd_settime(timer_, 0, &off, nullptr);
    std::uint64_t expirations;
    [[maybe_unused]] ssize_t r = ::read(timer_, &expirations, sizeof expirations);
  }
}

void wait_fd::end_watch_now(bool timers) noexcept {
  std::lock_guard g(lock_);
  release_locked(timers);
}

int getwait(fi_wait_obj wait_obj, wait_fd& fd, int command, void* arg) noexcept {
  if (command != FI_GETWAIT) return -FI_ENOSYS;
  if (wait_obj != FI_WAIT_FD && wait_obj != FI_WAIT_UNSPEC) return -FI_ENODATA;
  if (!arg) return -FI_EINVAL;
  if (int rc = fd.open(); rc != 0) return rc;
  *static_cast<int*>(arg) = fd.fd();
  return 0;
}

const char* strerror_into(int prov_errno, char* buf, std::size_t len) noexcept {
  const char* s = fi_strerror(prov_errno);
  if (!buf || !len) return s;
  std::strncpy(buf, s, len - 1);
  buf[len - 1] = '\0';
  return buf;
}

std::uint64_t now_ms() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::uint64_t(ts.tv_sec) * 1000 + std::uint64_t(ts.tv_nsec) / 1000000;
}

void idle_backoff(unsigned& round) noexcept {
  ++round;
  if (round < 64) return;
  if (round < 256) {
    sched_yield();
    return;
  }
  const timespec nap{0, round < 1024 ? 10'000 : 100'000};
  nanosleep(&nap, nullptr);
}

namespace {

/// A thread's bell: an eventfd it polls beside the network fds while it sleeps, opened on its
/// first poll(2) sleep and kept until the thread ends.
struct thread_bell {
  int fd = -1;
  ~thread_bell() {
    if (fd >= 0) ::close(fd);
  }
  int get() noexcept {
    if (fd < 0) fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return fd;
  }
};
thread_local thread_bell t_bell;

/// The poll(2) sleepers and the words they wait on, for wake_all_sleepers. Both sides follow
/// announce-then-look: a sleeper registers (under the lock, then counts itself, seq_cst) and
/// only then compares its words to their expected values; a waker changes its word (seq_cst)
/// and only then reads the count. So either the sleeper sees the new value and does not sleep,
/// or the waker sees a sleeper, takes the lock (after the registration, made under it) and
/// rings its bell, which poll(2) sees whenever it comes: an eventfd stays readable until read.
struct bell_registration {
  const core::futex_watch* words = nullptr;
  std::size_t count = 0;
  int bell = -1;
  bell_registration* next = nullptr;
};
struct bell_registry {
  std::mutex lock;
  bell_registration* head = nullptr;
  std::atomic<std::uint32_t> sleepers{0};
};
bell_registry g_bells;

class registered_bell {
 public:
  registered_bell(const core::futex_watch* words, std::size_t count, int bell) noexcept
      : me_{words, count, bell, nullptr} {
    std::lock_guard g(g_bells.lock);
    me_.next = g_bells.head;
    g_bells.head = &me_;
    g_bells.sleepers.fetch_add(1, std::memory_order_seq_cst);
  }
  ~registered_bell() {
    {
      std::lock_guard g(g_bells.lock);
      for (bell_registration** at = &g_bells.head; *at; at = &(*at)->next)
        if (*at == &me_) {
          *at = me_.next;
          break;
        }
      g_bells.sleepers.fetch_sub(1, std::memory_order_relaxed);
    }
    // No waker rings it now (they ring under the lock): what it holds is for this sleep only.
    std::uint64_t v;
    [[maybe_unused]] ssize_t r = ::read(me_.bell, &v, sizeof v);
  }
  registered_bell(const registered_bell&) = delete;
  registered_bell& operator=(const registered_bell&) = delete;

 private:
  bell_registration me_;
};

[[gnu::cold, gnu::noinline]] void ring_bells(const std::atomic<std::uint32_t>& word) noexcept {
  std::lock_guard g(g_bells.lock);
  for (const bell_registration* r = g_bells.head; r; r = r->next)
    for (std::size_t i = 0; i < r->count; ++i)
      if (r->words[i].word == &word) {
        const std::uint64_t one = 1;
        [[maybe_unused]] ssize_t w = ::write(r->bell, &one, sizeof one);
        break;
      }
}

}  // namespace

void wake_all_sleepers(const std::atomic<std::uint32_t>& word) noexcept {
  core::futex_wake_all(word);
  if (g_bells.sleepers.load(std::memory_order_seq_cst) != 0) [[unlikely]] ring_bells(word);
}

bool arrival_sleep::add(const progress_source& s) noexcept {
  if (!s.sleep_prepare || words_used_ == max_words) return false;
  sleep_target t;
  if (!s.sleep_prepare(s.self, t)) return false;
  sources_[sources_used_++] = s;
  words_[words_used_++] = {t.word, t.expected};
  look_again_ms_ = sooner_look(look_again_ms_, t.look_again_ms);
  const auto poll_too = [this](int fd) {
    if (std::find(fds_.begin(), fds_.begin() + fds_used_, fd) == fds_.begin() + fds_used_)
      fds_[fds_used_++] = fd;
  };
  if (t.fd < 0) {
    if (t.word_fd < 0) wordless_sources_ = true;
  } else {
    if (t.word_in_use) foreign_words_ = true;
    poll_too(t.fd);
  }
  if (t.word_fd >= 0) poll_too(t.word_fd);
  return true;
}

bool arrival_sleep::add(core::futex_watch w) noexcept {
  if (words_used_ == max_words) return false;
  words_[words_used_++] = w;
  return true;
}

void arrival_sleep::sleep(unsigned timeout_ms) noexcept {
  if (look_again_ms_ && look_again_ms_ < timeout_ms) [[unlikely]]
    timeout_ms = look_again_ms_;
  if (fds_used_ == 0) [[likely]]
    core::futex_wait_any({words_.data(), words_used_}, timeout_ms);
  else
    poll_sleep(timeout_ms);
  // A sleep skipped the checks idle progress makes now and then (lost peers, rendezvous
  // probes; each runs at most once per its period anyway). Before release: the sources are
  // still held open.
  for (std::size_t i = 0; i < sources_used_; ++i)
    if (sources_[i].timers) sources_[i].timers(sources_[i].self);
  release();
}

bool arrival_sleep::words_changed() const noexcept {
  for (std::size_t i = 0; i < words_used_; ++i)
    if (words_[i].word->load(std::memory_order_seq_cst) != words_[i].expected) return true;
  return false;
}

void arrival_sleep::poll_sleep(unsigned timeout_ms) noexcept {
  // Each fd is armed already: its source's sleep_prepare called fi_trywait, and any arrival
  // since makes it readable. The words of this process ring the bell once it is registered;
  // then the look at every word, and only then the sleep.
  const int bell = t_bell.get();
  std::array<pollfd, 2 * max_words + 1> polled{};
  for (std::size_t i = 0; i < fds_used_; ++i) polled[i] = {fds_[i], POLLIN, 0};
  std::size_t n = fds_used_;
  // Without a bell (no eventfd to be had) every word is looked at, as a foreign one.
  const bool look_often = foreign_words_ || wordless_sources_ || bell < 0;
  std::optional<registered_bell> reg;
  if (bell >= 0) {
    reg.emplace(words_.data(), words_used_, bell);
    polled[n++] = {bell, POLLIN, 0};
  }
  if (words_changed()) return;
  const std::uint64_t deadline = now_ms() + timeout_ms;
  for (;;) {
    const std::uint64_t now = now_ms();
    if (now >= deadline) return;
    const std::uint64_t left = deadline - now;
    const int slice = static_cast<int>(look_often ? std::min<std::uint64_t>(left, foreign_word_look_ms)
                                                  : left);
    // Readable, or interrupted: the caller looks again either way.
    if (::poll(polled.data(), n, slice) != 0) return;
    if (look_often && words_changed()) return;
  }
}

void arrival_sleep::release() noexcept {
  for (std::size_t i = 0; i < sources_used_; ++i) sources_[i].sleep_end(sources_[i].self);
  sources_used_ = words_used_ = fds_used_ = 0;
  look_again_ms_ = 0;
  foreign_words_ = wordless_sources_ = false;
}

void wake_word::wake_now() noexcept {
  word_.fetch_add(1, std::memory_order_seq_cst);
  wake_all_sleepers(word_);
}

int trywait_one(fid* f) noexcept {
  if (!f) return -FI_EINVAL;
  switch (f->fclass) {
    case FI_CLASS_CQ:
      if (cq* q = cq_from(f)) return cq_trywait(*q);
      break;
    case FI_CLASS_CNTR:
      if (cntr* c = cntr_from(f)) return cntr_trywait(*c);
      break;
    case FI_CLASS_EQ:
      if (eq* q = eq_from(f)) return eq_trywait(*q);
      break;
    case FI_CLASS_WAIT:
      if (waitset* w = waitset_from(f)) return waitset_trywait(*w);
      break;
    default:
      break;
  }
  return -FI_EINVAL;
}

}  // namespace exanet::fi
