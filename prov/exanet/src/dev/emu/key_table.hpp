// SPDX-License-Identifier: BSD-2-Clause
// The RMA protection table in an endpoint's segment (layout.hpp key_entry): open addressing by
// key, written only by the owning process and read by any initiator. A reader never acts on a torn
// entry: it retries while the sequence number is odd or changed under it.
#pragma once
#include <atomic>
#include <cstdint>

#include "dev/device.hpp"
#include "dev/emu/layout.hpp"

namespace exanet::dev::emu::key_table {

inline constexpr std::uint32_t no_slot = ~0u;

inline std::uint32_t home_of(std::uint64_t key, std::uint32_t slots) noexcept {
  // Keys are often small consecutive integers: mix the bits so neighbours spread out.
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdull;
  key ^= key >> 33;
  return static_cast<std::uint32_t>(key) & (slots - 1);
}

/// A consistent copy of entry e; false if it is not live, or if it never reads consistently (a
/// corrupt entry must not hold an initiator for ever; an owner's rewrite takes nanoseconds).
inline bool read_entry(const key_entry& e, key_grant& out) noexcept {
  for (int tries = 0; tries < 4096; ++tries) {
    const std::uint32_t s1 = e.seq.load(std::memory_order_acquire);
    if (s1 & 1) continue;  // the owner is rewriting it right now
    const auto state = static_cast<key_state>(e.state.load(std::memory_order_relaxed));
    out.key = e.key.load(std::memory_order_relaxed);
    out.va = e.va.load(std::memory_order_relaxed);
    out.len = e.len.load(std::memory_order_relaxed);
    out.addr_base = e.addr_base.load(std::memory_order_relaxed);
    out.access = e.access.load(std::memory_order_relaxed);
    const std::uint32_t flags = e.flags.load(std::memory_order_relaxed);
    out.events = flags & key_flag::events;
    out.may_fault = flags & key_flag::may_fault;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e.seq.load(std::memory_order_relaxed) == s1) return state == key_state::live;
  }
  return false;
}

/// The slot holding a live grant for key (copied to out), or no_slot.
inline std::uint32_t find(const key_entry* table, std::uint32_t slots, std::uint64_t key,
                          key_grant& out) noexcept {
  std::uint32_t i = home_of(key, slots);
  for (std::uint32_t probes = 0; probes < slots; ++probes, i = (i + 1) & (slots - 1)) {
    const auto state = static_cast<key_state>(table[i].state.load(std::memory_order_acquire));
    if (state == key_state::empty) return no_slot;
    if (read_entry(table[i], out) && out.key == key) return i;
  }
  return no_slot;
}

inline void write_entry(key_entry& e, key_state state, const key_grant& g) noexcept {
  const std::uint32_t s = e.seq.load(std::memory_order_relaxed);
  e.seq.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  e.key.store(g.key, std::memory_order_relaxed);
  e.va.store(g.va, std::memory_order_relaxed);
  e.len.store(g.len, std::memory_order_relaxed);
  e.addr_base.store(g.addr_base, std::memory_order_relaxed);
  e.access.store(g.access, std::memory_order_relaxed);
  e.flags.store((g.events ? key_flag::events : 0) | (g.may_fault ? key_flag::may_fault : 0),
                std::memory_order_relaxed);
  e.state.store(static_cast<std::uint32_t>(state), std::memory_order_relaxed);
  e.seq.store(s + 2, std::memory_order_release);
}

/// Owner only. The slot now granting g, or no_slot when the table is full or the key is there.
inline std::uint32_t publish(key_entry* table, std::uint32_t slots, const key_grant& g) noexcept {
  key_grant seen;
  if (find(table, slots, g.key, seen) != no_slot) return no_slot;
  std::uint32_t i = home_of(g.key, slots);
  for (std::uint32_t probes = 0; probes < slots; ++probes, i = (i + 1) & (slots - 1)) {
    if (static_cast<key_state>(table[i].state.load(std::memory_order_relaxed)) != key_state::live) {
      write_entry(table[i], key_state::live, g);
      return i;
    }
  }
  return no_slot;
}

/// Owner only. After this returns, no new access through the slot's key passes the check.
inline void revoke(key_entry* table, std::uint32_t slot) noexcept {
  write_entry(table[slot], key_state::revoked, key_grant{});
}

using dev::grant_admits;
using dev::grant_target;

}  // namespace exanet::dev::emu::key_table
