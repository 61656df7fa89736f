// SPDX-License-Identifier: BSD-2-Clause
// The network backend's first step (dev/net/device.hpp): the lower endpoint, the mailbox with
// credits and hellos, notification slots with registered windows, and DMA writes into them.
#include "dev/net/device.hpp"

#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/random.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/copy.hpp"
#include "core/iov.hpp"
#include "core/log.hpp"

namespace exanet::dev::net {
namespace {

using wire::credit_packet;
using wire::from_packet;
using wire::hello_packet;
using wire::key_answer_packet;
using wire::key_gone_packet;
using wire::key_query_packet;
using wire::notify_packet;
using wire::ring_packet;
using wire::to_packet;

std::uint64_t fresh_incarnation() noexcept {
  std::uint64_t v = 0;
  if (getrandom(&v, sizeof v, 0) != sizeof v) v = static_cast<std::uint64_t>(std::time(nullptr));
  return (v & id_mask) | 1;  // never 0; 48 bits, so the name fits its compact form
}

core::status from_fi(int rc) noexcept {
  switch (-rc) {
    case FI_EAGAIN: return core::status::again;
    case FI_EACCES: case FI_EPERM: case FI_EKEYREJECTED: return core::status::access;
    case FI_ECONNRESET: case FI_ECONNREFUSED: case FI_ECONNABORTED: return core::status::peer_dead;
    case FI_EHOSTUNREACH: case FI_ENETUNREACH: return core::status::unreachable;
    case FI_ENOMEM: return core::status::no_memory;
    default: return core::status::io;
  }
}

/// CLOCK_MONOTONIC in microseconds: the waits this backend bounds itself (a stuck wait fd, ring
/// credit).
std::uint64_t monotonic_us() noexcept {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return std::uint64_t(t.tv_sec) * 1000000 + std::uint64_t(t.tv_nsec) / 1000;
}

}  // namespace

namespace {
/// A byte count as ofi_rxm's parameters take it (a plain decimal number); 0 when unset or not
/// one (ofi_rxm then keeps its default too).
std::size_t byte_count(const char* text) noexcept {
  if (!text || *text < '0' || *text > '9') return 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  return *end == '\0' ? static_cast<std::size_t>(v) : 0;
}
}  // namespace

bool choose_lower_settings(std::string_view lower_provider) noexcept {
  const std::string_view core_name = lower_provider.substr(0, lower_provider.find(';'));
  const bool under_rxm = lower_provider.find(";ofi_rxm") != std::string_view::npos ||
                         core_name == "tcp" || core_name == "verbs";
  if (!under_rxm || std::getenv("FI_OFI_RXM_BUFFER_SIZE")) return false;
  char value[24];
  std::snprintf(value, sizeof value, "%zu", rxm_buffer_choice);
  if (setenv("FI_OFI_RXM_BUFFER_SIZE", value, 0) != 0) return false;
  // The receive count only with the size: a count the process set stays, with our size.
  char rx[24];
  const char* rx_kept = std::getenv("FI_OFI_RXM_MSG_RX_SIZE");
  std::snprintf(rx, sizeof rx, "%zu", rxm_msg_rx_choice);
  if (!rx_kept && setenv("FI_OFI_RXM_MSG_RX_SIZE", rx, 0) != 0) std::snprintf(rx, sizeof rx, "rxm's");
  EXANET_LOG(info, core, "network backend: FI_OFI_RXM_BUFFER_SIZE=%s chosen for ofi_rxm (every "
             "lower message whole), FI_OFI_RXM_MSG_RX_SIZE=%s%s; set FI_OFI_RXM_BUFFER_SIZE to "
             "keep rxm's own", value, rx_kept ? rx_kept : rx, rx_kept ? " (the process's)" : "");
  return true;
}

std::size_t lower_whole_message_bytes(std::string_view prov_name, const char* rxm_buffer_size,
                                      const char* rxm_eager_limit, std::size_t most) noexcept {
  std::size_t whole = whole_message_default;
  const std::size_t layer = prov_name.find(";ofi_rxm");
  const std::string_view core_name = prov_name.substr(0, layer);
  const bool stream = core_name == "tcp" || core_name == "net";
  if (layer != std::string_view::npos) {
    if (const std::size_t b = byte_count(rxm_buffer_size)) whole = b;
    if (const std::size_t e = byte_count(rxm_eager_limit); stream && e > whole) whole = e;
  } else if (stream) {
    whole = native_whole_bytes;
  }
  return std::clamp(whole, whole_message_min, std::max(most, whole_message_min));
}

core::status device::open(const open_params& p) noexcept {
  close();
  params_ = p;
  const open_params::network& net = p.net;
  if (net.provider.empty() || net.provider.rfind("exanet", 0) == 0) {
    EXANET_LOG(warn, core, "network backend: lower provider \"%s\" refused (exanet cannot carry "
               "itself)", net.provider.c_str());
    return core::status::invalid;
  }
  if (p.liveness_period_ms == 0 && net.lost_after_ms == 0) return core::status::invalid;
  if (net.credits < 2 || p.geo.notify_slots == 0 || net.receive_bytes < 4 * whole_message_min ||
      net.ring_bytes < 4096 || (net.ring_bytes & (net.ring_bytes - 1)) != 0 ||
      p.geo.key_slots > (1u << 16))  // access events name a slot in 16 bits
    return core::status::invalid;
  fi_info* hints = fi_allocinfo();
  if (!hints) return core::status::no_memory;
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_MSG | FI_RMA | FI_MULTI_RECV | FI_SEND | FI_RECV | FI_WRITE | FI_REMOTE_WRITE;
  hints->mode = FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA;
  // Our own keys (derived from a window's slot and generation) and virtual addresses: the RTR
  // and CTS name buffers by address. Providers that insist on their own keys come later.
  hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_ENDPOINT;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  // FIFO per pair for packets, and a notification (a send) never processed before its data.
  hints->tx_attr->msg_order = FI_ORDER_SAS | FI_ORDER_SAW;
  hints->rx_attr->msg_order = FI_ORDER_SAS | FI_ORDER_SAW;
  hints->fabric_attr->prov_name = strdup(net.provider.c_str());
  const int rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
                            net.node.empty() ? nullptr : net.node.c_str(), nullptr,
                            net.node.empty() ? 0 : FI_SOURCE, hints, &info_);
  fi_freeinfo(hints);
  if (rc != 0 || !info_) {
    EXANET_LOG(warn, core, "network backend: lower provider \"%s\"%s%s has no RDM endpoint with "
               "messages, RMA writes, multi-receive and send-after-write order that takes "
               "exanet's keys without local registrations (FI_MR_PROV_KEY and FI_MR_LOCAL "
               "providers are not supported yet): %s",
               net.provider.c_str(), net.node.empty() ? "" : " at ", net.node.c_str(), fi_strerror(-rc));
    info_ = nullptr;
    return core::status::not_supported;
  }
  lower_name_ = info_->fabric_attr->prov_name ? info_->fabric_attr->prov_name : "";
  if (lower_name_.find("exanet") != std::string::npos) {
    EXANET_LOG(warn, core, "network backend: lower provider resolved to exanet; refused");
    close();
    return core::status::invalid;
  }
  if (info_->domain_attr->mr_mode & FI_MR_PROV_KEY) {
    EXANET_LOG(warn, core, "network backend: %s wants provider keys; not supported yet",
               lower_name_.c_str());
    close();
    return core::status::not_supported;
  }
  offset_addressing_ = !(info_->domain_attr->mr_mode & FI_MR_VIRT_ADDR);
  iov_limit_ = std::clamp<std::size_t>(info_->tx_attr->iov_limit, 1, 16);
  auto fail = [&](const char* what, int err) {
    EXANET_LOG(warn, core, "network backend: %s over %s failed: %s", what, lower_name_.c_str(),
               fi_strerror(-err));
    close();
    return from_fi(err) == core::status::again ? core::status::io : from_fi(err);
  };
  if (int e = fi_fabric(info_->fabric_attr, &fabric_, nullptr)) return fail("fi_fabric", e);
  if (int e = fi_domain(fabric_, info_, &domain_, nullptr)) return fail("fi_domain", e);
  fi_av_attr ava{};
  ava.type = info_->domain_attr->av_type == FI_AV_UNSPEC ? FI_AV_TABLE
                                                         : info_->domain_attr->av_type;
  if (int e = fi_av_open(domain_, &ava, &av_, nullptr)) return fail("fi_av_open", e);
  // An endpoint whose port the application chose (fi_getinfo's service) listens on the same
  // port here, so that another host can name it by address and port alone, as tcp's peers are
  // named (dev::by_network_address). Taken by something else: any port, and only the full
  // name reaches it (logged).
  const bool chosen_port = p.self.port != 0 && p.self.port < first_auto_port;
  if (chosen_port) set_lower_port(static_cast<std::uint16_t>(p.self.port));
  int opened = fi_endpoint(domain_, info_, &ep_, nullptr);
  if (opened != 0 && chosen_port) {
    EXANET_LOG(info, core, "network backend: port %u is taken on %s (%s); listening on another, "
               "so other hosts reach this endpoint by its whole name only", p.self.port,
               lower_name_.c_str(), fi_strerror(-opened));
    set_lower_port(0);
    opened = fi_endpoint(domain_, info_, &ep_, nullptr);
  }
  if (int e = opened) return fail("fi_endpoint", e);
  if (int e = fi_ep_bind(ep_, &av_->fid, 0)) return fail("fi_ep_bind av", e);
  // A bundle (header, ring bytes, packets: three iovecs) must land whole in one receive
  // buffer, and go out whole when posted: a longer lower message may take the lower provider's
  // own segmentation or rendezvous (tcp;ofi_rxm above its 16 KiB buffers), which waits for our
  // later progress, the very thing the bounce ring spares the sender. A lower provider with
  // fewer iovecs has no bounce path (bounce_max 0: those messages take the rendezvous) and no
  // bundles (every packet alone).
  bundling_ = iov_limit_ >= 3;
  // A bundle is at most lower_whole_ in all (bundle_for, bounce_write): the bytes beside
  // its packets at most piece_bytes (an eager train's packets fit beside them), a burst of
  // packets up to max_bundle_packets. A longer medium message sends its leading bytes in
  // bundles of their own first (bounce_write).
  lower_whole_ = lower_whole_message_bytes(lower_name_, std::getenv("FI_OFI_RXM_BUFFER_SIZE"),
                                           std::getenv("FI_OFI_RXM_EAGER_LIMIT"),
                                           std::size_t{net.receive_bytes} / 4);
  bounce_max_ = bundling_ ? std::min(std::size_t{net.ring_bytes} / 2,
                                     std::size_t{net.receive_bytes} / 4)
                          : 0;

  self_ = p.self;
  self_.magic = address_magic;
  self_.version = 2;
  if (self_.incarnation == 0) self_.incarnation = fresh_incarnation();
  std::size_t len = lower_name_bytes;
  // The lower endpoint starts (its CQ, enabled, receives posted) when the endpoint above is
  // enabled (enable): only then is it known whether anything will sleep on it. Its name is
  // needed now, for fi_getname; a lower provider that names an endpoint only once enabled
  // starts now, as if something would sleep.
  int named = fi_getname(&ep_->fid, self_.lower_name.data(), &len);
  if (named != 0 && named != -FI_ETOOSMALL) {
    if (core::status s = start(true); !core::ok(s)) {
      close();
      return s;
    }
    len = lower_name_bytes;
    named = fi_getname(&ep_->fid, self_.lower_name.data(), &len);
  }
  if (int e = named) {
    if (e == -FI_ETOOSMALL) {
      EXANET_LOG(warn, core, "network backend: %s names endpoints in %zu bytes; exanet's names "
                 "have room for %zu", lower_name_.c_str(), len, lower_name_bytes);
      close();
      return core::status::not_supported;
    }
    return fail("fi_getname", e);
  }
  self_.lower_len = static_cast<std::uint8_t>(len);

  slots_.assign(p.geo.notify_slots, slot{});
  grants_.assign(p.geo.key_slots, grant_slot{});
  constexpr std::size_t receive_buffers = 2;
  receive_buffers_.assign(receive_buffers, std::vector<std::byte>(net.receive_bytes));
  // Receives, then DMA writes and bounce messages in flight (bounce_reserve leaves the writes
  // a share: see bounce_ops_reserved).
  ops_.assign(receive_buffers + 256, op_context{});
  free_ops_.clear();
  for (std::uint32_t i = 0; i < ops_.size(); ++i) {
    ops_[i].index = i;
    if (i >= receive_buffers) free_ops_.push_back(i);
  }
  for (std::uint32_t b = 0; b < receive_buffers; ++b) ops_[b].what = op_context::kind::receive;
  answer_slots_.assign(answer_slot_count, answer_slot{});
  free_answer_slots_.resize(answer_slot_count);
  for (std::uint32_t i = 0; i < answer_slot_count; ++i)
    free_answer_slots_[i] = static_cast<std::uint32_t>(answer_slot_count - 1 - i);
  if (started_)  // started already (above): its buffers go to the lower provider now
    for (std::uint32_t b = 0; b < receive_buffers; ++b)
      if (core::status s = post_receive(b); !core::ok(s)) {
        close();
        return s;
      }
  if (lower_name_.rfind("tcp", 0) == 0 && !std::getenv("FI_TCP_NODELAY"))
    EXANET_LOG_ONCE(warn, core, "network backend over %s without FI_TCP_NODELAY=1: the kernel "
                    "delays exanet's small packets (Nagle's algorithm against delayed "
                    "acknowledgements: up to 40 ms each in a rendezvous here)", lower_name_.c_str());
  EXANET_LOG(info, core, "network backend over %s (%s): %zu-byte name, %u credits per sender, "
             "lower messages of up to %zu bytes",
             lower_name_.c_str(), info_->domain_attr->name, len, net.credits, lower_whole_);
  return core::status::ok;
}

namespace {
// Lower providers whose CQ wait fd this process found stuck (judge_wait_fd): an endpoint opened
// later over the same one naps from its first sleep instead of learning it again, a spin of
// stuck_after_us with every sleeper awake (wait_cpu's second pair of endpoints: 500-1300 wakes in
// its first second). Cold: read at start, written once per endpoint that finds it.
std::mutex g_stuck_lock;
std::vector<std::string> g_stuck_lowers;

bool stuck_seen(const std::string& lower) noexcept {
  std::lock_guard g(g_stuck_lock);
  return std::find(g_stuck_lowers.begin(), g_stuck_lowers.end(), lower) != g_stuck_lowers.end();
}

void stuck_found(const std::string& lower) noexcept {
  std::lock_guard g(g_stuck_lock);
  try {
    if (std::find(g_stuck_lowers.begin(), g_stuck_lowers.end(), lower) == g_stuck_lowers.end())
      g_stuck_lowers.push_back(lower);
  } catch (...) {  // without memory the next endpoint learns it again
  }
}
}  // namespace

core::status device::start(bool sleepers) noexcept {
  if (started_) return core::status::ok;
  if (cq_ || !ep_) return core::status::io;  // a start failed already (close cleans up)
  auto fail = [&](const char* what, int err) {
    EXANET_LOG(warn, core, "network backend: %s over %s failed: %s", what, lower_name_.c_str(),
               fi_strerror(-err));
    wait_fd_ = -1;  // cq_ stays for close(), which closes it after the endpoint bound to it
    return from_fi(err) == core::status::again ? core::status::io : from_fi(err);
  };
  fi_cq_attr cqa{};
  cqa.format = FI_CQ_FORMAT_DATA;
  cqa.size = 4096;
  // A wait object only where something may sleep on this endpoint (sleep_prepare's fd). It is
  // not free: tcp polls the sockets of a CQ with an fd through an epoll set (epoll_wait where
  // it otherwise calls poll), which the kernel updates on every arrival (perf, 8 B ping-pong
  // across two namespaces: 5.6 % of the samples in _raw_spin_unlock_irqrestore, absent
  // without), and a lower CQ without one took 0.7-1.3 us off a one-way 8 B latency of 7-10 us
  // (BENCHMARKS.md, "A lower CQ without wait fd"). A lower provider without an fd is polled,
  // as with none.
  cqa.wait_obj = sleepers ? FI_WAIT_FD : FI_WAIT_NONE;
  cqa.wait_cond = FI_CQ_COND_NONE;
  int opened = fi_cq_open(domain_, &cqa, &cq_, nullptr);
  if (opened != 0 && sleepers) {  // no fd wait object there: a CQ without one, polled
    cqa.wait_obj = FI_WAIT_NONE;
    opened = fi_cq_open(domain_, &cqa, &cq_, nullptr);
  }
  if (opened != 0) {
    cq_ = nullptr;
    return fail("fi_cq_open", opened);
  }
  if (cqa.wait_obj == FI_WAIT_FD && fi_control(&cq_->fid, FI_GETWAIT, &wait_fd_) != 0)
    wait_fd_ = -1;
  if (sleepers && wait_fd_ < 0)
    EXANET_LOG(info, core, "network backend: %s's CQ has no wait fd; waits poll it",
               lower_name_.c_str());
  if (int e = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV)) return fail("fi_ep_bind cq", e);
  if (int e = fi_enable(ep_)) return fail("fi_enable", e);
  const std::size_t min_room = lower_whole_;
  if (int e = fi_setopt(&ep_->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min_room,
                        sizeof min_room))
    return fail("FI_OPT_MIN_MULTI_RECV", e);
  started_ = true;
  // Quiet arms in a row trust it again (judge_wait_fd).
  if (wait_fd_ >= 0 && stuck_seen(lower_name_)) stuck_ = stuck_logged_ = true;
  for (std::uint32_t b = 0; b < ops_.size() && ops_[b].what == op_context::kind::receive; ++b)
    if (core::status s = post_receive(b); !core::ok(s)) return s;
  EXANET_LOG(info, core, "network backend over %s started: lower CQ %s", lower_name_.c_str(),
             wait_fd_ >= 0 ? "with a wait fd (something may sleep on this endpoint)"
                           : "without a wait fd (nothing sleeps on this endpoint: it polls)");
  return core::status::ok;
}

void device::close() noexcept {
  if (ep_ && started_) say_bye();
  for (slot& s : slots_)
    if (s.mr) fi_close(&s.mr->fid);
  slots_.clear();
  for (grant_slot& g : grants_)
    if (g.mr) fi_close(&g.mr->fid);
  grants_.clear();
  {
    std::lock_guard lock(sinks_lock_);
    for (sink& k : sinks_) release(k);
    sinks_.clear();
    sinks_count_.store(0, std::memory_order_relaxed);
  }
  told_slots_.clear();
  answers_due_.clear();
  if (ep_) fi_close(&ep_->fid);
  if (av_) fi_close(&av_->fid);
  if (cq_) fi_close(&cq_->fid);  // closes wait_fd_ with it
  wait_fd_ = -1;
  if (domain_) fi_close(&domain_->fid);
  if (fabric_) fi_close(&fabric_->fid);
  if (info_) fi_freeinfo(info_);
  ep_ = nullptr;
  av_ = nullptr;
  cq_ = nullptr;
  started_ = false;
  domain_ = nullptr;
  fabric_ = nullptr;
  info_ = nullptr;
  set_bundle(nullptr);  // its operation goes with ops_
  burst_to_ = no_peer;
  peers_.clear();
  by_incarnation_.clear();
  awaiting_hello_ = 0;
  pending_.clear();
  held_.clear();
  receive_buffers_.clear();
  ops_.clear();
  free_ops_.clear();
}

core::status device::post_receive(std::uint32_t buffer) noexcept {
  iovec v{receive_buffers_[buffer].data(), receive_buffers_[buffer].size()};
  fi_msg m{};
  m.msg_iov = &v;
  m.iov_count = 1;
  m.addr = FI_ADDR_UNSPEC;
  m.context = &ops_[buffer];
  for (;;) {
    const ssize_t rc = fi_recvmsg(ep_, &m, FI_MULTI_RECV);
    if (rc == 0) return core::status::ok;
    if (rc != -FI_EAGAIN) {
      EXANET_LOG(warn, core, "network backend: posting a receive buffer failed: %s",
                 fi_strerror(static_cast<int>(-rc)));
      return from_fi(static_cast<int>(rc));
    }
    fi_cq_data_entry e;
    (void)fi_cq_read(cq_, &e, 0);  // drives the lower provider's progress, consumes nothing
  }
}

void device::repost(void* ctx) noexcept {
  auto* op = static_cast<op_context*>(ctx);
  if (!op || op->what != op_context::kind::receive) return;
  (void)post_receive(op->index);
}

void device::repost_due() noexcept {
  const std::size_t due = std::exchange(reposts_due_, 0);
  for (std::size_t i = 0; i < due; ++i) repost(reposts_[i]);
}

// ---- peers ----------------------------------------------------------------------------------

core::status device::connect(const address& a, peer_id& out) noexcept {
  if (a.pdid != self_.pdid) return core::status::access;
  // A peer before enable (the endpoint above calls enable first; a caller of this device alone
  // may not): started as if something would sleep, the choice that never makes a sleeper spin.
  if (!started_) [[unlikely]]
    if (core::status s = start(true); !core::ok(s)) return s;
  if (!a.valid() || a.version < 2 || a.lower_len == 0 || a.lower_len > lower_name_bytes)
    return core::status::invalid;
  if (a.incarnation != 0) {
    if (auto it = by_incarnation_.find(a.incarnation); it != by_incarnation_.end()) {
      out = it->second;
      return core::status::ok;
    }
  }
  // A name by network address alone (incarnation 0: dev::by_network_address) is the live peer
  // at that address if there is one. A hello that names such a peer's address fills in its
  // incarnation and the rest of its name (adopted): its packets come as that peer's.
  // The look is a walk over the peers, taken only where it can find something: for such a
  // name, or while a peer so named waits for its hello.
  // (Two whole names at one address are two incarnations of the endpoint there: a new peer.)
  if (a.incarnation == 0 || awaiting_hello_ > 0) {
    const peer_id known = live_peer_at(a);
    if (known != no_peer && (a.incarnation == 0 || peers_[known].addr.incarnation == 0)) {
      if (a.incarnation != 0) {  // the hello of a peer named by address: adopted
        peers_[known].addr = a;
        by_incarnation_[a.incarnation] = known;
        ++adopted_;
        --awaiting_hello_;
      }
      out = known;
      return core::status::ok;
    }
  }
  fi_addr_t fa = FI_ADDR_UNSPEC;
  if (fi_av_insert(av_, a.lower_name.data(), 1, &fa, 0, nullptr) != 1)
    return core::status::unreachable;
  peer pr;
  pr.addr = a;
  pr.fa = fa;
  pr.credits = params_.net.credits;
  out = static_cast<peer_id>(peers_.size());
  peers_.push_back(pr);
  if (a.incarnation != 0) by_incarnation_[a.incarnation] = out;
  else ++awaiting_hello_;
  return core::status::ok;
}

peer_id device::live_peer_at(const address& a) const noexcept {
  for (std::size_t i = 0; i < peers_.size(); ++i) {
    const peer& pr = peers_[i];
    if (pr.dead || pr.forgotten || pr.addr.lower_len != a.lower_len || pr.addr.pdid != a.pdid ||
        pr.addr.port != a.port)
      continue;
    if (std::equal(a.lower_name.begin(), a.lower_name.begin() + a.lower_len,
                   pr.addr.lower_name.begin()))
      return static_cast<peer_id>(i);
  }
  return no_peer;
}

void device::set_lower_port(std::uint16_t port) noexcept {
  if (!info_->src_addr) return;
  auto* sa = static_cast<sockaddr*>(info_->src_addr);
  if (sa->sa_family == AF_INET && info_->src_addrlen >= sizeof(sockaddr_in))
    reinterpret_cast<sockaddr_in*>(sa)->sin_port = htons(port);
  else if (sa->sa_family == AF_INET6 && info_->src_addrlen >= sizeof(sockaddr_in6))
    reinterpret_cast<sockaddr_in6*>(sa)->sin6_port = htons(port);
}

// ---- mailbox --------------------------------------------------------------------------------

core::status device::inject_now(peer_id p, const packet& pk) noexcept {
  const ssize_t rc = fi_injectdata(ep_, pk.data(), pk.size(), self_.incarnation, peers_[p].fa);
  if (rc != 0) return from_fi(static_cast<int>(rc));
  peer& pr = peers_[p];
  if (pr.queued == 0 || posting_head_) {  // in line (a control packet may overtake the queue)
    ++pr.handed;
    pr.last_handed_completes = false;
  }
  bytes_sent_ += pk.size();
  ++lower_sends_;
  burst_to_ = p;
  return core::status::ok;
}

core::status device::post(const pending_packet& q) noexcept {
  // Our callers sent the bundle first (or are sending it): it is behind every pending packet.
  if (q.bounce) return send_bounce(*q.bounce);
  return q.reported ? send_reported(q.to, q.pk) : inject_now(q.to, q.pk);
}

core::status device::send_reported(peer_id p, const packet& pk) noexcept {
  op_context* op = op_acquire();
  if (!op) return inject_now(p, pk);
  op->what = op_context::kind::bounce;
  op->to = p;
  op->len = 0;
  op->count = 1;
  op->packets[0] = pk;
  peer& pr = peers_[p];
  const ssize_t rc = fi_senddata(ep_, op->packets[0].data(), packet_bytes, nullptr,
                                 self_.incarnation, pr.fa, &op->ctx);
  if (rc != 0) {
    free_op(*op);
    return from_fi(static_cast<int>(rc));
  }
  op->handed_index = ++pr.handed;  // in line, as inject_now's callers
  pr.last_handed_completes = true;
  bytes_sent_ += packet_bytes;
  ++lower_sends_;
  burst_to_ = p;
  return core::status::ok;
}

core::status device::send_bounce(op_context& op) noexcept {
  peer& pr = peers_[op.to];
  iovec v[3];
  std::size_t n = 0;
  v[n++] = {op.header.data(), packet_bytes};
  if (op.len > 0) {
    const std::uint64_t size = pr.ring_out.size();
    v[n++] = {pr.ring_out.data() + (op.offset & (size - 1)), op.len};
  }
  if (op.count > 0) v[n++] = {op.packets.data(), op.count * packet_bytes};
  fi_msg m{};
  m.msg_iov = v;
  m.iov_count = n;
  m.addr = pr.fa;
  m.context = &op;
  m.data = self_.incarnation;
  const ssize_t rc = fi_sendmsg(ep_, &m, FI_COMPLETION | FI_REMOTE_CQ_DATA);
  if (rc != 0) return from_fi(static_cast<int>(rc));
  op.handed_index = ++pr.handed;  // always in line: the head of the queue, or no queue
  pr.last_handed_completes = true;
  bytes_sent_ += wire::bundle_bytes(op.len, op.count);
  ++lower_sends_;
  burst_to_ = op.to;
  return core::status::ok;
}

device::op_context* device::bundle_for(peer_id p) noexcept {
  if (bundle_ && (bundle_->to != p || bundle_->count == wire::max_bundle_packets ||
                  wire::bundle_bytes(bundle_->len, bundle_->count + 1u) > lower_whole_))
    flush_bundle();
  if (bundle_) return bundle_;
  op_context* op = op_acquire();
  if (!op) return nullptr;
  op->what = op_context::kind::bounce;
  op->to = p;
  op->len = 0;
  op->offset = 0;
  op->count = 0;
  set_bundle(op);
  return op;
}

void device::flush_bundle() noexcept {
  op_context* op = bundle_;
  if (!op) return;
  set_bundle(nullptr);
  const peer_id to = op->to;
  peer& pr = peers_[to];
  pending_packet q{to, {}, op};
  if (op->len == 0 && op->count <= 1) {
    // One packet alone (a train cut short by "again", a bundle the next send found full, a
    // reported packet kept for the poll) goes as it would have without a bundle, with a
    // completion: it may be a reported one (send_reported).
    const bool one = op->count == 1;
    q = {to, op->packets[0], nullptr, false, true};
    free_op(*op);
    if (!one) return;
  } else {
    ring_packet h{};
    h.type = static_cast<std::uint8_t>(device_packet::bounce);
    h.packets = op->count;
    h.len = static_cast<std::uint32_t>(op->len);
    h.offset = op->offset;
    op->header = to_packet(h);
    q.pk = op->header;
  }
  // FIFO with our packets to it: behind any that wait.
  if (pr.queued == 0) {
    const core::status s = post(q);
    if (s == core::status::ok) return;
    if (s != core::status::again) {  // never sent: nothing will complete it
      if (q.bounce) free_op(*q.bounce);
      return;
    }
  }
  try {
    pending_.push_back(q);
  } catch (...) {
    if (q.bounce) free_op(*q.bounce);
    return;
  }
  ++pr.queued;
  push_queued(to);
}

core::status device::send_hello(peer_id p) noexcept {
  hello_packet h{};
  h.type = static_cast<std::uint8_t>(device_packet::hello);
  h.lower_len = self_.lower_len;
  h.node = self_.node;
  h.pdid = self_.pdid;
  h.incarnation = self_.incarnation;
  h.host = self_.host;
  h.port = self_.port;
  h.lower_name = self_.lower_name;
  h.ring_log2 = static_cast<std::uint8_t>(std::countr_zero(std::uint64_t{params_.net.ring_bytes}));
  peers_[p].hello_due = false;
  return send_or_queue(p, to_packet(h));
}

core::status device::send_or_queue(peer_id p, const packet& pk, bool more, bool reported) noexcept {
  // The caller made sure of the credit; FIFO per peer: behind what is already queued.
  peer& pr = peers_[p];
  if (pr.hello_due && static_cast<std::uint8_t>(pk[0]) != static_cast<std::uint8_t>(device_packet::hello)) {
    if (core::status s = send_hello(p); !core::ok(s)) return s;
  }
  --pr.credits;
  // (Never ahead of our hello: the receiver knows our credit packets only after it.)
  if (pr.consumed >= params_.net.credits / 8 && pr.consumed > 0 &&
      static_cast<std::uint8_t>(pk[0]) != static_cast<std::uint8_t>(device_packet::hello))
    credit_along(p);
  // A burst: a lower message to p left since the last poll, and the application will read
  // before it can know this packet went (reported), so the packet may wait for that poll.
  const bool wait = reported && burst_to_ == p && pr.queued == 0 && !pushing_;
  if ((more || wait || (bundle_ && bundle_->to == p)) && bundling_) {
    // Into the bundle: it leaves with this packet unless more of the message follows or the
    // burst goes on (then at the next poll, or when full, or before anything else we send).
    if (op_context* b = bundle_for(p)) {
      b->packets[b->count++] = pk;
      if ((!more && !wait) || b->count == wire::max_bundle_packets) flush_bundle();
      return core::status::ok;
    }
  }
  if (pr.queued == 0) {
    if (bundle_) flush_bundle();  // the bundle waiting (to another peer) first
    const core::status s = reported ? send_reported(p, pk) : inject_now(p, pk);
    if (s != core::status::again) return s;
  }
  pending_.push_back({p, pk, nullptr, false, reported});
  ++pr.queued;
  push_queued(p);
  return core::status::ok;
}

void device::push_queued(peer_id p) noexcept {
  // The caller counts the packet as sent (a send completes on it), and may not call us again
  // for a long time: manual progress lets an application block elsewhere (a barrier of its
  // own) after its send completed. So a packet the lower endpoint could not take at once (its
  // connection to the peer is still being set up, or its queue is full) is pushed here, driving
  // the lower provider, for a bounded time; whatever is left goes at the next poll.
  if (pushing_) return;  // a packet sent while we drive the lower provider below: queued
  pushing_ = true;
  timespec t0{}, t{};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    drive();
    if (peers_[p].queued == 0) break;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >= push_limit_ms) {
      EXANET_LOG_ONCE(info, core, "network backend: %u packets to a peer still queued after %u ms",
                      peers_[p].queued, push_limit_ms);
      break;
    }
  }
  pushing_ = false;
}

void device::drive() noexcept {
  // The lower provider progresses (its connections, its flow control) only when its CQ is read
  // for real; what that reads waits, in order, for the next poll (budget 0).
  (void)poll_mailbox(0, [](peer_id, const packet&) {});
}

void device::flush_pending() noexcept {
  if (bundle_) flush_bundle();  // before we hold a reference into pending_: it may queue
  while (!pending_.empty()) {
    const pending_packet& q = pending_.front();
    if (peers_[q.to].dead) {  // never read: it must not hold up the packets behind it
      if (q.bounce) free_op(*q.bounce);
      --peers_[q.to].queued;
      if (q.answer) --peers_[q.to].answers_queued;
      pending_.pop_front();
      continue;
    }
    posting_head_ = true;
    const core::status s = post(q);
    posting_head_ = false;
    if (s == core::status::again) return;
    if (!core::ok(s) && q.bounce) free_op(*q.bounce);  // never sent: nothing will complete it
    --peers_[q.to].queued;
    if (q.answer) --peers_[q.to].answers_queued;
    pending_.pop_front();
  }
}

core::status device::ready_to_send(peer_id p) noexcept {
  // A registration closed before this send: its askers learn of it first (key_revoke).
  if (gone_due_.load(std::memory_order_relaxed)) [[unlikely]] announce_gone();
  peer& pr = peers_[p];
  if (pr.dead) return core::status::peer_dead;
  // A protocol packet is accepted only when the lower endpoint takes packets to p at once: a
  // send completes on its packet, and under manual progress the application may then stop
  // calling us (and wait for the peer by other means). The first packet to a peer waits for
  // the lower connection (the hello goes first, and "again" until it went out, as tcp;ofi_rxm
  // says again to a send while it connects); a backlog behind a full lower queue likewise.
  if (pr.queued > 0) {
    if (!pushing_) drive();
    if (pr.queued > 0) return core::status::again;
  }
  if (pr.hello_due) {
    if (pr.credits < 2) return core::status::again;
    if (core::status s = send_hello(p); !core::ok(s)) return s;
    if (pr.queued > 0) return core::status::again;
  }
  return can_send(pr) ? core::status::ok : core::status::again;
}

core::status device::mailbox_send(peer_id p, const packet& pk) noexcept {
  if (core::status s = ready_to_send(p); !core::ok(s)) return s;
  return send_or_queue(p, pk);
}

core::status device::mailbox_reserve(peer_id p, mailbox_reservation& r) noexcept {
  if (core::status s = ready_to_send(p); !core::ok(s)) return s;
  reserved_for_ = p;
  reserved_ = {};  // a sender may write a prefix only (dev::mailbox_reservation)
  r.bytes = reserved_.data();
  r.handle = &reserved_;
  return core::status::ok;
}

void device::mailbox_publish(const mailbox_reservation& r) noexcept {
  // Credit checked at reserve; queued if busy; in the bundle while more of the message follows.
  (void)send_or_queue(reserved_for_, reserved_, r.more, r.reported);
}

// The credit for every packet of pr's we consumed and have not given credit for.
packet device::credit_for(const peer& pr) noexcept {
  credit_packet c{};
  c.type = static_cast<std::uint8_t>(device_packet::credit);
  c.count = pr.consumed;
  return to_packet(c);
}

void device::give_credit(peer_id p) noexcept {
  peer& pr = peers_[p];
  if (pr.consumed < params_.net.credits / 2) return;
  // Credit packets take no credit (the receiver handles them at once); one that cannot go now
  // is due, and every poll tries it again (send_due_credits).
  if (pr.hello_due) {  // the hello takes a credit like any packet; without one, wait
    if (pr.credits == 0 || !core::ok(send_hello(p))) {
      pr.packet_credit_due = credits_due_ = true;
      return;
    }
  }
  if (inject(p, credit_for(pr)) == core::status::ok) {
    pr.consumed = 0;
    return;
  }
  // The lower endpoint is busy. Not "with the next consumed packet": a sender that has used
  // its whole window sends none, and waited for this credit until its wait ran out, then
  // wrote everything by DMA (fi_rma_bw across two namespaces: 10-20 % of a side's writes
  // inline in 2 runs of 5 at 64 B). Every poll tries again.
  pr.packet_credit_due = credits_due_ = true;
}

void device::credit_along(peer_id p) noexcept {
  // give_credit waits for half of p's window, which costs a lower message of its own. Our own
  // traffic to p carries the credit sooner, in the bundle the packet leaves in: a receiver that
  // answers and then goes quiet (computes, sleeps) keeps no more than an eighth of p's window
  // from it, where up to half stayed here before (MPICH's sendrecv3 over the network: a
  // window of 100 isends stalled for the whole second the receiver slept).
  if (!bundling_) return;  // then only give_credit's own packets carry credit
  peer& pr = peers_[p];
  if (op_context* b = bundle_for(p)) {  // the packet that follows joins it (send_or_queue)
    b->packets[b->count++] = credit_for(pr);
    pr.consumed = 0;
  }
}

bool device::take_received(std::uint64_t incarnation, const packet& pk, peer_id& from) noexcept {
  const auto type = static_cast<std::uint8_t>(pk[0]);
  if (type == static_cast<std::uint8_t>(device_packet::hello)) {
    on_hello(incarnation, pk);
    return false;
  }
  auto it = by_incarnation_.find(incarnation);
  if (it == by_incarnation_.end()) {
    ++drops_.unknown_sender;
    EXANET_LOG_ONCE(warn, core, "network backend: packet from an unknown sender dropped");
    return false;
  }
  from = it->second;
  peer& pr = peers_[from];
  if (pr.dead) {
    ++drops_.from_lost;  // counted lost (bye, or silent too long): lost stays lost
    return false;
  }
  pr.heard = true;
  switch (static_cast<device_packet>(type)) {
    case device_packet::ping: {
      if (pr.hello_due) {  // it must know our incarnation first (send_signal sends the hello)
        send_signal(from, device_packet::pong);
        return false;
      }
      packet pong{};
      pong[0] = static_cast<std::byte>(device_packet::pong);
      send_answer(from, pong);
      return false;
    }
    case device_packet::pong: return false;
    // A bundle header alone, without bytes or packets: its sender wanted a completion behind
    // what it sent us before (sent_out). Takes no credit.
    case device_packet::bounce: return false;
    case device_packet::bye: mark_dead(from); return false;
    case device_packet::intake: pr.intake_held = pk[1] != std::byte{0}; return false;
    case device_packet::key_gone: on_key_gone(from, pk); return false;
    case device_packet::write_check: on_write_check(from, pk); return false;
    case device_packet::write_verdict: on_write_verdict(from, pk); return false;
    case device_packet::ring_credit: {
      // Never past what we produced: a forged tail cannot make us overwrite unread bytes.
      const auto c = from_packet<ring_packet>(pk);
      if (c.offset <= pr.ring_head && c.offset > pr.ring_tail) pr.ring_tail = c.offset;
      return false;
    }
    default: break;
  }
  if (type == static_cast<std::uint8_t>(device_packet::credit)) {
    const auto c = from_packet<credit_packet>(pk);
    // Never more than it could have been given: a forged count cannot unbound the sender.
    peers_[from].credits = std::min(params_.net.credits, peers_[from].credits + c.count);
    return false;
  }
  if (type >= first_device_packet_type) {
    consumed(from);
    on_device_packet(from, pk);
    return false;
  }
  if (pr.report != peer::next_report::none) [[unlikely]] {
    // The report of a write whose check came just before it: it goes where the write went.
    const bool withdraw = pr.report == peer::next_report::withdraw;
    pr.report = peer::next_report::none;
    if (withdraw) {
      consumed(from);
      ++drops_.withdrawn;
      return false;
    }
  }
  return true;  // consumed when delivered
}

void device::on_hello(std::uint64_t incarnation, const packet& pk) noexcept {
  const auto h = from_packet<hello_packet>(pk);
  if (h.pdid != self_.pdid) {
    ++drops_.foreign_pdid;
    EXANET_LOG_ONCE(warn, core, "network backend: hello of PDID %u refused (ours is %u)",
                    h.pdid, self_.pdid);
    return;
  }
  if (h.incarnation != incarnation || h.lower_len == 0 || h.lower_len > lower_name_bytes ||
      (h.ring_log2 != 0 && (h.ring_log2 < wire::min_ring_log2 || h.ring_log2 > wire::max_ring_log2))) {
    ++drops_.bad_field;
    return;
  }
  address from{};
  from.version = 2;
  from.node = h.node;
  from.pdid = h.pdid;
  from.port = h.port;
  from.host = h.host;
  from.incarnation = h.incarnation;
  from.lower_len = h.lower_len;
  std::copy_n(h.lower_name.begin(), h.lower_len, from.lower_name.begin());  // the rest stays 0
  peer_id p = no_peer;
  if (!core::ok(connect(from, p))) {
    ++drops_.bad_field;
    return;
  }
  // Its ring here is as large as its credit rules make it (fixed once its bytes came).
  peer& pr = peers_[p];
  if (pr.ring_in.empty())
    pr.ring_in_bytes = h.ring_log2 != 0 ? std::uint64_t{1} << h.ring_log2 : params_.net.ring_bytes;
  consumed(p);
}

void device::on_device_packet(peer_id from, const packet& pk) noexcept {
  const auto type = static_cast<device_packet>(pk[0]);
  if (type == device_packet::key_query) return on_key_query(from, pk);
  if (type == device_packet::key_answer) return on_key_answer(from, pk);
  if (type == device_packet::record) {
    const auto r = from_packet<notify_packet>(pk);
    if (r.slot >= slots_.size() || slots_[r.slot].gen == 0) {
      ++drops_.notify_refused;  // a record for a slot that expects nothing
      return;
    }
    slots_[r.slot].record = r.data;
    return;
  }
  if (type != device_packet::notify) {
    ++drops_.bad_field;
    return;
  }
  const auto n = from_packet<notify_packet>(pk);
  if (n.slot >= slots_.size() || n.gen == 0 || slots_[n.slot].gen != n.gen) {
    ++drops_.notify_refused;
    EXANET_LOG_ONCE(warn, core, "network backend: notification for slot %u generation %u "
                    "dropped: not armed", n.slot, n.gen);
    return;
  }
  if (slots_[n.slot].landed == n.gen) return;  // a repeat rings no second bell
  slots_[n.slot].data = n.data;
  slots_[n.slot].landed = n.gen;
  bells_.push_back(n.slot);
}

void device::on_cq_error() noexcept {
  fi_cq_err_entry err{};
  if (fi_cq_readerr(cq_, &err, 0) != 1) return;
  if (answer_slot* a = answer_of(err.op_context)) return on_answer_done(*a);  // the peer is gone
  auto* op = static_cast<op_context*>(err.op_context);
  if (op && (op->what == op_context::kind::write || op->what == op_context::kind::bounce)) {
    on_tx_done(op, err.err ? err.err : FI_EIO);
    return;
  }
  EXANET_LOG_ONCE(warn, core, "network backend: lower completion error: %s",
                  fi_strerror(err.err));
  if (op && op->what == op_context::kind::receive && (err.flags & FI_MULTI_RECV)) repost(op);
}

void device::on_answer_done(answer_slot& a) noexcept {
  if (a.to < peers_.size()) {
    peer& pr = peers_[a.to];
    if (pr.answers_out > 0) --pr.answers_out;
    pr.handed_out = std::max(pr.handed_out, a.handed_index);
  }
  a.to = no_peer;
  free_answer_slots_.push_back(static_cast<std::uint32_t>(&a - answer_slots_.data()));
}

void device::on_tx_done(void* ctx, int err) noexcept {
  if (answer_slot* a = answer_of(ctx)) return on_answer_done(*a);
  auto* op = static_cast<op_context*>(ctx);
  if (op && op->what == op_context::kind::bounce) {
    // Its bytes stay in the ring mirror until the receiver consumes them; the operation is done.
    // It and every send to its peer handed before it have left this process (sent_out).
    if (op->to < peers_.size())
      peers_[op->to].handed_out = std::max(peers_[op->to].handed_out, op->handed_index);
    if (err)
      EXANET_LOG_ONCE(warn, core, "network backend: a bounce message of %zu bytes failed: %s "
                      "(the packet naming it is dropped at the receiver)", op->len,
                      fi_strerror(err));
    free_op(*op);
    return;
  }
  if (!op || op->what != op_context::kind::write) return;
  if (op->to < peers_.size()) {
    peer& pr = peers_[op->to];
    pr.write_bytes_out -= std::min<std::uint64_t>(pr.write_bytes_out, op->len);
  }
  if (op->orphan) {
    op->orphan = false;
    op->what = op_context::kind::free;
    free_ops_.push_back(op->index);
    return;
  }
  op->done = true;
  op->err = err;
}

bool device::sleep_prepare(const std::atomic<std::uint32_t>*& word,
                           std::uint32_t& expected) noexcept {
  if (wait_fd_ < 0 || !started_) return false;
  if (bundle_ || !held_.empty() || !bells_.empty() || !pending_.empty() ||
      !answers_due_.empty() || intake_due_ || credits_due_)
    return false;  // handed over or sent by the next poll, not by an arrival
  for (const op_context& op : ops_)  // cold: a few hundred entries, once per sleep
    if ((op.what == op_context::kind::write && !op.done && !op.orphan) ||
        op.what == op_context::kind::bounce)
      return false;  // the lower provider may need our progress to send it
  // The transport's own announce-then-look: 0 only if nothing is queued in the lower CQ and
  // the fd will turn readable on the next arrival (fi_poll(3), fi_trywait).
  fid* f = &cq_->fid;
  if (fi_trywait(fabric_, &f, 1) != 0) return false;
  judge_wait_fd();
  word = &no_word_;
  expected = no_word_.load(std::memory_order_relaxed);
  return true;
}

void device::judge_wait_fd() noexcept {
  const std::uint64_t now = monotonic_us();
  const bool moved = lower_entries_ != entries_at_arm_ || entries_moved_us_ == 0;
  if (moved) {
    entries_at_arm_ = lower_entries_;
    entries_moved_us_ = now;
    readable_at_arm_ = 0;
  }
  // Readable right after fi_trywait said the CQ is empty: an arrival raced the arm (tcp, now
  // and then), or the fd is stuck. Only a long run of them, with nothing read meanwhile, is
  // taken for the latter.
  pollfd p{wait_fd_, POLLIN, 0};
  const bool readable = ::poll(&p, 1, 0) == 1;
  if (stuck_) {
    nap_ms_ = moved ? 1 : std::min(2 * nap_ms_, stuck_nap_max_ms);
    // Quiet now: this sleep watches the fd, still bounded by the nap. A stuck fd is quiet now
    // and then too (before a lower connection forms, or just after a read drained it) and
    // turns readable again at once; trusting it at the first quiet arm cost a new stretch of
    // stuck_after_us with every sleeper spinning (net_native.wait_cpu: 450-860 wake-ups in
    // a 1 s fi_cq_sread, 2 runs in 5). Only stuck_after_arms quiet arms in a row trust it.
    quiet_at_arm_ = readable ? 0 : quiet_at_arm_ + 1;
    if (quiet_at_arm_ >= stuck_after_arms) {
      stuck_ = false;
      quiet_at_arm_ = 0;
      readable_at_arm_ = 0;  // trusted again: stuck only after a new run of readable arms
    }
    return;
  }
  if (!readable) {
    readable_at_arm_ = 0;
    return;
  }
  if (++readable_at_arm_ < stuck_after_arms || now - entries_moved_us_ < stuck_after_us) return;
  stuck_ = true;
  nap_ms_ = 1;
  quiet_at_arm_ = 0;
  stuck_found(lower_name_);
  if (!stuck_logged_) {
    stuck_logged_ = true;
    EXANET_LOG(warn, core,
               "network backend: %s's CQ wait fd stays readable with nothing to read (%u sleeps "
               "in a row); while it does, sleepers nap 1 to %u ms and look again",
               lower_name_.c_str(), readable_at_arm_, stuck_nap_max_ms);
  }
}

device::op_context* device::op_acquire() noexcept {
  if (free_ops_.empty()) return nullptr;
  op_context* op = &ops_[free_ops_.back()];
  free_ops_.pop_back();
  op->what = op_context::kind::write;
  op->done = false;
  op->err = 0;
  op->check = op_context::verdict::none;
  ++op->gen;
  return op;
}

// ---- bounce rings ---------------------------------------------------------------------------

bool device::bounce_reserve(peer_id p, std::size_t len, std::uintptr_t place_like,
                            ring_space& out) noexcept {
  if (p >= peers_.size() || len > bounce_max_ || bounce_ops_short(len)) return false;
  peer& pr = peers_[p];
  if (pr.dead) return false;
  if (pr.ring_out.empty()) {
    try {  // once per peer: the mirror our bytes are sent from
      pr.ring_out.resize(params_.net.ring_bytes);
    } catch (...) {
      return false;
    }
  }
  const std::uint64_t size = pr.ring_out.size();
  const auto base = reinterpret_cast<std::uintptr_t>(pr.ring_out.data());
  // Placed like the source within a cache line (the emulation's rule), and never wrapping.
  const auto placed = [&](std::uint64_t from) {
    return from + core::line_offset(place_like - base - from);
  };
  std::uint64_t head = placed(pr.ring_head);
  const std::uint64_t room_to_end = size - (head & (size - 1));
  if (room_to_end < len) head = placed(head + room_to_end);
  if (head + len - pr.ring_tail > size) return false;  // no credit until it consumes
  pr.credit_wait_from_us = 0;
  out.ring = 0;
  out.offset = head;
  out.handle = pr.ring_out.data() + (head & (size - 1));
  return true;
}

bool device::bounce_credit_coming(peer_id p, std::size_t len) noexcept {
  if (p >= peers_.size() || len > bounce_max_) return false;
  peer& pr = peers_[p];
  if (pr.dead) return false;
  // Short of lower operations: they come back as the lower provider completes what is in
  // flight (a bundle's at its send completion), with no bound: a fallback needs an operation
  // too and holds it longer (an RMA write by DMA keeps its operation until the target's
  // verdict, a round trip), so falling back fed the shortage. In runs where the lower sends
  // completed slowly, both sides of fi_rma_bw -S 64 wrote 55-100 % by DMA that way.
  if (bounce_ops_short(len)) return true;
  // Else credit can come only for bytes it has not credited yet; a ring never made waits for none.
  if (pr.ring_out.empty() || pr.ring_head == pr.ring_tail) return false;
  // Once over, the sends behind it take the fallback for credit_fallback_us.
  return still_waiting(pr.credit_wait_from_us);
}

bool device::still_waiting(std::uint64_t& from_us) noexcept {
  const std::uint64_t now = monotonic_us();
  if (from_us == 0) from_us = now;
  const std::uint64_t waited = now - from_us;
  if (waited < credit_wait_us) return true;
  if (waited < credit_wait_us + credit_fallback_us) return false;
  from_us = now;  // the fallback's time is up: wait again
  return true;
}

core::status device::sent_out(peer_id p, std::uint64_t mark) noexcept {
  if (p >= peers_.size()) return core::status::invalid;
  peer& pr = peers_[p];
  if (pr.handed_out >= mark) return core::status::ok;
  // Handed to a peer that died: as far as we can tell; not handed: it never will be.
  if (pr.dead) return pr.handed >= mark ? core::status::ok : core::status::peer_dead;
  // Waiting here (queued, or in the bundle): our polls hand it over, then look again. Handed,
  // with a completion at or after the mark: it will come. Otherwise (an inject last, which
  // completes nothing) an empty bundle follows it: a lower message the receiver takes as a
  // bundle without bytes or packets, whose completion covers everything before it.
  if (pr.queued > 0 || (bundle_ && bundle_->to == p) || pr.last_handed_completes)
    return core::status::again;
  op_context* op = op_acquire();
  if (!op) return core::status::again;  // the completions of those in flight free one
  op->what = op_context::kind::bounce;
  op->to = p;
  op->len = 0;
  op->count = 0;
  op->offset = 0;
  ring_packet h{};
  h.type = static_cast<std::uint8_t>(device_packet::bounce);
  op->header = to_packet(h);
  if (!core::ok(send_bounce(*op))) free_op(*op);  // again at the next look
  return core::status::again;
}

bool device::mailbox_credit_coming(peer_id p) noexcept {
  if (p >= peers_.size()) return false;
  peer& pr = peers_[p];
  if (pr.dead) return false;
  // Packets of ours queue to p while the lower operations are busy: a DMA write taken instead
  // would queue its question behind them and hold an operation longer. Our polls drain them.
  // No credit: p has not consumed our packets. The DMA path waits for p's progress as well (its
  // data lands, and its verdict comes, when p polls its lower provider), so it buys nothing but
  // a few more accepted writes, each costing a verdict: wait, with no bound. With a bound of
  // 1 ms, two processes sharing their cores with a third preempted each other past it, and
  // 64 B writes went 50-93 % by DMA at half the rate (fi_rma_bw, 2026-12-06). With credit
  // left, only our hello being due stopped the reserve: not a wait on p.
  return pr.queued > 0 || pr.credits == 0;
}

void device::bounce_write(peer_id p, const ring_space& at, std::span<const iovec> src,
                          std::size_t len) noexcept {
  peer& pr = peers_[p];
  core::copy_from_iov(at.handle, src, 0, len);
  pr.ring_head = at.offset + len;
  if (len == 0) return;  // nothing to carry (a zero-byte inline RMA write): see bounce_data
  // It must know us before it reads the bytes (the caller's mailbox_reserve sent our hello).
  if (pr.hello_due && (pr.credits == 0 || !core::ok(send_hello(p)))) return;
  // The bytes leave in bundles of at most lower_whole_, in ring order (FIFO per pair),
  // each within one pass of the ring. A bundle to p that waits (a burst, or packets of this
  // call) takes them when they continue its own bytes: all of them if the packet naming them
  // fits too (the caller publishes it next, and both leave as one lower message), else as
  // many as fit beside its packets, and it leaves full. So a stream of medium messages longer
  // than what one lower message carries beside a packet costs a lower message per
  // lower_whole_, not two per message (16 KiB over tcp;ofi_rxm). The rest starts a new
  // bundle: what fits with room for the packet (piece_bytes) waits there; longer, the leading
  // bytes go first, a full bundle at a time. The receiver lays a bundle's bytes in its ring
  // before it reads the bundle's packets, and no earlier packet names these bytes, which lie
  // past everything it was sent (the gaps of placement travel along).
  const std::uint64_t size = pr.ring_out.size();
  std::uint64_t from = at.offset;
  if (bundle_ && bundle_->to != p) flush_bundle();
  while (len > 0) {
    if (op_context* b = bundle_) {
      const std::uint64_t start = b->len == 0 ? from : b->offset;
      const bool continues = from >= b->offset + b->len && (start & (size - 1)) + (from + len - start) <= size;
      if (continues && b->count < wire::max_bundle_packets &&
          wire::bundle_bytes(from + len - start, b->count + 1u) <= lower_whole_) {
        b->offset = start;
        b->len = static_cast<std::size_t>(from + len - start);
        return;
      }
      const std::size_t used = wire::bundle_bytes(from - start, b->count);
      if (continues && used < lower_whole_ && len > lower_whole_ - used) {
        const std::size_t n = lower_whole_ - used;  // the leading bytes fill it
        b->offset = start;
        b->len = static_cast<std::size_t>(from + n - start);
        from += n;
        len -= n;
      }
      flush_bundle();
      continue;
    }
    op_context* op = bundle_for(p);  // bounce_reserve saw enough free
    if (!op) return;  // cannot happen; the receiver drops the packet that names the bytes
    op->offset = from;
    if (len <= piece_bytes()) {
      op->len = len;
      return;
    }
    const std::size_t n = lower_whole_ - wire::bundle_bytes(0, 0);
    op->len = std::min(len, n);
    from += op->len;
    len -= op->len;
    flush_bundle();
  }
}

const std::byte* device::bounce_data(peer_id from, std::uint32_t ring, std::uint64_t offset,
                                     std::size_t len) const noexcept {
  if (from >= peers_.size() || ring != 0) return nullptr;
  // No bytes: nothing was sent, nothing can be read; any valid address will do.
  static constexpr std::byte nothing{};
  if (len == 0) return &nothing;
  const peer& pr = peers_[from];
  const std::uint64_t size = pr.ring_in.size();
  if (size == 0 || len > size || (offset & (size - 1)) + len > size) return nullptr;
  if (offset < pr.ring_in_tail || offset > pr.ring_in_head || len > pr.ring_in_head - offset)
    return nullptr;
  // Within the bundle being handled: where it arrived. A range reaching into it from before is
  // not there (open_bundle copied such a bundle's bytes into the ring at once).
  if (staged_.bytes && from == staged_.from && offset + len > staged_.offset) [[likely]] {
    if (offset < staged_.offset) return nullptr;
    return staged_.bytes + (offset - staged_.offset);
  }
  return pr.ring_in.data() + (offset & (size - 1));
}

void device::settle_staged() noexcept {
  peer& pr = peers_[staged_.from];
  const std::uint64_t from = std::max(pr.ring_in_tail, staged_.offset);
  if (from < staged_.end)
    std::memcpy(pr.ring_in.data() + (from & (pr.ring_in.size() - 1)),
                staged_.bytes + (from - staged_.offset), staged_.end - from);
  staged_ = {};
}

void device::bounce_consume(peer_id from, std::uint32_t ring, std::uint64_t end) noexcept {
  if (from >= peers_.size() || ring != 0) return;
  peer& pr = peers_[from];
  if (end <= pr.ring_in_tail || end > pr.ring_in_head) return;
  pr.ring_in_tail = end;
  // Credit back every quarter ring: a message is at most half a ring, so a sender whose bytes
  // were all consumed always has room for the next, one packet per many messages.
  if (pr.ring_in_tail - pr.ring_in_told >= pr.ring_in.size() / 4) send_ring_credit(from);
}

std::size_t device::open_bundle(const fi_cq_data_entry& e) noexcept {
  ring_packet h{};
  if (!e.buf || e.len < packet_bytes) {
    ++drops_.bad_field;
    return 0;
  }
  std::memcpy(&h, e.buf, sizeof h);
  if (h.type != static_cast<std::uint8_t>(device_packet::bounce) ||
      h.packets > wire::max_bundle_packets || e.len > lower_whole_ ||
      e.len != wire::bundle_bytes(h.len, h.packets)) {
    ++drops_.bad_field;  // not a lower message this backend sends
    if (e.len > lower_whole_ && e.len == wire::bundle_bytes(h.len, h.packets))
      EXANET_LOG_ONCE(warn, core, "network backend: a %zu-byte lower message dropped, longer "
                      "than this process's %zu (every process must use the same "
                      "FI_OFI_RXM_BUFFER_SIZE and FI_OFI_RXM_EAGER_LIMIT)", std::size_t{e.len},
                      lower_whole_);
    return 0;
  }
  auto it = by_incarnation_.find(e.data);
  if (it == by_incarnation_.end()) {
    ++drops_.unknown_sender;
    return 0;
  }
  peer& pr = peers_[it->second];
  if (pr.dead) {
    ++drops_.from_lost;
    return 0;
  }
  pr.heard = true;
  if (h.len == 0) return h.packets;
  // The packets go on whatever becomes of the bytes: each holds a credit its sender gets back
  // only when it is handled, and a packet naming refused bytes is refused where it is read.
  const std::uint64_t size = pr.ring_in_bytes != 0 ? pr.ring_in_bytes : params_.net.ring_bytes;
  // In order, within the credit it was given, never wrapping: anything else is a bad sender.
  if (h.offset < pr.ring_in_head || h.offset + h.len - pr.ring_in_tail > size ||
      (h.offset & (size - 1)) + h.len > size) {
    ++drops_.bad_field;
    EXANET_LOG_ONCE(warn, core, "network backend: bounce bytes outside the sender's credit "
                    "dropped (outside the ring its hello announced)");
    return h.packets;
  }
  if (pr.ring_in.empty()) {
    try {  // once per sender: its ring here
      pr.ring_in.resize(size);
    } catch (...) {
      ++drops_.bad_field;
      EXANET_LOG_ONCE(warn, core, "network backend: no memory for a sender's bounce ring");
      return h.packets;
    }
  }
  const std::byte* bytes = static_cast<const std::byte*>(e.buf) + packet_bytes;
  // Bytes of this sender still unconsumed before these (the leading bytes of the same medium
  // message, sent alone, or a message whose packet waits): one contiguous range may span both,
  // so these join them in the ring now. Otherwise they are read where they arrived.
  if (staged_.bytes) settle_staged();  // a poll inside an outer one's packet (poll_depth)
  if (pr.ring_in_tail < pr.ring_in_head || h.packets == 0)
    std::memcpy(pr.ring_in.data() + (h.offset & (size - 1)), bytes, h.len);
  else
    staged_ = {bytes, it->second, h.offset, h.offset + h.len};
  pr.ring_in_head = h.offset + h.len;
  return h.packets;
}

void device::send_ring_credit(peer_id p) noexcept {
  peer& pr = peers_[p];
  ring_packet c{};
  c.type = static_cast<std::uint8_t>(device_packet::ring_credit);
  c.offset = pr.ring_in_tail;
  // Takes no credit (the sender handles it at once). One the lower endpoint cannot take now
  // goes at the next poll. The sender must know us to read it: our hello first if it is due.
  if ((pr.hello_due && (pr.credits == 0 || !core::ok(send_hello(p)))) ||
      inject(p, to_packet(c)) != core::status::ok) {
    pr.ring_credit_due = credits_due_ = true;
    return;
  }
  pr.ring_in_told = pr.ring_in_tail;
  pr.ring_credit_due = false;
}

void device::send_due_credits() noexcept {
  credits_due_ = false;
  for (peer_id p = 0; p < peers_.size(); ++p) {
    peer& pr = peers_[p];
    if (pr.dead) continue;
    if (pr.ring_credit_due) send_ring_credit(p);
    if (pr.packet_credit_due) {
      pr.packet_credit_due = false;
      give_credit(p);  // nothing if credit_along carried it meanwhile
    }
  }
}

// ---- notification slots ---------------------------------------------------------------------

bool device::notify_alloc(std::uint32_t& out_slot, std::uint32_t& gen) noexcept {
  // A linear scan is enough for a first step; the slot array is small and windows are per
  // transfer, not per packet.
  for (std::uint32_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].gen != 0) continue;
    gen = next_gen_++;
    if (next_gen_ > 0x7fffffffu) next_gen_ = 1;
    slots_[i].gen = gen;
    slots_[i].landed = 0;
    out_slot = i;
    return true;
  }
  return false;
}

bool device::window_open(std::uint32_t s, std::uint64_t va, std::uint64_t len) noexcept {
  if (s >= slots_.size() || slots_[s].gen == 0) return false;
  slot& sl = slots_[s];
  if (sl.mr) {
    fi_close(&sl.mr->fid);
    sl.mr = nullptr;
  }
  if (len == 0) return true;
  sl.mr = register_lower(va, len, FI_REMOTE_WRITE, window_key(s, sl.gen));
  return sl.mr != nullptr;
}

fid_mr* device::register_lower(std::uint64_t va, std::uint64_t len, std::uint64_t access,
                               std::uint64_t key, bool quiet) noexcept {
  fid_mr* mr = nullptr;
  const int rc = fi_mr_reg(domain_, reinterpret_cast<void*>(va), len, access, 0, key, 0, &mr,
                           nullptr);
  if (rc != 0 && quiet) return nullptr;
  if (rc != 0) {
    EXANET_LOG_ONCE(warn, core, "network backend: registering %llu bytes with %s failed: %s",
               static_cast<unsigned long long>(len), lower_name_.c_str(), fi_strerror(-rc));
    return nullptr;
  }
  if (info_->domain_attr->mr_mode & FI_MR_ENDPOINT) {
    if (fi_mr_bind(mr, &ep_->fid, 0) != 0 || fi_mr_enable(mr) != 0) {
      fi_close(&mr->fid);
      return nullptr;
    }
  }
  return mr;
}

bool device::notify_adopt(std::uint32_t s, std::uint32_t gen) noexcept {
  if (s >= slots_.size() || gen == 0) return false;
  if (slots_[s].mr) fi_close(&slots_[s].mr->fid);
  slots_[s] = slot{};
  slots_[s].gen = gen;
  return true;
}

void device::notify_free(std::uint32_t s) noexcept {
  if (s >= slots_.size()) return;
  if (slots_[s].mr) fi_close(&slots_[s].mr->fid);
  slots_[s] = slot{};
}

// ---- DMA engine -----------------------------------------------------------------------------

core::status device::dma_post(const dma_write& w, dma_state& st) noexcept {
  if (w.peer >= peers_.size()) return core::status::invalid;
  peer& pr = peers_[w.peer];
  if (pr.dead) {
    auto* op = static_cast<op_context*>(st.in_flight);
    // A piece whose completion and verdict came before the peer's bye, often in the same read
    // of the lower CQ (a target that exits right after its event), is judged below as if the
    // peer were alive: it landed, and the write may be complete.
    const bool judged = op && op->done && (op->check != op_context::verdict::awaited || op->err);
    if (!judged) {
      if (op) {
        // The lower provider may never complete it (tcp;ofi_rxm retries a dead peer for ever):
        // its context is freed if and when it completes, and the caller's buffers are released.
        // One that completed and waited for its verdict is freed now.
        if (op->done) free_op(*op);
        else op->orphan = true;
        st.in_flight = nullptr;
      }
      return core::status::peer_dead;
    }
  }
  // Through a window (slot, generation) or through a registration the target told us of.
  std::uint64_t lower_key = window_key(w.notify_slot, w.notify_gen), base = w.dst_base;
  remote_grant* through = nullptr;
  if (w.key_slot != no_key_slot) {
    for (remote_grant& rg : pr.grants)
      if (rg.st == remote_grant::state::known && rg.slot == w.key_slot) through = &rg;
    if (through) {
      lower_key = through->lower_key;
      base = through->g.va;
    }
  }
  while (st.done < w.len) {
    if (!st.in_flight) {
      if (pr.dead) return core::status::peer_dead;  // the piece before was its last word
      // rma_check never passed for this slot, or the owner has closed the registration since
      // (key_gone) and the rest of the write must not go: access. A piece in flight is waited
      // for below first (its source is in use until it completes).
      if (w.key_slot != no_key_slot && !through) return core::status::access;
      // Bounded bytes ahead of the peer's next packet (write_bytes_ahead): a piece waits for
      // room, and takes no more than there is.
      if (pr.write_bytes_out >= write_bytes_ahead) return core::status::again;
      op_context* op = op_acquire();
      if (!op) return core::status::again;
      iovec local[16];
      const std::size_t n = core::slice_iov(
          w.src, w.src_offset + st.done,
          std::min<std::uint64_t>(w.len - st.done, write_bytes_ahead - pr.write_bytes_out), local,
          iov_limit_);
      std::size_t len = 0;
      for (std::size_t i = 0; i < n; ++i) len += local[i].iov_len;
      const std::uint64_t at = w.dst_addr + st.done - (offset_addressing_ ? base : 0);
      fi_rma_iov remote{at, len, lower_key};
      // What waits in the bundle was sent first; but this write's landing record
      // (notify_record_put) may stay there and leave after the data, as one lower message
      // with the notification that follows at once (notify_ahead): the record only has to be
      // in place before the notification.
      if (bundle_ && !(w.notify_ahead && bundle_->to == w.peer && bundle_->len == 0))
        flush_bundle();
      fi_msg_rma m{};
      m.msg_iov = local;
      m.iov_count = n;
      m.addr = pr.fa;
      m.rma_iov = &remote;
      m.rma_iov_count = 1;
      m.context = op;
      // Delivery complete: the target's verdict (its lower provider checks key and range) comes
      // back with the completion, and the source may be reused once it is in.
      const ssize_t rc = fi_writemsg(ep_, &m, FI_COMPLETION | FI_DELIVERY_COMPLETE);
      if (rc != 0) {
        op->what = op_context::kind::free;
        free_ops_.push_back(op->index);
        if (rc == -FI_EAGAIN) return core::status::again;
        return from_fi(static_cast<int>(rc));
      }
      op->done = false;
      op->to = w.peer;
      st.in_flight = op;
      op->len = len;
      pr.write_bytes_out += len;
      bytes_sent_ += len;
      // The lower provider keeps sends after writes in order on the connection (as the
      // notification behind the data needs): whatever is sent to the peer from now on lands
      // behind this piece. Wrong only if the target's verdict says it missed (a registration
      // closed under it, stale below), and then the write is checked and written anew.
      st.ahead_of_later_packets = st.done + len == w.len;
      if (through) {
        // Behind the data (FI_ORDER_SAW): did it go into the registration the answer named? A
        // registration closed since left a sink under its lower key (leave_sink), and the
        // data went there, or into the key's next registration; only the owner can tell.
        op->check = op_context::verdict::awaited;
        wire::write_check_packet c{};
        c.type = static_cast<std::uint8_t>(device_packet::write_check);
        c.slot = through->slot;
        c.gen = through->gen;
        c.op = op->index;
        c.op_gen = op->gen;
        // The last piece's check takes the write's report along, if it has a credit now: the
        // owner delivers it as it answers the check, so the report reaches the target's
        // protocol right behind the data, not a verdict's round trip later (without a credit
        // the caller sends it after, as before). Every earlier piece has landed (each waited
        // for its verdict).
        const bool report = w.deliver_if_landed && st.done + len == w.len && !st.delivered &&
                            !pr.hello_due && can_send(pr);
        c.then_deliver = report ? 1 : 0;
        send_uncredited(w.peer, to_packet(c));
        if (report && core::ok(send_or_queue(w.peer, *w.deliver_if_landed))) st.delivered = true;
      }
      // The notification of a window's last piece goes now when the caller allows it
      // (notify_ahead), not when the write completes: FI_ORDER_SAW already keeps it behind
      // the data at the target, and waiting for the delivery acknowledgement would add a
      // round trip between the data and the receiver's completion (and need our progress in
      // between). A write the target refuses does not let it through: the target's lower
      // provider breaks the connection at the refused write (tcp closes it; a reliable
      // connection goes to error), so nothing sent after it on that connection is delivered.
      // RMA writes (key_slot) keep the order below: their notification is the target's event,
      // and a write through a key revoked since must not produce one even where the lower
      // provider carries on.
      if (w.notify && w.notify_ahead && !st.notified && w.key_slot == no_key_slot &&
          st.done + len == w.len && can_send(pr)) {
        if (core::status s = send_notify(w); core::ok(s)) st.notified = true;
      }
      return core::status::again;
    }
    auto* op = static_cast<op_context*>(st.in_flight);
    if (!op->done || (op->check == op_context::verdict::awaited && op->err == 0))
      return core::status::again;
    const int err = op->err;
    const bool missed = op->check == op_context::verdict::missed;
    const std::size_t len = op->len;
    op->what = op_context::kind::free;
    free_ops_.push_back(op->index);
    st.in_flight = nullptr;
    if (err) {
      EXANET_LOG_ONCE(warn, core, "network backend: write of %zu bytes refused or failed: %s",
                      len, fi_strerror(err));
      if (through) {
        // The target no longer grants what it told us (revoked, or registered anew): forget
        // its answer, so the next access asks again.
        const std::uint32_t slot = w.key_slot;
        std::erase_if(pr.grants, [slot](const remote_grant& rg) {
          return rg.st == remote_grant::state::known && rg.slot == slot;
        });
      }
      return from_fi(-err) == core::status::again ? core::status::io : from_fi(-err);
    }
    if (missed) {
      // The owner closed the registration before the data came: it went into the sink or the
      // key's next registration. Forget the answer; the caller checks again and writes anew.
      const std::uint32_t slot = w.key_slot;
      std::erase_if(pr.grants, [slot](const remote_grant& rg) {
        return rg.st == remote_grant::state::known && rg.slot == slot;
      });
      ++stale_writes_;
      return core::status::stale;
    }
    st.done += len;
  }
  if (w.notify && !st.notified) {
    if (pr.dead) return core::status::peer_dead;
    if (!can_send(pr)) return core::status::again;
    if (core::status s = send_notify(w); !core::ok(s)) return s;
    st.notified = true;
  }
  return core::status::ok;
}

core::status device::send_notify(const dma_write& w) noexcept {
  notify_packet n{};
  n.type = static_cast<std::uint8_t>(device_packet::notify);
  n.slot = w.notify_slot;
  n.gen = w.notify_gen;
  n.data = w.notify_data;
  return send_or_queue(w.peer, to_packet(n));
}

// ---- landing records and access events ------------------------------------------------------

core::status device::notify_record_put(peer_id p, std::uint32_t slot, const notification& rec) noexcept {
  if (p >= peers_.size()) return core::status::invalid;
  peer& pr = peers_[p];
  if (pr.dead) return core::status::peer_dead;
  if (!can_send(pr)) return core::status::again;
  notify_packet r{};
  r.type = static_cast<std::uint8_t>(device_packet::record);
  r.slot = slot;
  r.data = rec;
  // In the bundle: it leaves with the write's notification (dma_post), or before anything else
  // sent, or at the next poll.
  return send_or_queue(p, to_packet(r), true);
}

// ---- lost peers -------------------------------------------------------------------------------

void device::say_bye() noexcept {
  // What we accepted to send was counted as sent (an answer to a peer's write_check, a packet
  // queued behind a busy lower endpoint): it goes before the endpoint closes, and a bye behind
  // it, so that peers count us lost at once instead of after lost_after_ms of silence. Each bye
  // is a send with a completion: FIFO per pair, its completion says everything before it to
  // that peer has left (an inject's cannot). A process often exits right after the close (its
  // peer waits for our verdict on the write it just made), so this waits for those
  // completions, for at most bye_linger_ms when a peer does not take them.
  if (bundle_) flush_bundle();
  struct bye_sent {
    op_context* op;
    std::uint32_t gen;
  };
  std::vector<bye_sent> sent;
  std::vector<bool> said;
  try {
    sent.reserve(peers_.size());
    said.assign(peers_.size(), false);
  } catch (...) {
    return;  // no memory: peers count us lost after their silence instead
  }
  const std::uint64_t t0 = monotonic_us();
  for (;;) {
    drive();  // reads completions (and answers write_checks that came meanwhile), sends the queue
    bool all_said = true;
    for (peer_id p = 0; p < peers_.size(); ++p) {
      const peer& pr = peers_[p];
      if (said[p] || pr.dead || pr.hello_due) continue;  // never told of us: nothing to say
      if (pr.queued > 0) {  // FIFO: after the queue to it
        all_said = false;
        continue;
      }
      op_context* op = op_acquire();
      if (!op) {
        all_said = false;
        break;
      }
      // A bounce message of its header alone: freed by its completion (on_tx_done).
      op->what = op_context::kind::bounce;
      op->to = p;
      op->len = 0;
      op->count = 0;
      op->header = {};
      op->header[0] = static_cast<std::byte>(device_packet::bye);
      const core::status s = send_bounce(*op);
      if (core::ok(s)) {
        said[p] = true;
        sent.push_back({op, op->gen});
        continue;
      }
      free_op(*op);
      if (s == core::status::again) {
        all_said = false;
      } else {
        said[p] = true;  // the lower endpoint refuses sends to it: nothing more will go
      }
    }
    std::erase_if(sent, [](const bye_sent& b) {
      return b.op->what != op_context::kind::bounce || b.op->gen != b.gen;  // completed
    });
    if (all_said && sent.empty()) return;
    if (monotonic_us() - t0 >= std::uint64_t{bye_linger_ms} * 1000) {
      EXANET_LOG(info, core, "network backend: closing with %zu byes unconfirmed after %u ms "
                 "(those peers count us lost after their silence)", sent.size(), bye_linger_ms);
      return;
    }
  }
}

void device::send_signal(peer_id p, device_packet type, std::uint8_t arg) noexcept {
  // Liveness packets take no credit: the receiver handles them at once, like credit packets.
  peer& pr = peers_[p];
  if (pr.hello_due) {  // it must know our incarnation to read them; the hello takes a credit
    if (pr.credits == 0 || !core::ok(send_hello(p))) return;
  }
  packet pk{};
  pk[0] = static_cast<std::byte>(type);
  pk[1] = static_cast<std::byte>(arg);
  (void)inject(p, pk);  // again: the next look sends another
}

void device::send_intake() noexcept {
  // Takes no credit (a receiver that holds its intake may have none to give). Each peer is told
  // the current value once; one the lower endpoint could not take now is told at the next poll.
  bool all = true;
  for (peer_id p = 0; p < peers_.size(); ++p) {
    peer& pr = peers_[p];
    if (pr.dead || pr.intake_sent == intake_held_) continue;  // a new peer starts un-held
    if (pr.hello_due && (pr.credits == 0 || !core::ok(send_hello(p)))) {
      all = false;  // it must know us to read the packet
      continue;
    }
    packet pk{};
    pk[0] = static_cast<std::byte>(device_packet::intake);
    pk[1] = static_cast<std::byte>(intake_held_ ? 1 : 0);
    if (inject(p, pk) == core::status::ok)
      pr.intake_sent = intake_held_;
    else
      all = false;
  }
  intake_due_ = !all;
}

void device::check_liveness(std::uint64_t now_ms) noexcept {
  if (now_ms - liveness_checked_ms_ >= params_.liveness_period_ms) liveness_checked_ms_ = now_ms;
  death_since_check_ = false;
  reap_sinks();  // a peer lost since its key_gone went will not answer it
  const std::uint64_t quarter = params_.net.lost_after_ms / 4;
  for (peer_id p = 0; p < peers_.size(); ++p) {
    peer& pr = peers_[p];
    if (pr.dead || pr.forgotten) continue;
    if (pr.heard) {
      pr.heard = false;
      pr.heard_ms = now_ms;
      pr.ping_out_ms = 0;
      continue;
    }
    const std::uint64_t silent = now_ms - pr.heard_ms;
    if (silent < quarter) continue;
    // Silent for a while: ask. Lost only once a ping stayed unanswered for three quarters of
    // lost_after_ms and the silence reached it (after a long gap between looks, a ping first).
    if (pr.ping_out_ms != 0 && now_ms - pr.ping_out_ms >= 3 * quarter &&
        silent >= params_.net.lost_after_ms) {
      EXANET_LOG(info, core, "network backend: peer %u silent for %llu ms, unanswered pings; "
                 "counted lost", p, static_cast<unsigned long long>(silent));
      log_silence(p);
      mark_dead(p);
      continue;
    }
    if (pr.ping_out_ms == 0) {  // 0 means none out
      pr.ping_out_ms = now_ms ? now_ms : 1;
      log_silence(p);
    }
    if (now_ms - pr.pinged_ms >= quarter || pr.pinged_ms < pr.heard_ms) {
      pr.pinged_ms = now_ms;
      send_signal(p, device_packet::ping);
    }
  }
}

void device::log_silence(peer_id p) const noexcept {
  const peer& pr = peers_[p];
  EXANET_LOG(info, core, "network backend: peer %u silent: credits %u, consumed %u, queued %u, "
             "answers out %u and queued %u, ring out %llu bytes, ring in %llu bytes; free "
             "operations %zu, pending %zu, bundle %s",
             p, pr.credits, pr.consumed, pr.queued, pr.answers_out, pr.answers_queued,
             static_cast<unsigned long long>(pr.ring_head - pr.ring_tail),
             static_cast<unsigned long long>(pr.ring_in_head - pr.ring_in_tail), free_ops_.size(),
             pending_.size(), bundle_ ? "waiting" : "none");
}

void device::forget_dead_peer(peer_id p) noexcept {
  peer& pr = peers_[p];
  settle_dead(pr);
  pr.forgotten = true;
  pr.grants.clear();
  if (bundle_ && bundle_->to == p) {
    free_op(*bundle_);
    set_bundle(nullptr);
  }
  // Packets still queued to it will never be read: drop them (their credits do not matter now).
  std::erase_if(pending_, [this, p](const pending_packet& q) {
    if (q.to != p) return false;
    if (q.bounce) free_op(*q.bounce);
    return true;
  });
  std::erase_if(answers_due_, [p](const pending_packet& q) { return q.to == p; });
  pr.queued = 0;
  pr.answers_queued = 0;
  // Packets it sent before it was lost and that wait in held_ are still delivered: it did send
  // them (as the emulation delivers what a dead peer left in the mailbox).
}

// ---- RMA: registrations, checked at the target ----------------------------------------------

core::status device::key_publish(const key_grant& g, std::uint32_t& out) noexcept {
  std::uint32_t free_slot = no_key_slot;
  for (std::uint32_t i = 0; i < grants_.size(); ++i) {
    if (grants_[i].gen != 0 && grants_[i].g.key == g.key) return core::status::exists;
    if (grants_[i].gen == 0 && free_slot == no_key_slot) free_slot = i;
  }
  if (free_slot == no_key_slot) return core::status::no_memory;
  out = free_slot;
  return key_publish_at(g, free_slot);
}

core::status device::key_publish_at(const key_grant& g, std::uint32_t free_slot) noexcept {
  if (free_slot >= grants_.size()) return core::status::no_memory;
  if (grants_[free_slot].gen != 0) return core::status::exists;
  const std::uint32_t gen = next_grant_gen_;
  next_grant_gen_ = next_grant_gen_ >= 0x3fffffffu ? 1 : next_grant_gen_ + 1;
  const std::uint64_t access = ((g.access & rma_access::remote_write) ? FI_REMOTE_WRITE : 0) |
                               ((g.access & rma_access::remote_read) ? FI_REMOTE_READ : 0);
  fid_mr* mr = nullptr;
  if (g.len > 0 && access != 0 && !g.may_fault) {  // nothing the lower provider may write (rma_check)
    if (key_is_lower_key(g) && sink_yields(g.key, g))
      mr = register_lower(g.va, g.len, access, g.key, true);
    if (!mr) mr = register_lower(g.va, g.len, access, grant_fallback_key(free_slot, gen));
    if (!mr) return core::status::io;
  }
  // Published by gen: the registering thread holds none of the endpoint's locks, and under
  // FI_PROGRESS_AUTO the progress thread reads the table (on_key_query, grant_check).
  grants_[free_slot].g = g;
  grants_[free_slot].mr = mr;
  grants_[free_slot].lower_key = mr ? fi_mr_key(mr) : 0;
  grants_[free_slot].told_any = 0;
  std::atomic_ref<std::uint32_t>(grants_[free_slot].gen).store(gen, std::memory_order_release);
  return core::status::ok;
}

void device::key_revoke(std::uint32_t slot) noexcept {
  if (slot >= grants_.size()) return;
  grant_slot& gs = grants_[slot];
  const std::uint32_t gen = std::atomic_ref<std::uint32_t>(gs.gen).exchange(0);
  // Its askers are told at the endpoint's next send or poll, before anything else goes.
  gone_due_.store(true, std::memory_order_release);
  if (!gs.mr) return;
  // After gen (seq_cst, as on_key_query): an answer given is seen here, or was not given.
  const bool told = std::atomic_ref<std::uint8_t>(gs.told_any).load() != 0;
  if (told && gen != 0 && offset_addressing_ && (gs.g.access & rma_access::remote_write))
    leave_sink(slot, gen);
  else
    fi_close(&gs.mr->fid);
  gs.mr = nullptr;
}

void device::leave_sink(std::uint32_t slot, std::uint32_t gen) noexcept {
  grant_slot& gs = grants_[slot];
  const std::uint64_t key = gs.lower_key, len = gs.g.len;
  fi_close(&gs.mr->fid);  // the key is free for the sink
  std::lock_guard lock(sinks_lock_);
  const char* failed = nullptr;
  void* memory = MAP_FAILED;
  fid_mr* mr = nullptr;
  if (sinks_.size() >= grants_.size()) {
    failed = "too many closed registrations still known to peers";
  } else if ((memory = mmap(nullptr, len, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)) == MAP_FAILED) {
    failed = "no address space";
  } else if (!(mr = register_lower(reinterpret_cast<std::uint64_t>(memory), len, FI_REMOTE_WRITE,
                                   key, true))) {
    failed = "the lower provider refused it";
  } else {
    try {
      sinks_.push_back(sink{slot, gen, key, len, mr, memory, false, {}});
      sinks_count_.store(sinks_.size(), std::memory_order_relaxed);
      return;
    } catch (...) {
      failed = "no memory";
    }
  }
  if (mr) fi_close(&mr->fid);
  if (memory != MAP_FAILED) munmap(memory, len);
  EXANET_LOG_ONCE(warn, core, "network backend: no sink for a closed registration (%s): a write "
                  "a peer makes through it before it hears of the close is refused by %s, "
                  "which may cost the pair's connection", failed, lower_name_.c_str());
}

void device::release(sink& k) noexcept {
  if (k.mr) fi_close(&k.mr->fid);
  if (k.memory) munmap(k.memory, k.len);
  k.mr = nullptr;
  k.memory = nullptr;
}

bool device::sink_yields(std::uint64_t key, const key_grant& g) noexcept {
  if (sinks_count_.load(std::memory_order_relaxed) == 0) return true;
  std::lock_guard lock(sinks_lock_);
  const auto it = std::find_if(sinks_.begin(), sinks_.end(),
                               [key](const sink& k) { return k.lower_key == key; });
  if (it == sinks_.end()) return true;
  // Every write an old answer admits (offsets below its length) fits g: it may land there, as
  // the key's current registration says (its writer is told it missed, and writes again).
  if (g.len < it->len || !(g.access & rma_access::remote_write)) return false;
  release(*it);
  sinks_.erase(it);
  sinks_count_.store(sinks_.size(), std::memory_order_relaxed);
  return true;
}

void device::reap_sinks() noexcept {
  if (sinks_count_.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard lock(sinks_lock_);
  std::erase_if(sinks_, [this](sink& k) {
    std::erase_if(k.waiting, [this](peer_id p) { return p >= peers_.size() || peers_[p].dead; });
    if (!k.announced || !k.waiting.empty()) return false;
    release(k);
    return true;
  });
  sinks_count_.store(sinks_.size(), std::memory_order_relaxed);
}

bool device::key_at(std::uint32_t slot, key_grant& out) const noexcept {
  if (slot >= grants_.size() || live_gen(grants_[slot]) == 0) return false;
  out = grants_[slot].g;
  return true;
}

core::status device::grant_check(std::uint64_t key, std::uint64_t addr, std::uint64_t len,
                                 std::uint32_t need, rma_target& out) const noexcept {
  for (std::uint32_t i = 0; i < grants_.size(); ++i) {
    const grant_slot& gs = grants_[i];
    if (live_gen(gs) == 0 || gs.g.key != key) continue;
    return grant_target(gs.g, i, addr, len, need, out) ? core::status::ok : core::status::access;
  }
  return core::status::access;
}

core::status device::rma_check(peer_id p, std::uint64_t key, std::uint64_t addr,
                               std::uint64_t len, std::uint32_t need, rma_target& out) noexcept {
  if (p >= peers_.size()) return core::status::invalid;
  peer& pr = peers_[p];
  if (pr.dead) return core::status::peer_dead;  // before anything that could say again for ever
  const auto it = std::find_if(pr.grants.begin(), pr.grants.end(),
                               [key](const remote_grant& rg) { return rg.g.key == key; });
  if (it != pr.grants.end()) {
    switch (it->st) {
      case remote_grant::state::asked:
        return core::status::again;
      case remote_grant::state::refused:
        pr.grants.erase(it);  // said once; the key may be registered later
        return core::status::access;
      case remote_grant::state::known:
        if (!grant_admits(it->g, addr, len, need, out.va)) {
          // The answer may be stale: the owner can have closed the registration and made a
          // new one under the same key (MPICH's large messages reuse keys). Only a fresh
          // answer refuses; an old one is asked again.
          if (it->fresh) {
            it->fresh = false;
            return core::status::access;
          }
          pr.grants.erase(it);
          break;
        }
        it->fresh = false;
        // Not known to be backed: the lower provider would land the data itself (tcp copies
        // it from its own buffer into ours), and a page missing there kills the target. Reads
        // (answered by the target) and atomics (performed by it) check every page instead.
        if (it->g.may_fault && (need & rma_access::remote_write)) return core::status::refused;
        out.key_slot = it->slot;
        out.events = it->g.events;
        out.may_fault = it->g.may_fault;
        return core::status::ok;
    }
  }
  if (!can_send(pr)) return core::status::again;
  if (pr.grants.size() >= max_remote_grants) {
    // Bounded: forget the oldest answer (a later use of its key asks again). Questions still
    // out are kept, or their answers would find nobody waiting.
    auto oldest = std::find_if(pr.grants.begin(), pr.grants.end(), [](const remote_grant& rg) {
      return rg.st != remote_grant::state::asked;
    });
    if (oldest == pr.grants.end()) return core::status::again;
    pr.grants.erase(oldest);
  }
  key_query_packet q{};
  q.type = static_cast<std::uint8_t>(device_packet::key_query);
  q.key = key;
  if (core::status s = send_or_queue(p, to_packet(q)); !core::ok(s)) return s;
  remote_grant rg;
  rg.g.key = key;
  try {
    pr.grants.push_back(rg);
  } catch (...) {
    return core::status::no_memory;  // the answer, when it comes, finds no question: dropped
  }
  return core::status::again;
}

void device::on_key_query(peer_id from, const packet& pk) noexcept {
  if (answers_due_.size() >= max_remote_grants * peers_.size()) {
    // More questions than honest askers can have out while they give us no credit: dropped.
    ++drops_.bad_field;
    return;
  }
  const auto q = from_packet<key_query_packet>(pk);
  key_answer_packet a{};
  a.type = static_cast<std::uint8_t>(device_packet::key_answer);
  a.key = q.key;
  for (std::uint32_t i = 0; i < grants_.size(); ++i) {
    grant_slot& gs = grants_[i];
    const std::uint32_t gen = live_gen(gs);
    if (gen == 0 || gs.g.key != q.key) continue;
    // Marked before gen is looked at again (seq_cst, as key_revoke): a close that did not see
    // the mark is seen here, and nothing is answered.
    std::atomic_ref<std::uint8_t>(gs.told_any).store(1);
    if (std::atomic_ref<std::uint32_t>(gs.gen).load() != gen) continue;
    a.found = 1;
    a.events = gs.g.events;
    a.may_fault = gs.g.may_fault;
    a.access = gs.g.access;
    a.va = gs.g.va;
    a.len = gs.g.len;
    a.addr_base = gs.g.addr_base;
    a.slot = i;
    a.gen = gen;
    a.lower_key = gs.lower_key;
  }
  if (a.found) {
    // Told of this generation: it hears of the close (announce_gone). Once per peer and
    // generation; an allocation failure leaves it untold, as before key_gone existed.
    auto& told = grants_[a.slot].told;
    const std::pair<peer_id, std::uint32_t> entry{from, a.gen};
    if (std::find(told.begin(), told.end(), entry) == told.end()) {
      try {
        if (told.empty()) told_slots_.push_back(a.slot);
        told.push_back(entry);
      } catch (...) {
        if (told.empty()) std::erase(told_slots_, a.slot);
      }
    }
  }
  answers_due_.push_back({from, to_packet(a)});
  send_due_answers();
}

void device::send_due_answers() noexcept {
  // In order of the questions; an answer waits for a credit at its asker like any packet.
  while (!answers_due_.empty()) {
    const pending_packet& a = answers_due_.front();
    const peer& pr = peers_[a.to];
    if (pr.dead) {  // nobody to answer: it must not hold up the answers behind it
      answers_due_.pop_front();
      continue;
    }
    if (!can_send(pr)) return;
    if (!core::ok(send_or_queue(a.to, a.pk))) return;
    answers_due_.pop_front();
  }
}

void device::on_key_answer(peer_id from, const packet& pk) noexcept {
  const auto a = from_packet<key_answer_packet>(pk);
  for (remote_grant& rg : peers_[from].grants) {
    if (rg.st != remote_grant::state::asked || rg.g.key != a.key) continue;
    if (!a.found) {
      rg.st = remote_grant::state::refused;
      return;
    }
    if (a.slot >= (1u << 16) || a.len > ~std::uint64_t{0} - a.va) {
      ++drops_.bad_field;  // malformed: the question ends in a refusal, never a wait for ever
      rg.st = remote_grant::state::refused;
      return;
    }
    rg.st = remote_grant::state::known;
    rg.fresh = true;
    rg.slot = a.slot;
    rg.gen = a.gen;
    rg.lower_key = a.lower_key;
    rg.g = {a.key, a.va, a.len, a.addr_base, a.access, a.events != 0, a.may_fault != 0};
    return;
  }
  ++drops_.bad_field;  // an answer nobody asked for, or a malformed one
}

void device::announce_gone() noexcept {
  // Lowered first, reading the last raise (acquire: the generation it follows is seen below);
  // a revocation while we look raises it again for the next send or poll.
  if (!gone_due_.exchange(false, std::memory_order_acquire)) return;
  std::unique_lock lock(sinks_lock_);  // rare: after a close; a sink may be made meanwhile
  for (const std::uint32_t slot : told_slots_) {
    auto& told = grants_[slot].told;
    const std::uint32_t live = live_gen(grants_[slot]);
    for (const auto& [p, gen] : told) {
      if (gen == live || p >= peers_.size() || peers_[p].dead) continue;
      key_gone_packet k{};
      k.type = static_cast<std::uint8_t>(device_packet::key_gone);
      k.slot = slot;
      k.gen = gen;
      // Takes no credit (the peer handles it at once). FIFO: behind what is queued to p, and
      // ahead of anything sent later (a busy lower endpoint queues it, and later packets to p
      // wait behind that queue: ready_to_send).
      send_uncredited(p, to_packet(k));
      // Its sink stays until p answers (behind every write p made through the answer).
      const std::uint32_t told_gen = gen;
      const auto it = std::find_if(sinks_.begin(), sinks_.end(), [&](const sink& s) {
        return s.slot == slot && s.gen == told_gen;
      });
      if (it != sinks_.end()) {
        try {
          it->waiting.push_back(p);
        } catch (...) {  // not waited for: its stale writes may find the key refused
        }
      }
    }
    for (sink& s : sinks_)
      if (s.slot == slot && s.gen != live) s.announced = true;
    std::erase_if(told, [live](const auto& e) { return e.second != live; });
  }
  std::erase_if(told_slots_, [this](std::uint32_t slot) { return grants_[slot].told.empty(); });
  lock.unlock();
  reap_sinks();
}

void device::send_uncredited(peer_id p, const packet& pk) noexcept {
  peer& pr = peers_[p];
  if (pr.queued == 0 && inject(p, pk) == core::status::ok) return;
  queue_uncredited(p, pk, false);
}

void device::queue_uncredited(peer_id p, const packet& pk, bool answer) noexcept {
  peer& pr = peers_[p];
  try {
    pending_.push_back({p, pk, nullptr, answer});
    ++pr.queued;
    if (answer) ++pr.answers_queued;
  } catch (...) {
    // Lost: a key_gone leaves the peer its answer (its writes through it reach the sink, or
    // are refused); a write_check or its verdict leaves the writer waiting until the peer is
    // lost.
  }
}

void device::send_answer(peer_id p, const packet& pk) noexcept {
  peer& pr = peers_[p];
  if (pr.answers_out + pr.answers_queued >= answers_per_peer) [[unlikely]] {
    ++drops_.unanswered;
    EXANET_LOG_ONCE(warn, core, "network backend: peer %u leaves %u answers unread; its further "
                    "questions are dropped until it reads", p, pr.answers_out + pr.answers_queued);
    return;
  }
  if (bundle_) flush_bundle();  // what waits in it was first (and may queue: FIFO below)
  if (pr.queued == 0) {
    if (free_answer_slots_.empty()) {  // many askers at once: an inject, as before the slots
      if (inject_now(p, pk) == core::status::ok) return;
    } else {
      answer_slot& a = answer_slots_[free_answer_slots_.back()];
      a.pk = pk;
      a.to = p;
      const ssize_t rc = fi_senddata(ep_, a.pk.data(), packet_bytes, nullptr, self_.incarnation,
                                     pr.fa, &a.ctx);
      if (rc == 0) {
        free_answer_slots_.pop_back();
        a.handed_index = ++pr.handed;
        pr.last_handed_completes = true;
        ++pr.answers_out;
        bytes_sent_ += packet_bytes;
        ++lower_sends_;
        burst_to_ = p;
        return;
      }
      a.to = no_peer;
      if (rc != -FI_EAGAIN) return;  // the lower endpoint refuses sends to it: nobody to answer
    }
  }
  queue_uncredited(p, pk, true);
}

void device::on_key_gone(peer_id from, const packet& pk) noexcept {
  // What we were told of that registration is stale now: the next access under the key asks
  // again. (A forged one only costs a question.)
  const auto k = from_packet<key_gone_packet>(pk);
  if (k.ack) {
    // Every write it made through that answer is behind us: the sink may go.
    {
      std::lock_guard lock(sinks_lock_);
      for (sink& s : sinks_)
        if (s.slot == k.slot && s.gen == k.gen) std::erase(s.waiting, from);
    }
    reap_sinks();
    return;
  }
  std::erase_if(peers_[from].grants, [&k](const remote_grant& rg) {
    return rg.st == remote_grant::state::known && rg.slot == k.slot && rg.gen == k.gen;
  });
  key_gone_packet a = k;
  a.ack = 1;
  send_answer(from, to_packet(a));
}

void device::on_write_check(peer_id from, const packet& pk) noexcept {
  auto c = from_packet<wire::write_check_packet>(pk);
  // The write before it is in: it went into that registration if it is still the live one.
  c.type = static_cast<std::uint8_t>(device_packet::write_verdict);
  c.landed = c.slot < grants_.size() && c.gen != 0 && live_gen(grants_[c.slot]) == c.gen;
  // The write's report follows (FIFO): delivered only where the data went.
  if (c.then_deliver)
    peers_[from].report = c.landed ? peer::next_report::deliver : peer::next_report::withdraw;
  send_answer(from, to_packet(c));
}

void device::on_write_verdict(peer_id from, const packet& pk) noexcept {
  const auto c = from_packet<wire::write_check_packet>(pk);
  if (c.op >= ops_.size()) {
    ++drops_.bad_field;
    return;
  }
  op_context& op = ops_[c.op];
  if (op.what != op_context::kind::write || op.gen != c.op_gen || op.to != from ||
      op.check != op_context::verdict::awaited) {
    ++drops_.bad_field;  // not a write of ours waiting for this peer's verdict
    return;
  }
  op.check = c.landed ? op_context::verdict::landed : op_context::verdict::missed;
}

}  // namespace exanet::dev::net
