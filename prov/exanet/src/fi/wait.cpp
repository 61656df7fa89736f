// SPDX-License-Identifier: BSD-2-Clause
#include "fi/wait.hpp"

#include <rdma/fi_errno.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "fi/cntr.hpp"
#include "fi/cq.hpp"
#include "fi/eq.hpp"
#include "fi/poll.hpp"

namespace exanet::fi {

wait_fd::~wait_fd() {
  if (const int f = fd(); f >= 0) ::close(f);
}

int wait_fd::open() noexcept {
  if (fd() >= 0) return 0;
  const int mine = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (mine < 0) return -FI_EMFILE;
  int none = -1;
  if (!fd_.compare_exchange_strong(none, mine, std::memory_order_acq_rel)) ::close(mine);
  return 0;
}

void wait_fd::signal() noexcept {
  const int f = fd();
  if (f < 0) return;
  const std::uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(f, &one, sizeof one);
}

void wait_fd::drain() noexcept {
  const int f = fd();
  if (f < 0) return;
  std::uint64_t v;
  [[maybe_unused]] ssize_t r = ::read(f, &v, sizeof v);
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

bool arrival_sleep::add(const progress_source& s) noexcept {
  if (!s.sleep_prepare || words_used_ == max_words) return false;
  core::futex_watch w;
  if (!s.sleep_prepare(s.self, w.word, w.expected)) return false;
  sources_[sources_used_++] = s;
  words_[words_used_++] = w;
  return true;
}

bool arrival_sleep::add(core::futex_watch w) noexcept {
  if (words_used_ == max_words) return false;
  words_[words_used_++] = w;
  return true;
}

void arrival_sleep::sleep(unsigned timeout_ms) noexcept {
  core::futex_wait_any({words_.data(), words_used_}, timeout_ms);
  // A sleep skipped the checks idle progress makes now and then (lost peers, rendezvous
  // probes; each runs at most once per its period anyway). Before release: the sources are
  // still held open.
  for (std::size_t i = 0; i < sources_used_; ++i)
    if (sources_[i].timers) sources_[i].timers(sources_[i].self);
  release();
}

void arrival_sleep::release() noexcept {
  for (std::size_t i = 0; i < sources_used_; ++i) sources_[i].sleep_end(sources_[i].self);
  sources_used_ = words_used_ = 0;
}

void wake_word::wake_now() noexcept {
  word_.fetch_add(1, std::memory_order_seq_cst);
  core::futex_wake_all(word_);
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
