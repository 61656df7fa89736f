// SPDX-License-Identifier: BSD-2-Clause
#include "fi/cntr.hpp"

#include <rdma/fi_errno.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "core/lock.hpp"
#include "fi/domain.hpp"
#include "fi/enosys.hpp"
#include "fi/poll.hpp"
#include "fi/wait.hpp"

namespace exanet::fi {

class cntr {
 public:
  fid_cntr cntr_fid{};  // first member
  fid_domain* domain = nullptr;
  fi_wait_obj wait_obj = FI_WAIT_NONE;
  std::atomic<std::uint64_t> value{0};
  std::atomic<std::uint64_t> errors{0};
  progress_list sources;
  wait_fd fd;
  wake_word waker;  // fi_cntr_wait asleep (fi/wait.hpp)
  // fi_poll(3): a counter has events while its counts differ from the checkpoint, which fi_poll,
  // fi_wait (exanet: either takes what it reports), fi_cntr_set and fi_cntr_add move.
  std::atomic<std::uint64_t> seen_value{0};
  std::atomic<std::uint64_t> seen_errors{0};
  // fi_trywait's own checkpoint (not fi_poll's, which fi_trywait must not move): the counts the
  // last fi_trywait saw. A change since then may have come inside that call's progress, after
  // the application last read, with the fd's signal drained by the same call.
  std::atomic<std::uint64_t> trywait_value{0}, trywait_errors{0};
  waitset* ws = nullptr;         // FI_WAIT_SET: the set this counter belongs to
  std::atomic<int> set_refs{0};  // poll sets holding it

  // The application is back: an fi_trywait's watch over the endpoints ends (one load if none).
  void progress() noexcept {
    fd.end_watch();
    sources.progress();
  }
  void checkpoint_at(std::uint64_t v, std::uint64_t e) noexcept {
    seen_value.store(v, std::memory_order_release);
    seen_errors.store(e, std::memory_order_release);
  }
  void checkpoint() noexcept {
    checkpoint_at(value.load(std::memory_order_acquire), errors.load(std::memory_order_acquire));
  }
  void signal() noexcept {
    // Callers changed a count with a sequentially consistent operation: a sleeping wait's last
    // look saw it, or we see the sleeper.
    waker.wake();
    fd.signal();
    if (ws) [[unlikely]] waitset_signal(*ws);
  }
};

namespace {

cntr& cntr_of(fid* f) noexcept { return from_fid<cntr>(f); }
cntr& cntr_of(fid_cntr* f) noexcept { return from_fid<cntr>(&f->fid); }

uint64_t cntr_read(fid_cntr* f) noexcept {
  cntr& c = cntr_of(f);
  c.progress();
  return c.value.load(std::memory_order_acquire);
}

uint64_t cntr_readerr(fid_cntr* f) noexcept {
  cntr& c = cntr_of(f);
  c.progress();
  return c.errors.load(std::memory_order_acquire);
}

int cntr_add(fid_cntr* f, uint64_t v) noexcept {
  cntr& c = cntr_of(f);
  c.value.fetch_add(v, std::memory_order_seq_cst);
  c.checkpoint();
  c.signal();
  return 0;
}

int cntr_set(fid_cntr* f, uint64_t v) noexcept {
  cntr& c = cntr_of(f);
  c.value.store(v, std::memory_order_seq_cst);
  c.checkpoint();
  c.signal();
  return 0;
}

int cntr_adderr(fid_cntr* f, uint64_t v) noexcept {
  cntr& c = cntr_of(f);
  c.errors.fetch_add(v, std::memory_order_seq_cst);
  c.checkpoint();
  c.signal();
  return 0;
}

int cntr_seterr(fid_cntr* f, uint64_t v) noexcept {
  cntr& c = cntr_of(f);
  c.errors.store(v, std::memory_order_seq_cst);
  c.checkpoint();
  c.signal();
  return 0;
}

// fi_cntr_wait: returns once the count reaches threshold; an error counted meanwhile ends the
// wait with -FI_EAVAIL (fi_cntr(3)), and the timeout with -FI_ETIMEDOUT. fi_cntr(3) calls it
// invalid on an FI_WAIT_NONE counter; programs do it anyway (upstream fabtests' fi_multi_mr),
// and since the wait is a progress loop here whatever the wait object, they get what they meant.
int cntr_wait(fid_cntr* f, uint64_t threshold, int timeout) noexcept {
  cntr& c = cntr_of(f);
  const std::uint64_t errors_before = c.errors.load(std::memory_order_acquire);
  const std::uint64_t deadline = timeout < 0 ? UINT64_MAX : now_ms() + std::uint64_t(timeout);
  unsigned round = 0;
  for (;;) {
    c.progress();
    if (c.value.load(std::memory_order_acquire) >= threshold) return 0;
    if (c.errors.load(std::memory_order_acquire) != errors_before) return -FI_EAVAIL;
    if (now_ms() >= deadline) return -FI_ETIMEDOUT;
    wait_idle(c.sources, c.waker, round, deadline, [&]() noexcept {
      return c.value.load(std::memory_order_seq_cst) >= threshold ||
             c.errors.load(std::memory_order_seq_cst) != errors_before;
    });
  }
}

int cntr_close(fid* f) noexcept {
  cntr& c = cntr_of(f);
  if (!c.sources.empty() || c.set_refs.load(std::memory_order_acquire) > 0) return -FI_EBUSY;
  if (c.ws) waitset_leave(*c.ws, &c.cntr_fid.fid);
  domain_unref(c.domain);
  delete &c;
  return 0;
}

int cntr_control(fid* f, int command, void* arg) noexcept {
  cntr& c = cntr_of(f);
  return getwait(c.wait_obj, c.fd, command, arg);
}

constinit fi_ops g_cntr_fid_ops = {
    .size = sizeof(fi_ops),
    .close = &cntr_close,
    .bind = enosys_ptr<decltype(fi_ops::bind)>,
    .control = &cntr_control,
    .ops_open = enosys_ptr<decltype(fi_ops::ops_open)>,
    .tostr = enosys_ptr<decltype(fi_ops::tostr)>,
    .ops_set = enosys_ptr<decltype(fi_ops::ops_set)>,
};

constinit fi_ops_cntr g_cntr_ops = {
    .size = sizeof(fi_ops_cntr),
    .read = &cntr_read,
    .readerr = &cntr_readerr,
    .add = &cntr_add,
    .set = &cntr_set,
    .wait = &cntr_wait,
    .adderr = &cntr_adderr,
    .seterr = &cntr_seterr,
};

void count_event(void* self, bool error) noexcept {
  auto& c = *static_cast<cntr*>(self);
  (error ? c.errors : c.value).fetch_add(1, std::memory_order_seq_cst);
  c.signal();
}

}  // namespace

int cntr_open(fid_domain* domain, fi_cntr_attr* attr, fid_cntr** out, void* context) noexcept {
  if (!domain || !out) return -FI_EINVAL;
  fi_cntr_attr defaults{};
  defaults.events = FI_CNTR_EVENTS_COMP;
  defaults.wait_obj = FI_WAIT_UNSPEC;
  const fi_cntr_attr& a = attr ? *attr : defaults;
  if (a.events != FI_CNTR_EVENTS_COMP) return -FI_ENOSYS;
  waitset* set = nullptr;
  switch (a.wait_obj) {
    case FI_WAIT_NONE: case FI_WAIT_UNSPEC: case FI_WAIT_FD: case FI_WAIT_YIELD:
      break;
    case FI_WAIT_SET:
      set = a.wait_set ? waitset_from(&a.wait_set->fid) : nullptr;
      if (!set) return -FI_EINVAL;
      break;
    default:
      return -FI_ENOSYS;
  }
  if (a.flags) return -FI_EBADFLAGS;
  return fi_guard([&]() -> int {
    auto* c = new cntr;
    c->wait_obj = a.wait_obj;
    const fi_threading t = domain_threading(domain);
    c->sources.enable_lock(t == FI_THREAD_SAFE || t == FI_THREAD_FID || t == FI_THREAD_ENDPOINT);
    c->cntr_fid.fid.fclass = FI_CLASS_CNTR;
    c->cntr_fid.fid.context = context;
    c->cntr_fid.fid.ops = &g_cntr_fid_ops;
    c->cntr_fid.ops = &g_cntr_ops;
    if (set) {
      if (int rc = waitset_join(*set, &c->cntr_fid.fid); rc != 0) {
        delete c;
        return rc;
      }
      c->ws = set;
    }
    c->domain = domain;
    domain_ref(domain);
    *out = &c->cntr_fid;
    return 0;
  });
}

cntr* cntr_from(fid* f) noexcept {
  if (!f || f->fclass != FI_CLASS_CNTR || f->ops != &g_cntr_fid_ops) return nullptr;
  return &cntr_of(f);
}

proto::counter_sink cntr_sink(cntr& c) noexcept { return {&c, &count_event}; }

void cntr_attach(cntr& c, progress_source src) { c.sources.attach(src); }
void cntr_detach(cntr& c, progress_source src) noexcept { c.sources.detach(src); }

bool cntr_progress_changed(cntr& c, bool take) noexcept {
  c.progress();
  const std::uint64_t v = c.value.load(std::memory_order_acquire);
  const std::uint64_t e = c.errors.load(std::memory_order_acquire);
  const bool changed = v != c.seen_value.load(std::memory_order_acquire) ||
                       e != c.seen_errors.load(std::memory_order_acquire);
  if (changed && take) c.checkpoint_at(v, e);
  return changed;
}

bool cntr_sleep_prepare(cntr& c, arrival_sleep& s) noexcept {
  c.waker.announce();
  return s.add(c.waker.watch()) && c.sources.prepare_sleep(s);
}
void cntr_sleep_end(cntr& c) noexcept { c.waker.withdraw(); }
bool cntr_changed(cntr& c) noexcept {
  return c.value.load(std::memory_order_seq_cst) != c.seen_value.load(std::memory_order_acquire) ||
         c.errors.load(std::memory_order_seq_cst) != c.seen_errors.load(std::memory_order_acquire);
}

fid_domain* cntr_domain(const cntr& c) noexcept { return c.domain; }
void cntr_set_ref(cntr& c, int delta) noexcept { c.set_refs.fetch_add(delta, std::memory_order_acq_rel); }

int cntr_trywait(cntr& c) noexcept {
  c.progress();
  c.fd.drain();
  // A counter has no "threshold reached" state of its own: the caller checks its value. But a
  // count that moved since the last fi_trywait may have moved inside this one (its progress
  // took the arrival, and the drain above its signal), after the caller last looked: blocking
  // then waits for an event that has come. So, as fi_poll does for counters, a change is
  // "something available" once: -FI_EAGAIN, and the caller looks again. Loaded after the
  // drain: a change made after this load signals the fd anew.
  const std::uint64_t v = c.value.load(std::memory_order_seq_cst);
  const std::uint64_t e = c.errors.load(std::memory_order_seq_cst);
  // Both exchanged (no short circuit): the checkpoint moves to what this call saw.
  const bool moved = (c.trywait_value.exchange(v, std::memory_order_acq_rel) != v) |
                     (c.trywait_errors.exchange(e, std::memory_order_acq_rel) != e);
  if (moved) return -FI_EAGAIN;
  // Under manual progress an arrival must ready the fd by itself.
  progress_list* const lists[] = {&c.sources};
  return c.fd.watch_arrivals(lists) ? 0 : -FI_EAGAIN;
}

void cntr_end_watch(cntr& c) noexcept {
  c.fd.end_watch_waking();
  if (c.ws) waitset_end_watch(*c.ws);
}
progress_list& cntr_sources(cntr& c) noexcept { return c.sources; }

}  // namespace exanet::fi
