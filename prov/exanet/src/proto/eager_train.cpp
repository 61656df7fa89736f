// SPDX-License-Identifier: BSD-2-Clause
// eager train: a message too long for one env_data, up to FI_EXANET_EAGER_MAX (at most
// wire::eager_train_limit), as consecutive mailbox packets of one sender: eager_data packets
// with its first bytes, then its env_data with flag_train and the last eager_payload_max bytes.
// Like eager, the send completes at post; unlike medium, it needs no bounce ring, no credit and
// no copy-out at the receiver beyond the packets' own. Chart: docs/protocol.md §3.1a.
// Owns: eager_data, env_data with flag_train. Counters: train_sent, train_recv, drop_bad_field.
//
// Invariant: the message is matched only when its env_data is taken, in psn order like any
// message, and only if every byte ahead of it arrived in order for that psn. So a receiver never
// sees a partial message: the watermark, the matcher and RTR tickets know it only once whole.
// Why the data go first: the mailbox is FIFO per sender, so when the env_data comes its train is
// in; were the envelope first, the message would be half-taken (its psn past the watermark, not
// matchable) while its last packet was still to come, and a receive posted meanwhile would
// compute its RTR ticket against a message it cannot see (docs/model).
//
// The receiver keeps one train per sender: the sender writes a train and its env_data in one call
// under its endpoint's lock, so nothing of that sender comes between them. A train packet is
// written into that buffer only if it names a psn not yet taken within the reorder window and
// continues the train exactly (same psn, next offset), or starts one (offset 0); anything else
// is dropped and counted. A train the sender abandoned (its mailbox filled in the middle: the
// send returned -FI_EAGAIN and nothing was committed) is replaced by the next train's first
// packet; its env_data never comes.
#include <rdma/fabric.h>

#include <algorithm>
#include <cstring>

#include "core/iov.hpp"
#include "core/log.hpp"
#include "proto/endpoint.hpp"

namespace exanet::proto {

core::status endpoint::train_send(const send_args& a, std::size_t len) noexcept {
  const wire::psn_t psn = next_psn(a.peer);
  const std::size_t ahead = len - wire::eager_payload_max;  // bytes in eager_data packets
  const bool contiguous = a.iov.size() == 1;
  const auto* base = contiguous ? static_cast<const std::byte*>(a.iov[0].iov_base) : nullptr;
  auto fill = [&](std::byte* out, std::size_t from, std::size_t n) {
    if (contiguous)
      core::copy_small(out, base + from, n);  // n <= 48: no library call
    else
      core::copy_from_iov(out, a.iov, from, n);
  };
  static_assert(wire::eager_data_bytes <= 64 && wire::eager_payload_max <= 64);
  for (std::size_t off = 0; off < ahead; off += wire::eager_data_bytes) {
    const std::size_t n = std::min(ahead - off, wire::eager_data_bytes);
    dev::mailbox_reservation slot;
    // Full in mid-train: nothing is committed, the caller retries the whole send; the receiver
    // replaces the abandoned train with the next one.
    if (core::status s = dev_.mailbox_reserve(a.peer, slot); !core::ok(s)) return s;
    alignas(64) wire::eager_data d{};
    d.hdr = wire::make_header(wire::pkt_type::eager_data, 0, static_cast<std::uint32_t>(n));
    d.psn = psn;
    d.offset = static_cast<std::uint32_t>(off);
    fill(d.payload, off, n);
    wire::write(slot.data(), d);
    slot.more = true;  // the rest of the train and its env_data follow in this call
    dev_.mailbox_publish(slot);
  }
  dev::mailbox_reservation slot;
  if (core::status s = dev_.mailbox_reserve(a.peer, slot); !core::ok(s)) return s;
  alignas(64) wire::env_data p{};
  p.hdr = wire::make_header(wire::pkt_type::env_data,
                            wire::flag_train |
                                (a.kind == queue_kind::tagged ? wire::flag_tagged : 0) |
                                (a.has_cq_data ? wire::flag_cq_data : 0),
                            static_cast<std::uint32_t>(len));
  p.tag = a.tag;
  p.cq_data = a.cq_data;
  p.psn = psn;
  fill(p.payload, ahead, wire::eager_payload_max);
  wire::write(slot.data(), p);
  slot.reported = reported(a.completion);
  dev_.mailbox_publish(slot);
  commit_send(a.peer, a.kind, a.tag, false, 0);
  ++stats_.train_sent;
  stats_.bytes_sent += len;
  complete_buffered_send(a, len);
  return core::status::ok;
}

endpoint::train_assembly* endpoint::train_of(dev::peer_id p) noexcept {
  if (p < trains_.size()) [[likely]] return &trains_[p];
  try {
    trains_.resize(std::size_t{p} + 1);  // cold: the first train from a peer of a higher id
  } catch (...) {
    return nullptr;
  }
  return &trains_[p];
}

void endpoint::drop_train_packet(dev::peer_id from, const char* why) noexcept {
  ++stats_.drop_bad_field;
  EXANET_LOG_ONCE(warn, ep_data, "eager train packet from peer %u dropped: %s", from, why);
}

void endpoint::on_eager_data(dev::peer_id from, const dev::packet& pkt) noexcept {
  if (from == dev::no_peer) {  // a train is kept per sender: one the device cannot name has none
    drop_train_packet(from, "unknown sender");
    return;
  }
  const auto d = wire::read<wire::eager_data>(pkt);
  const std::size_t n = d.hdr.len, off = d.offset;
  constexpr std::size_t room = wire::eager_train_limit - wire::eager_payload_max;
  if (n == 0 || n > wire::eager_data_bytes || off > room - n) {
    drop_train_packet(from, "length or offset beyond a train");
    return;
  }
  static_assert(wire::eager_data_bytes <= 64, "copy_small takes at most 64 bytes");
  if (off != 0) {
    // A continuation: it must extend the open train exactly, whose first packet had its psn
    // checked, so that check is not repeated here (one packet in two or more of every train).
    train_assembly* t = from < trains_.size() ? &trains_[from] : nullptr;
    if (!t || !t->open || t->psn != d.psn || t->filled != off) [[unlikely]] {
      drop_train_packet(from, "out of order or of another message");
      return;
    }
    core::copy_small(t->bytes.data() + off, d.payload, n);
    t->filled = static_cast<std::uint32_t>(off + n);
    return;
  }
  // The psn of a message not taken yet, within the reorder window: a correct sender's train
  // always names the very message its env_data will carry next.
  const peer_sequence* q = sequence_of(from);
  if (!q || !wire::psn_before(q->watermark, d.psn) || d.psn - q->watermark > psn_window()) {
    drop_train_packet(from, "psn taken already or beyond the reorder window");
    return;
  }
  train_assembly* t = train_of(from);
  if (!t) {
    EXANET_LOG(warn, ep_data, "out of memory for an eager train from peer %u; dropped", from);
    return;  // its env_data finds the train missing and is dropped too
  }
  t->open = true;  // a new train; one left unfinished was abandoned by its sender
  t->psn = d.psn;
  core::copy_small(t->bytes.data(), d.payload, n);
  t->filled = static_cast<std::uint32_t>(n);
}

void endpoint::on_env_train(dev::peer_id from, const wire::env_data& p) noexcept {
  const std::size_t len = p.hdr.len;
  train_assembly* t = from < trains_.size() ? &trains_[from] : nullptr;
  if (!(p.hdr.flags & wire::flag_train) || len > wire::eager_train_limit || !t || !t->open ||
      t->psn != p.psn || t->filled != len - wire::eager_payload_max) {
    if (t) t->open = false;
    drop_train_packet(from, "an env_data whose train did not arrive whole");
    return;
  }
  t->open = false;
  std::byte* data = t->bytes.data();
  std::memcpy(data + t->filled, p.payload, wire::eager_payload_max);
  const auto kind = (p.hdr.flags & wire::flag_tagged) ? queue_kind::tagged : queue_kind::msg;
  const bool has_data = p.hdr.flags & wire::flag_cq_data;
  ++stats_.train_recv;
  prof_recv(profile_phase::arrival, profile_proto::eager, len);
  if (recv_request* r = take_posted(kind, from, p.tag, len)) {
    prof_recv(profile_phase::match);
    deliver_recv(*r, from, p.tag, p.cq_data, has_data, data, len);
    return;
  }
  // Unexpected: the bytes leave the train buffer now (the next train of this sender reuses it),
  // into the record itself, as an eager message's (no train is longer than the record holds).
  static_assert(wire::eager_train_limit <= unexpected_inline_max);
  unexpected_msg* u = unexpected_.acquire();
  if (!u) {
    EXANET_LOG(warn, ep_data, "out of memory: unexpected eager train message dropped");
    return;
  }
  std::memcpy(u->inline_payload, data, len);
  u->type = wire::pkt_type::env_data;
  u->peer = from;
  u->tag = p.tag;
  u->cq_data = p.cq_data;
  u->has_cq_data = has_data;
  u->len = len;
  (void)add_unexpected(kind, *u);  // on failure it logged and freed the record
}

void endpoint::forget_train(dev::peer_id p) noexcept {
  if (p < trains_.size()) trains_[p].open = false;
}

}  // namespace exanet::proto
