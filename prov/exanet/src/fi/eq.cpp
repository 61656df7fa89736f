// SPDX-License-Identifier: BSD-2-Clause
#include "fi/eq.hpp"

#include <rdma/fi_errno.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <vector>

#include "fi/common.hpp"
#include "fi/enosys.hpp"
#include "fi/wait.hpp"

namespace exanet::fi {

class eq {
 public:
  fid_eq eq_fid{};  // first member
  fi_wait_obj wait_obj = FI_WAIT_NONE;
  std::size_t capacity = 256;
  struct event {
    std::uint32_t type;
    std::vector<std::byte> data;
    bool error = false;  // read with fi_eq_readerr: fi_eq_read answers -FI_EAVAIL at it
    fi_eq_err_entry err{};
  };
  std::mutex lock;  // the control path: always locked, whatever the threading level
  std::deque<event> events;
  // fi_eq_sread sleeps here. Every event is written by a thread of this process (fi_eq_write,
  // an AV insert with FI_EVENT): no peer and no progress is involved, so the writer wakes it.
  std::condition_variable written;
  wait_fd fd;
};

namespace {

eq& eq_of(fid* f) noexcept { return from_fid<eq>(f); }
eq& eq_of(fid_eq* f) noexcept { return from_fid<eq>(&f->fid); }

ssize_t eq_read(fid_eq* f, uint32_t* event, void* buf, size_t len, uint64_t flags) noexcept {
  eq& q = eq_of(f);
  if (flags & ~static_cast<std::uint64_t>(FI_PEEK)) return -FI_EBADFLAGS;
  std::lock_guard g(q.lock);
  if (q.events.empty()) return -FI_EAGAIN;
  const eq::event& e = q.events.front();
  if (e.error) return -FI_EAVAIL;
  if (len < e.data.size() || (e.data.size() && !buf)) return -FI_ETOOSMALL;
  if (event) *event = e.type;
  if (e.data.size()) std::memcpy(buf, e.data.data(), e.data.size());
  const auto n = static_cast<ssize_t>(e.data.size());
  if (!(flags & FI_PEEK)) q.events.pop_front();
  if (q.events.empty()) q.fd.drain();
  return n;
}

// The asynchronous errors are those of AV inserts with FI_EVENT: one per address that failed,
// ahead of the insert's FI_AV_COMPLETE (fi_av(3)).
ssize_t eq_readerr(fid_eq* f, fi_eq_err_entry* buf, uint64_t flags) noexcept {
  if (!buf) return -FI_EINVAL;
  if (flags & ~static_cast<std::uint64_t>(FI_PEEK)) return -FI_EBADFLAGS;
  eq& q = eq_of(f);
  std::lock_guard g(q.lock);
  if (q.events.empty() || !q.events.front().error) return -FI_EAGAIN;
  *buf = q.events.front().err;
  if (!(flags & FI_PEEK)) q.events.pop_front();
  if (q.events.empty()) q.fd.drain();
  return sizeof *buf;
}

ssize_t eq_write(fid_eq* f, uint32_t event, const void* buf, size_t len, uint64_t flags) noexcept {
  return eq_write_event(eq_of(f), event, buf, len, flags);
}

ssize_t eq_sread(fid_eq* f, uint32_t* event, void* buf, size_t len, int timeout,
                 uint64_t flags) noexcept {
  eq& q = eq_of(f);
  if (q.wait_obj == FI_WAIT_NONE) return -FI_ENOSYS;
  using clock = std::chrono::steady_clock;
  const clock::time_point deadline = clock::now() + std::chrono::milliseconds(timeout);
  for (;;) {
    const ssize_t r = eq_read(f, event, buf, len, flags);
    if (r != -FI_EAGAIN) return r;
    std::unique_lock l(q.lock);
    if (!q.events.empty()) continue;  // written between the read and the lock
    if (timeout < 0) {
      q.written.wait(l);
    } else if (q.written.wait_until(l, deadline) == std::cv_status::timeout) {
      if (q.events.empty()) return -FI_EAGAIN;
    }
  }
}

const char* eq_strerror(fid_eq*, int prov_errno, const void*, char* buf, size_t len) noexcept {
  return strerror_into(prov_errno, buf, len);
}

int eq_close(fid* f) noexcept {
  delete &eq_of(f);
  return 0;
}

int eq_control(fid* f, int command, void* arg) noexcept {
  eq& q = eq_of(f);
  std::lock_guard g(q.lock);
  const int rc = getwait(q.wait_obj, q.fd, command, arg);
  if (rc == 0 && !q.events.empty()) q.fd.signal();  // events written before the fd existed
  return rc;
}

constinit fi_ops g_eq_fid_ops = {
    .size = sizeof(fi_ops),
    .close = &eq_close,
    .bind = enosys_ptr<decltype(fi_ops::bind)>,
    .control = &eq_control,
    .ops_open = enosys_ptr<decltype(fi_ops::ops_open)>,
    .tostr = enosys_ptr<decltype(fi_ops::tostr)>,
    .ops_set = enosys_ptr<decltype(fi_ops::ops_set)>,
};

constinit fi_ops_eq g_eq_ops = {
    .size = sizeof(fi_ops_eq),
    .read = &eq_read,
    .readerr = &eq_readerr,
    .write = &eq_write,
    .sread = &eq_sread,
    .strerror = &eq_strerror,
};

}  // namespace

ssize_t eq_write_event(eq& q, std::uint32_t event, const void* buf, std::size_t len,
                       std::uint64_t flags) noexcept {
  if (len && !buf) return -FI_EINVAL;
  (void)flags;  // fi_eq(3) defines no write flags
  try {
    std::lock_guard g(q.lock);
    if (q.events.size() >= q.capacity) return -FI_EAGAIN;
    eq::event e{event, std::vector<std::byte>(len)};
    if (len) std::memcpy(e.data.data(), buf, len);
    q.events.push_back(std::move(e));
  } catch (...) {
    return -FI_ENOMEM;
  }
  q.written.notify_all();
  q.fd.signal();
  return static_cast<ssize_t>(len);
}

ssize_t eq_write_error(eq& q, const fi_eq_err_entry& err) noexcept {
  try {
    std::lock_guard g(q.lock);
    if (q.events.size() >= q.capacity) return -FI_EAGAIN;
    eq::event e{0, {}, true, err};
    q.events.push_back(std::move(e));
  } catch (...) {
    return -FI_ENOMEM;
  }
  q.written.notify_all();
  q.fd.signal();
  return 0;
}

int eq_open(fid_fabric* fabric, fi_eq_attr* attr, fid_eq** out, void* context) noexcept {
  if (!fabric || !out) return -FI_EINVAL;
  fi_eq_attr defaults{};
  defaults.wait_obj = FI_WAIT_UNSPEC;
  const fi_eq_attr& a = attr ? *attr : defaults;
  switch (a.wait_obj) {
    case FI_WAIT_NONE: case FI_WAIT_UNSPEC: case FI_WAIT_FD: case FI_WAIT_YIELD:
      break;
    default:
      return -FI_ENOSYS;
  }
  return fi_guard([&]() -> int {
    auto* q = new eq;
    q->wait_obj = a.wait_obj;
    q->capacity = a.size ? a.size : 256;
    q->eq_fid.fid.fclass = FI_CLASS_EQ;
    q->eq_fid.fid.context = context;
    q->eq_fid.fid.ops = &g_eq_fid_ops;
    q->eq_fid.ops = &g_eq_ops;
    if (q->wait_obj == FI_WAIT_FD && q->fd.open() != 0) {
      delete q;
      return -FI_EMFILE;
    }
    *out = &q->eq_fid;
    return 0;
  });
}

eq* eq_from(fid* f) noexcept {
  if (!f || f->fclass != FI_CLASS_EQ || f->ops != &g_eq_fid_ops) return nullptr;
  return &eq_of(f);
}

int eq_trywait(eq& q) noexcept {
  std::lock_guard g(q.lock);
  if (!q.events.empty()) return -FI_EAGAIN;
  q.fd.drain();
  return 0;
}

}  // namespace exanet::fi
