// SPDX-License-Identifier: BSD-2-Clause
// RMA (DESIGN.md §5): writes are DMA writes into a peer's registered memory (small ones may take
// the bounce ring instead, rma_inline.cpp); reads are direct when the engine can read the peer
// (CMA) and the placement does not make the kernel's copy slow, and otherwise a request the peer
// answers with a DMA write. Each read chooses once (rma_check_ranges, direct_ranges).
// Every access passes the target's protection table first (dev rma_check / grant_check), so a bad
// key, range or right fails before any byte moves. A backend that must ask the target first
// (dev/net) answers rma_check with again until the target's answer came: the call returns
// -FI_EAGAIN with nothing started, as when the request pool is empty. Accesses the target wants to hear about (its
// FI_RMA_EVENT counters, remote CQ data) follow the data as a 16-byte event in the initiator's
// ring at the target, or as an rma_done packet when the data itself travels through the target's
// mailbox (staged copies) and the event must not overtake it.
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <cstdlib>
#include <cstring>

#include "core/checked_memory.hpp"
#include "core/iov.hpp"
#include "core/log.hpp"
#include "proto/endpoint.hpp"

namespace exanet::proto {
namespace {

// Which counts a range ends at the target: the operation (endpoint counters) and the operation's
// use of one registration (MR counters), so an operation counts once on each.
std::uint8_t ends_of(const rma_request& r, std::size_t seg) noexcept {
  const bool last = seg + 1 == r.remote_count;
  const bool region_end = last || r.target[seg + 1].key_slot != r.target[seg].key_slot;
  return static_cast<std::uint8_t>((last ? wire::event_last : 0) |
                                   (region_end ? wire::event_region_end : 0));
}

wire::rma_event pack_event(const rma_request& r, std::size_t seg, bool with_data) noexcept {
  wire::rma_event e{};
  const std::uint64_t len = r.remote[seg].len;
  e.cq_data = with_data ? r.cq_data : 0;
  e.len_low = static_cast<std::uint32_t>(len);
  e.len_high = static_cast<std::uint8_t>(len >> 32);  // up to 1 TiB reported exactly
  e.key_slot = static_cast<std::uint16_t>(r.target[seg].key_slot);
  e.flags = static_cast<std::uint8_t>((with_data ? wire::event_cq_data : 0) |
                                      ends_of(r, seg) |
                                      (r.what == rma_request::role::read ? wire::event_remote_read : 0));
  return e;
}

// The same two marks as they travel in a packet header (rma_done, rma_read_req).
std::uint16_t ends_to_flags(std::uint8_t ends) noexcept {
  return static_cast<std::uint16_t>(((ends & wire::event_last) ? wire::flag_last : 0) |
                                    ((ends & wire::event_region_end) ? wire::flag_region_end : 0));
}

std::uint8_t ends_from_flags(std::uint16_t flags) noexcept {
  return static_cast<std::uint8_t>(((flags & wire::flag_last) ? wire::event_last : 0) |
                                   ((flags & wire::flag_region_end) ? wire::event_region_end : 0));
}

// The report of range seg as an rma_done packet (ack: the slot the target answers in, or none).
dev::packet rma_done_packet(const rma_request& r, std::size_t seg, bool with_data,
                            std::uint16_t flags) noexcept {
  wire::rma_done d{};
  flags |= (with_data ? wire::flag_cq_data : 0) | ends_to_flags(ends_of(r, seg)) |
           (r.what == rma_request::role::read ? wire::flag_remote_read : 0);
  d.hdr = wire::make_header(wire::pkt_type::rma_done, flags);
  d.cq_data = with_data ? r.cq_data : 0;
  d.len = r.remote[seg].len;
  d.key_slot = r.target[seg].key_slot;
  d.key = r.remote[seg].key;
  d.remote_addr = r.remote[seg].addr;
  if (flags & wire::flag_ack) {
    d.ack_slot = r.reply_slot;
    d.ack_gen = r.reply_gen;
  }
  dev::packet pkt;
  wire::write(pkt.data(), d);
  return pkt;
}

}  // namespace

bool endpoint::writes_unissued_to(dev::peer_id to) const noexcept {
  // A write past its data and report waits only for the target's acknowledgement (wait_reply):
  // what it moved is ahead of anything sent now. So is one whose last range the device has
  // already put ahead of later packets (dma_state::ahead_of_later_packets) with nothing left to
  // report, or its report gone along with the data. Reads and read answers never hold a send.
  const auto unissued = [to](const rma_request& r) {
    if (r.what != rma_request::role::write || r.peer != to) return false;
    if (r.at == rma_request::stage::wait_reply) return false;
    if (r.at != rma_request::stage::data || r.seg + 1 != r.remote_count ||
        !r.dma.ahead_of_later_packets)
      return true;
    bool reports = r.has_cq_data;
    for (std::size_t i = 0; i < r.remote_count; ++i) reports = reports || r.target[i].events;
    return reports && !(r.remote_count == 1 && r.dma.delivered);
  };
  if (rma_active_.find(unissued)) return true;
  return atomic_unsent_ != 0 && atomic_active_.find([to](const atomic_request& r) {
           return r.what == atomic_request::role::initiator && r.peer == to &&
                  r.sent < r.remote_count;
         });
}

core::status endpoint::rma(const rma_args& a) noexcept {
  const core::status s = rma_now(a);
  if (s == core::status::peer_dead) [[unlikely]] settle_found_dead();
  return s;
}

core::status endpoint::rma_now(const rma_args& a) noexcept {
  if (a.iov.size() > max_iov || a.remote.empty() || a.remote.size() > max_iov)
    return core::status::invalid;
  const std::size_t local_len = core::iov_length(a.iov);
  std::size_t remote_len = 0;
  for (const remote_range& rr : a.remote) remote_len += rr.len;
  if (local_len != remote_len) return core::status::invalid;

  rma_request* r = rmas_.acquire();
  if (!r) return core::status::again;
  r->what = a.read ? rma_request::role::read : rma_request::role::write;
  r->context = a.context;
  r->peer = a.peer;
  std::copy(a.iov.begin(), a.iov.end(), r->iov.begin());
  r->iov_count = a.iov.size();
  r->remote_count = a.remote.size();
  r->total = local_len;
  r->cq_data = a.cq_data;
  r->has_cq_data = a.has_cq_data && !a.read;
  r->completion = a.completion;
  r->delivery_complete = a.delivery_complete;

  // The engine's protection check, for every range before anything moves.
  std::copy(a.remote.begin(), a.remote.end(), r->remote.begin());
  r->at = rma_request::stage::check;
  const rma_step checked = rma_check_ranges(*r);
  if (checked == rma_step::released) return core::status::ok;  // refused: an error completion
  // blocked: the target's answer about a key is on its way (a backend that asks the target,
  // dev/net). The operation is accepted and waits for it in rma_active_, as applications (and
  // upstream fabtests) post an RMA once and expect it to go; nothing moves before every range
  // passed, and a refusal then is an error completion. A write that waited tries the inline
  // path when its answer comes (rma_advance).
  if (checked == rma_step::next) {
    if (!a.read) {
      const core::status inlined = rma_write_inline_checked(*r);
      if (core::ok(inlined)) return core::status::ok;
      if (inlined == core::status::again) {
        // Credit (ring, packets or the device's operations) is on its way and worth the wait
        // (over a network, where the DMA path costs the target's verdict, a round trip, per
        // write): nothing has started, and the retry counts the write (rma_check_ranges
        // counted this attempt).
        --stats_.rma_writes;
        rmas_.release(r);
        return core::status::again;
      }
      // rma/dma, or rma/inline without ring credit (its fallback).
    }
    if (rma_advance(*r)) return core::status::ok;
  }
  if (a.inject && r->what == rma_request::role::write) {
    // The caller may reuse its buffer now: keep what has not been handed to the engine.
    const std::size_t from = r->seg_offset + r->dma.done;
    const std::size_t rest = r->total - from;
    auto* copy = static_cast<std::byte*>(std::malloc(rest ? rest : 1));
    if (!copy) {
      rma_finish(*r, FI_ENOMEM);
      return core::status::ok;
    }
    core::copy_from_iov(copy, {r->iov.data(), r->iov_count}, from, rest);
    r->owned = copy;
    // Local offsets keep counting from the operation start: pad the front with a hole the
    // engine never reads again.
    r->iov[0] = {nullptr, from};
    r->iov[1] = {copy, rest};
    r->iov_count = 2;
  }
  rma_active_.push_back(*r);
  return core::status::ok;
}

core::status endpoint::rma_write_inline_checked(rma_request& r) noexcept {
  const situation where = r.delivery_complete     ? situation::delivery_complete
                          : r.remote_count == 1 ? situation::transmit_complete
                                                : situation::several_ranges;
  // A grant not known to be backed takes the DMA path, whose fault comes back to us.
  if (r.may_fault || protocols_.choose(op_kind::rma_write, where, r.total) != protocol::rma_inline)
    return core::status::not_supported;
  const core::status s = rma_write_inline(r);
  if (core::ok(s)) rma_finish(r, 0);  // copied out of the source: complete, inject or not
  return s;
}

bool endpoint::rma_advance(rma_request& r) noexcept {
  if (r.what == rma_request::role::read_response) return rma_answer_read(r);
  if (r.at == rma_request::stage::check) [[unlikely]] {
    const rma_step st = rma_check_ranges(r);
    if (st != rma_step::next) return st == rma_step::released;
    // A write that waited for the target's answer about its key (dev/net) and has sent
    // nothing: inline if it can, as it would have gone without the wait. Over the network a
    // DMA write costs the target's verdict, and the writes a stream posts while the first
    // answer travels (64 to 128 in fi_rma_bw) went that way.
    if (r.what == rma_request::role::write && r.rechecks == 0) {
      if (core::ok(rma_write_inline_checked(r))) return true;
      // again: the credit is on its way, but the write was accepted and its answer came: the
      // DMA path goes now rather than hold it longer.
    }
  }
  if (r.at == rma_request::stage::data) {
    const rma_step st = r.what == rma_request::role::write ? rma_write_data(r) : rma_read_data(r);
    if (st != rma_step::next) return st == rma_step::released;
    r.at = rma_request::stage::events;
    r.seg = 0;
  }
  if (r.at == rma_request::stage::events) {
    const rma_step st = rma_post_events(r);
    if (st != rma_step::next) return st == rma_step::released;
    if (r.at != rma_request::stage::wait_reply) {
      rma_finish(r, 0);
      return true;
    }
  }
  dev::notification n;
  if (!dev_.notify_test(r.reply_slot, r.reply_gen, n)) return false;
  wire::rma_reply reply;
  std::memcpy(&reply, n.data(), sizeof reply);
  rma_finish(r, reply.status < 0 ? static_cast<int>(-reply.status) : 0);
  return true;
}

endpoint::rma_step endpoint::rma_check_ranges(rma_request& r) noexcept {
  const std::uint32_t need = r.what == rma_request::role::read ? dev::rma_access::remote_read
                                                               : dev::rma_access::remote_write;
  for (; r.checked < r.remote_count; ++r.checked) {
    const remote_range& rr = r.remote[r.checked];
    const core::status s = dev_.rma_check(r.peer, rr.key, rr.addr, rr.len, need, r.target[r.checked]);
    if (s == core::status::again) return rma_step::blocked;
    if (!core::ok(s)) {
      log_refused(r, r.checked);
      rma_finish(r, -core::to_int(s));
      return rma_step::released;
    }
    r.may_fault = r.may_fault || r.target[r.checked].may_fault;
  }
  if (r.what == rma_request::role::read) {
    ++stats_.rma_reads;
    r.direct_ranges = read_direct(r) ? static_cast<std::uint8_t>(r.remote_count) : 0;
  } else if (r.rechecks == 0) {  // counted once, however often its check went stale
    ++stats_.rma_writes;
  }
  r.at = rma_request::stage::data;
  return rma_step::next;
}

void endpoint::log_refused(const rma_request& r, std::size_t i) noexcept {
  EXANET_LOG(info, ep_data, "RMA %s refused by port %u: key 0x%llx addr 0x%llx len %llu",
             r.what == rma_request::role::read ? "read" : "write",
             dev_.peer_address(r.peer).port, static_cast<unsigned long long>(r.remote[i].key),
             static_cast<unsigned long long>(r.remote[i].addr),
             static_cast<unsigned long long>(r.remote[i].len));
}

endpoint::rma_step endpoint::rma_write_data(rma_request& r) noexcept {
  const std::span<const iovec> local{r.iov.data(), r.iov_count};
  while (r.seg < r.remote_count) {
    dev::dma_write w;
    w.peer = r.peer;
    w.src = local;
    w.src_offset = r.seg_offset;
    w.dst_addr = r.target[r.seg].va;
    w.len = r.remote[r.seg].len;
    w.key_slot = r.target[r.seg].key_slot;  // the registration the target checks it against
    // A one-range write the target hears of (its counters, remote CQ data) and that asks no
    // acknowledgement: its report may go with the data where the device can make it follow
    // the write's fate (dev/net), a verdict's round trip sooner than rma_post_events would.
    dev::packet report;
    if (r.remote_count == 1 && (r.target[0].events || r.has_cq_data) && !r.delivery_complete &&
        !r.may_fault) {
      report = rma_done_packet(r, 0, r.has_cq_data, 0);
      w.deliver_if_landed = &report;
    }
    const core::status s = dev_.dma_post(w, r.dma);
    if (s == core::status::again) return rma_step::blocked;
    // An inject's copy starts where the engine stood at post (rma_now): never before it.
    const bool range_kept = !r.owned || r.iov[0].iov_len <= r.seg_offset;
    if (s == core::status::stale && r.rechecks < max_rechecks && range_kept) {
      // The owner closed the registration this range's check found before the data came
      // (dev/net: what the initiator knew of a key went stale). This range and the ones after
      // it are checked again, against what the owner has now, and written anew.
      ++r.rechecks;
      r.dma = {};
      r.checked = r.seg;
      r.at = rma_request::stage::check;
      return rma_step::blocked;
    }
    if (!core::ok(s)) {
      rma_finish(r, s == core::status::stale ? FI_EACCES : -core::to_int(s));
      return rma_step::released;
    }
    r.staged_any = r.staged_any || !r.dma.landed_at_post;
    r.report_delivered = r.dma.delivered;
    r.seg_offset += w.len;
    ++r.seg;
    r.dma = {};
  }
  return rma_step::next;
}

endpoint::rma_step endpoint::rma_read_data(rma_request& r) noexcept {
  const std::span<const iovec> local{r.iov.data(), r.iov_count};
  auto fail = [&](int err) {
    rma_finish(r, err);
    return rma_step::released;
  };
  while (r.seg < r.remote_count) {
    const std::size_t len = r.remote[r.seg].len;
    if (!read_by_request(r, r.seg)) {
      const core::status s = dev_.dma_read(r.peer, r.target[r.seg].va, local, r.seg_offset, len);
      if (core::ok(s)) {
        r.seg_offset += len;
        ++r.seg;
        continue;
      }
      if (s != core::status::permission) return fail(-core::to_int(s));
      // The kernel refused CMA: ask the target to write this range and the rest (below); the
      // ranges before it were read, and post their events (rma_post_events).
      r.direct_ranges = static_cast<std::uint8_t>(r.seg);
    }
    // Read by request, one contiguous local piece at a time.
    if (r.reply_slot != rma_request::no_slot) {
      dev::notification n;
      if (!dev_.notify_test(r.reply_slot, r.reply_gen, n)) return rma_step::blocked;
      dev_.notify_free(r.reply_slot);
      r.reply_slot = rma_request::no_slot;
      wire::rma_reply reply;
      std::memcpy(&reply, n.data(), sizeof reply);
      if (reply.status < 0) return fail(static_cast<int>(-reply.status));
      r.seg_done += reply.bytes;
    }
    if (r.seg_done == len) {
      r.seg_offset += len;
      r.seg_done = 0;
      ++r.seg;
      continue;
    }
    iovec piece{};
    if (core::slice_iov(local, r.seg_offset + r.seg_done, len - r.seg_done, &piece, 1) == 0)
      return fail(FI_EINVAL);  // the local buffers are shorter than the ranges (checked at post)
    std::uint32_t slot = 0, gen = 0;
    if (!dev_.notify_alloc(slot, gen)) return rma_step::blocked;
    if (!dev_.window_open(slot, reinterpret_cast<std::uint64_t>(piece.iov_base), piece.iov_len)) {
      dev_.notify_free(slot);  // the device cannot expose the buffer the reply lands in
      return fail(FI_EIO);
    }
    wire::rma_read_req q{};
    const bool range_done = r.seg_done + piece.iov_len == len;
    const std::uint8_t ends = range_done ? ends_of(r, r.seg) : 0;
    q.hdr = wire::make_header(wire::pkt_type::rma_read_req, ends_to_flags(ends));
    q.key = r.remote[r.seg].key;
    q.remote_addr = r.remote[r.seg].addr + r.seg_done;
    q.len = piece.iov_len;
    q.reply_addr = reinterpret_cast<std::uint64_t>(piece.iov_base);
    q.notify_slot = slot;
    q.notify_gen = gen;
    dev::packet pkt;
    wire::write(pkt.data(), q);
    const core::status s = dev_.mailbox_send(r.peer, pkt);
    if (!core::ok(s)) {
      dev_.notify_free(slot);
      if (s == core::status::again) return rma_step::blocked;
      return fail(-core::to_int(s));
    }
    r.reply_slot = slot;
    r.reply_gen = gen;
    return rma_step::blocked;
  }
  return rma_step::next;
}

// Events after the data: one per range the target counts, the CQ data with the last, and for a
// delivery-complete write whose data is staged, an ack request that also proves it landed.
endpoint::rma_step endpoint::rma_post_events(rma_request& r) noexcept {
  const bool want_ack = write_wants_ack(r);
  while (r.seg < r.remote_count) {
    const bool last = r.seg + 1 == r.remote_count;
    const bool wanted = r.target[r.seg].events || (last && (r.has_cq_data || want_ack));
    // A range read by request is counted by the target when it answers; a report that went
    // with the data is not sent again.
    if (wanted && !read_by_request(r, r.seg) && !(last && r.report_delivered)) {
      const core::status s = rma_post_event(r, r.seg, last);
      if (s == core::status::again) return rma_step::blocked;
      if (!core::ok(s)) {
        rma_finish(r, -core::to_int(s));
        return rma_step::released;
      }
    }
    ++r.seg;
  }
  if (want_ack) r.at = rma_request::stage::wait_reply;
  return rma_step::next;
}

core::status endpoint::rma_post_event(rma_request& r, std::size_t seg, bool last) noexcept {
  const bool with_data = last && r.has_cq_data;
  const bool late = landed_late(r);
  const bool ack = last && write_wants_ack(r);
  if (!ack && !late) {
    const wire::rma_event e = pack_event(r, seg, with_data);
    dev::notification n;
    std::memcpy(n.data(), &e, sizeof e);
    const core::status s = dev_.event_post(r.peer, n);
    if (s != core::status::not_supported) return s;
  }
  // By packet: FIFO behind staged data, or no event ring is left at the peer for us.
  if (ack && !dev_.notify_alloc(r.reply_slot, r.reply_gen)) return core::status::again;
  const dev::packet pkt = rma_done_packet(r, seg, with_data, ack ? wire::flag_ack : 0);
  const core::status s = dev_.mailbox_send(r.peer, pkt);
  if (!core::ok(s) && ack) {
    dev_.notify_free(r.reply_slot);
    r.reply_slot = rma_request::no_slot;
  }
  return s;
}

void endpoint::rma_finish(rma_request& r, int err) noexcept {
  if (r.what != rma_request::role::read_response) {
    const bool read = r.what == rma_request::role::read;
    completion c;
    c.context = r.context;
    c.flags = FI_RMA | (read ? FI_READ : FI_WRITE);
    c.len = err ? 0 : r.total;
    c.err = err;
    if (!read && !err) {
      // Its bytes (or its notification and report) may still wait in a transport's queue.
      if ((r.completion && sinks_.tx) || sinks_.write_cntr)
        report_sent(r.peer, c, r.completion, report_counter::write);
    } else {
      if ((err || r.completion) && sinks_.tx) sinks_.tx.write(c);
      const counter_sink& cn = read ? sinks_.read_cntr : sinks_.write_cntr;
      if (cn) cn.add(cn.self, err != 0);
    }
  } else if (r.peer < control_queues_.size()) {
    --control_queues_[r.peer].responses;  // counted in rma_reply_to
  }
  if (r.reply_slot != rma_request::no_slot) dev_.notify_free(r.reply_slot);
  std::free(r.owned);
  rmas_.release(&r);
}

std::size_t endpoint::progress_rma() noexcept {
  std::size_t n = 0;
  // Each request once per call: one still blocked goes to the back and waits for the next call.
  for (std::size_t todo = rma_active_.size(); todo > 0; --todo) {
    rma_request* r = rma_active_.pop_front();
    if (rma_advance(*r)) ++n;
    else rma_active_.push_back(*r);
  }
  return n;
}

// ---- target side ------------------------------------------------------------------------------

bool endpoint::access_granted(std::uint64_t key, std::uint64_t addr, std::size_t len,
                              std::uint32_t need, std::uint32_t slot_hint,
                              dev::rma_target& t) const noexcept {
  dev::key_grant g;
  if (dev_.key_at(slot_hint, g) && g.key == key)
    return dev::grant_target(g, slot_hint, addr, len, need, t);
  // The key was registered anew in another slot (or is gone): the whole table is asked.
  return core::ok(dev_.grant_check(key, addr, len, need, t));
}

void endpoint::rma_access_landed(dev::peer_id from, std::uint32_t key_slot, bool remote_read,
                                 std::uint8_t ends, std::size_t len, bool has_cq_data,
                                 std::uint64_t cq_data) noexcept {
  // Only an access that could have happened here counts (issue 12): a live registration of this
  // endpoint with the right the access needs, no longer than it, that asked to hear of accesses
  // or that the access brings CQ data into. Anything else is a stale or forged event.
  // A read brings no CQ data (fi_rma(3): FI_REMOTE_CQ_DATA is for writes; our initiators never
  // set it on a read): an event claiming both is forged (the forger's seed 1796245461 made the
  // target write an FI_REMOTE_CQ_DATA completion for a read of a registration without events).
  dev::key_grant g;
  const std::uint32_t need = remote_read ? dev::rma_access::remote_read : dev::rma_access::remote_write;
  if ((remote_read && has_cq_data) || !dev_.key_at(key_slot, g) || (g.access & need) != need ||
      len > g.len || !(g.events || has_cq_data)) {
    ++stats_.drop_rma_event;
    EXANET_LOG_ONCE(warn, ep_data, "RMA event for key slot %u (%s, %zu bytes) dropped: no such "
                    "access is possible here", key_slot, remote_read ? "read" : "write", len);
    return;
  }
  if (!sinks_.rma_target) return;
  rma_target_event e;
  e.key = g.key;
  e.remote_read = remote_read;
  e.op_end = ends & wire::event_last;
  e.region_end = ends & wire::event_region_end;
  e.len = len;
  e.has_cq_data = has_cq_data;
  e.cq_data = cq_data;
  e.src = from == dev::no_peer ? unknown_source : source_of(from);
  sinks_.rma_target.on_access(sinks_.rma_target.self, e);
}

void endpoint::on_rma_event(dev::peer_id from, const dev::notification& n) noexcept {
  wire::rma_event e;
  std::memcpy(&e, n.data(), sizeof e);
  const std::size_t len = e.len_low | (std::size_t{e.len_high} << 32);
  rma_access_landed(from, e.key_slot, e.flags & wire::event_remote_read,
                    e.flags & (wire::event_last | wire::event_region_end), len,
                    e.flags & wire::event_cq_data, e.cq_data);
}

void endpoint::on_rma_done(dev::peer_id from, const dev::packet& pkt) noexcept {
  const auto d = wire::read<wire::rma_done>(pkt);
  const bool ack = (d.hdr.flags & wire::flag_ack) && from != dev::no_peer;
  // The ack reports a write of this peer that found no memory in a grant not known to be
  // backed (the writer asks for an ack then); such a write counts as no access here.
  const bool faulted = ack && dev_.take_write_fault(from);
  // FIFO: the staged data before this packet has already been copied into place. Counted
  // against the key's registration of now, as the data landed in it: over the network the
  // initiator may have checked an answer about an earlier registration under the key, and
  // the lower provider put the data where the current one says (dev/net, key_is_lower_key).
  const bool read = d.hdr.flags & wire::flag_remote_read;
  const std::uint32_t need = read ? dev::rma_access::remote_read : dev::rma_access::remote_write;
  dev::rma_target t;
  if (!faulted && access_granted(d.key, d.remote_addr, d.len, need, d.key_slot, t)) {
    rma_access_landed(from, t.key_slot, read, ends_from_flags(d.hdr.flags), d.len,
                      d.hdr.flags & wire::flag_cq_data, d.cq_data);
  } else if (!faulted) {
    ++stats_.drop_rma_event;
    EXANET_LOG_ONCE(warn, ep_data, "RMA %s event (key 0x%llx, %llu bytes) dropped: no "
                    "registration here admits it", read ? "read" : "write",
                    static_cast<unsigned long long>(d.key), static_cast<unsigned long long>(d.len));
  }
  if (!ack) return;
  // An empty write carrying only the notification: the ack.
  if (faulted) ++stats_.rma_target_faults;
  if (rma_request* r = rma_reply_to(from, d.ack_slot, d.ack_gen)) {
    if (faulted) r->reply_status = core::to_int(core::status::access);
    if (!rma_answer_read(*r)) rma_active_.push_back(*r);
  }
}

rma_request* endpoint::rma_reply_to(dev::peer_id from, std::uint32_t slot,
                                    std::uint32_t gen) noexcept {
  // Each request names one of the peer's notification slots, so a correct peer (same settings)
  // never has more than notify_slots answered at once; one that asks more (and never takes the
  // answers) must not grow this endpoint (issue 12).
  control_queue* q = control_queue_of(from);
  if (!q || q->responses >= cfg_.notify_slots) {
    ++stats_.drop_backlog;
    EXANET_LOG_ONCE(warn, ep_data, "peer port %u has more RMA requests outstanding than it has "
                    "notification slots; one is dropped", dev_.peer_address(from).port);
    return nullptr;
  }
  rma_request* r = rmas_.acquire();
  if (!r) {
    // The peer waits until it fails this endpoint as dead; only pool growth can fail here.
    EXANET_LOG(warn, ep_data, "no memory to answer an RMA request from port %u",
               dev_.peer_address(from).port);
    return nullptr;
  }
  ++q->responses;
  r->what = rma_request::role::read_response;
  r->peer = from;
  r->reply_slot = slot;
  r->reply_gen = gen;
  return r;
}

void endpoint::on_rma_read_req(dev::peer_id from, const dev::packet& pkt) noexcept {
  if (from == dev::no_peer) return;  // cannot answer a sender we cannot map
  const auto q = wire::read<wire::rma_read_req>(pkt);
  rma_request* r = rma_reply_to(from, q.notify_slot, q.notify_gen);
  if (!r) return;
  r->reply_addr = q.reply_addr;
  dev::rma_target t;
  const core::status s =
      dev_.grant_check(q.key, q.remote_addr, q.len, dev::rma_access::remote_read, t);
  if (core::ok(s) && t.may_fault &&
      !core::range_readable(reinterpret_cast<const void*>(t.va), q.len)) [[unlikely]] {
    ++stats_.rma_target_faults;  // a grant not known to be backed: nothing there to read
    r->reply_status = core::to_int(core::status::access);
    r->total = 0;
  } else if (core::ok(s)) {
    r->iov[0] = {reinterpret_cast<void*>(t.va), q.len};
    r->iov_count = 1;
    r->total = q.len;
    ++stats_.rma_read_requests_served;
    // A read by request comes in contiguous pieces; the initiator marks where counts end.
    if (t.events)
      rma_access_landed(from, t.key_slot, true, ends_from_flags(q.hdr.flags), q.len, false, 0);
  } else {
    EXANET_LOG(info, ep_data, "read of port %u refused: key 0x%llx addr 0x%llx len %llu: %s",
               dev_.peer_address(from).port, static_cast<unsigned long long>(q.key),
               static_cast<unsigned long long>(q.remote_addr),
               static_cast<unsigned long long>(q.len), fi_strerror(-core::to_int(s)));
    r->reply_status = core::to_int(s);  // the reply carries the refusal; no data moves
    r->total = 0;
  }
  if (!rma_answer_read(*r)) rma_active_.push_back(*r);
}

// Writes the answer (data, if any) to the asking peer, then the rma_reply notification.
core::status endpoint::post_reply(dev::peer_id peer, std::span<const iovec> src,
                                  std::uint64_t reply_addr, std::uint32_t slot, std::uint32_t gen,
                                  std::int64_t status, std::uint64_t bytes,
                                  dev::dma_state& st) noexcept {
  dev::dma_write w;
  w.peer = peer;
  w.src = src;
  w.dst_addr = reply_addr;
  w.dst_base = reply_addr;  // the window starts at the landing piece
  w.len = bytes;
  w.notify = true;
  w.notify_slot = slot;
  w.notify_gen = gen;
  w.awaited = true;  // the peer waits for it, progressing
  const wire::rma_reply reply{status, bytes};
  std::memcpy(w.notify_data.data(), &reply, sizeof reply);
  return dev_.dma_post(w, st);
}

bool endpoint::rma_answer_read(rma_request& r) noexcept {
  const core::status s = post_reply(r.peer, {r.iov.data(), r.iov_count}, r.reply_addr,
                                    r.reply_slot, r.reply_gen, r.reply_status, r.total, r.dma);
  if (s == core::status::again) return false;
  if (!core::ok(s))
    EXANET_LOG(info, ep_data, "RMA reply to port %u failed: %d", dev_.peer_address(r.peer).port,
               core::to_int(s));
  r.reply_slot = rma_request::no_slot;  // the peer's slot, not ours: nothing to free here
  rma_finish(r, 0);
  return true;
}

}  // namespace exanet::proto
