// SPDX-License-Identifier: BSD-2-Clause
// Atomics (fi_atomic(3)), performed by the target: ExaNeST has no atomic unit, so the initiator
// asks and the target's progress does the arithmetic on its own memory, as a read by request is
// answered today (rma.cpp).
//
//  initiator                                         target
//    arm reply slot (+ window for initial values)
//    operands: in the packet (<= 16 bytes, no CQ data), or bounce_write into my ring there, or
//    (no ring or no credit for them) a train of atomic_operands packets
//    ---- atomic_req(key, addr, op, type, count) ---->  grant_check(key, range, rights), alignment,
//                                                       op/type valid: else status, nothing changes
//                                                       perform, element by element (atomic_ops.hpp)
//                                                       FI_RMA_EVENT counters, remote CQ data
//    <=== DMA write: initial values (fetch) + rma_reply(status) into the reply slot ===
//    complete (or error completion with the status)
//
// Why the bounce ring for operands and not a DMA write: the target has no window armed for an
// operand that arrives unannounced, and arming one would cost a round trip; the ring is already the
// initiator's room at the target, is written before the packet naming it (so FIFO delivery keeps
// the two together), and gives its credit back as soon as the target has performed the operation.
// When the ring cannot take them (every ring of the target is held by other senders, or its
// pages could not be reserved, or there is no credit now), the operands go in atomic_operands
// packets of 52 bytes just before the request: slower, but it needs nothing but the mailbox, so an
// atomic never waits for a ring that may never come. The reply, in contrast, goes into a window
// the initiator armed before sending, exactly as a read by request's data does.
//
// Every atomic waits for its reply, so its completion always means the target performed it
// (delivery complete) and a refusal (key, range, rights, alignment, op/type) is an error
// completion. Order: one initiator's requests leave in post order (a request sends only once
// every earlier one has sent all its ranges), the mailbox is FIFO per pair, and the target
// performs each on arrival, one at a time: atomics from one initiator to one target are performed
// in the order posted (FI_ORDER_ATOMIC_RAR/RAW/WAR/WAW), and atomic against every other initiator
// of that target and its own atomics through it.
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <cstring>

#include "core/checked_memory.hpp"
#include "core/iov.hpp"
#include "core/log.hpp"
#include "proto/atomic_ops.hpp"
#include "proto/endpoint.hpp"

namespace exanet::proto {

static_assert(atomics_max_bytes == atomics::max_bytes);
static_assert(atomics::max_bytes / 1 <= UINT16_MAX, "atomic_req.count is 16 bits");

namespace {

atomics::family family_of(int op, bool fetch) noexcept {
  if (atomics::is_compare_op(op)) return atomics::family::compare;
  return fetch ? atomics::family::fetch : atomics::family::base;
}

/// Bytes of operands one range of n elements carries: the operand elements, then as many compare
/// elements for the compare family; none for FI_ATOMIC_READ.
std::size_t operand_bytes(int op, std::size_t n, std::size_t size) noexcept {
  if (op == FI_ATOMIC_READ) return 0;
  return n * size * (atomics::is_compare_op(op) ? 2 : 1);
}

}  // namespace

// ---- initiator --------------------------------------------------------------------------------

core::status endpoint::atomic(const atomic_args& a) noexcept {
  const std::size_t size = atomics::datatype_size(a.datatype);
  const atomics::family fam = family_of(a.op, a.fetch);
  if (a.remote.empty() || a.remote.size() > max_iov || a.result.size() > max_iov ||
      !atomics::valid(a.datatype, a.op, fam))
    return core::status::invalid;
  std::size_t count = 0;
  for (const remote_range& rr : a.remote) count += rr.len;
  if (count == 0 || count > atomics::max_count(a.datatype, a.op, fam)) return core::status::invalid;
  const std::size_t bytes = count * size;
  const bool compare = fam == atomics::family::compare;
  if (a.op != FI_ATOMIC_READ && core::iov_length(a.operand) != bytes) return core::status::invalid;
  if (compare && core::iov_length(a.compare) != bytes) return core::status::invalid;
  if (a.fetch && core::iov_length(a.result) != bytes) return core::status::invalid;

  atomic_request* r = atomics_.acquire();
  if (!r) return core::status::again;
  r->what = atomic_request::role::initiator;
  r->op = a.op;
  r->datatype = a.datatype;
  r->fetch = a.fetch || compare;
  r->has_cq_data = a.has_cq_data;
  r->cq_data = a.cq_data;
  r->completion = a.completion;
  r->context = a.context;
  r->peer = a.peer;
  std::copy(a.remote.begin(), a.remote.end(), r->remote.begin());
  r->remote_count = a.remote.size();
  r->count = count;
  std::copy(a.result.begin(), a.result.end(), r->result.begin());
  r->result_count = a.result.size();
  // The caller's buffers are its own again at return (fi_inject_atomic too): copy the operands.
  if (a.op != FI_ATOMIC_READ) core::copy_from_iov(r->data.data(), a.operand, 0, bytes);
  if (compare) core::copy_from_iov(r->data.data() + bytes, a.compare, 0, bytes);

  const bool may_send = atomic_unsent_ == 0;  // nothing posted earlier is still waiting to go
  ++atomic_unsent_;
  atomic_active_.push_back(*r);
  if (may_send) (void)atomic_advance(*r, true);
  settle_found_dead();
  return core::status::ok;
}

bool endpoint::atomic_send(atomic_request& r) noexcept {
  const std::size_t size = atomics::datatype_size(r.datatype);
  const bool compare = atomics::is_compare_op(r.op);
  const std::size_t all_bytes = r.count * size;
  std::size_t first = 0;  // the range's first element within the operation
  for (std::size_t k = 0; k < r.sent; ++k) first += r.remote[k].len;
  while (r.sent < r.remote_count) {
    const std::size_t k = r.sent;
    const remote_range& rr = r.remote[k];
    const std::size_t n = rr.len;
    const std::size_t opnd = operand_bytes(r.op, n, size);
    const bool last = k + 1 == r.remote_count;
    const bool cq_data = last && r.has_cq_data;
    // The table says where the operands go (CQ data and in-packet operands share the packet's
    // last 16 bytes); a ring without room for them takes the class's fallback, the train.
    const protocol how = protocols_.choose(
        op_kind::atomic, cq_data ? situation::cq_data : situation::transmit_complete, opnd);
    const bool use_ring = how == protocol::atomic_ring;
    const bool in_packet = how == protocol::atomic_packet && opnd > 0;
    std::byte* landing = r.data.data() + first * size;  // over this range's own operands
    // The operands of this range, as they travel: operand elements, then compare elements.
    std::array<iovec, 2> pieces{iovec{landing, opnd ? n * size : 0},
                                iovec{r.data.data() + all_bytes + first * size,
                                      compare ? n * size : 0}};
    // No room in the bounce ring (no ring left for us at this target, or no credit): the
    // operands go ahead in atomic_operands packets, FIFO before the request.
    dev::ring_space space;
    if (use_ring && !r.by_train &&
        !dev_.bounce_reserve(r.peer, opnd, reinterpret_cast<std::uintptr_t>(landing), space))
      r.by_train = true;
    if (r.by_train && !atomic_send_train(r, {pieces.data(), pieces.size()}, opnd)) return false;
    std::uint32_t slot = 0, gen = 0;
    if (!dev_.notify_alloc(slot, gen)) return false;
    if (r.fetch && !dev_.window_open(slot, reinterpret_cast<std::uint64_t>(landing), n * size)) {
      dev_.notify_free(slot);  // the device cannot expose the landing piece for the reply
      r.err = FI_EIO;
      return false;
    }
    dev::mailbox_reservation mb;
    if (const core::status s = dev_.mailbox_reserve(r.peer, mb); !core::ok(s)) {
      dev_.notify_free(slot);
      if (s != core::status::again) r.err = -core::to_int(s);
      return false;
    }
    wire::atomic_req q{};
    std::uint16_t flags = (r.fetch ? wire::flag_fetch : 0) | (cq_data ? wire::flag_cq_data : 0);
    if (r.by_train) flags |= wire::flag_assembled;
    if (in_packet) {
      flags |= wire::flag_inline;
      std::byte inline_operands[wire::atomic_inline_bytes]{};
      core::copy_from_iov(inline_operands, {pieces.data(), pieces.size()}, 0, opnd);
      std::memcpy(&q.ring_offset, inline_operands, sizeof q.ring_offset);
      std::memcpy(&q.cq_data, inline_operands + sizeof q.ring_offset, sizeof q.cq_data);
    } else {
      if (use_ring && !r.by_train) {
        dev_.bounce_write(r.peer, space, {pieces.data(), pieces.size()}, opnd);
        q.ring_offset = space.offset;
        q.ring = space.ring;
      }
      q.cq_data = cq_data ? r.cq_data : 0;
    }
    q.hdr = wire::make_header(wire::pkt_type::atomic_req, flags, static_cast<std::uint32_t>(opnd));
    q.key = rr.key;
    q.remote_addr = rr.addr;
    q.reply_addr = reinterpret_cast<std::uint64_t>(landing);
    q.notify_slot = slot;
    q.notify_gen = gen;
    q.count = static_cast<std::uint16_t>(n);
    q.op = static_cast<std::uint8_t>(r.op);
    q.datatype = static_cast<std::uint8_t>(r.datatype);
    wire::write(mb.data(), q);
    dev_.mailbox_publish(mb);
    r.slot[k] = slot;
    r.gen[k] = gen;
    ++r.sent;
    r.by_train = false;
    r.train_sent = 0;
    first += n;
    if (r.sent == r.remote_count) --atomic_unsent_;
  }
  return true;
}

bool endpoint::atomic_send_train(atomic_request& r, std::span<const iovec> operands,
                                 std::size_t len) noexcept {
  while (r.train_sent < len) {
    wire::atomic_operands p{};
    const std::size_t n = std::min(len - r.train_sent, wire::atomic_operands_bytes);
    p.hdr = wire::make_header(wire::pkt_type::atomic_operands, 0, static_cast<std::uint32_t>(n));
    p.offset = static_cast<std::uint32_t>(r.train_sent);
    core::copy_from_iov(p.data, operands, r.train_sent, n);
    dev::mailbox_reservation slot;
    if (const core::status s = dev_.mailbox_reserve(r.peer, slot); !core::ok(s)) {
      if (s != core::status::again) r.err = -core::to_int(s);
      return false;
    }
    wire::write(slot.data(), p);
    // The rest of the train and the atomic_req follow in this call (atomic_send), as an eager
    // train's packets do: over the network they leave as one lower message (protocol.md,
    // "Bundles"). A train stopped by a full mailbox resumes from train_sent; what waits in the
    // device's bundle goes at its next poll or send, ahead of anything else (FIFO per pair).
    slot.more = true;
    dev_.mailbox_publish(slot);
    r.train_sent += n;
  }
  return true;
}

bool endpoint::atomic_advance(atomic_request& r, bool may_send) noexcept {
  if (r.what == atomic_request::role::response) {
    const iovec src{r.data.data(), r.reply_bytes};
    const core::status s = post_reply(r.peer, {&src, 1}, r.reply_addr, r.reply_slot,
                                      r.reply_gen, r.reply_status, r.reply_bytes, r.dma);
    if (s == core::status::again) return false;
    if (!core::ok(s))
      EXANET_LOG(info, ep_data, "atomic reply to port %u failed: %d",
                 dev_.peer_address(r.peer).port, core::to_int(s));
    atomic_finish(r, 0);
    return true;
  }
  while (r.answered < r.sent) {
    dev::notification n;
    if (!dev_.notify_test(r.slot[r.answered], r.gen[r.answered], n)) break;
    dev_.notify_free(r.slot[r.answered]);
    wire::rma_reply reply;
    std::memcpy(&reply, n.data(), sizeof reply);
    if (reply.status < 0 && r.err == 0) r.err = static_cast<int>(-reply.status);
    ++r.answered;
  }
  // After a refusal nothing more is sent: the operation has failed.
  if (may_send && r.err == 0 && r.sent < r.remote_count) (void)atomic_send(r);
  if (r.answered == r.sent && (r.sent == r.remote_count || r.err != 0)) {
    atomic_finish(r, r.err);
    return true;
  }
  return false;
}

void endpoint::atomic_finish(atomic_request& r, int err) noexcept {
  atomic_active_.remove(r);
  if (r.what == atomic_request::role::response) {
    if (r.peer < control_queues_.size()) --control_queues_[r.peer].responses;
    atomics_.release(&r);
    return;
  }
  if (r.sent < r.remote_count) --atomic_unsent_;
  for (std::size_t k = r.answered; k < r.sent; ++k) dev_.notify_free(r.slot[k]);
  const std::size_t bytes = r.count * atomics::datatype_size(r.datatype);
  if (!err && r.fetch) core::copy_to_iov({r.result.data(), r.result_count}, 0, r.data.data(), bytes);
  if (err || r.completion) {
    completion c;
    c.context = r.context;
    c.flags = FI_ATOMIC | (r.fetch ? FI_READ : FI_WRITE);
    c.len = err ? 0 : bytes;
    c.err = err;
    if (sinks_.tx) sinks_.tx.write(c);
  }
  // fi_cntr(3): base atomics count as writes, fetch and compare atomics as reads.
  const counter_sink& cn = r.fetch ? sinks_.read_cntr : sinks_.write_cntr;
  if (cn) cn.add(cn.self, err != 0);
  atomics_.release(&r);
}

std::size_t endpoint::progress_atomic() noexcept {
  std::size_t n = 0;
  bool may_send = true;  // false once an earlier request still has ranges to send
  atomic_active_.for_each([&](atomic_request& r) {
    if (atomic_advance(r, may_send)) {
      ++n;
      return;
    }
    if (r.what == atomic_request::role::initiator && r.sent < r.remote_count) may_send = false;
  });
  return n;
}

std::size_t endpoint::fail_atomics_of(dev::peer_id p) noexcept {
  std::size_t failed = 0;
  atomic_active_.for_each([&](atomic_request& r) {
    if (r.peer != p) return;
    if (r.what == atomic_request::role::initiator) {
      atomic_finish(r, FI_ECONNRESET);
      ++failed;
    } else {
      atomic_finish(r, 0);  // nobody waits for the answer any more
    }
  });
  return failed;
}

// ---- target -----------------------------------------------------------------------------------

void endpoint::on_atomic_operands(dev::peer_id from, const dev::packet& pkt) noexcept {
  if (from == dev::no_peer) return;
  const auto p = wire::read<wire::atomic_operands>(pkt);
  const std::size_t len = p.hdr.len;
  constexpr std::size_t room = 2 * atomics::max_bytes;  // a compare request's two buffers
  if (len > wire::atomic_operands_bytes || p.offset > room - len) {
    ++stats_.drop_bad_field;
    EXANET_LOG_ONCE(warn, ep_data, "atomic operands beyond one request's room; dropped");
    return;
  }
  try {  // cold: the first train from this sender
    if (assembly_.size() <= from) assembly_.resize(from + 1);
    if (assembly_[from].bytes.empty()) assembly_[from].bytes.resize(room);
  } catch (...) {
    EXANET_LOG(warn, ep_data, "no memory for atomic operands from port %u; dropped",
               dev_.peer_address(from).port);
    return;  // the request that follows finds them missing and is refused
  }
  operand_assembly& a = assembly_[from];
  std::memcpy(a.bytes.data() + p.offset, p.data, len);
  a.filled = std::max(a.filled, p.offset + len);
}

void endpoint::on_atomic_req(dev::peer_id from, const dev::packet& pkt) noexcept {
  if (from == dev::no_peer) return;  // cannot answer a sender we cannot map
  const auto q = wire::read<wire::atomic_req>(pkt);
  const std::size_t opnd_len = q.hdr.len;
  const bool in_packet = q.hdr.flags & wire::flag_inline;
  const bool assembled = q.hdr.flags & wire::flag_assembled;
  const std::byte* operands = nullptr;
  bool operands_missing = false;
  if (assembled) {
    // FIFO: its train came just before it. What did not arrive (no memory) refuses the request.
    operand_assembly* a = from < assembly_.size() ? &assembly_[from] : nullptr;
    if (a && a->filled >= opnd_len) operands = a->bytes.data();
    else operands_missing = true;
    if (a) a->filled = 0;
  } else if (in_packet) {
    if (opnd_len > wire::atomic_inline_bytes) {
      ++stats_.drop_bad_field;
      EXANET_LOG_ONCE(warn, ep_data, "atomic request with %zu in-packet operand bytes; dropped",
                      opnd_len);
      return;
    }
    operands = pkt.data() + offsetof(wire::atomic_req, ring_offset);
  } else if (opnd_len) {
    operands = dev_.bounce_data(from, q.ring, q.ring_offset, opnd_len);
    if (!operands) {
      ++stats_.drop_bad_field;
      EXANET_LOG_ONCE(warn, ep_data, "atomic request names operands outside its sender's ring; "
                      "dropped");
      return;
    }
  }
  auto give_back_ring = [&] {
    if (!in_packet && !assembled && opnd_len) dev_.bounce_consume(from, q.ring, q.ring_offset + opnd_len);
  };
  // Each request names one of the peer's notification slots, so a correct peer never has more
  // answers owed than it has slots (as for reads by request, rma.cpp).
  control_queue* cq = control_queue_of(from);
  if (!cq || cq->responses >= cfg_.notify_slots) {
    ++stats_.drop_backlog;
    EXANET_LOG_ONCE(warn, ep_data, "peer port %u has more atomics outstanding than it has "
                    "notification slots; one is dropped", dev_.peer_address(from).port);
    give_back_ring();
    return;
  }
  atomic_request* r = atomics_.acquire();
  if (!r) {
    EXANET_LOG(warn, ep_data, "no memory to answer an atomic from port %u",
               dev_.peer_address(from).port);
    give_back_ring();
    return;
  }
  ++cq->responses;
  r->what = atomic_request::role::response;
  r->peer = from;
  r->reply_addr = q.reply_addr;
  r->reply_slot = q.notify_slot;
  r->reply_gen = q.notify_gen;

  // The checks: the pair exists, the count fits, the operands are what the op needs, the range
  // is inside a registration of ours with the rights the op needs, and it is aligned. Any refusal
  // leaves our memory as it was.
  const int dt = q.datatype, op = q.op;
  const bool fetch = q.hdr.flags & wire::flag_fetch;
  const atomics::family fam = family_of(op, fetch);
  const std::size_t size = atomics::datatype_size(dt);
  int err = 0;
  dev::rma_target t;
  if (!atomics::valid(dt, op, fam) || (fam == atomics::family::compare && !fetch)) {
    err = FI_EOPNOTSUPP;
  } else if (operands_missing) {
    err = FI_ENOMEM;
  } else if (q.count == 0 || q.count > atomics::max_count(dt, op, fam) ||
             opnd_len != operand_bytes(op, q.count, size)) {
    err = FI_EINVAL;
  } else {
    const std::uint32_t need = (atomics::modifies(op) ? dev::rma_access::remote_write : 0) |
                               (fetch ? dev::rma_access::remote_read : 0);
    const std::size_t bytes = q.count * size;
    if (const core::status s = dev_.grant_check(q.key, q.remote_addr, bytes, need, t); !core::ok(s))
      err = -core::to_int(s);
    else if (t.va % atomics::datatype_align(dt) != 0)
      err = FI_EINVAL;
  }
  const std::size_t bytes = q.count * size;
  auto perform_on = [&](std::byte* target) {
    atomics::perform(dt, op, target, op == FI_ATOMIC_READ ? nullptr : operands,
                     fam == atomics::family::compare ? operands + bytes : nullptr,
                     fetch ? r->data.data() : nullptr, q.count);
  };
  auto* at = reinterpret_cast<std::byte*>(t.va);
  if (err == 0 && !t.may_fault) [[likely]] {
    perform_on(at);
  } else if (err == 0) {
    // Not known to be backed: ask the kernel whether the pages are there (and writable, if the
    // op writes) before touching them, so a missing page is refused rather than fault here.
    const core::writable w = atomics::modifies(op) ? core::range_writable(at, bytes)
                             : core::range_readable(at, bytes) ? core::writable::yes
                                                               : core::writable::no;
    if (w == core::writable::yes) {
      perform_on(at);
    } else if (w == core::writable::unknown) {
      // A kernel without MADV_POPULATE_WRITE: work on a copy read and written back through the
      // kernel. Atomic with respect to this endpoint's other atomics (it performs them one at
      // a time), not to other endpoints' on the same memory.
      alignas(16) std::byte target_copy[atomics::max_bytes];  // count * size <= max_bytes
      if (!core::copy_or_fault(target_copy, at, bytes)) {
        err = FI_EACCES;
      } else {
        perform_on(target_copy);
        if (!core::copy_or_fault(at, target_copy, bytes)) err = FI_EACCES;
      }
    } else {
      err = FI_EACCES;
    }
    if (err) ++stats_.rma_target_faults;
  }
  if (err == 0) {
    r->reply_bytes = fetch ? bytes : 0;
    const bool has_cq_data = (q.hdr.flags & wire::flag_cq_data) && !in_packet;
    dev::key_grant g;
    if ((t.events || has_cq_data) && sinks_.rma_target && dev_.key_at(t.key_slot, g)) {
      rma_target_event e;
      e.key = g.key;
      e.atomic = true;
      e.remote_read = fetch;  // fi_cntr(3): fetch and compare atomics are remote reads
      e.len = bytes;
      e.has_cq_data = has_cq_data;
      e.cq_data = q.cq_data;
      e.src = source_of(from);
      sinks_.rma_target.on_access(sinks_.rma_target.self, e);
    }
  } else {
    EXANET_LOG(info, ep_data, "atomic (op %d, type %d, %u elements) from port %u refused: %d",
               op, dt, q.count, dev_.peer_address(from).port, err);
    r->reply_bytes = 0;
  }
  r->reply_status = -err;
  give_back_ring();
  atomic_active_.push_back(*r);
  (void)atomic_advance(*r, false);
}

}  // namespace exanet::proto
