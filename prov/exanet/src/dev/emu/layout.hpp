// SPDX-License-Identifier: BSD-2-Clause
// Layout of an emulated endpoint's shared segment. Every process that talks to the endpoint maps
// this; fields are fixed-width and offsets are computed from the header, so processes built with
// different parameters still agree. Hot producer and consumer words sit on their own cache lines.
//
//   +--------------------+ 0
//   | segment_header     |  identity, owner pid, geometry, ready flag
//   | mailbox_control    |  producers' tail (one line)
//   | mailbox_slot[M]    |  128 B each: seq/PDID/source line + the 64-byte packet line
//   | notify_slot[N]     |  64 B each: generation, 16 bytes of notification, 16-byte record,
//   |                    |  and the DMA window the owner armed for this use of the slot
//   | notify bells       |  a bit per slot whose notification landed, and a summary word
//   | bounce_desc[P]     |  per-sender medium ring: owner, head, tail on separate lines
//   | staging_control    |  free mask of DMA staging chunks (copy fallback without CMA)
//   | key_entry[K]       |  64 B each: the RMA protection table (keys this endpoint granted)
//   | event doorbell     |  one bit per event ring holding unread entries (one line)
//   | event_desc[E]      |  per-sender RMA event ring: owner, head, tail on separate lines
//   | event entries      |  E rings of Q 16-byte notifications
//   | staging data       |  S chunks of C + 64 bytes (data at the destination's line offset)
//   +--------------------+ reserved_at_open: everything above is reserved in /dev/shm at open
//   | bounce data        |  P rings of R bytes, each reserved by the sender that claims it
//   +--------------------+
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/copy.hpp"
#include "dev/device.hpp"

namespace exanet::dev::emu {

inline constexpr std::uint32_t segment_magic = 0x45584e54;  // "EXNT"
inline constexpr std::uint32_t layout_version = 13;  // 13: key_entry flags (may_fault)
                                                     // 12: wake_socket (the owner's sleepers
                                                     //     poll a socket too)
                                                     // 11: a slot's packet starts in seq's line
                                                     // 10: link model (arrival times, position),
                                                     // and sleepers and wake_seq (owner sleeps)
                                                     // 8: the creator holds a flock on the file
                                                     // 7: bounce rings last, reserved on claim
inline constexpr std::size_t cache_line = 64;

/// The endpoint's resources (dev/device.hpp). It is stored in the segment header as is, so its
/// layout is part of this one: a change there bumps layout_version.
using geometry = dev::geometry;
static_assert(sizeof(geometry) == 9 * sizeof(std::uint32_t) &&
                  std::is_trivially_copyable_v<geometry> && std::is_standard_layout_v<geometry>,
              "dev::geometry is part of the segment layout");
static_assert(offsetof(geometry, mailbox_slots) == 0 && offsetof(geometry, notify_slots) == 4 &&
                  offsetof(geometry, bounce_peers) == 8 &&
                  offsetof(geometry, bounce_ring_bytes) == 12 &&
                  offsetof(geometry, staging_chunks) == 16 &&
                  offsetof(geometry, staging_chunk_bytes) == 20 &&
                  offsetof(geometry, key_slots) == 24 && offsetof(geometry, event_rings) == 28 &&
                  offsetof(geometry, event_ring_entries) == 32,
              "dev::geometry is part of the segment layout");

struct alignas(cache_line) segment_header {
  std::uint32_t magic;
  std::uint32_t version;
  std::uint32_t pdid;
  std::uint32_t port;
  std::int32_t owner_pid;
  std::uint16_t node;
  std::uint16_t reserved;
  geometry geo;
  std::atomic<std::uint32_t> ready;   // released last by the creator: the rest is initialised
  std::atomic<std::uint32_t> closed;  // set by the owner's close: senders stop, waiters fail
  // Set while the owner holds message packets at its unexpected bound: senders send no new
  // message packets (they see -FI_EAGAIN), so the mailbox keeps carrying what needs no room
  // (control packets, staged DMA data) and the owner never has to stop reading it. On the line
  // senders read for `closed` anyway.
  std::atomic<std::uint32_t> intake_held;
  // Where the owner sits in the link model (dev/link_model.hpp, encode_position), so senders
  // can time what they send it; no_position when the owner runs without the model.
  std::uint32_t link_position;
  // Threads of the owner about to sleep or asleep until an arrival (device::sleep_prepare), and
  // the futex word they sleep on. A peer that makes an arrival visible (a mailbox claim, a
  // notification bell, an event doorbell: each an atomic read-modify-write) then looks at
  // sleepers, and if any bumps wake_seq and wakes them. The owner announces itself before its
  // last look for arrivals; both sides are sequentially consistent, so one sees the other and no
  // wake is lost. On the line senders read for `closed`: the look costs no extra cache miss.
  std::atomic<std::uint32_t> sleepers;
  std::atomic<std::uint32_t> wake_seq;
  // 1 while the owner's sleepers also poll(2) its wake socket (device::arm_wake_socket): a waker
  // then sends it a datagram after the futex wake. A sleeper that polls the network's fd beside
  // the word cannot wait on a futex; without the socket it would look at the word only now and
  // then. Set before the owner first sleeps on it, cleared at close.
  std::atomic<std::uint32_t> wake_socket;
};

struct alignas(cache_line) mailbox_control {
  std::atomic<std::uint64_t> tail;  // next position producers claim
};

/// Two lines; the packet starts in the first, right behind what the receiver reads to take it
/// (seq, pdid, sender), so a packet whose meaning fits in its first packet_in_seq_line bytes (a
/// message of up to 12 bytes: the env_data header is 28) is taken with the one line that seq
/// brought. With the packet in a line of its own, the receiver's load of it could start only
/// after seq's line had come and its check passed: two cross-core transfers in a row for every
/// small message, where this costs one. The receiver reads only the packet bytes it needs
/// (proto/wire.hpp, read_head) and a small message's sender writes only those (write_prefix),
/// so the second line stays where it was when they are unused.
struct alignas(cache_line) mailbox_slot {
  std::atomic<std::uint64_t> seq;  // == position: free; == position + 1: holds a packet
  std::uint32_t pdid;              // stamped by the sending "packetizer"
  std::uint32_t src_port;
  std::uint16_t src_node;
  std::uint8_t reserved[6];
  packet data;  // bytes 24..88: its first 40 in seq's line
  // Link model: the packet is not taken before this CLOCK_MONOTONIC time (ns), stamped by the
  // sender before it publishes seq; 0 without the model.
  std::uint64_t arrive_ns;
};
static_assert(sizeof(mailbox_slot) == 2 * cache_line);
inline constexpr std::size_t packet_in_seq_line = cache_line - offsetof(mailbox_slot, data);
static_assert(packet_in_seq_line == 40 && offsetof(mailbox_slot, arrive_ns) >= cache_line);

struct alignas(cache_line) notify_slot {
  std::atomic<std::uint32_t> gen;  // set to the armed generation after data is written
  // The owner's published copy of the slot's DMA window (device::window_open): the only range a
  // write naming (slot, window_gen) may land in. Initiators that write with the kernel's help
  // (CMA) check it, as the hardware checks at the target; staged writes are checked by the
  // owner against its private copy, never this one. window_gen is written last (release).
  std::atomic<std::uint32_t> window_gen;
  notification data;
  notification record;  // written by the sender before the data; read once gen is armed
  std::atomic<std::uint64_t> window_va;
  std::atomic<std::uint64_t> window_len;
  // Link model: the notification counts as landed from this CLOCK_MONOTONIC time (ns); written
  // before gen (release), 0 without the model.
  std::uint64_t arrive_ns;
};
static_assert(sizeof(notify_slot) == cache_line);

/// A single-producer ring one sender claims at a receiver: the medium bounce rings count bytes,
/// the RMA event rings count 16-byte entries.
struct ring_desc {
  alignas(cache_line) std::atomic<std::uint64_t> owner;  // sender's (node << 32 | port) + 1; 0 free
  alignas(cache_line) std::atomic<std::uint64_t> head;   // sender: units ever produced
  alignas(cache_line) std::atomic<std::uint64_t> tail;   // receiver: units ever consumed
};
static_assert(sizeof(ring_desc) == 3 * cache_line);

/// The owner word a sender at (node, port) writes into a ring it claims (0 means free).
constexpr std::uint64_t ring_owner(std::uint16_t node, std::uint32_t port) noexcept {
  return ((std::uint64_t{node} << 32) | port) + 1;
}
/// Set in a bounce ring's owner word by a sender that closed while the receiver had not copied
/// out everything it sent: the ring stays that sender's (its last messages are still read as
/// its own) until the receiver consumes up to the head, which frees it.
inline constexpr std::uint64_t ring_closing = 1ull << 63;
/// A closing ring is drained, and may be freed, once the receiver consumed up to its head or
/// past it: a receiver bounds a packet's range by its own tail, not the sender's head, so a
/// forging sender can have it consume beyond what was produced (claim_ring continues after both).
constexpr bool ring_drained(std::uint64_t tail, std::uint64_t head) noexcept {
  return tail >= head;
}

/// Claims the first free ring of `count` for `owner`; returns its index, or ~0u if all are taken.
/// head is where the claimant continues: a previous owner may have left units the receiver has
/// not consumed yet, and credits stay exact only if the new owner appends after them. A
/// receiver bounds what a bounce packet names by its tail, not the sender's head, so a forging
/// previous owner could have had it consume past its head: the claimant starts after both,
/// or its first messages would name consumed bytes and be refused.
inline std::uint32_t claim_ring(ring_desc* rings, std::uint32_t count, std::uint64_t owner,
                                std::uint64_t& head) noexcept {
  for (std::uint32_t i = 0; i < count; ++i) {
    std::uint64_t expected = 0;
    if (rings[i].owner.compare_exchange_strong(expected, owner, std::memory_order_acq_rel)) {
      head = std::max(rings[i].head.load(std::memory_order_acquire),
                      rings[i].tail.load(std::memory_order_acquire));
      return i;
    }
  }
  return ~0u;
}

/// One registration this endpoint exposes to RMA. Written only by the owning process, under a
/// sequence lock so a peer checking a key never sees half an update; every field is atomic
/// because the peer reads it concurrently.
struct alignas(cache_line) key_entry {
  std::atomic<std::uint32_t> seq;    // odd while the owner rewrites the entry
  std::atomic<std::uint32_t> state;  // key_state
  std::atomic<std::uint64_t> key;
  std::atomic<std::uint64_t> va;         // first registered byte, in the owner's address space
  std::atomic<std::uint64_t> len;
  std::atomic<std::uint64_t> addr_base;  // the remote address that names va
  std::atomic<std::uint32_t> access;     // rma_access bits
  std::atomic<std::uint32_t> flags;      // key_flag bits
};
static_assert(sizeof(key_entry) == cache_line);

/// key_entry::flags.
namespace key_flag {
inline constexpr std::uint32_t events = 1;     // the owner counts accesses (FI_RMA_EVENT)
inline constexpr std::uint32_t may_fault = 2;  // key_grant::may_fault: initiators use only paths
                                               // that report a fault back (protocol.md §3.6)
}  // namespace key_flag

/// Never-used entries end a probe; revoked ones do not (open addressing).
enum class key_state : std::uint32_t { empty = 0, live = 1, revoked = 2 };

/// Rung after a notification is written: bit s of word s/64, then bit s/64 of the summary. The
/// owner takes the bells and looks only at the slots that rang, so neither a progress call nor a
/// landing costs anything per slot armed and still waiting.
inline constexpr std::uint32_t max_notify_slots = 64 * 64;  // one summary word
struct alignas(cache_line) notify_bells {
  std::atomic<std::uint64_t> summary;
  alignas(cache_line) std::atomic<std::uint64_t> words[max_notify_slots / 64];
};

struct alignas(cache_line) event_doorbell {
  std::atomic<std::uint64_t> rings;  // bit i: event ring i may hold unread entries
};

struct alignas(cache_line) staging_control {
  std::atomic<std::uint64_t> free_mask;  // bit i set: chunk i is free
};

struct segment_offsets {
  std::size_t mailbox_control, mailbox, notify, notify_bell, bounce_desc, staging_control, keys, doorbell,
      event_desc, event_data, bounce_data, staging_data, total;
};

constexpr std::size_t align_up(std::size_t v, std::size_t a) noexcept { return (v + a - 1) / a * a; }

/// Bytes between staging chunks: a chunk's payload starts at the destination address's offset
/// within a cache line, so the target's copy out is mutually aligned (core/copy.hpp).
constexpr std::size_t staging_stride(const geometry& g) noexcept {
  return std::size_t{g.staging_chunk_bytes} + cache_line;
}

/// Where the payload of a staged write to dst_addr starts in chunk `chunk`.
constexpr std::size_t staging_payload_offset(const geometry& g, std::uint32_t chunk,
                                             std::uint64_t dst_addr) noexcept {
  return staging_stride(g) * chunk + core::line_offset(dst_addr);
}

constexpr segment_offsets offsets_of(const geometry& g) noexcept {
  segment_offsets o{};
  std::size_t at = align_up(sizeof(segment_header), cache_line);
  o.mailbox_control = at;
  at += sizeof(mailbox_control);
  o.mailbox = at;
  at += sizeof(mailbox_slot) * g.mailbox_slots;
  o.notify = at;
  at += sizeof(notify_slot) * g.notify_slots;
  o.notify_bell = at;
  at += sizeof(notify_bells);
  o.bounce_desc = at;
  at += sizeof(ring_desc) * g.bounce_peers;
  o.staging_control = at;
  at += sizeof(staging_control);
  o.keys = at;
  at += sizeof(key_entry) * g.key_slots;
  o.doorbell = at;
  at += sizeof(event_doorbell);
  o.event_desc = at;
  at += sizeof(ring_desc) * g.event_rings;
  o.event_data = at;
  at += notification_bytes * std::size_t{g.event_rings} * g.event_ring_entries;
  o.staging_data = at = align_up(at, 4096);
  at += staging_stride(g) * g.staging_chunks;
  // The rings start on a page and are whole pages each (bounce_ring_bytes >= 4096, a power of
  // two), so reserving one ring reserves exactly its own pages.
  o.bounce_data = at = align_up(at, 4096);
  at += std::size_t{g.bounce_ring_bytes} * g.bounce_peers;
  o.total = align_up(at, 4096);
  return o;
}

/// Bytes at the start of a segment its creator reserves in /dev/shm: every part any endpoint
/// touches from the start (a mailbox, notification slots and bells, ring descriptors, keys,
/// event rings, staging chunks). The bounce rings after it are reserved one at a time by the
/// sender that claims each (device::bounce_acquire): they are 16 MiB of the 18.6 MiB default
/// segment, and most endpoints talk to few peers.
constexpr std::size_t reserved_at_open(const geometry& g) noexcept { return offsets_of(g).bounce_data; }

/// Byte offset of bounce ring `ring` in the segment (page-aligned; bounce_ring_bytes long).
constexpr std::size_t bounce_ring_offset(const geometry& g, std::uint32_t ring) noexcept {
  return offsets_of(g).bounce_data + std::size_t{g.bounce_ring_bytes} * ring;
}

/// The bounds of every geometry field. Our own parameters and a peer's header are held to the
/// same ones: a geometry field becomes a ring mask, a loop bound or an offset, so one bad field
/// is an access out of the mapping (mailbox_slots 0 makes the index mask 2^32 - 1). Within these
/// bounds offsets_of cannot overflow (the static_assert below).
struct geometry_bounds {
  static constexpr std::uint32_t max_mailbox_slots = 1u << 22;        // 512 MiB of slots
  static constexpr std::uint32_t max_bounce_peers = 1u << 16;
  static constexpr std::uint32_t min_bounce_ring_bytes = 4096;        // rings start on pages
  static constexpr std::uint32_t max_bounce_ring_bytes = 1u << 30;
  static constexpr std::uint32_t max_staging_chunks = 64;             // one free-mask word
  static constexpr std::uint32_t max_staging_chunk_bytes = 1u << 30;
  static constexpr std::uint32_t max_key_slots = 1u << 16;            // 16-bit slot in RMA events
  static constexpr std::uint32_t max_event_rings = 64;                // one doorbell word
  static constexpr std::uint32_t max_event_ring_entries = 1u << 20;
};

/// nullptr if g is a geometry exanet can use in a mapping of mapped_bytes; otherwise which rule
/// it breaks (for the log). Checked before a peer's header is used at all, and at open.
constexpr const char* geometry_error(const geometry& g, std::size_t mapped_bytes) noexcept {
  using b = geometry_bounds;
  const auto pow2 = [](std::uint32_t v) { return v != 0 && (v & (v - 1)) == 0; };
  if (!pow2(g.mailbox_slots) || g.mailbox_slots < 2 || g.mailbox_slots > b::max_mailbox_slots)
    return "mailbox_slots is not a power of two in [2, 2^22]";
  if (g.notify_slots == 0 || g.notify_slots > max_notify_slots)
    return "notify_slots is not in [1, 4096]";
  if (g.bounce_peers > b::max_bounce_peers) return "bounce_peers exceeds 2^16";
  if (!pow2(g.bounce_ring_bytes) || g.bounce_ring_bytes < b::min_bounce_ring_bytes ||
      g.bounce_ring_bytes > b::max_bounce_ring_bytes)
    return "bounce_ring_bytes is not a power of two in [4096, 2^30]";
  if (g.staging_chunks == 0 || g.staging_chunks > b::max_staging_chunks)
    return "staging_chunks is not in [1, 64]";
  if (g.staging_chunk_bytes == 0 || g.staging_chunk_bytes > b::max_staging_chunk_bytes)
    return "staging_chunk_bytes is not in [1, 2^30]";
  if (!pow2(g.key_slots) || g.key_slots > b::max_key_slots)
    return "key_slots is not a power of two in [1, 2^16]";
  if (g.event_rings > b::max_event_rings) return "event_rings exceeds 64";
  if (!pow2(g.event_ring_entries) || g.event_ring_entries > b::max_event_ring_entries)
    return "event_ring_entries is not a power of two in [1, 2^20]";
  if (offsets_of(g).total > mapped_bytes) return "the layout is larger than the mapping";
  return nullptr;
}

static_assert(offsets_of(geometry{geometry_bounds::max_mailbox_slots, max_notify_slots,
                                  geometry_bounds::max_bounce_peers,
                                  geometry_bounds::max_bounce_ring_bytes,
                                  geometry_bounds::max_staging_chunks,
                                  geometry_bounds::max_staging_chunk_bytes,
                                  geometry_bounds::max_key_slots, geometry_bounds::max_event_rings,
                                  geometry_bounds::max_event_ring_entries})
                      .total < (std::size_t{1} << 50),
              "the largest valid geometry must not overflow offsets_of");
static_assert(geometry_error(geometry{}, offsets_of(geometry{}).total) == nullptr);

/// Typed views of one mapped segment.
struct segment_view {
  segment_header* header = nullptr;
  mailbox_control* mbox_ctl = nullptr;
  mailbox_slot* mailbox = nullptr;
  notify_slot* notify = nullptr;
  notify_bells* bells = nullptr;
  ring_desc* bounce = nullptr;
  staging_control* staging_ctl = nullptr;
  key_entry* keys = nullptr;
  event_doorbell* doorbell = nullptr;
  ring_desc* events = nullptr;
  notification* event_data = nullptr;
  std::byte* bounce_data = nullptr;
  std::byte* staging_data = nullptr;

  static segment_view of(void* base, const geometry& g) noexcept {
    auto* b = static_cast<std::byte*>(base);
    const segment_offsets o = offsets_of(g);
    segment_view v;
    v.header = reinterpret_cast<segment_header*>(b);
    v.mbox_ctl = reinterpret_cast<mailbox_control*>(b + o.mailbox_control);
    v.mailbox = reinterpret_cast<mailbox_slot*>(b + o.mailbox);
    v.notify = reinterpret_cast<notify_slot*>(b + o.notify);
    v.bells = reinterpret_cast<notify_bells*>(b + o.notify_bell);
    v.bounce = reinterpret_cast<ring_desc*>(b + o.bounce_desc);
    v.staging_ctl = reinterpret_cast<staging_control*>(b + o.staging_control);
    v.keys = reinterpret_cast<key_entry*>(b + o.keys);
    v.doorbell = reinterpret_cast<event_doorbell*>(b + o.doorbell);
    v.events = reinterpret_cast<ring_desc*>(b + o.event_desc);
    v.event_data = reinterpret_cast<notification*>(b + o.event_data);
    v.bounce_data = b + o.bounce_data;
    v.staging_data = b + o.staging_data;
    return v;
  }
};

/// Device-internal packet of the copy fallback: "chunk `chunk` of your staging area holds len
/// bytes for address dst (at staging_payload_offset); then (if notify) post this notification". FIFO delivery through the
/// mailbox orders the data before the notification, as the hardware engine does.
struct staging_packet {
  std::uint8_t type;  // device_packet::staged_write
  std::uint8_t notify;
  std::uint16_t reserved;
  std::uint32_t chunk;
  std::uint64_t dst_addr;
  std::uint64_t len;
  std::uint32_t notify_slot;  // with notify_gen, the window the data must land in ...
  std::uint32_t notify_gen;
  notification notify_data;
  std::uint32_t key_slot;     // ... or, when not no_key_slot, the registration it goes through
  std::uint8_t pad[12];
};
static_assert(sizeof(staging_packet) == packet_bytes);

enum class device_packet : std::uint8_t { staged_write = first_device_packet_type };

}  // namespace exanet::dev::emu
