// SPDX-License-Identifier: BSD-2-Clause
// Endpoint lifetime, binding, options and naming. Data-path calls live in ep_xfer.cpp.
#include "fi/ep.hpp"

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_ext_exanet.h>
#include <sched.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <new>

#include "core/log.hpp"
#include "fi/addr_format.hpp"
#include "fi/attr.hpp"
#include "fi/av.hpp"
#include "fi/cntr.hpp"
#include "fi/common.hpp"
#include "fi/cq.hpp"
#include "fi/domain.hpp"
#include "fi/enosys.hpp"
#include "fi/mr.hpp"
#include "fi/progress_thread.hpp"

namespace exanet::fi {

// The public description of an endpoint name must match the one the device uses.
static_assert(sizeof(fi_exanet_addr) == dev::address::v1_bytes &&
              sizeof(fi_exanet_addr_v2) == sizeof(dev::address) &&
              offsetof(fi_exanet_addr_v2, host) == offsetof(dev::address, host) &&
              offsetof(fi_exanet_addr_v2, lower_name) == offsetof(dev::address, lower_name) &&
              FI_EXANET_LOWER_NAME_BYTES == dev::lower_name_bytes &&
              sizeof(dev::address) <= FI_NAME_MAX &&  // Open MPI's fi_getname buffer is FI_NAME_MAX
              FI_EXANET_ADDR_MAGIC == dev::address_magic &&
              sizeof(fi_exanet_addr_v3) == dev::compact_address::bytes &&
              offsetof(fi_exanet_addr_v3, version) == offsetof(dev::compact_address, version) &&
              offsetof(fi_exanet_addr_v3, lower_ipv4) == offsetof(dev::compact_address, lower_ipv4) &&
              offsetof(fi_exanet_addr_v3, incarnation) ==
                  offsetof(dev::compact_address, incarnation));

extern fi_ops_msg g_msg_ops;        // ep_xfer.cpp
extern fi_ops_tagged g_tagged_ops;  // ep_xfer.cpp
extern fi_ops_rma g_rma_ops;        // ep_rma.cpp
extern fi_ops_atomic g_atomic_ops;  // ep_atomic.cpp

namespace {

endpoint& ep_of(fid* f) noexcept { return from_fid<endpoint>(f); }

progress_source source_of(endpoint& ep) noexcept {
  return {&ep, [](void* self) noexcept { static_cast<endpoint*>(self)->progress(); },
          [](void* self, sleep_target& target) noexcept {
            return static_cast<endpoint*>(self)->sleep_prepare(target);
          },
          [](void* self) noexcept { static_cast<endpoint*>(self)->sleep_end(); },
          [](void* self) noexcept { static_cast<endpoint*>(self)->timers(); }};
}

std::uint64_t resolve_source(void* self, const dev::address& a) noexcept {
  auto& ep = *static_cast<endpoint*>(self);
  return ep.av_ ? av_reverse_lookup(*ep.av_, a) : FI_ADDR_NOTAVAIL;
}

// A peer wrote or read memory this endpoint exposes: counters, and remote CQ data.
void on_remote_access(void* self, const proto::rma_target_event& e) noexcept {
  auto& ep = *static_cast<endpoint*>(self);
  const std::uint64_t event = e.remote_read ? FI_REMOTE_READ : FI_REMOTE_WRITE;
  if (e.region_end) domain_mr_registry(ep.domain).count_remote_access(e.key, event);
  cntr* c = e.remote_read ? ep.remote_read_cntr : ep.remote_write_cntr;
  if (c && e.op_end) cntr_sink(*c).add(cntr_sink(*c).self, false);
  if (e.has_cq_data && ep.rx_cq) {
    proto::completion cq;
    cq.flags = (e.atomic ? FI_ATOMIC : FI_RMA) | (e.remote_read ? FI_REMOTE_READ : FI_REMOTE_WRITE) |
               FI_REMOTE_CQ_DATA;
    cq.len = e.len;
    cq.data = e.cq_data;
    cq.src = e.src;
    cq_sink(*ep.rx_cq).write(cq);
  }
}

int ep_close(fid* f) noexcept {
  endpoint& ep = ep_of(f);
  // First out of the progress thread's list: once remove() returns the thread never touches ep.
  if (ep.enabled)
    if (progress_thread* t = domain_progress_thread(ep.domain)) t->remove(ep);
  domain_mr_registry(ep.domain).detach(ep);
  // A thread asleep in a wait on one of its CQs or counters looks again within
  // wait_sleep_max_ms; none may sleep on it any more, and none may still when the device closes.
  {
    core::level_guard g(ep.lock);
    ep.closing = true;
  }
  // An application blocked on a wait fd after fi_trywait holds announcements here until it
  // reads again: they are withdrawn now (it then finds the endpoint gone, as any reader would).
  if (ep.tx_cq) cq_end_watch(*ep.tx_cq);
  if (ep.rx_cq && ep.rx_cq != ep.tx_cq) cq_end_watch(*ep.rx_cq);
  for (cntr* c : {ep.send_cntr, ep.recv_cntr, ep.read_cntr, ep.write_cntr, ep.remote_read_cntr,
                  ep.remote_write_cntr})
    if (c) cntr_end_watch(*c);
  while (ep.sleep_refs.load(std::memory_order_acquire) != 0) sched_yield();
  {
    core::level_guard g(ep.lock);
    endpoint_report_counters(ep);
    endpoint_live_close(ep);
    ep.proto.close();
  }
  // Each CQ and counter holds the endpoint once, however many of its slots it fills.
  if (ep.tx_cq) cq_detach(*ep.tx_cq, source_of(ep));
  if (ep.rx_cq && ep.rx_cq != ep.tx_cq) cq_detach(*ep.rx_cq, source_of(ep));
  cntr* const slots[] = {ep.send_cntr, ep.recv_cntr, ep.read_cntr, ep.write_cntr,
                         ep.remote_read_cntr, ep.remote_write_cntr};
  for (std::size_t i = 0; i < std::size(slots); ++i)
    if (slots[i] && std::find(slots, slots + i, slots[i]) == slots + i)
      cntr_detach(*slots[i], source_of(ep));
  if (ep.av_) av_unref(*ep.av_);
  domain_unref(ep.domain);
  delete &ep;
  return 0;
}

int bind_cq(endpoint& ep, cq& q, std::uint64_t flags) {
  if (flags & ~(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION)) return -FI_EBADFLAGS;
  if (!(flags & (FI_TRANSMIT | FI_RECV))) return -FI_EINVAL;
  if ((flags & FI_TRANSMIT && ep.tx_cq) || (flags & FI_RECV && ep.rx_cq)) return -FI_EINVAL;
  const bool selective = flags & FI_SELECTIVE_COMPLETION;
  // One attachment per CQ: a CQ that serves both queues (as Open MPI's binds it) must progress
  // the endpoint once per read, not once per queue.
  if (ep.tx_cq != &q && ep.rx_cq != &q) cq_attach(q, source_of(ep));
  if (flags & FI_TRANSMIT) {
    ep.tx_cq = &q;
    ep.tx_selective = selective;
  }
  if (flags & FI_RECV) {
    ep.rx_cq = &q;
    ep.rx_selective = selective;
  }
  return 0;
}

int bind_cntr(endpoint& ep, cntr& c, std::uint64_t flags) {
  const std::pair<std::uint64_t, cntr**> slots[] = {
      {FI_SEND, &ep.send_cntr},         {FI_RECV, &ep.recv_cntr},
      {FI_READ, &ep.read_cntr},         {FI_WRITE, &ep.write_cntr},
      {FI_REMOTE_READ, &ep.remote_read_cntr}, {FI_REMOTE_WRITE, &ep.remote_write_cntr}};
  std::uint64_t known = 0;
  for (const auto& [bit, slot] : slots) {
    known |= bit;
    if ((flags & bit) && *slot) return -FI_EINVAL;  // one counter per event class
  }
  if (flags & ~known) return -FI_EBADFLAGS;
  // Remote events are counted only for endpoints that asked for them (fi_cntr(3)).
  if ((flags & (FI_REMOTE_READ | FI_REMOTE_WRITE)) && !(ep.caps & FI_RMA_EVENT))
    return -FI_EINVAL;
  // One attachment per counter, however many event classes it counts (see bind_cq).
  bool attached = false;
  for (const auto& [bit, slot] : slots) attached = attached || *slot == &c;
  if (!attached && (flags & known)) cntr_attach(c, source_of(ep));
  for (const auto& [bit, slot] : slots)
    if (flags & bit) *slot = &c;
  return 0;
}

int ep_bind(fid* f, fid* bfid, std::uint64_t flags) noexcept {
  endpoint& ep = ep_of(f);
  if (!bfid) return -FI_EINVAL;
  if (ep.enabled) return -FI_EOPBADSTATE;
  return fi_guard([&]() -> int {
    switch (bfid->fclass) {
      case FI_CLASS_AV: {
        av* a = av_from(bfid);
        if (!a) return -FI_EINVAL;
        if (ep.av_) return -FI_EINVAL;
        av_ref(*a);
        ep.av_ = a;
        ep.av_epoch = av_remove_epoch(*a);
        ep.av_epoch_now = &av_remove_epoch_counter(*a);
        return 0;
      }
      case FI_CLASS_CQ: {
        cq* q = cq_from(bfid);
        return q ? bind_cq(ep, *q, flags) : -FI_EINVAL;
      }
      case FI_CLASS_CNTR: {
        cntr* c = cntr_from(bfid);
        return c ? bind_cntr(ep, *c, flags) : -FI_EINVAL;
      }
      case FI_CLASS_EQ:
        return 0;  // no connection events on RDM endpoints
      default:
        return -FI_EINVAL;
    }
  });
}

int ep_enable(endpoint& ep) noexcept {
  proto::endpoint_sinks s;
  if (ep.tx_cq) s.tx = cq_sink(*ep.tx_cq);
  if (ep.rx_cq) s.rx = cq_sink(*ep.rx_cq);
  if (ep.send_cntr) s.send_cntr = cntr_sink(*ep.send_cntr);
  if (ep.recv_cntr) s.recv_cntr = cntr_sink(*ep.recv_cntr);
  if (ep.read_cntr) s.read_cntr = cntr_sink(*ep.read_cntr);
  if (ep.write_cntr) s.write_cntr = cntr_sink(*ep.write_cntr);
  s.rma_target = {&ep, &on_remote_access};
  s.resolver = {&ep, &resolve_source};
  ep.proto.set_sinks(s);
  // Whether anything may ever sleep on this endpoint, now that nothing more can be bound: a CQ
  // with a wait object, any counter (fi_cntr_wait sleeps whatever the counter's wait object:
  // cntr_wait), or the domain's progress thread. If not, the network backend's lower CQ gets
  // no wait object, which makes each arrival cheaper (dev/net's start).
  const bool sleepers = domain_progress_thread(ep.domain) != nullptr ||
                        (ep.tx_cq && cq_may_sleep(*ep.tx_cq)) || (ep.rx_cq && cq_may_sleep(*ep.rx_cq)) ||
                        ep.send_cntr || ep.recv_cntr || ep.read_cntr || ep.write_cntr ||
                        ep.remote_read_cntr || ep.remote_write_cntr;
  {
    // A CQ read in another thread progresses the endpoint already (bound, not yet enabled),
    // and a device polled before enable starts itself: one start, under the endpoint's lock.
    core::level_guard g(ep.lock);
    if (core::status st = ep.proto.enable(sleepers); !core::ok(st)) return core::to_int(st);
  }
  if (ep.proto.cfg().protocol == proto::protocol_family::optimistic &&
      !(ep.caps & FI_DIRECTED_RECV))
    EXANET_LOG(warn, core, "FI_EXANET_PROTOCOL=optimistic refuses any-source receives, and "
                           "without FI_DIRECTED_RECV every receive is one");
  // FI_PROGRESS_AUTO: from now on the domain's thread progresses the endpoint too.
  if (progress_thread* t = domain_progress_thread(ep.domain)) {
    ep.thread_progresses.store(true, std::memory_order_relaxed);
    if (int rc = t->add(ep); rc != 0) {
      ep.thread_progresses.store(false, std::memory_order_relaxed);
      return rc;
    }
  }
  ep.enabled = true;
  return 0;
}

int ep_control(fid* f, int command, void* arg) noexcept {
  endpoint& ep = ep_of(f);
  switch (command) {
    case FI_ENABLE:
      return ep.enabled ? 0 : ep_enable(ep);
    case FI_GETOPSFLAG: {
      auto* flags = static_cast<std::uint64_t*>(arg);
      if (!flags) return -FI_EINVAL;
      if ((*flags & FI_TRANSMIT) && (*flags & FI_RECV)) return -FI_EINVAL;
      if (*flags & FI_TRANSMIT) *flags = ep.tx_op_flags;
      else if (*flags & FI_RECV) *flags = ep.rx_op_flags;
      else return -FI_EINVAL;
      return 0;
    }
    case FI_SETOPSFLAG: {
      auto* flags = static_cast<std::uint64_t*>(arg);
      if (!flags) return -FI_EINVAL;
      const std::uint64_t value = *flags & ~(FI_TRANSMIT | FI_RECV);
      if (*flags & FI_TRANSMIT) ep.tx_op_flags = value;
      else if (*flags & FI_RECV) ep.rx_op_flags = value;
      else return -FI_EINVAL;
      return 0;
    }
    default:
      return -FI_ENOSYS;
  }
}

ssize_t ep_cancel(fid* f, void* context) noexcept {
  endpoint& ep = ep_of(f);
  if (!context) return -FI_EINVAL;
  core::level_guard g(ep.lock);
  const core::status s = ep.proto.cancel(context);
  // Not found means it already completed (or never existed): nothing to cancel is not an error.
  return s == core::status::no_entry ? 0 : core::to_int(s);
}

// FI_OPT_MIN_MULTI_RECV is the one endpoint option.
int ep_getopt(fid* f, int level, int name, void* value, size_t* len) noexcept {
  if (level != FI_OPT_ENDPOINT || name != FI_OPT_MIN_MULTI_RECV) return -FI_ENOPROTOOPT;
  if (!value || !len || *len < sizeof(size_t)) return -FI_EINVAL;
  endpoint& ep = ep_of(f);
  core::level_guard g(ep.lock);
  *static_cast<size_t*>(value) = ep.proto.min_multi_recv();
  *len = sizeof(size_t);
  return 0;
}

int ep_setopt(fid* f, int level, int name, const void* value, size_t len) noexcept {
  if (level != FI_OPT_ENDPOINT || name != FI_OPT_MIN_MULTI_RECV) return -FI_ENOPROTOOPT;
  if (!value || len != sizeof(size_t)) return -FI_EINVAL;
  endpoint& ep = ep_of(f);
  core::level_guard g(ep.lock);
  ep.proto.set_min_multi_recv(*static_cast<const size_t*>(value));
  return 0;
}

ssize_t ep_tx_size_left(fid_ep* f) noexcept {
  return static_cast<ssize_t>(ep_of(&f->fid).proto.cfg().tx_size);
}
ssize_t ep_rx_size_left(fid_ep* f) noexcept {
  return static_cast<ssize_t>(ep_of(&f->fid).proto.cfg().rx_size);
}

int ep_getname(fid* f, void* addr, size_t* addrlen) noexcept {
  endpoint& ep = ep_of(f);
  if (!addrlen) return -FI_EINVAL;
  return addr_encode(domain_names(ep.domain), ep.proto.address(), addr, addrlen);
}

constinit fi_ops g_ep_fid_ops = {
    .size = sizeof(fi_ops),
    .close = &ep_close,
    .bind = &ep_bind,
    .control = &ep_control,
    .ops_open = &endpoint_ops_open,
    .tostr = enosys_ptr<decltype(fi_ops::tostr)>,
    .ops_set = enosys_ptr<decltype(fi_ops::ops_set)>,
};

constinit fi_ops_ep g_ep_ops = {
    .size = sizeof(fi_ops_ep),
    .cancel = &ep_cancel,
    .getopt = &ep_getopt,
    .setopt = &ep_setopt,
    .tx_ctx = enosys_ptr<decltype(fi_ops_ep::tx_ctx)>,
    .rx_ctx = enosys_ptr<decltype(fi_ops_ep::rx_ctx)>,
    .rx_size_left = &ep_rx_size_left,
    .tx_size_left = &ep_tx_size_left,
};

constinit fi_ops_cm g_cm_ops = {
    .size = sizeof(fi_ops_cm),
    .setname = enosys_ptr<decltype(fi_ops_cm::setname)>,
    .getname = &ep_getname,
    .getpeer = enosys_ptr<decltype(fi_ops_cm::getpeer)>,
    .connect = enosys_ptr<decltype(fi_ops_cm::connect)>,
    .listen = enosys_ptr<decltype(fi_ops_cm::listen)>,
    .accept = enosys_ptr<decltype(fi_ops_cm::accept)>,
    .reject = enosys_ptr<decltype(fi_ops_cm::reject)>,
    .shutdown = enosys_ptr<decltype(fi_ops_cm::shutdown)>,
    .join = enosys_ptr<decltype(fi_ops_cm::join)>,
};

constinit fi_ops_collective g_collective_ops = {
    .size = sizeof(fi_ops_collective),
    .barrier = enosys_ptr<decltype(fi_ops_collective::barrier)>,
    .broadcast = enosys_ptr<decltype(fi_ops_collective::broadcast)>,
    .alltoall = enosys_ptr<decltype(fi_ops_collective::alltoall)>,
    .allreduce = enosys_ptr<decltype(fi_ops_collective::allreduce)>,
    .allgather = enosys_ptr<decltype(fi_ops_collective::allgather)>,
    .reduce_scatter = enosys_ptr<decltype(fi_ops_collective::reduce_scatter)>,
    .reduce = enosys_ptr<decltype(fi_ops_collective::reduce)>,
    .scatter = enosys_ptr<decltype(fi_ops_collective::scatter)>,
    .gather = enosys_ptr<decltype(fi_ops_collective::gather)>,
    .msg = enosys_ptr<decltype(fi_ops_collective::msg)>,
    .barrier2 = enosys_ptr<decltype(fi_ops_collective::barrier2)>,
};

}  // namespace

progress_source endpoint_progress_source(endpoint& ep) noexcept { return source_of(ep); }

int endpoint::resolve_peer(fi_addr_t addr, dev::peer_id& out) noexcept {
  if (!av_) return -FI_EADDRNOTAVAIL;
  const std::uint64_t epoch = av_remove_epoch(*av_);
  if (epoch != av_epoch) [[unlikely]] {
    // An address was removed: cached peers may now name something else.
    av_epoch = epoch;
    std::fill(peers.begin(), peers.end(), dev::no_peer);
    proto.invalidate_sources();
  }
  if (addr < peers.size() && peers[addr] != dev::no_peer) [[likely]] {
    out = peers[addr];
    return 0;
  }
  dev::address a;
  if (addr == FI_ADDR_UNSPEC || addr == FI_ADDR_NOTAVAIL || !av_lookup(*av_, addr, a))
    return -FI_EADDRNOTAVAIL;
  dev::peer_id p = dev::no_peer;
  if (core::status s = proto.connect(a, p); !core::ok(s)) {
    if (a.pdid != proto.cfg().pdid) {
      // Most often two launches that were meant to talk (MPI_Comm_connect between two mpiruns):
      // say what would let them.
      EXANET_LOG_ONCE(warn, ep_data, "fi_addr %llu is of protection domain %u, this endpoint's "
                      "is %u: refused (-FI_EACCES). Processes of separate launches talk only "
                      "when FI_EXANET_PDID gives them the same one.",
                      static_cast<unsigned long long>(addr), a.pdid, proto.cfg().pdid);
      return core::to_int(s);
    }
    EXANET_LOG(info, ep_data, "fi_addr %llu (port %u) unreachable: %d",
               static_cast<unsigned long long>(addr), a.port, core::to_int(s));
    return core::to_int(s);
  }
  if (addr < (1u << 24)) {
    try {
      if (addr >= peers.size()) peers.resize(addr + 1, dev::no_peer);
      peers[addr] = p;
    } catch (...) {
      // Uncached: resolved again next time.
    }
  }
  out = p;
  return 0;
}

void endpoint::progress() noexcept {
  // Under FI_PROGRESS_AUTO an endpoint held by another thread is being progressed: by the
  // progress thread, or by the application's thread that holds it, or by the progress thread
  // once that one's call ends. Waiting for the lock would only put this thread to sleep, once
  // for each round of the thread it met (hundreds of futex waits a second while both poll, seen
  // at the start of an fi_cq_sread: net.wait_cpu). So the poll is skipped: a CQ read returns
  // what is there, a blocking wait polls again or sleeps on the endpoint's words, which any
  // completion moves. Under manual progress nobody else is bound to progress it.
  const bool shared = thread_progresses.load(std::memory_order_relaxed);
  const auto take = [&]() noexcept {
    if (shared) return lock.try_lock();
    lock.lock();
    return true;
  };
  if (!take()) return;
  const bool give_core = idle.after_poll(proto.progress() != 0);
  if (--live_countdown == 0) [[unlikely]] endpoint_live_tick(*this);
  lock.unlock();
  if (give_core) [[unlikely]] {
    // Outside the lock: another thread of the application may progress meanwhile.
    const core::idle_yield::yield_time t = core::idle_yield::timed_yield();
    if (!take()) return;  // a lesson skipped now and then only delays the streak's adaptation
    idle.learn(t);
    lock.unlock();
  }
}

bool endpoint::sleep_prepare(sleep_target& target) noexcept {
  core::level_guard g(lock);
  if (closing) return false;
  if (target.app_polls) [[unlikely]] {
    if (domain_progress_thread(domain)) {  // it progresses us: completions signal the fd
      target.served = true;
      return true;
    }
    // Armed before the announcement: a waker that sees the sleeper also sees the socket.
    if (!proto.arm_poll_wake()) return false;
  }
  if (!proto.sleep_prepare(target.word, target.expected)) return false;
  const dev::sleep_descriptor d = target.app_polls ? proto.poll_fd() : proto.sleep_fd();
  target.fd = d.fd;
  target.word_in_use = d.word_in_use;
  target.word_fd = d.word_fd;
  // The device's own bound (a lower fd it cannot trust) and, for a sleeper in the application's
  // poll(2), which never runs our timers, the protocol's periodic checks.
  target.look_again_ms =
      target.app_polls ? sooner_look(d.look_again_ms, proto.look_again_ms()) : d.look_again_ms;
  sleep_refs.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void endpoint::sleep_end() noexcept {
  proto.sleep_end();  // the device's own counter of sleepers, an atomic: no lock needed
  sleep_refs.fetch_sub(1, std::memory_order_release);
}

void endpoint::timers() noexcept {
  core::level_guard g(lock);
  proto.progress_timers();
}

std::size_t endpoint::try_progress() noexcept {
  if (!lock.try_lock()) return held;
  const std::size_t n = proto.progress();
  if (--live_countdown == 0) [[unlikely]] endpoint_live_tick(*this);
  lock.unlock();
  return n;
}

int endpoint_open(fid_domain* domain, fi_info* info, fid_ep** out, void* context) noexcept {
  if (!domain || !info || !out) return -FI_EINVAL;
  if (info->ep_attr && info->ep_attr->type != FI_EP_RDM && info->ep_attr->type != FI_EP_UNSPEC)
    return -FI_ENOPROTOOPT;
  auto* ep = new (std::nothrow) endpoint;
  if (!ep) return -FI_ENOMEM;
  ep->domain = domain;
  ep->caps = info->caps;
  ep->tx_op_flags = info->tx_attr ? info->tx_attr->op_flags : 0;
  ep->rx_op_flags = info->rx_attr ? info->rx_attr->op_flags : 0;
  ep->inject_size = domain_config(domain).inject_size;
  ep->idle = core::idle_yield(domain_config(domain).idle_yield);
  if (info->tx_attr && info->tx_attr->inject_size && info->tx_attr->inject_size < ep->inject_size)
    ep->inject_size = info->tx_attr->inject_size;
  // The iovec limits the application was granted (a lower one it asked for binds it too).
  const std::size_t iov_max = domain_config(domain).iov_limit;
  const auto granted = [iov_max](std::size_t asked) { return asked && asked < iov_max ? asked : iov_max; };
  ep->tx_iov_limit = granted(info->tx_attr ? info->tx_attr->iov_limit : 0);
  ep->rma_iov_limit = granted(info->tx_attr ? info->tx_attr->rma_iov_limit : 0);
  ep->rx_iov_limit = granted(info->rx_attr ? info->rx_attr->iov_limit : 0);
  // Reading a CQ or counter progresses the endpoints bound to it, possibly from another thread
  // than the one posting: only DOMAIN and COMPLETION promise that never overlaps.
  const fi_threading t = domain_threading(domain);
  ep->lock.enable(t == FI_THREAD_SAFE || t == FI_THREAD_FID || t == FI_THREAD_ENDPOINT);

  // A source address picks the port (0, or none: any free one). It is in the info's format.
  dev::address src{};
  if (info->src_addr) {
    const addr_codec c = info->addr_format == domain_names(domain).format
                             ? domain_names(domain)
                             : addr_codec_for(info->addr_format, info->src_addr,
                                              info->src_addrlen, domain_config(domain));
    if (addr_decode(c, info->src_addr, info->src_addrlen, src, port_any::allowed) != 0) {
      delete ep;
      return -FI_EADDRNOTAVAIL;
    }
  }
  // The queue sizes the application was granted size the pools peers' packets draw from
  // (fi_getinfo refused anything above max_queue_size).
  proto::config cfg = domain_config(domain);
  if (info->tx_attr && info->tx_attr->size) cfg.tx_size = std::min(info->tx_attr->size, max_queue_size);
  if (info->rx_attr && info->rx_attr->size) cfg.rx_size = std::min(info->rx_attr->size, max_queue_size);
  // RMA event rings (a page each, 268 KiB of the segment with the defaults) serve only a target
  // of RMA: an endpoint whose caps make it none gets no rings (fi_exanet(7), FOOTPRINT). An
  // event that reaches it anyway comes as a mailbox packet, the path taken when rings run out.
  constexpr std::uint64_t rma_directions = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  const bool rma_target = (info->caps & (FI_RMA | FI_ATOMIC)) &&
                          (!(info->caps & rma_directions) ||
                           (info->caps & (FI_REMOTE_READ | FI_REMOTE_WRITE)));
  if (!rma_target) cfg.event_rings = 0;
  if (core::status s = ep->proto.open(cfg, src); !core::ok(s)) {
    delete ep;
    return s == core::status::exists ? -FI_EADDRINUSE : core::to_int(s);
  }
  ep->ep_fid.fid.fclass = FI_CLASS_EP;
  ep->ep_fid.fid.context = context;
  ep->ep_fid.fid.ops = &g_ep_fid_ops;
  ep->ep_fid.ops = &g_ep_ops;
  ep->ep_fid.cm = &g_cm_ops;
  ep->ep_fid.msg = &g_msg_ops;
  ep->ep_fid.rma = &g_rma_ops;
  ep->ep_fid.tagged = &g_tagged_ops;
  ep->ep_fid.atomic = &g_atomic_ops;
  ep->ep_fid.collective = &g_collective_ops;
  if (int rc = domain_mr_registry(domain).attach(*ep); rc != 0) {
    domain_mr_registry(domain).detach(*ep);
    ep->proto.close();
    delete ep;
    return rc;
  }
  endpoint_live_open(*ep);
  domain_ref(domain);
  *out = &ep->ep_fid;
  return 0;
}

}  // namespace exanet::fi
