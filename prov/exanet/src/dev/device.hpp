// The Exanet device interface (DESIGN.md §3): a packetizer that delivers 64-byte packets FIFO per
// (sender, receiver) pair into the receiver's mailbox, tagged with the sender's PDID; and a DMA
// engine that writes local data to a remote virtual address, then a 16-byte notification.
// Protocols (proto/) are written against the `device` concept below; a backend is chosen at
// compile time (dev/emu today, dev/hw when the ExaNeST user library is present), so the data path
// makes no virtual call.
#pragma once
#include <sys/uio.h>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/status.hpp"
#include "dev/address.hpp"

namespace exanet::dev {

inline constexpr std::size_t packet_bytes = 64;  // ExaNeST packetizer unit
inline constexpr std::size_t notification_bytes = 16;

/// Byte 0 of every packet is its type. Types at or above this value belong to the device itself
/// (emulation of engine internals) and never reach the protocols.
inline constexpr std::uint8_t first_device_packet_type = 0xF0;

using packet = std::array<std::byte, packet_bytes>;
using notification = std::array<std::byte, notification_bytes>;

/// A connected peer endpoint, dense from 0 in the order peers become known.
using peer_id = std::uint32_t;
inline constexpr peer_id no_peer = ~peer_id{0};

/// What a backend can do, for protocol selection at setup.
struct caps {
  bool dma_read = false;        // the engine can read remote memory (ExaNeST cannot)
  bool direct_user_write = false;  // DMA lands in user memory without staging (CMA available)
};

/// Names no registration: a write that carries it must land in a window its target armed.
inline constexpr std::uint32_t no_key_slot = ~std::uint32_t{0};

/// One DMA write: local iovecs (from byte `src_offset`) to a remote address, optionally followed
/// by a notification into one of the target's notification slots.
///
/// The target is the authority on where bytes may land (as the ExaNeST engine checks at the
/// target): a write goes either through a registration (`key_slot`, RMA) and must fall inside it
/// with remote-write rights, or names a notification slot and generation (`notify_slot`,
/// `notify_gen`, used for that even without `notify`) whose window the target armed for this
/// transfer (a receive buffer, a read's landing piece). Anything else is refused and counted.
struct dma_write {
  peer_id peer = no_peer;
  std::span<const iovec> src;
  std::size_t src_offset = 0;
  std::uint64_t dst_addr = 0;     // virtual address in the target process
  std::size_t len = 0;
  bool notify = false;
  std::uint32_t notify_slot = 0;
  std::uint32_t notify_gen = 0;   // names this use of the slot, so a late write cannot satisfy a
                                  // later reuse of it
  notification notify_data{};
  std::uint32_t key_slot = no_key_slot;  // RMA: the target's protection-table slot
};

/// Rights a memory registration grants to remote peers (bits of key_grant::access).
namespace rma_access {
inline constexpr std::uint32_t remote_read = 1u << 0;
inline constexpr std::uint32_t remote_write = 1u << 1;
}  // namespace rma_access

/// One registration an endpoint exposes to RMA: an entry of its protection table, which the
/// engine checks at the target before any byte moves.
struct key_grant {
  std::uint64_t key = 0;
  std::uint64_t va = 0;         // first registered byte, in the owner's address space
  std::uint64_t len = 0;
  std::uint64_t addr_base = 0;  // the remote address that names va (va itself with virtual
                                // addressing; otherwise the base offsets count from)
  std::uint32_t access = 0;     // rma_access bits
  bool events = false;          // the owner counts accesses: initiators post an event each time
};

/// Where a checked RMA access lands at the target.
struct rma_target {
  std::uint64_t va = 0;
  std::uint32_t key_slot = 0;  // names the grant in events sent back to the owner
  bool events = false;
};

/// Packets and writes a device refused, by reason (the target's checks).
struct drop_counts {
  std::uint64_t foreign_pdid = 0;    // a packet of another protection domain
  std::uint64_t bad_field = 0;       // a device packet naming a chunk, length or type that is not
  std::uint64_t dma_refused = 0;     // a write outside every window and registration armed for it
  std::uint64_t notify_refused = 0;  // a notification for a slot not armed with that generation
};

/// Progress of one DMA write; a backend that stages data may need several calls.
struct dma_state {
  std::size_t done = 0;  // bytes of the payload handed to the engine
  bool notified = false;
};

template <class D>
concept device = requires(D& d, const D& cd, peer_id p, const packet& pk, const dma_write& w,
                          dma_state& st, const address& a) {
  { d.connect(a, p) } -> std::same_as<core::status>;
  { d.mailbox_send(p, pk) } -> std::same_as<core::status>;   // status::again when full
  { d.dma_post(w, st) } -> std::same_as<core::status>;       // status::again: call again
  { cd.local_address() } -> std::same_as<const address&>;
  { cd.capabilities() } -> std::same_as<caps>;
  { d.peer_alive(p) } -> std::same_as<bool>;
  { cd.drops() } -> std::same_as<const drop_counts&>;
};

}  // namespace exanet::dev
