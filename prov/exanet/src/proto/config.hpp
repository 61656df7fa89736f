// SPDX-License-Identifier: BSD-2-Clause
// Tunables of one domain, read once from provider parameters (fi/params.cpp) and then passed by
// value: no layer below fi/ reads the environment (STYLE.md: no hidden mutable globals).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

#include "core/copy.hpp"
#include "dev/device.hpp"

namespace exanet::proto {

/// FI_EXANET_PROTOCOL (DESIGN.md §4): the rendezvous family, for comparing the thesis variants.
enum class protocol_family : std::uint8_t {
  write,       // default: the write-based rendezvous
  read,        // thesis baseline: sender-initiated only, the receiver acknowledges every
               // rendezvous and the sender completes on that acknowledgement
  optimistic,  // thesis §3.14: every long transfer receiver-initiated, matched at the sender
               // (rndv_optimistic.cpp); refuses any-source receives and FI_PEEK
};

struct config {
  std::size_t eager_max = 84;              // largest message sent eager: in its env_data up to
                                           // 36 bytes, above that as an eager train (at most
                                           // wire::eager_train_limit; eager_train.cpp)
  std::size_t medium_max = 16384;          // largest message sent through the bounce ring;
                                           // the crossover with the rendezvous (issue 17)
  std::size_t inject_size = 4096;          // fi_inject limit (eager or medium, copied at post)
  std::size_t mailbox_slots = 1024;        // 64-byte packets per endpoint mailbox
  std::size_t bounce_ring_bytes = 262144;  // per-peer medium ring in the receiver's segment
  std::size_t bounce_peers = 64;           // peers that can hold a bounce ring at one receiver
  std::size_t notify_slots = 1024;         // DMA notification slots per endpoint
  std::size_t rma_inline_max = 65536;      // RMA writes up to this size travel through the bounce
                                           // ring and are copied by the target (no CMA call)
  std::size_t mr_keys = 2048;              // protection-table entries per endpoint (RMA keys)
  std::size_t event_rings = 64;            // senders with an RMA event ring at one target (<= 64)
  std::size_t tx_size = 1024;              // outstanding sends per endpoint
  std::size_t rx_size = 1024;              // posted receives per endpoint
  std::size_t iov_limit = 8;               // iovecs per operation, remote ranges per RMA (<= 8)
  // Bounds of the queues that peers' packets fill (resolve_queue_bounds; fi_exanet(7), RESOURCE
  // MANAGEMENT). 0: derived from the attributes.
  std::size_t unexpected_max = 0;          // unexpected messages held at once (16 x rx_size)
  std::size_t unexpected_bytes = 0;        // medium payload they hold (rx_size x medium_max,
                                           // at most 64 MiB)
  std::size_t stored_rtr_max = 0;          // RTRs held for sends not yet posted (4 x tx_size)
  std::uint32_t pdid = 1;                  // protection domain of this job
  std::uint16_t node = 0;                  // node id of this host
  protocol_family protocol = protocol_family::write;
  // FI_EXANET_DMA_ENGINE (or the older FI_EXANET_USE_CMA): how the emulated engine moves a
  // write; automatic measures both engines per size class (dev/emu/dma_engine_choice.hpp).
  dev::dma_engine_mode dma_engine = dev::dma_engine_mode::automatic;
  core::copy_policy copy = core::copy_policy::automatic;  // FI_EXANET_COPY: misaligned copies
  unsigned dead_peer_check_ms = 200;       // period of the watch over peers waited on (lost
                                           // peers, rendezvous timeouts); the device polls
                                           // liveness at most this often (open_params)
  unsigned rndv_timeout_ms = 30000;        // FI_EXANET_RNDV_TIMEOUT_MS: a receive matched to a
                                           // rendezvous whose data has not come for this long
                                           // probes its sender (rndv_probe.cpp); 0: never
  unsigned rndv_deadline_ms = 0;           // FI_EXANET_RNDV_DEADLINE_MS: opt-in hard limit: such a
                                           // receive fails with FI_ETIMEDOUT after this long
                                           // without data, even if its sender says it has the
                                           // send; 0: none (the default: a computing rank is
                                           // waited for)
  std::uint32_t idle_yield = 64;           // FI_EXANET_IDLE_YIELD: empty polls in a row before
                                           // an application's poll gives its core away (the
                                           // fi layer's, core/idle_yield.hpp); 0: never
  bool profile = false;                    // FI_EXANET_PROFILE: each endpoint stamps its
                                           // messages' phases (profile.hpp)
  bool proto_info = false;                 // FI_EXANET_PROTO_INFO: each endpoint prints its
                                           // protocol table at open (protocol_select.hpp)
  // FI_EXANET_NETWORK*: which peers the network backend reaches (dev/hybrid), over which
  // lower provider, bound to which local address, and when a silent peer counts as lost.
  dev::open_params::network::use network = dev::open_params::network::use::off;
  std::array<char, 32> network_provider{'t', 'c', 'p'};
  std::array<char, 64> network_node{};
  unsigned network_lost_after_ms = 30000;
  std::size_t network_ring_bytes = 524288;  // per-peer medium ring for peers over the network
};

/// Fills the queue bounds left at 0 from the endpoint's attributes (rx_size and tx_size as the
/// application was granted them, medium_max as the protocol table clamped it).
///
/// Why these numbers. An unexpected message mirrors a receive the application has not posted
/// yet, so the bounds scale with rx_size. Records are small (about 200 bytes) and MPI needs many
/// (MPICH's tests expect 100 unexpected messages per source; libfabric's shm raised its rx size
/// from 1024 to 16384 after running out of command contexts): 16 per receive. Medium payload is
/// the large part: one full medium message per receive, capped so that a raised medium_max does
/// not make the bound meaningless. A stored RTR costs its sender nothing when refused (the
/// receive goes sender-initiated), so a modest 4 per send suffices.
constexpr void resolve_queue_bounds(config& c) noexcept {
  constexpr std::size_t payload_cap = std::size_t{64} << 20;
  if (c.unexpected_max == 0) c.unexpected_max = 16 * (c.rx_size ? c.rx_size : 1);
  if (c.unexpected_bytes == 0) {
    const std::size_t m = (c.rx_size ? c.rx_size : 1) * c.medium_max;
    c.unexpected_bytes = m < payload_cap ? m : payload_cap;
  }
  if (c.stored_rtr_max == 0) c.stored_rtr_max = 4 * (c.tx_size ? c.tx_size : 1);
}

}  // namespace exanet::proto
