// SPDX-License-Identifier: BSD-2-Clause
#include "fi/cq.hpp"

#include <rdma/fi_errno.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>

#include "core/lock.hpp"
#include "core/log.hpp"
#include "dev/device.hpp"
#include "fi/domain.hpp"
#include "fi/enosys.hpp"
#include "fi/poll.hpp"
#include "fi/wait.hpp"

namespace exanet::fi {

class cq {
 public:
  fid_cq cq_fid{};  // first member
  fid_domain* domain = nullptr;
  fi_cq_format format = FI_CQ_FORMAT_CONTEXT;
  fi_wait_obj wait_obj = FI_WAIT_NONE;
  proto::completion_ring entries;     // written inline by the endpoints bound to it
  progress_list sources;
  std::atomic<bool> signaled{false};  // fi_cq_signal: wake one sread
  std::atomic<bool> armed{false};     // fi_trywait said "block": signal the fd on the next write
  wait_fd fd;
  wake_word waker;                    // fi_cq_sread asleep (fi/wait.hpp): woken by push, signal
  waitset* ws = nullptr;              // FI_WAIT_SET: the set this CQ belongs to
  std::atomic<int> set_refs{0};       // poll sets holding it
  bool progress_skipped = false;      // the last read returned entries without progressing

  // The application is back: an fi_trywait's watch over the endpoints ends (one load if none).
  void progress() noexcept {
    fd.end_watch();
    sources.progress();
  }

  // The ring calls this after a push while someone watches it: a sleeper (counted in by the
  // wake word), an fd fi_trywait armed (counted in while armed), a wait set (for the CQ's life).
  // Outside the ring's lock: the ring decided under it that someone watches, and a sleeper
  // takes its wake word's snapshot before its last look under that lock, so the wake that
  // follows here is not lost.
  static void pushed(void* self) noexcept {
    cq& q = *static_cast<cq*>(self);
    q.waker.wake();
    if (q.armed.load(std::memory_order_relaxed) &&
        q.armed.exchange(false, std::memory_order_acq_rel)) {
      q.entries.unwatch();
      q.fd.signal();
    }
    if (q.ws) waitset_signal(*q.ws);
  }
  // fi_trywait's arming and disarming; each change of armed counts the ring's watch once.
  void arm() noexcept {
    if (!armed.exchange(true, std::memory_order_acq_rel)) entries.watch();
  }
  void disarm() noexcept {
    if (armed.exchange(false, std::memory_order_acq_rel)) entries.unwatch();
  }
};

namespace {

cq& cq_of(fid* f) noexcept { return from_fid<cq>(f); }
cq& cq_of(fid_cq* f) noexcept { return from_fid<cq>(&f->fid); }

// The entry layout of each format, filled from a completion. The CQ's read calls are
// instantiated per format, so reading an entry costs no switch.
template <fi_cq_format F> struct entry_of;
template <> struct entry_of<FI_CQ_FORMAT_CONTEXT> {
  using type = fi_cq_entry;
  static type make(const proto::completion& c) noexcept { return {c.context}; }
};
template <> struct entry_of<FI_CQ_FORMAT_MSG> {
  using type = fi_cq_msg_entry;
  static type make(const proto::completion& c) noexcept { return {c.context, c.flags, c.len}; }
};
template <> struct entry_of<FI_CQ_FORMAT_DATA> {
  using type = fi_cq_data_entry;
  static type make(const proto::completion& c) noexcept {
    return {c.context, c.flags, c.len, c.buf, c.data};
  }
};
template <> struct entry_of<FI_CQ_FORMAT_TAGGED> {
  using type = fi_cq_tagged_entry;
  static type make(const proto::completion& c) noexcept {
    return {c.context, c.flags, c.len, c.buf, c.data, c.tag};
  }
};

template <fi_cq_format F>
[[gnu::noinline]] ssize_t take_entries(cq& q, void* buf, size_t count, fi_addr_t* src) noexcept {
  proto::completion_ring& r = q.entries;
  core::level_guard g(r.lock());
  if (r.size() == 0) return -FI_EAGAIN;
  if (r.front().err != 0) [[unlikely]] return -FI_EAVAIL;  // errors wait their turn, in order
  auto* out = static_cast<typename entry_of<F>::type*>(buf);
  size_t n = 0;
  do {
    const proto::completion& c = r.front();
    out[n] = entry_of<F>::make(c);
    if (src) src[n] = c.src;
    r.pop();
    ++n;
  } while (n < count && r.size() > 0 && r.front().err == 0);
  if (r.size() == 0 && q.fd.fd() >= 0) q.fd.drain();
  return static_cast<ssize_t>(n);
}

template <fi_cq_format F>
ssize_t read_entries(cq& q, void* buf, size_t count, fi_addr_t* src) noexcept {
  // Completions ready are returned before any progress: over the network backend a progress
  // call costs the lower provider's (tcp: an epoll_wait system call, 1.5-2 us on the
  // benchmark VM), which a ping-pong paid on every message between its completion's arrival
  // and the application's read (measured with timestamps: 2.0-2.5 us from the lower
  // completion to the application's, 0.19 us without it). But never twice in a row: an
  // application whose own calls put an entry there before each read (a peek loop answered
  // FI_ENOMSG at once) must still let the message it waits for in. Without a lock at this
  // threading level the count is only ever changed by this same caller; with one, every read
  // progresses as before. Nor while a device holds packets for its next poll (a burst over the
  // network backend, dev::held_for_poll): the entries may be the completions of their messages,
  // and an application that has them may stop calling us.
  if (q.entries.lock().enabled() || q.entries.size() == 0 || q.progress_skipped ||
      dev::held_for_poll.load(std::memory_order_relaxed) != 0) {
    q.progress();
    q.progress_skipped = false;
  } else {
    q.progress_skipped = true;
  }
  // A poll that finds nothing, the common case of a waiting application, returns here. Without
  // a lock at this threading level the count is only ever changed by this same caller.
  if (!q.entries.lock().enabled() && q.entries.size() == 0) return -FI_EAGAIN;
  return take_entries<F>(q, buf, count, src);
}

template <fi_cq_format F>
ssize_t cq_read(fid_cq* f, void* buf, size_t count) noexcept {
  if (count == 0) [[unlikely]] {  // fi_cq_read(cq, NULL, 0): progress only (fabtests use it so)
    cq_of(f).progress();
    return -FI_EAGAIN;
  }
  if (!buf) [[unlikely]] return -FI_EINVAL;
  return read_entries<F>(cq_of(f), buf, count, nullptr);
}

template <fi_cq_format F>
ssize_t cq_readfrom(fid_cq* f, void* buf, size_t count, fi_addr_t* src) noexcept {
  if (count == 0) [[unlikely]] {
    cq_of(f).progress();
    return -FI_EAGAIN;
  }
  if (!buf || !src) [[unlikely]] return -FI_EINVAL;
  return read_entries<F>(cq_of(f), buf, count, src);
}

ssize_t cq_readerr(fid_cq* f, fi_cq_err_entry* e, uint64_t flags) noexcept {
  cq& q = cq_of(f);
  if (!e || flags) return -FI_EINVAL;
  core::level_guard g(q.entries.lock());
  if (q.entries.size() == 0 || q.entries.front().err == 0) return -FI_EAGAIN;
  const proto::completion& c = q.entries.front();
  // API >= 1.5 lets the caller supply err_data; exanet has no provider-specific error data, so
  // the size reported back is 0 either way.
  void* err_data = e->err_data && e->err_data_size > 0 ? e->err_data : nullptr;
  e->op_context = c.context;
  e->flags = c.flags;
  e->len = c.len;
  e->buf = c.buf;
  e->data = c.data;
  e->tag = c.tag;
  e->olen = c.olen;
  e->err = c.err;
  e->prov_errno = c.prov_errno;
  e->err_data = err_data;
  e->err_data_size = 0;
  // What an application that aborts on an error completion prints seldom says which it was.
  EXANET_LOG(info, cq, "error completion read: %s (err %d), flags 0x%llx, len %zu, context %p",
             fi_strerror(c.err), c.err, static_cast<unsigned long long>(c.flags), c.len, c.context);
  q.entries.pop();
  return 1;
}

template <fi_cq_format F>
ssize_t cq_sreadfrom(fid_cq* f, void* buf, size_t count, fi_addr_t* src, const void* cond,
                     int timeout) noexcept {
  cq& q = cq_of(f);
  if (q.wait_obj == FI_WAIT_NONE) return -FI_ENOSYS;
  // A FI_CQ_COND_THRESHOLD is treated as 1: fi_cq(3) lets a provider return early.
  (void)cond;
  const std::uint64_t deadline = timeout < 0 ? UINT64_MAX : now_ms() + std::uint64_t(timeout);
  unsigned round = 0;
  for (;;) {
    const ssize_t r = read_entries<F>(q, buf, count, src);
    if (r != -FI_EAGAIN) return r;
    if (q.signaled.exchange(false, std::memory_order_acq_rel)) return -FI_EAGAIN;
    if (now_ms() >= deadline) return -FI_EAGAIN;
    wait_idle(q.sources, q.waker, round, deadline, [&q]() noexcept { return cq_has_entries(q); });
  }
}

template <fi_cq_format F>
ssize_t cq_sread(fid_cq* f, void* buf, size_t count, const void* cond, int timeout) noexcept {
  return cq_sreadfrom<F>(f, buf, count, nullptr, cond, timeout);
}

int cq_signal(fid_cq* f) noexcept {
  cq& q = cq_of(f);
  q.signaled.store(true, std::memory_order_seq_cst);
  q.waker.wake();
  q.fd.signal();
  if (q.ws) waitset_signal(*q.ws);
  return 0;
}

const char* cq_strerror(fid_cq*, int prov_errno, const void*, char* buf, size_t len) noexcept {
  return strerror_into(prov_errno, buf, len);
}

int cq_close(fid* f) noexcept {
  cq& q = cq_of(f);
  if (!q.sources.empty() || q.set_refs.load(std::memory_order_acquire) > 0) return -FI_EBUSY;
  if (q.ws) waitset_leave(*q.ws, &q.cq_fid.fid);
  domain_unref(q.domain);
  delete &q;
  return 0;
}

int cq_control(fid* f, int command, void* arg) noexcept {
  cq& q = cq_of(f);
  return getwait(q.wait_obj, q.fd, command, arg);
}

constinit fi_ops g_cq_fid_ops = {
    .size = sizeof(fi_ops),
    .close = &cq_close,
    .bind = enosys_ptr<decltype(fi_ops::bind)>,
    .control = &cq_control,
    .ops_open = enosys_ptr<decltype(fi_ops::ops_open)>,
    .tostr = enosys_ptr<decltype(fi_ops::tostr)>,
    .ops_set = enosys_ptr<decltype(fi_ops::ops_set)>,
};

template <fi_cq_format F>
constinit fi_ops_cq g_cq_ops = {
    .size = sizeof(fi_ops_cq),
    .read = &cq_read<F>,
    .readfrom = &cq_readfrom<F>,
    .readerr = &cq_readerr,
    .sread = &cq_sread<F>,
    .sreadfrom = &cq_sreadfrom<F>,
    .signal = &cq_signal,
    .strerror = &cq_strerror,
};

fi_ops_cq* ops_for(fi_cq_format f) noexcept {
  switch (f) {
    case FI_CQ_FORMAT_MSG: return &g_cq_ops<FI_CQ_FORMAT_MSG>;
    case FI_CQ_FORMAT_DATA: return &g_cq_ops<FI_CQ_FORMAT_DATA>;
    case FI_CQ_FORMAT_TAGGED: return &g_cq_ops<FI_CQ_FORMAT_TAGGED>;
    default: return &g_cq_ops<FI_CQ_FORMAT_CONTEXT>;
  }
}

}  // namespace

int cq_open(fid_domain* domain, fi_cq_attr* attr, fid_cq** out, void* context) noexcept {
  if (!domain || !attr || !out) return -FI_EINVAL;
  switch (attr->format) {
    case FI_CQ_FORMAT_UNSPEC: case FI_CQ_FORMAT_CONTEXT: case FI_CQ_FORMAT_MSG:
    case FI_CQ_FORMAT_DATA: case FI_CQ_FORMAT_TAGGED:
      break;
    default:
      return -FI_ENOSYS;
  }
  waitset* set = nullptr;
  switch (attr->wait_obj) {
    case FI_WAIT_NONE: case FI_WAIT_UNSPEC: case FI_WAIT_FD: case FI_WAIT_YIELD:
      break;
    case FI_WAIT_SET:
      set = attr->wait_set ? waitset_from(&attr->wait_set->fid) : nullptr;
      if (!set) return -FI_EINVAL;
      break;
    default:
      return -FI_ENOSYS;  // mutex/cond and pollfd waits are not offered
  }
  if (attr->flags & ~static_cast<std::uint64_t>(FI_AFFINITY)) return -FI_EBADFLAGS;
  return fi_guard([&]() -> int {
    auto* q = new cq;
    q->format = attr->format == FI_CQ_FORMAT_UNSPEC ? FI_CQ_FORMAT_CONTEXT : attr->format;
    attr->format = q->format;
    q->wait_obj = attr->wait_obj;
    // The levels below FI_THREAD_FID promise that one thread at a time uses the CQ together with
    // everything that writes it.
    const fi_threading t = domain_threading(domain);
    const bool locked = t == FI_THREAD_SAFE || t == FI_THREAD_FID || t == FI_THREAD_ENDPOINT;
    q->entries.enable_lock(locked);
    q->sources.enable_lock(locked);
    // A power of two (beyond 2^62 the allocation throws: -FI_ENOMEM, as for any oversized ring).
    const std::size_t asked = attr->size ? attr->size : 1024;
    q->entries.reserve(std::min<std::size_t>(asked, std::size_t{1} << 62));
    q->entries.set_hook(q, &cq::pushed);
    q->waker.count_also(&q->entries.watchers());
    q->cq_fid.fid.fclass = FI_CLASS_CQ;
    q->cq_fid.fid.context = context;
    q->cq_fid.fid.ops = &g_cq_fid_ops;
    q->cq_fid.ops = ops_for(q->format);
    if (q->wait_obj == FI_WAIT_FD && q->fd.open() != 0) {
      delete q;
      return -FI_EMFILE;
    }
    if (set) {
      if (int rc = waitset_join(*set, &q->cq_fid.fid); rc != 0) {
        delete q;
        return rc;
      }
      q->ws = set;
      q->entries.watch();  // every push signals the set
    }
    q->domain = domain;
    domain_ref(domain);
    *out = &q->cq_fid;
    return 0;
  });
}

cq* cq_from(fid* f) noexcept {
  if (!f || f->fclass != FI_CLASS_CQ || f->ops != &g_cq_fid_ops) return nullptr;
  return &cq_of(f);
}

proto::completion_sink cq_sink(cq& q) noexcept { return {&q.entries}; }

void cq_attach(cq& q, progress_source src) { q.sources.attach(src); }
void cq_detach(cq& q, progress_source src) noexcept { q.sources.detach(src); }

bool cq_progress_ready(cq& q) noexcept {
  q.progress();
  {
    core::level_guard g(q.entries.lock());
    if (q.entries.size() > 0) return true;
  }
  return q.signaled.exchange(false, std::memory_order_acq_rel);
}

bool cq_sleep_prepare(cq& q, arrival_sleep& s) noexcept {
  q.waker.announce();
  return s.add(q.waker.watch()) && q.sources.prepare_sleep(s);
}
void cq_sleep_end(cq& q) noexcept { q.waker.withdraw(); }
bool cq_has_entries(cq& q) noexcept {
  {
    core::level_guard g(q.entries.lock());
    if (q.entries.size() > 0) return true;
  }
  return q.signaled.load(std::memory_order_seq_cst);
}

fid_domain* cq_domain(const cq& q) noexcept { return q.domain; }
bool cq_may_sleep(const cq& q) noexcept { return q.wait_obj != FI_WAIT_NONE; }
void cq_set_ref(cq& q, int delta) noexcept { q.set_refs.fetch_add(delta, std::memory_order_acq_rel); }

int cq_trywait(cq& q) noexcept {
  q.progress();
  // What the fd holds was for completions already looked at: a push from here on signals anew.
  q.fd.drain();
  // Armed (and counted in at the ring) before the locked look: a push after the look calls
  // cq::pushed, which signals the fd; one before it is seen here.
  q.arm();
  {
    core::level_guard g(q.entries.lock());
    if (q.entries.size() > 0) {
      q.disarm();
      return -FI_EAGAIN;
    }
  }
  // Nothing here yet: under manual progress an arrival must ready the fd by itself.
  progress_list* const lists[] = {&q.sources};
  if (!q.fd.watch_arrivals(lists)) {
    q.disarm();
    return -FI_EAGAIN;
  }
  return 0;
}

void cq_end_watch(cq& q) noexcept {
  q.fd.end_watch_waking();
  if (q.ws) waitset_end_watch(*q.ws);
}
progress_list& cq_sources(cq& q) noexcept { return q.sources; }

}  // namespace exanet::fi
