// SPDX-License-Identifier: BSD-2-Clause
#include "fi/poll.hpp"

#include <rdma/fi_errno.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <span>
#include <vector>

#include "core/lock.hpp"
#include "fi/cntr.hpp"
#include "fi/common.hpp"
#include "fi/cq.hpp"
#include "fi/domain.hpp"
#include "fi/enosys.hpp"
#include "fi/fabric.hpp"
#include "fi/wait.hpp"

namespace exanet::fi {
namespace {

/// A CQ or counter of a set, with what the set needs to look at it.
struct member {
  fid* f = nullptr;
  cq* q = nullptr;     // exactly one of q and c
  cntr* c = nullptr;

  /// Progresses it; true if it has events (a counter's change is taken when `take`).
  bool ready(bool take) const noexcept { return q ? cq_progress_ready(*q) : cntr_progress_changed(*c, take); }
  fid_domain* domain() const noexcept { return q ? cq_domain(*q) : cntr_domain(*c); }
  /// A poll set starts (+1) or stops (-1) holding it.
  void hold(int delta) const noexcept { q ? cq_set_ref(*q, delta) : cntr_set_ref(*c, delta); }
  bool sleep_prepare(arrival_sleep& s) const noexcept {
    return q ? cq_sleep_prepare(*q, s) : cntr_sleep_prepare(*c, s);
  }
  void sleep_end() const noexcept { q ? cq_sleep_end(*q) : cntr_sleep_end(*c); }
  progress_list& sources() const noexcept { return q ? cq_sources(*q) : cntr_sources(*c); }
  bool has_events() const noexcept { return q ? cq_has_entries(*q) : cntr_changed(*c); }
};

member member_of(fid* f) noexcept {
  member m{f};
  if (!f) return m;
  if (f->fclass == FI_CLASS_CQ) m.q = cq_from(f);
  if (f->fclass == FI_CLASS_CNTR) m.c = cntr_from(f);
  return m;
}

bool is_member(const std::vector<member>& v, const fid* f) noexcept {
  return std::any_of(v.begin(), v.end(), [f](const member& m) { return m.f == f; });
}

void erase_member(std::vector<member>& v, const fid* f) noexcept {
  v.erase(std::remove_if(v.begin(), v.end(), [f](const member& m) { return m.f == f; }), v.end());
}

// ---- poll sets ----------------------------------------------------------------------------------

class pollset {
 public:
  fid_poll poll_fid{};  // first member
  fid_domain* domain = nullptr;
  core::level_lock lock;  // the members, at the threading levels that share objects
  std::vector<member> members;
  std::size_t next = 0;  // where the next fi_poll starts looking: after the last one reported
};

pollset& pollset_of(fid* f) noexcept { return from_fid<pollset>(f); }
pollset& pollset_of(fid_poll* f) noexcept { return from_fid<pollset>(&f->fid); }

// Members are looked at in turn, starting after the last one reported, until `count` contexts
// are found: a CQ the application does not read yet (it stays non-empty) cannot hide the members
// after it when the array has room for fewer than all (fi_poll(3): every member with events is
// returned, over successive calls).
int poll_poll(fid_poll* f, void** context, int count) noexcept {
  if (!context || count <= 0) return -FI_EINVAL;
  pollset& p = pollset_of(f);
  core::level_guard g(p.lock);
  const std::size_t size = p.members.size(), start = p.next;
  int n = 0;
  for (std::size_t k = 0; k < size && n < count; ++k) {
    const std::size_t i = (start + k) % size;
    if (p.members[i].ready(true)) {
      context[n++] = p.members[i].f->context;
      p.next = i + 1;
    }
  }
  return n;
}

int poll_add(fid_poll* f, fid* event_fid, uint64_t flags) noexcept {
  if (flags) return -FI_EBADFLAGS;
  pollset& p = pollset_of(f);
  const member m = member_of(event_fid);
  if (!m.q && !m.c) return -FI_EINVAL;  // CQs and counters only, and exanet's own
  if (m.domain() != p.domain) return -FI_EINVAL;
  return fi_guard([&]() -> int {
    core::level_guard g(p.lock);
    if (is_member(p.members, event_fid)) return -FI_EALREADY;
    p.members.push_back(m);
    m.hold(1);
    return 0;
  });
}

int poll_del(fid_poll* f, fid* event_fid, uint64_t flags) noexcept {
  if (flags) return -FI_EBADFLAGS;
  pollset& p = pollset_of(f);
  core::level_guard g(p.lock);
  if (!event_fid || !is_member(p.members, event_fid)) return -FI_ENOENT;
  erase_member(p.members, event_fid);
  p.next = 0;
  member_of(event_fid).hold(-1);
  return 0;
}

int poll_close(fid* f) noexcept {
  pollset& p = pollset_of(f);
  {
    core::level_guard g(p.lock);
    if (!p.members.empty()) return -FI_EBUSY;  // fi_poll(3): del every member first
  }
  domain_unref(p.domain);
  delete &p;
  return 0;
}

constinit fi_ops g_poll_fid_ops = {
    .size = sizeof(fi_ops),
    .close = &poll_close,
    .bind = enosys_ptr<decltype(fi_ops::bind)>,
    .control = enosys_ptr<decltype(fi_ops::control)>,
    .ops_open = enosys_ptr<decltype(fi_ops::ops_open)>,
    .tostr = enosys_ptr<decltype(fi_ops::tostr)>,
    .ops_set = enosys_ptr<decltype(fi_ops::ops_set)>,
};

constinit fi_ops_poll g_poll_ops = {
    .size = sizeof(fi_ops_poll),
    .poll = &poll_poll,
    .poll_add = &poll_add,
    .poll_del = &poll_del,
};

}  // namespace

int poll_open(fid_domain* domain, fi_poll_attr* attr, fid_poll** out) noexcept {
  if (!domain || !out) return -FI_EINVAL;
  if (attr && attr->flags) return -FI_EBADFLAGS;  // reserved: 0 (fi_poll(3))
  return fi_guard([&]() -> int {
    auto* p = new pollset;
    const fi_threading t = domain_threading(domain);
    p->lock.enable(t == FI_THREAD_SAFE || t == FI_THREAD_FID || t == FI_THREAD_ENDPOINT);
    p->poll_fid.fid.fclass = FI_CLASS_POLL;
    p->poll_fid.fid.ops = &g_poll_fid_ops;
    p->poll_fid.ops = &g_poll_ops;
    p->domain = domain;
    domain_ref(domain);
    *out = &p->poll_fid;
    return 0;
  });
}

// ---- wait sets ----------------------------------------------------------------------------------

class waitset {
 public:
  fid_wait wait_fid{};  // first member
  fid_fabric* fabric = nullptr;
  fi_wait_obj wait_obj = FI_WAIT_UNSPEC;
  // Members join when they open and leave when they close, possibly from other threads than a
  // waiter's: always locked (control path and waits only).
  core::level_lock lock;
  std::vector<member> members;
  wait_fd fd;                        // FI_GETWAIT
  std::atomic<bool> armed{false};    // fi_trywait said "block": signal the fd on the next event

  /// Progresses every member; true if one has events (counters' changes taken).
  bool any_ready() noexcept {
    core::level_guard g(lock);
    bool any = false;
    for (const member& m : members) any = m.ready(true) || any;  // all progress, all taken
    return any;
  }

  /// Sleeps until an arrival at a member's endpoints, a member's wake word, or min(left_ms,
  /// wait_sleep_max_ms); false if it could not (then the caller naps). The lock is held
  /// throughout, so no member closes under the sleep (a close waits at most one sleep).
  bool sleep_until_event(std::uint64_t left_ms) noexcept {
    core::level_guard g(lock);
    arrival_sleep sleep;
    std::size_t announced = 0;
    bool can_sleep = !members.empty();
    for (const member& m : members) {
      ++announced;
      if (!m.sleep_prepare(sleep)) {
        can_sleep = false;
        break;
      }
    }
    if (can_sleep &&
        std::none_of(members.begin(), members.end(), [](const member& m) { return m.has_events(); }))
      sleep.sleep(static_cast<unsigned>(std::min<std::uint64_t>(left_ms, wait_sleep_max_ms)));
    sleep.release();
    for (std::size_t i = 0; i < announced; ++i) members[i].sleep_end();
    return can_sleep;
  }
};

namespace {

waitset& waitset_of(fid* f) noexcept { return from_fid<waitset>(f); }

// fi_wait: under manual progress nothing completes while a thread sleeps, so waiting is
// progressing every member until one has events; idle, it sleeps as fi_cq_sread does (fi/wait.hpp,
// wait_idle), on every member's wake word and endpoints at once, and naps only when they are too
// many to watch or one has work it must poll for.
int wait_wait(fid_wait* f, int timeout) noexcept {
  waitset& w = waitset_of(&f->fid);
  const std::uint64_t deadline = timeout < 0 ? UINT64_MAX : now_ms() + std::uint64_t(timeout);
  unsigned round = 0;
  for (;;) {
    if (w.any_ready()) {
      w.fd.drain();
      return 0;
    }
    const std::uint64_t now = now_ms();
    if (now >= deadline) return -FI_ETIMEDOUT;
    if (w.wait_obj == FI_WAIT_YIELD) {
      sched_yield();
    } else if (round < spin_rounds || !w.sleep_until_event(deadline - now)) {
      idle_backoff(round);
    }
  }
}

int wait_close(fid* f) noexcept {
  waitset& w = waitset_of(f);
  {
    core::level_guard g(w.lock);
    if (!w.members.empty()) return -FI_EBUSY;  // its CQs and counters close first
  }
  fabric_unref(w.fabric);
  delete &w;
  return 0;
}

int wait_control(fid* f, int command, void* arg) noexcept {
  waitset& w = waitset_of(f);
  return getwait(w.wait_obj, w.fd, command, arg);
}

constinit fi_ops g_wait_fid_ops = {
    .size = sizeof(fi_ops),
    .close = &wait_close,
    .bind = enosys_ptr<decltype(fi_ops::bind)>,
    .control = &wait_control,
    .ops_open = enosys_ptr<decltype(fi_ops::ops_open)>,
    .tostr = enosys_ptr<decltype(fi_ops::tostr)>,
    .ops_set = enosys_ptr<decltype(fi_ops::ops_set)>,
};

constinit fi_ops_wait g_wait_ops = {
    .size = sizeof(fi_ops_wait),
    .wait = &wait_wait,
};

}  // namespace

int wait_open(fid_fabric* fabric, fi_wait_attr* attr, fid_wait** out) noexcept {
  if (!fabric || !attr || !out) return -FI_EINVAL;
  if (attr->flags) return -FI_EBADFLAGS;
  switch (attr->wait_obj) {
    case FI_WAIT_UNSPEC: case FI_WAIT_FD: case FI_WAIT_YIELD:
      break;
    default:
      return -FI_ENOSYS;  // mutex/cond and pollfd wait sets are not offered (fi_exanet(7))
  }
  return fi_guard([&]() -> int {
    auto* w = new waitset;
    w->wait_obj = attr->wait_obj;
    w->lock.enable(true);
    if (w->wait_obj == FI_WAIT_FD && w->fd.open() != 0) {
      delete w;
      return -FI_EMFILE;
    }
    w->wait_fid.fid.fclass = FI_CLASS_WAIT;
    w->wait_fid.fid.ops = &g_wait_fid_ops;
    w->wait_fid.ops = &g_wait_ops;
    w->fabric = fabric;
    fabric_ref(fabric);
    *out = &w->wait_fid;
    return 0;
  });
}

waitset* waitset_from(fid* w) noexcept {
  if (!w || w->fclass != FI_CLASS_WAIT || w->ops != &g_wait_fid_ops) return nullptr;
  return &waitset_of(w);
}

int waitset_join(waitset& s, fid* f) noexcept {
  return fi_guard([&]() -> int {
    core::level_guard g(s.lock);
    s.members.push_back(member_of(f));  // the CQ or counter is complete when it joins
    return 0;
  });
}

void waitset_leave(waitset& s, fid* f) noexcept {
  core::level_guard g(s.lock);
  erase_member(s.members, f);
}

void waitset_signal(waitset& s) noexcept {
  if (s.armed.load(std::memory_order_relaxed) && s.armed.exchange(false, std::memory_order_acq_rel))
    s.fd.signal();
}

int waitset_trywait(waitset& s) noexcept {
  s.fd.drain();
  s.armed.store(true, std::memory_order_release);
  const auto again = [&s]() noexcept {
    s.armed.store(false, std::memory_order_release);
    return -FI_EAGAIN;
  };
  // Counters' changes are not taken here: fi_trywait only says whether blocking is safe.
  core::level_guard g(s.lock);
  s.fd.end_watch();  // before the members progress: their endpoints' announcements go first
  for (const member& m : s.members)
    if (m.ready(false)) return again();
  // Nothing yet: under manual progress an arrival at a member's endpoints must ready the fd.
  // More members than the fd can watch: the application reads instead of blocking.
  std::array<progress_list*, 16> lists{};
  if (s.members.size() > lists.size()) return again();
  for (std::size_t i = 0; i < s.members.size(); ++i) lists[i] = &s.members[i].sources();
  if (!s.fd.watch_arrivals(std::span(lists.data(), s.members.size()))) return again();
  return 0;
}

void waitset_end_watch(waitset& s) noexcept { s.fd.end_watch_waking(); }

}  // namespace exanet::fi
