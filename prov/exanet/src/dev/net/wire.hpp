// SPDX-License-Identifier: BSD-2-Clause
// What the network backend (dev/net/device.hpp) puts on its lower provider: the layout of every
// lower message and of its device packets (types 0xF1-0xFF, dev::first_device_packet_type and
// above), in one place, each checked against the packet size. docs/protocol.md describes them.
//
// A lower message is one of:
//  - one 64-byte packet (a protocol packet, or a device packet below); its 8 bytes of remote CQ
//    data are the sender's incarnation;
//  - a bundle: a bundle_header packet (type bounce), then `len` bytes for the sender's bounce
//    ring at the receiver (0 for none), then `packets` whole packets, each taking a credit as
//    if it came alone, in the order they were published. So a medium message (its ring bytes
//    and the packet naming them) or an eager train (its packets and its envelope) is one lower
//    message, as tcp;ofi_rxm sends one.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "dev/address.hpp"
#include "dev/device.hpp"

namespace exanet::dev::net {

/// Device packet types of this backend (byte 0; dev::first_device_packet_type and above).
enum class device_packet : std::uint8_t {
  notify = 0xF1,  // a DMA write's notification, behind its data
  hello = 0xF2,   // first packet to a peer: who I am and how to answer me
  credit = 0xF3,  // the receiver consumed this many of my packets
  key_query = 0xF4,   // initiator -> owner: what does this RMA key of yours grant?
  key_answer = 0xF5,  // owner -> initiator: the grant (range, rights, slot) or "no such key"
  ping = 0xF6,        // are you there? (sent to a peer silent for a while; takes no credit)
  pong = 0xF7,        // yes (takes no credit)
  bye = 0xF8,         // this endpoint closes: count me lost now (takes no credit)
  record = 0xF9,      // a slot's 16-byte landing record, sent before the slot's notification
  write_check = 0xFA,  // initiator -> owner, behind a write through an answer: did it land in
                       // the registration the answer named? (no credit)
  intake = 0xFB,      // the receiver holds (1) or resumes (0) message packets (no credit)
  bounce = 0xFC,      // heads a bundle: ring bytes, then packets (the header takes no credit:
                      // the ring's own bytes bound them; each packet takes its own). Alone,
                      // without either: its sender wanted a completion (sent_out)
  ring_credit = 0xFD,  // the receiver consumed its sender's ring up to here (no credit)
  key_gone = 0xFE,     // owner -> every peer it answered about a registration: closed; forget
                       // that answer (before anything the owner sends after the close). The
                       // peer sends it back (ack 1) behind every write it made through the answer
  write_verdict = 0xFF,  // owner -> initiator: the answer to a write_check (no credit)
};

namespace wire {

// Where each field of a device packet sits (byte 0 is the type).
struct notify_packet {
  std::uint8_t type;
  std::uint8_t pad[3];
  std::uint32_t slot;
  std::uint32_t gen;
  std::uint32_t pad2;
  notification data;
};
static_assert(sizeof(notify_packet) <= packet_bytes);

/// Who the sender is, all of its dev::address but the magic and version (implied), and the
/// size of its bounce ring at the receiver: the sender's credit rules define that ring, so the
/// receiver sizes its copy by it (processes may use different FI_EXANET_NETWORK_RING_BYTES).
/// ring_log2 0 (a sender from before it was announced) means "the same as yours".
struct hello_packet {
  std::uint8_t type;
  std::uint8_t lower_len;
  std::uint16_t node;
  std::uint32_t pdid;
  std::uint64_t incarnation;
  std::uint64_t host;
  std::uint32_t port;
  std::uint8_t ring_log2;
  std::array<std::byte, 4> pad;
  std::array<std::byte, lower_name_bytes> lower_name;
};
static_assert(sizeof(hello_packet) == packet_bytes);
static_assert(offsetof(hello_packet, ring_log2) == 28 && offsetof(hello_packet, lower_name) == 33);
/// The ring sizes a hello may announce: the bounds of FI_EXANET_NETWORK_RING_BYTES.
inline constexpr unsigned min_ring_log2 = 12, max_ring_log2 = 30;

struct credit_packet {
  std::uint8_t type;
  std::uint8_t pad[3];
  std::uint32_t count;
};
static_assert(sizeof(credit_packet) <= packet_bytes);

struct key_query_packet {
  std::uint8_t type;
  std::uint8_t pad[7];
  std::uint64_t key;
};
static_assert(sizeof(key_query_packet) <= packet_bytes);

struct key_answer_packet {
  std::uint8_t type;
  std::uint8_t found;   // 0: no live registration under this key
  std::uint8_t events;
  std::uint8_t may_fault;  // key_grant::may_fault
  std::uint32_t access;
  std::uint64_t key;
  std::uint64_t va;
  std::uint64_t len;
  std::uint64_t addr_base;
  std::uint32_t slot;
  std::uint32_t gen;
  std::uint64_t lower_key;  // of the owner's lower registration (0: none, may_fault or no rights)
};
static_assert(sizeof(key_answer_packet) <= packet_bytes);

/// key_gone: the registration an answer named (slot and generation) is closed. ack 1: the
/// peer's reply, once it forgot the answer; FIFO puts every write it made through it before.
struct key_gone_packet {
  std::uint8_t type;
  std::uint8_t ack;
  std::uint8_t pad[2];
  std::uint32_t slot;
  std::uint32_t gen;
};
static_assert(sizeof(key_gone_packet) <= packet_bytes);

/// write_check: did the write before this packet, made through the answer naming (slot, gen),
/// land in that registration? op and op_gen name the initiator's write (echoed back).
/// write_verdict: landed 1 if that registration is still the live one (the write went into
/// it), 0 if it was closed (the write went into its sink, or the key's next registration).
struct write_check_packet {
  std::uint8_t type;
  std::uint8_t landed;  // write_verdict
  // write_check: the sender's next protocol packet is this write's report (dma_write::
  // deliver_if_landed): the owner delivers it if the write landed, and withdraws it if not.
  std::uint8_t then_deliver;
  std::uint8_t pad;
  std::uint32_t slot;
  std::uint32_t gen;
  std::uint32_t op;
  std::uint32_t op_gen;
};
static_assert(sizeof(write_check_packet) <= packet_bytes);

/// A bundle's header (device_packet::bounce), and a ring_credit (offset: the consumed position).
struct ring_packet {
  std::uint8_t type;
  std::uint8_t packets;  // bundle: whole packets after the ring bytes (0 to max_bundle_packets)
  std::uint8_t pad[2];
  std::uint32_t len;     // bundle: ring bytes right after this header (0: none)
  std::uint64_t offset;  // bundle: where they go in the sender's ring; ring_credit: consumed to
};
static_assert(sizeof(ring_packet) <= packet_bytes);
static_assert(offsetof(ring_packet, packets) == 1 && offsetof(ring_packet, len) == 4 &&
              offsetof(ring_packet, offset) == 8);

/// Packets one bundle carries at most: a burst of small messages (dev/net/device.hpp) leaves in
/// lower messages of up to 2 KiB of packets. A bundle with ring bytes has fewer: the whole stays
/// within what the lower provider sends whole (device.cpp), and the largest medium message
/// leaves room for train_room packets beside its bytes (an eager train, wire::eager_train_limit:
/// 5 eager_data packets, and its envelope fit).
inline constexpr std::size_t max_bundle_packets = 32;
inline constexpr std::size_t train_room = 8;
static_assert(train_room <= max_bundle_packets);
static_assert(max_bundle_packets <= 0xFF, "counted in ring_packet::packets");

/// A bundle's length on the wire.
constexpr std::size_t bundle_bytes(std::size_t ring_len, std::size_t packets) noexcept {
  return packet_bytes + ring_len + packets * packet_bytes;
}

template <class T>
packet to_packet(const T& v) noexcept {
  static_assert(sizeof(T) <= packet_bytes);
  packet pk{};
  std::memcpy(pk.data(), &v, sizeof v);
  return pk;
}

template <class T>
T from_packet(const packet& pk) noexcept {
  static_assert(sizeof(T) <= packet_bytes);
  T v;
  std::memcpy(&v, pk.data(), sizeof v);
  return v;
}

}  // namespace wire
}  // namespace exanet::dev::net
