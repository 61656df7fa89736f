// SPDX-License-Identifier: BSD-2-Clause
// Every packet exanet puts on the wire (DESIGN.md §4; prov/exanet/docs/protocol.md). Each is a
// trivially copyable, standard-layout 64-byte struct of fixed-width integers, read and written with
// memcpy. Type values are never renumbered or reused; a layout change bumps `version`.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "dev/device.hpp"

namespace exanet::proto::wire {

inline constexpr std::uint8_t version = 8;  // 3: optimistic RTRs (flag_optimistic), flag_rtr_first;
                                            // 4: atomic_req; 5: eager trains (eager_data,
                                            // flag_train); 6: rma_write_inline names key and
                                            // address, resolved at the target; 7: so does
                                            // rma_done; 8: an rma_done may travel with its
                                            // write's check (dma_write::deliver_if_landed)

enum class pkt_type : std::uint8_t {
  env_data = 1,  // eager: envelope and payload in one packet          (eager.cpp)
  medium = 2,    // envelope; payload already in the bounce ring       (medium.cpp)
  rts = 3,       // ready to send: envelope of a rendezvous message    (rndv_rts.cpp)
  cts = 4,       // clear to send: one destination segment             (rndv_rts.cpp)
  rma_read_req = 5,  // read emulated by the target: "write this range back"  (rma.cpp)
  rma_done = 6,      // an RMA access landed: count it, deliver CQ data, ack   (rma.cpp)
  rma_write_inline = 7,  // a small write whose bytes wait in the bounce ring (rma_inline.cpp)
  rndv_ack = 8,      // read variant: the receiver has the data; the sender may complete (rndv_rts.cpp)
  rtr = 9,           // ready to receive: "write the j-th send of my class after psn w here"  (rndv_rtr.cpp)
  rtr_nack = 10,     // the sender cannot serve an RTR: the receive goes sender-initiated      (rndv_rtr.cpp)
  rtr_cancel = 11,   // the receiver wants its RTR back (fi_cancel)                            (rndv_rtr.cpp)
  rtr_cancel_reply = 12,  // the sender's answer: withdrawn, or already written            (rndv_rtr.cpp)
  rndv_probe = 13,        // a receiver heard nothing for a while: "is this send yours?"     (rndv_probe.cpp)
  rndv_probe_reply = 14,  // the sender's answer: it has no such send                         (rndv_probe.cpp)
  atomic_req = 15,        // "perform this atomic on your memory and answer me"              (atomic.cpp)
  atomic_operands = 16,   // operand bytes of the next atomic_req, when no bounce ring serves  (atomic.cpp)
  eager_data = 17,        // the first bytes of an eager message too long for one packet, ahead
                          // of its env_data (flag_train)                           (eager_train.cpp)
  count = 18,
};
static_assert(static_cast<std::uint8_t>(pkt_type::count) < dev::first_device_packet_type);

/// header.flags
enum : std::uint16_t {
  flag_tagged = 1u << 0,    // FI_TAGGED queue (else FI_MSG)
  flag_cq_data = 1u << 1,   // remote CQ data present
  flag_last = 1u << 2,      // cts: the final segment; the sender completes after writing it
  flag_remote_read = 1u << 3,  // rma_done / rma_event: the access was a read (else a write)
  flag_ack = 1u << 4,          // rma_done: answer with an rma_reply once processed
  flag_region_end = 1u << 5,   // rma_done: the operation's final range in this registration
  flag_ack_wanted = 1u << 6,   // rts: the sender completes on an rndv_ack (read variant)
  flag_withdrawn = 1u << 7,    // rtr_cancel_reply: the RTR was still stored and is gone
  flag_optimistic = 1u << 8,   // rtr: optimistic variant, no ticket: "the next send of my tag"
  flag_rtr_first = 1u << 9,    // ri_notification: the RTR was at the sender before the send
  flag_fetch = 1u << 10,       // atomic_req: write the target's initial values back (fetch, compare)
  flag_inline = 1u << 11,      // atomic_req: the operands are in the packet, not in the bounce ring
  flag_assembled = 1u << 12,   // atomic_req: the operands came before it in atomic_operands packets
  flag_train = 1u << 13,       // env_data: len > eager_payload_max; the message's first
                               // len - eager_payload_max bytes came just before it in eager_data
                               // packets, the packet carries the last eager_payload_max
};

/// Packet sequence number: every message a sender sends to one receiver (env_data, medium, rts,
/// or a receiver-initiated write) takes the next one. The receiver takes messages in psn order,
/// which is what makes an RTR's ticket exact (prov/exanet/docs/model). Compared as serial
/// numbers, so wrap-around is harmless while fewer than 2^31 are in flight.
using psn_t = std::uint32_t;
constexpr bool psn_before(psn_t a, psn_t b) noexcept {
  return static_cast<std::int32_t>(a - b) < 0;
}

struct header {
  pkt_type type;
  std::uint8_t version;
  std::uint16_t flags;
  std::uint32_t len;  // env_data, medium: payload bytes
};
static_assert(sizeof(header) == 8);

inline constexpr std::size_t eager_payload_max = 36;

// The three message packets share their first 28 bytes (header, tag, cq_data, psn), so the
// receiver can order them by psn before it knows more (psn_of).
struct env_data {
  header hdr;
  std::uint64_t tag;
  std::uint64_t cq_data;
  psn_t psn;
  std::byte payload[eager_payload_max];
};

/// An eager train (eager_train.cpp): a message of up to eager_train_limit bytes as consecutive
/// packets of one sender, which the mailbox delivers in order: eager_data packets with its first
/// bytes, in order from offset 0, then its env_data with flag_train, the whole length in hdr.len
/// and the last eager_payload_max bytes. The receiver matches the message only at the env_data,
/// once every byte before it has arrived; the train carries the env_data's psn, so a packet of
/// another message, out of order or beyond the limit is dropped, never written.
inline constexpr std::size_t eager_data_bytes = 48;
inline constexpr std::size_t eager_train_packets_max = 5;  // eager_data packets ahead of the env_data
inline constexpr std::size_t eager_train_limit =
    eager_payload_max + eager_train_packets_max * eager_data_bytes;  // 276: the receiver's buffer
struct eager_data {
  header hdr;            // len: bytes used of payload (1..eager_data_bytes)
  psn_t psn;             // the psn of the env_data that ends the train
  std::uint32_t offset;  // where payload goes in the message (offsets come in order, from 0)
  std::byte payload[eager_data_bytes];
};

struct medium {
  header hdr;
  std::uint64_t tag;
  std::uint64_t cq_data;
  psn_t psn;
  std::uint32_t ring;         // which bounce ring
  std::uint64_t ring_offset;  // absolute position in the sender's bounce ring at the receiver
  std::uint8_t pad[24];
};

struct rts {
  header hdr;
  std::uint64_t tag;
  std::uint64_t cq_data;
  psn_t psn;
  std::uint32_t reserved;
  std::uint64_t msg_len;
  std::uint64_t send_id;  // names the send request at the sender; echoed by every cts
  std::uint8_t pad[16];
};

/// Receiver-initiated rendezvous: a posted receive tells the sender where its buffer is. Its
/// ticket names the nth send of the receive's class (tag and ignore bits, queue) with psn after
/// `after_psn`, the receiver's watermark: every send up to it has been taken in order.
struct rtr {
  header hdr;                 // flag_tagged
  std::uint64_t tag;
  std::uint64_t ignore;
  std::uint64_t buf_addr;
  std::uint64_t capacity;
  std::uint64_t recv_id;      // names the receive in rtr_nack and rtr_cancel_reply
  psn_t after_psn;
  std::uint32_t nth;          // 1: the first class send after after_psn
  std::uint32_t notify_slot;  // the receive's slot: notification and landing record
  std::uint32_t notify_gen;
};

/// The sender's answers about one RTR: rtr_nack, rtr_cancel and rtr_cancel_reply.
struct rtr_answer {
  header hdr;  // rtr_cancel_reply: flag_withdrawn
  std::uint64_t recv_id;
  std::uint8_t pad[48];
};

/// What a receiver-initiated write posts after the data: the DMA notification (16 bytes) and the
/// landing record the sender wrote first. Together they make the full completion entry.
struct ri_notification {
  std::uint64_t cq_data;
  psn_t psn;
  std::uint32_t flags;  // flag_cq_data
};
static_assert(sizeof(ri_notification) == dev::notification_bytes);
struct ri_record {
  std::uint64_t tag;
  std::uint64_t msg_len;  // the whole message; more than the capacity means truncated
};
static_assert(sizeof(ri_record) == dev::notification_bytes);

struct cts {
  header hdr;
  std::uint64_t send_id;
  std::uint64_t msg_offset;   // first message byte this segment receives
  std::uint64_t buf_addr;     // receiver's virtual address for that byte
  std::uint64_t buf_len;      // bytes to write (0 only when the message is empty after truncation)
  std::uint32_t notify_slot;  // where the DMA engine posts the notification
  std::uint32_t notify_gen;
  std::uint8_t pad[16];
};

struct rndv_ack {
  header hdr;
  std::uint64_t send_id;  // the send the acknowledged RTS named
  std::uint8_t pad[48];
};

/// rndv_probe and rndv_probe_reply: a receive matched to the RTS that named send_id has waited
/// FI_EXANET_RNDV_TIMEOUT_MS for its data; the sender answers only if it has no such send.
struct rndv_probe {
  header hdr;
  std::uint64_t send_id;
  std::uint64_t recv_id;  // echoed in the reply
  std::uint8_t pad[40];
};

/// The 16 bytes the DMA engine posts after a rendezvous segment lands.
struct rndv_notification {
  std::uint64_t bytes;  // bytes written by this segment
  std::uint64_t send_id;
};
static_assert(sizeof(rndv_notification) == dev::notification_bytes);

struct rma_read_req {
  header hdr;
  std::uint64_t key;
  std::uint64_t remote_addr;  // in the target's key space (virtual address or offset)
  std::uint64_t len;
  std::uint64_t reply_addr;   // initiator's virtual address the data goes to
  std::uint32_t notify_slot;  // initiator's slot for the rma_reply after the data
  std::uint32_t notify_gen;
  std::uint8_t pad[16];
};

struct rma_done {
  header hdr;  // flag_cq_data, flag_remote_read, flag_ack, flag_last, flag_region_end
  std::uint64_t cq_data;
  std::uint64_t len;
  std::uint32_t key_slot;  // where the initiator's check found key: tried first at the target
  std::uint32_t ack_slot;  // flag_ack: initiator's slot for the rma_reply
  std::uint32_t ack_gen;
  std::uint32_t reserved;
  std::uint64_t key;          // the range as the application named it: the target counts the
  std::uint64_t remote_addr;  // access against the key's registration of now (rma_write_inline)
  std::uint8_t pad[8];
};

struct rma_write_inline {
  header hdr;               // len: bytes; flag_cq_data
  std::uint64_t remote_addr;  // as the application named it (virtual address or offset), under
                              // key: the target resolves both against its table on arrival
  std::uint64_t ring_offset;
  std::uint64_t key;
  std::uint32_t ring;
  std::uint32_t key_slot;   // where the initiator's check found key: tried first at the target
  // The first 40 bytes are all a plain write needs: in the emulation they share the line the
  // receiver polls (dev/emu/layout.hpp, mailbox_slot); the CQ data is read only when flagged.
  std::uint64_t cq_data;
  std::uint8_t pad[16];
};
static_assert(sizeof(rma_write_inline) == 64 && offsetof(rma_write_inline, cq_data) == 40);

/// The 16-byte entry an initiator appends to its event ring at the target after a direct
/// access the target counts (FI_RMA_EVENT) or that carries CQ data.
struct rma_event {
  std::uint64_t cq_data;
  std::uint32_t len_low;
  std::uint16_t key_slot;
  std::uint8_t flags;  // event_cq_data, event_remote_read
  std::uint8_t len_high;
};
static_assert(sizeof(rma_event) == dev::notification_bytes);
enum : std::uint8_t {
  event_cq_data = 1u << 0,
  event_remote_read = 1u << 1,
  event_last = 1u << 2,        // the operation's final range: the endpoint counts one access
  event_region_end = 1u << 3,  // the operation's final range in this registration: it counts one
};

/// The notification a target posts to an initiator: a read's data landed, or an ack.
struct rma_reply {
  std::int64_t status;  // 0 or a negative errno (the target's protection check failed)
  std::uint64_t bytes;
};
static_assert(sizeof(rma_reply) == dev::notification_bytes);

/// An atomic operation the target performs (atomic.cpp): the operands (operand elements, then
/// compare elements) wait in the initiator's bounce ring at the target, or, when they fit in 16
/// bytes and no CQ data travels, in the packet itself (`operands`, over ring_offset and cq_data).
/// The target answers with a DMA write of the initial values (flag_fetch) into the window the
/// initiator armed at notify_slot, then an rma_reply carrying the status.
struct atomic_req {
  header hdr;                 // len: operand bytes; flag_cq_data, flag_fetch, flag_inline
  std::uint64_t key;
  std::uint64_t remote_addr;  // in the target's key space (virtual address or offset)
  std::uint64_t reply_addr;   // initiator's window for the initial values (flag_fetch)
  std::uint64_t ring_offset;  // flag_inline: the first 8 operand bytes
  std::uint64_t cq_data;      // flag_inline: the next 8 operand bytes (no CQ data then)
  std::uint32_t ring;
  std::uint32_t notify_slot;  // initiator's slot for the rma_reply (always: every atomic is answered)
  std::uint32_t notify_gen;
  std::uint16_t count;        // elements
  std::uint8_t op;            // enum fi_op
  std::uint8_t datatype;      // enum fi_datatype
};
inline constexpr std::size_t atomic_inline_bytes = 16;

/// Operands of the next atomic_req from this sender, when its bounce ring at the target cannot
/// take them (no ring left for it, or no credit): a train of these, in order, then the request
/// with flag_assembled. The target keeps them in one buffer per sender until the request.
struct atomic_operands {
  header hdr;            // len: bytes used of data
  std::uint32_t offset;  // where they go among the request's operand bytes
  std::byte data[52];
};
inline constexpr std::size_t atomic_operands_bytes = sizeof(atomic_operands::data);
static_assert(offsetof(atomic_req, cq_data) == offsetof(atomic_req, ring_offset) + 8);

template <class P>
inline constexpr bool is_packet = sizeof(P) == dev::packet_bytes &&
                                  std::is_trivially_copyable_v<P> && std::is_standard_layout_v<P>;
static_assert(is_packet<env_data> && is_packet<medium> && is_packet<rts> && is_packet<cts> &&
              is_packet<rma_read_req> && is_packet<rma_done> && is_packet<rma_write_inline> &&
              is_packet<rndv_ack> && is_packet<rtr> && is_packet<rtr_answer> &&
              is_packet<rndv_probe> && is_packet<atomic_req> &&
              is_packet<atomic_operands> && is_packet<eager_data>);
static_assert(offsetof(eager_data, psn) == 8 && offsetof(eager_data, offset) == 12 &&
              offsetof(eager_data, payload) == 16);
static_assert(eager_train_limit < (1u << 16), "a train's offsets and lengths are small");
static_assert(offsetof(env_data, hdr) == 0 && offsetof(rts, hdr) == 0 && offsetof(cts, hdr) == 0);
inline constexpr std::size_t psn_offset = 24;
static_assert(offsetof(env_data, psn) == psn_offset && offsetof(medium, psn) == psn_offset &&
              offsetof(rts, psn) == psn_offset);

/// True for the packets that carry a message, and so a psn.
constexpr bool is_message(std::uint8_t type) noexcept {
  return type == static_cast<std::uint8_t>(pkt_type::env_data) ||
         type == static_cast<std::uint8_t>(pkt_type::medium) ||
         type == static_cast<std::uint8_t>(pkt_type::rts);
}
inline psn_t psn_of(const dev::packet& raw) noexcept {
  psn_t p;
  std::memcpy(&p, raw.data() + psn_offset, sizeof p);
  return p;
}

template <class P>
P read(const dev::packet& raw) noexcept {
  static_assert(is_packet<P>);
  P p;
  std::memcpy(&p, raw.data(), sizeof p);
  return p;
}

/// A packet's fields up to (not including) its member at Until, the rest left zero: for a
/// receiver that reads the tail itself and only as far as it needs, so the bytes of the packet
/// it does not need are never loaded (in the emulation a mailbox slot's second line stays with
/// its sender: dev/emu/layout.hpp, mailbox_slot).
template <class P, std::size_t Until>
P read_head(const dev::packet& raw) noexcept {
  static_assert(is_packet<P> && Until <= sizeof(P));
  P p{};
  std::memcpy(&p, raw.data(), Until);
  return p;
}

/// Writes a packet into a mailbox slot (or any line the peer reads) whole: one 64-byte copy of a
/// packet built in local memory. Writing the fields into the remote line one by one, and only
/// the bytes the receiver reads, saved instructions but cost 25-40 ns of 8-32 B ping-pong
/// latency here (0.175 against 0.21 us; BENCHMARKS.md, 2026-11-25). Why, this virtual machine
/// cannot say (no performance counters); a plausible reading is that a remote line written in
/// several stores changes hands between the cores more than once. Build packets zeroed (P p{}),
/// so no stale bytes of the sender's stack travel.
template <class P>
void write(std::byte* slot, const P& p) noexcept {
  static_assert(is_packet<P>);
  std::memcpy(slot, &p, sizeof p);
}

/// write, of the packet's first `used` bytes only (rounded up to whole 8-byte words): for a
/// packet whose receiver reads no further (on_env_data: the header and len payload bytes). Still
/// one copy of a packet built locally; what it saves is the rest of the slot: in the emulation
/// an 8 B message's packet then stays in the slot's first line, and the second line is not
/// taken from the receiver's side each time round the mailbox (BENCHMARKS.md, "A mailbox
/// packet, streamed"). Each size is a copy of constant length, so the stores do not overlap:
/// copy_small's two overlapping stores cost the 8-16 B ping-pong about 5 % here, as writing
/// field by field once did. The slot's other bytes keep what the backend gave at reserve
/// (dev::mailbox_reservation).
template <class P>
[[gnu::always_inline]] inline void write_prefix(std::byte* slot, const P& p,
                                                std::size_t used) noexcept {
  static_assert(is_packet<P> && sizeof(P) == 64);
  const auto* src = reinterpret_cast<const std::byte*>(&p);
  switch ((std::min(used, sizeof p) + 7) / 8) {
    case 0: case 1: case 2: case 3: case 4: std::memcpy(slot, src, 32); break;
    case 5: std::memcpy(slot, src, 40); break;
    case 6: std::memcpy(slot, src, 48); break;
    case 7: std::memcpy(slot, src, 56); break;
    default: std::memcpy(slot, src, 64); break;
  }
}

inline header make_header(pkt_type t, std::uint16_t flags, std::uint32_t len = 0) noexcept {
  return {t, version, flags, len};
}

}  // namespace exanet::proto::wire
