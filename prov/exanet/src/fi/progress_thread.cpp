// SPDX-License-Identifier: BSD-2-Clause
// The domain's progress thread (FI_PROGRESS_AUTO). It drives the same progress an application's
// CQ read would, under the endpoint's lock (which FI_PROGRESS_AUTO turns on whatever the
// threading level: domain.cpp), and sleeps while nothing happens.
#include "fi/progress_thread.hpp"

#include <rdma/fi_errno.h>

#include <algorithm>
#include <system_error>

#include <time.h>

#include "core/log.hpp"
#include "fi/ep.hpp"
#include "fi/wait.hpp"

namespace exanet::fi {

int progress_thread::add(endpoint& ep) noexcept {
  waiting_.fetch_add(1, std::memory_order_seq_cst);  // as remove(): end a sleep holding lock_
  kick();
  std::lock_guard g(lock_);
  waiting_.fetch_sub(1, std::memory_order_relaxed);
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

void progress_thread::kick() noexcept {
  kick_.fetch_add(1, std::memory_order_seq_cst);
  wake_all_sleepers(kick_);  // the futex, or the bell of a sleep that polls a network fd
}

void progress_thread::remove(endpoint& ep) noexcept {
  // Taking the lock waits for the round or sleep in progress (the kick ends a sleep, and the
  // thread does not start another while we wait): once it is ours the thread is outside ep.
  waiting_.fetch_add(1, std::memory_order_seq_cst);
  kick();
  std::lock_guard g(lock_);
  waiting_.fetch_sub(1, std::memory_order_relaxed);
  endpoints_.erase(std::remove(endpoints_.begin(), endpoints_.end(), &ep), endpoints_.end());
}

void progress_thread::stop() noexcept {
  stopping_.store(true, std::memory_order_seq_cst);
  kick();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

std::size_t progress_thread::round(bool& contended) noexcept {
  std::lock_guard g(lock_);
  std::size_t n = 0;
  contended = false;
  for (endpoint* ep : endpoints_) {
    const std::size_t did = ep->try_progress();
    if (did == endpoint::held) contended = true;
    else n += did;
  }
  return n;
}

bool progress_thread::sleep() noexcept {
  std::lock_guard g(lock_);
  arrival_sleep s;
  // The kick's value first: a remove() or stop() that comes after this look changes it.
  (void)s.add(core::futex_watch{&kick_, kick_.load(std::memory_order_seq_cst)});
  if (waiting_.load(std::memory_order_seq_cst) != 0 || stopping_.load(std::memory_order_seq_cst))
    return true;  // someone needs lock_: let go of it at once
  for (endpoint* ep : endpoints_)
    if (!s.add(endpoint_progress_source(*ep))) return false;  // work to poll for, or too many
  s.sleep(period_ms_);
  return true;
}

void progress_thread::run() noexcept {
  // Idle, the thread re-polls and yields for a while (fi/wait.hpp, spin_rounds: a request that
  // comes within microseconds is served without a system call), then sleeps on its endpoints'
  // wake words until a peer gives one of them something (the same sleep as fi_cq_sread's). An
  // endpoint waiting on something it must poll for (a staging credit, a full mailbox) keeps it
  // polling instead (yields, then naps if that lasts). The sleep ends at least once per period
  // for the peer watch and the rendezvous probes.
  unsigned idle = 0, pending = 0;
  bool contended = false;
  while (!stopping_.load(std::memory_order_acquire)) {
    if (round(contended) != 0) {
      idle = pending = 0;
      continue;
    }
    if (contended) {
      // The application is in a call on an endpoint, progressing it: stay awake (a peer would
      // pay a wake for each packet if we slept) but give it the core.
      idle = 0;
      std::this_thread::yield();
      continue;
    }
    if (idle < spin_rounds) {
      idle_backoff(idle);
      continue;
    }
    if (sleep()) {
      pending = 0;
    } else {
      // An endpoint waits for a peer to free something (staging space, ring credit, a mailbox
      // slot): the peer is usually busy making that room, so yield rather than nap (a 100 us
      // nap per staged chunk halved the busy-target read rate); naps only if it lasts.
      ++pending;
      if (pending < 4096) {
        std::this_thread::yield();
      } else {
        const timespec nap{0, pending < 65536 ? 10'000 : 100'000};
        nanosleep(&nap, nullptr);
      }
    }
    if (waiting_.load(std::memory_order_relaxed) != 0) std::this_thread::yield();
  }
}

}  // namespace exanet::fi
