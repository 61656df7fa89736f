// SPDX-License-Identifier: BSD-2-Clause
// The emulated engine's RMA side: the protection table every access is checked against, reads
// through cross-memory attach, and the per-sender event rings that tell a target about accesses
// it asked to count (DESIGN.md §5).
#include <sys/uio.h>

#include <cerrno>
#include <utility>

#include "core/iov.hpp"
#include "core/log.hpp"
#include "dev/emu/device.hpp"
#include "dev/emu/key_table.hpp"

namespace exanet::dev::emu {
core::status device::key_publish(const key_grant& g, std::uint32_t& slot) noexcept {
  key_grant seen;
  if (key_table::find(local_.keys, geo_.key_slots, g.key, seen) != key_table::no_slot)
    return core::status::exists;
  slot = key_table::publish(local_.keys, geo_.key_slots, g);
  if (slot == key_table::no_slot) return core::status::no_memory;
  // The owner's own copy decides; the table is for initiators. Published by the flag: under
  // FI_PROGRESS_AUTO the progress thread reads it (key_at) without the registering thread's
  // locks, the ordering reaching it only through the peer that learned the key (TSan, issue 13).
  grants_[slot].g = g;
  std::atomic_ref<bool>(grants_[slot].live).store(true, std::memory_order_release);
  return core::status::ok;
}

void device::key_revoke(std::uint32_t slot) noexcept {
  if (slot >= geo_.key_slots) return;
  std::atomic_ref<bool>(grants_[slot].live).store(false, std::memory_order_release);
  key_table::revoke(local_.keys, slot);
}

bool device::key_at(std::uint32_t slot, key_grant& out) const noexcept {
  if (slot >= grants_.size() || !grant_live(grants_[slot])) return false;
  out = grants_[slot].g;
  return true;
}

bool device::key_find(std::uint64_t key, key_grant& out) const noexcept {
  // The shared table only finds the slot; the private copy must agree with it.
  const std::uint32_t slot = key_table::find(local_.keys, geo_.key_slots, key, out);
  return key_at(slot, out) && out.key == key;
}

namespace {

core::status check_in(const key_entry* table, std::uint32_t slots, std::uint64_t key,
                      std::uint64_t addr, std::uint64_t len, std::uint32_t need,
                      rma_target& out) noexcept {
  key_grant g;
  const std::uint32_t slot = key_table::find(table, slots, key, g);
  if (slot == key_table::no_slot || !grant_target(g, slot, addr, len, need, out))
    return core::status::access;
  return core::status::ok;
}

}  // namespace

core::status device::rma_check(peer_id p, std::uint64_t key, std::uint64_t addr,
                               std::uint64_t len, std::uint32_t need, rma_target& out) noexcept {
  peer& pr = peers_[p];
  if (pr.dead) return core::status::peer_dead;
  return check_in(pr.view.keys, pr.geo.key_slots, key, addr, len, need, out);
}

core::status device::grant_check(std::uint64_t key, std::uint64_t addr, std::uint64_t len,
                                 std::uint32_t need, rma_target& out) const noexcept {
  // An access this endpoint carries out itself (a read by request): its own copy decides.
  key_grant g;
  const std::uint32_t slot = key_table::find(local_.keys, geo_.key_slots, key, g);
  if (!key_at(slot, g) || g.key != key || !grant_target(g, slot, addr, len, need, out))
    return core::status::access;
  return core::status::ok;
}

bool device::take_write_fault(peer_id p) noexcept {
  if (p >= peers_.size()) return false;
  return std::exchange(peers_[p].write_faulted, false);
}

core::status device::dma_read(peer_id p, std::uint64_t va, std::span<const iovec> dst,
                              std::size_t dst_offset, std::size_t len) noexcept {
  peer& pr = peers_[p];
  if (pr.dead) return core::status::peer_dead;
  if (!pr.cma) return core::status::permission;
  constexpr std::size_t max_iov = 64;
  std::size_t done = 0;
  while (done < len) {
    iovec local[max_iov];
    const std::size_t n = core::slice_iov(dst, dst_offset + done, len - done, local, max_iov);
    const iovec remote{reinterpret_cast<void*>(va + done), len - done};
    const ssize_t r = process_vm_readv(pr.pid, local, n, &remote, 1, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EPERM || errno == ENOSYS) {
        pr.cma = false;
        EXANET_LOG(warn, core, "process_vm_readv refused for pid %d; reads go through the target",
                   pr.pid);
        return core::status::permission;
      }
      if (errno == ESRCH) {
        pr.exited = true;
        mark_dead(pr);
        return core::status::peer_dead;
      }
      return errno == EFAULT ? core::status::access : core::status::io;
    }
    if (r == 0) return core::status::io;
    done += static_cast<std::size_t>(r);
  }
  if (link_on_) [[unlikely]]
    link_wait_read(pr, len);
  return core::status::ok;
}

core::status device::event_post(peer_id p, const notification& n) noexcept {
  peer& pr = peers_[p];
  if (pr.dead) return core::status::peer_dead;
  if (pr.event_ring == ~0u) {
    if (pr.event_none) return core::status::not_supported;
    pr.event_ring = claim_ring(pr.view.events, pr.geo.event_rings,
                               ring_owner(self_.node, self_.port), pr.event_head);
    if (pr.event_ring == ~0u) {
      pr.event_none = true;
      EXANET_LOG(info, core, "no free event ring at port %u: RMA events go by packet",
                 pr.addr.port);
      return core::status::not_supported;
    }
  }
  ring_desc& d = pr.view.events[pr.event_ring];
  const std::uint64_t q = pr.geo.event_ring_entries;
  if (pr.event_head - d.tail.load(std::memory_order_acquire) >= q) return core::status::again;
  pr.view.event_data[pr.event_ring * q + (pr.event_head & (q - 1))] = n;
  d.head.store(++pr.event_head, std::memory_order_release);
  pr.view.doorbell->rings.fetch_or(1ull << pr.event_ring, std::memory_order_seq_cst);
  wake_sleepers(*pr.view.header);
  return core::status::ok;
}

peer_id device::event_sender(std::uint64_t owner) noexcept {
  if (owner == 0) return no_peer;  // released since it rang: the entries are still valid
  const std::uint64_t key = owner - 1;
  if (auto it = peer_index_.find(key); it != peer_index_.end()) return it->second;
  address a{};
  a.node = static_cast<std::uint16_t>(key >> 32);
  a.pdid = self_.pdid;
  a.port = static_cast<std::uint32_t>(key);
  peer_id p = no_peer;
  return core::ok(connect(a, p)) ? p : no_peer;
}

}  // namespace exanet::dev::emu
