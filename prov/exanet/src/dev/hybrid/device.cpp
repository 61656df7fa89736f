// SPDX-License-Identifier: BSD-2-Clause
#include "dev/hybrid/device.hpp"

#include <algorithm>
#include <cstdlib>

#include "core/log.hpp"

namespace exanet::dev::hybrid {

core::status device::open(const open_params& p) noexcept {
  close();
  if (core::status s = local_.open(p); !core::ok(s)) return s;
  reach_ = p.net.reach;
  if (reach_ == open_params::network::use::off) return core::status::ok;
  open_params q = p;
  q.self = local_.local_address();  // the port the emulation chose
  q.self.host = emu::host_identity();
  if (core::status s = remote_.open(q); !core::ok(s)) {
    const bool every = reach_ == open_params::network::use::every_peer;
    EXANET_LOG(warn, core, "network backend over %s did not open (%d): %s%s", p.net.provider.c_str(),
               core::to_int(s),
               every ? "the endpoint does not open (FI_EXANET_NETWORK=every_peer asks for it)"
                     : "this endpoint reaches the peers of this host only",
               std::getenv("FI_PROVIDER") ? "; FI_PROVIDER hides every provider it does not "
                                            "name from exanet too: name the lower one as well, "
                                            "or select exanet by fi_getinfo's hints" : "");
    if (every) {
      local_.close();
      return s;  // asked for the network path alone: no silent fallback
    }
    reach_ = open_params::network::use::off;
    return core::status::ok;  // a host-local job still works; other hosts are unreachable
  }
  self_ = remote_.local_address();
  net_on_ = true;
  // Sleepers now poll the network's fd, and a futex word cannot be polled: peers of this host
  // wake them through a socket as well (with every peer over the network none would).
  if (reach_ != open_params::network::use::every_peer) (void)local_.arm_wake_socket();
  // The emulation's peers so far (none: it just opened) need no route; later ones get one.
  return core::status::ok;
}

void device::close() noexcept {
  remote_.close();
  local_.close();
  net_on_ = false;
  routes_.clear();
  names_.clear();
  by_local_.clear();
  by_remote_.clear();
}

caps device::capabilities() const noexcept {
  caps c = local_.capabilities();
  if (net_on_) {
    const caps n = remote_.capabilities();
    c.dma_read = c.dma_read && n.dma_read;
    c.direct_user_write = c.direct_user_write && n.direct_user_write;
    c.bounce_max = std::min(c.bounce_max, n.bounce_max);
  }
  return c;
}

address device::full_name(const address& a) const noexcept {
  address n = a;
  if (n.version == 1) {  // the emulation's names carry nothing past version 1
    n.version = 2;
    n.incarnation = 0;
    n.lower_len = 0;
    n.lower_name = {};
  }
  if (n.host == 0) n.host = emu::host_identity();
  return n;
}

core::status device::connect(const address& a, peer_id& out) noexcept {
  if (!net_on_) [[likely]] return local_.connect(a, out);
  if (!a.valid()) return core::status::invalid;
  const bool here = a.host == 0 || a.host == emu::host_identity();
  const bool remote = !here || reach_ == open_params::network::use::every_peer;
  peer_id inner = no_peer;
  if (remote) {
    if (core::status s = remote_.connect(a, inner); !core::ok(s))
      return s == core::status::invalid && a.lower_len == 0 ? core::status::unreachable : s;
  } else if (core::status s = local_.connect(a, inner); !core::ok(s)) {
    return s;
  }
  out = remote ? of_remote(inner) : of_local(inner);
  if (out == no_peer) return core::status::no_memory;
  if (a.version == 2) names_[out] = full_name(a);  // the name as the AV holds it, whole
  return core::status::ok;
}

peer_id device::adopt(bool remote, peer_id inner) noexcept try {
  auto& by = remote ? by_remote_ : by_local_;
  if (inner >= by.size()) by.resize(std::size_t{inner} + 1, no_peer);
  routes_.reserve(routes_.size() + 1);  // what may throw comes first: then nothing half-done
  names_.reserve(names_.size() + 1);
  const auto id = static_cast<peer_id>(routes_.size());
  routes_.push_back({remote, inner});
  names_.push_back(full_name(remote ? remote_.peer_address(inner) : local_.peer_address(inner)));
  by[inner] = id;
  return id;
} catch (...) {
  EXANET_LOG_ONCE(warn, core, "out of memory for a peer's route: its packets come as no_peer");
  return no_peer;
}

core::status device::key_publish(const key_grant& g, std::uint32_t& slot) noexcept {
  if (core::status s = local_.key_publish(g, slot); !core::ok(s)) return s;
  if (net_on_) {
    if (core::status s = remote_.key_publish_at(g, slot); !core::ok(s)) {
      local_.key_revoke(slot);
      return s;
    }
  }
  return core::status::ok;
}

bool device::sleep_prepare_both(const std::atomic<std::uint32_t>*& word,
                                std::uint32_t& expected) noexcept {
  if (!local_.sleep_prepare(word, expected)) return false;
  const std::atomic<std::uint32_t>* unused_word = nullptr;
  std::uint32_t unused_value = 0;
  if (!remote_.sleep_prepare(unused_word, unused_value)) {
    local_.sleep_end();
    return false;
  }
  return true;
}

const drop_counts& device::drops() const noexcept {
  if (!net_on_) return local_.drops();
  const drop_counts& a = local_.drops();
  const drop_counts& b = remote_.drops();
  drops_sum_.foreign_pdid = a.foreign_pdid + b.foreign_pdid;
  drops_sum_.bad_field = a.bad_field + b.bad_field;
  drops_sum_.dma_refused = a.dma_refused + b.dma_refused;
  drops_sum_.notify_refused = a.notify_refused + b.notify_refused;
  return drops_sum_;
}

route_counts device::routes() const noexcept {
  if (!net_on_) return local_.routes();
  const route_counts near = local_.routes(), far = remote_.routes();
  return {.peers_shared_memory = near.peers_shared_memory,
          .peers_network = far.peers_network,
          .network_bytes_sent = far.network_bytes_sent,
          .network_messages_sent = far.network_messages_sent,
          .network_sleepable = far.network_sleepable,
          .dma_writes_direct = near.dma_writes_direct,
          .dma_writes_staged = near.dma_writes_staged};
}

}  // namespace exanet::dev::hybrid
