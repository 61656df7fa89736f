// Tunables of one domain, read once from provider parameters (fi/params.cpp) and then passed by
// value: no layer below fi/ reads the environment (STYLE.md: no hidden mutable globals).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/copy.hpp"

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
  std::size_t medium_max = 8192;           // largest message sent through the bounce ring;
                                           // measured crossover with the rendezvous (issue 2)
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
  std::uint32_t pdid = 1;                  // protection domain of this job
  std::uint16_t node = 0;                  // node id of this host
  protocol_family protocol = protocol_family::write;
  bool use_cma = false;                    // DMA engine emulation: false pipelines each write through
                                           // the target's staging chunks (3-6x faster than
                                           // process_vm_writev here, issue 3 note); true writes
                                           // with cross-memory attach, which lands without the
                                           // target's progress
  core::copy_policy copy = core::copy_policy::automatic;  // FI_EXANET_COPY: misaligned copies
  unsigned dead_peer_check_ms = 200;       // liveness check period while waiting on a peer
  unsigned rndv_timeout_ms = 30000;        // FI_EXANET_RNDV_TIMEOUT_MS: a receive matched to a
                                           // rendezvous fails with FI_ETIMEDOUT when its sender,
                                           // alive, writes nothing for this long; 0: never
  bool proto_info = false;                 // FI_EXANET_PROTO_INFO: each endpoint prints its
                                           // protocol table at open (protocol_select.hpp)
};

}  // namespace exanet::proto
