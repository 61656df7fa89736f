// SPDX-License-Identifier: BSD-2-Clause
// Small RMA writes without a DMA call: the initiator copies the bytes into its bounce ring at the
// target (as medium messages do) and publishes one rma_write_inline packet; the target's progress
// copies them into place. Cheaper than a cross-memory-attach call for a few KiB, and an inject
// write completes at once. Delivery-complete writes never come here: their completion must mean
// the bytes are in place, which only the DMA path (rma.cpp) knows at post time.
#include <rdma/fabric.h>

#include <cstring>

#include "core/checked_memory.hpp"
#include "core/iov.hpp"
#include "core/log.hpp"
#include "proto/endpoint.hpp"

namespace exanet::proto {

core::status endpoint::rma_write_inline(const rma_request& r) noexcept {
  const std::size_t len = r.total;
  const dev::peer_id to = r.peer;
  // The source: the caller's buffers (valid until completion), or an inject's copy behind the
  // empty hole rma_now puts in front of it.
  std::span<const iovec> src{r.iov.data(), r.iov_count};
  if (r.owned) src = src.subspan(1);
  // Placed like the target address: the target's copy out is aligned.
  dev::ring_space space;
  // No ring or no credit: DMA instead, unless the device says the credit is on its way and
  // worth waiting for (as medium_send): then "again", and the application progresses and
  // retries. A full mailbox likewise.
  if (!dev_.bounce_reserve(to, len, r.target[0].va, space))
    return dev_.bounce_credit_coming(to, len) ? core::status::again : core::status::not_supported;
  dev::mailbox_reservation slot;
  if (core::status s = dev_.mailbox_reserve(to, slot); !core::ok(s))
    return s != core::status::again         ? s
           : dev_.mailbox_credit_coming(to) ? core::status::again
                                            : core::status::not_supported;
  dev_.bounce_write(to, space, src, len);
  wire::rma_write_inline p{};
  p.hdr = wire::make_header(wire::pkt_type::rma_write_inline,
                            r.has_cq_data ? wire::flag_cq_data : 0,
                            static_cast<std::uint32_t>(len));
  p.remote_addr = r.remote[0].addr;
  p.key = r.remote[0].key;
  p.cq_data = r.cq_data;
  p.ring_offset = space.offset;
  p.ring = space.ring;
  p.key_slot = r.target[0].key_slot;
  wire::write(slot.data(), p);
  // As a send's (medium.cpp): the application learns of this write only by reading its CQ or
  // its write counter, and both poll first, so a network backend may keep the packet for that
  // poll with the writes that follow it (a window of writes in a few lower messages).
  slot.reported = (r.completion && sinks_.tx) || sinks_.write_cntr;
  dev_.mailbox_publish(slot);
  dev_.bounce_prepare(to, len);  // as medium_send: the next write's room, taken ahead
  ++stats_.rma_inline_writes;
  return core::status::ok;
}

void endpoint::on_rma_write_inline(dev::peer_id from, const dev::packet& pkt) noexcept {
  // Up to the CQ data: a write without it never loads the packet's second line.
  auto p = wire::read_head<wire::rma_write_inline, offsetof(wire::rma_write_inline, cq_data)>(pkt);
  const std::size_t len = p.hdr.len;
  const std::byte* data = dev_.bounce_data(from, p.ring, p.ring_offset, len);
  if (!data) {
    ++stats_.drop_bad_field;
    EXANET_LOG_ONCE(warn, ep_data, "inline RMA write names bytes outside its sender's ring; dropped");
    return;
  }
  // Resolved here, on arrival, by the key and address the application named: the initiator's
  // check may have used what it knew of an earlier registration under the key (over the
  // network it keeps the target's answers), and the owner may have closed that one and
  // registered other memory under the same key since. The slot the initiator found is tried
  // first; the key's current registration decides.
  dev::rma_target t;
  bool granted =
      access_granted(p.key, p.remote_addr, len, dev::rma_access::remote_write, p.key_slot, t);
  if (granted && !t.may_fault) [[likely]] {
    core::copy_bytes(reinterpret_cast<void*>(t.va), data, len);
  } else if (granted) {
    // Not known to be backed. Our initiators send no inline write to such a grant (rma.cpp), so
    // nobody waits for an answer; a fault is counted and the write dropped.
    if (!core::copy_or_fault(reinterpret_cast<void*>(t.va), data, len)) {
      ++stats_.rma_target_faults;
      granted = false;
    }
  } else {
    ++stats_.drop_dma_refused;
    EXANET_LOG_ONCE(warn, ep_data, "inline RMA write from port %u outside its registration; dropped",
                    dev_.peer_address(from).port);
  }
  dev_.bounce_consume(from, p.ring, p.ring_offset + len);
  const bool has_data = p.hdr.flags & wire::flag_cq_data;
  if (has_data) std::memcpy(&p.cq_data, pkt.data() + offsetof(wire::rma_write_inline, cq_data),
                            sizeof p.cq_data);
  if (granted && (t.events || has_data))
    rma_access_landed(from, t.key_slot, false, wire::event_last | wire::event_region_end, len,
                      has_data, p.cq_data);
}

}  // namespace exanet::proto
