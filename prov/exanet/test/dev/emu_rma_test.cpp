// SPDX-License-Identifier: BSD-2-Clause
// The emulated engine's RMA side: the protection table (open addressing, revocation, range and
// rights checks without overflow), reads through CMA, and the per-sender event rings with their
// credits and doorbell.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "dev/emu/device.hpp"
#include "dev/emu/key_table.hpp"

namespace exanet::dev::emu {
namespace {

const pid_t g_test_pid = getpid();
std::uint32_t test_pdid(std::uint32_t salt) { return 9000 + (g_test_pid % 10000) * 16 + salt; }

params make_params(std::uint32_t pdid) {
  params p;
  p.self.pdid = pdid;
  p.geo.mailbox_slots = 64;
  p.geo.notify_slots = 64;
  p.geo.bounce_peers = 2;
  p.geo.bounce_ring_bytes = 1 << 14;
  p.geo.staging_chunks = 2;
  p.geo.staging_chunk_bytes = 4096;
  p.geo.key_slots = 16;
  p.geo.event_rings = 1;
  p.geo.event_ring_entries = 4;
  return p;
}

key_grant grant(std::uint64_t key, void* buf, std::size_t len, std::uint32_t access) {
  key_grant g;
  g.key = key;
  g.va = reinterpret_cast<std::uint64_t>(buf);
  g.len = len;
  g.addr_base = g.va;
  g.access = access;
  return g;
}

TEST(key_table, range_checks_never_overflow) {
  key_grant g;
  g.va = 0x10000;
  g.len = 100;
  g.addr_base = 1000;  // offsets mode: remote addresses 1000..1099
  g.access = rma_access::remote_write;
  std::uint64_t va = 0;
  EXPECT_TRUE(grant_admits(g, 1000, 100, rma_access::remote_write, va));
  EXPECT_EQ(va, 0x10000u);
  EXPECT_TRUE(grant_admits(g, 1099, 1, rma_access::remote_write, va));
  EXPECT_EQ(va, 0x10000u + 99);
  EXPECT_TRUE(grant_admits(g, 1100, 0, rma_access::remote_write, va));  // empty, at the end
  EXPECT_FALSE(grant_admits(g, 1099, 2, rma_access::remote_write, va));
  EXPECT_FALSE(grant_admits(g, 999, 1, rma_access::remote_write, va));
  EXPECT_FALSE(grant_admits(g, 1001, ~0ull, rma_access::remote_write, va));
  EXPECT_FALSE(grant_admits(g, ~0ull, 2, rma_access::remote_write, va));
  EXPECT_FALSE(grant_admits(g, 1000, 1, rma_access::remote_read, va));  // no right
}

TEST(key_table, publish_find_revoke_and_probe_past_revoked) {
  std::vector<key_entry> table(8);
  for (auto& e : table) e.state.store(0);
  char buf[64];
  // More keys than fit at their home slot: probing must find each, and stop at never-used slots.
  std::vector<std::uint32_t> slots;
  for (std::uint64_t k = 1; k <= 8; ++k) {
    const std::uint32_t s = key_table::publish(table.data(), 8, grant(k, buf, sizeof buf, 3));
    ASSERT_NE(s, key_table::no_slot);
    slots.push_back(s);
  }
  EXPECT_EQ(key_table::publish(table.data(), 8, grant(9, buf, 1, 3)), key_table::no_slot);  // full
  EXPECT_EQ(key_table::publish(table.data(), 8, grant(3, buf, 1, 3)), key_table::no_slot);  // dup
  key_grant g;
  for (std::uint64_t k = 1; k <= 8; ++k) {
    ASSERT_EQ(key_table::find(table.data(), 8, k, g), slots[k - 1]);
    EXPECT_EQ(g.key, k);
  }
  key_table::revoke(table.data(), slots[2]);
  EXPECT_EQ(key_table::find(table.data(), 8, 3, g), key_table::no_slot);
  for (std::uint64_t k : {1, 2, 4, 5, 6, 7, 8})  // revoked entries do not end a probe
    EXPECT_NE(key_table::find(table.data(), 8, k, g), key_table::no_slot) << k;
  // The revoked slot is reused.
  EXPECT_EQ(key_table::publish(table.data(), 8, grant(20, buf, 1, 3)), slots[2]);
  EXPECT_FALSE(key_table::find(table.data(), 8, 99, g) != key_table::no_slot);
}

TEST(emu_rma, peer_checks_keys_reads_memory_and_sees_revocation) {
  device target, initiator;
  ASSERT_EQ(target.open(make_params(test_pdid(1))), core::status::ok);
  ASSERT_EQ(initiator.open(make_params(test_pdid(1))), core::status::ok);
  peer_id p = no_peer;
  ASSERT_EQ(initiator.connect(target.local_address(), p), core::status::ok);
  std::vector<char> mem(4096);
  for (std::size_t i = 0; i < mem.size(); ++i) mem[i] = static_cast<char>(i * 7);
  std::uint32_t slot = 0;
  ASSERT_EQ(target.key_publish(grant(0xabc, mem.data(), mem.size(), rma_access::remote_read), slot),
            core::status::ok);
  EXPECT_EQ(target.key_publish(grant(0xabc, mem.data(), 1, 3), slot), core::status::exists);
  rma_target t;
  const auto base = reinterpret_cast<std::uint64_t>(mem.data());
  ASSERT_EQ(initiator.rma_check(p, 0xabc, base + 100, 200, rma_access::remote_read, t),
            core::status::ok);
  EXPECT_EQ(t.va, base + 100);
  EXPECT_EQ(t.key_slot, slot);
  EXPECT_EQ(initiator.rma_check(p, 0xabc, base, 1, rma_access::remote_write, t),
            core::status::access);
  EXPECT_EQ(initiator.rma_check(p, 0xabd, base, 1, rma_access::remote_read, t),
            core::status::access);
  // Same process here, so CMA reads our own memory through the peer's pid.
  char out[200] = {};
  const iovec dst{out, sizeof out};
  ASSERT_EQ(initiator.dma_read(p, base + 100, {&dst, 1}, 0, sizeof out), core::status::ok);
  EXPECT_EQ(std::memcmp(out, mem.data() + 100, sizeof out), 0);
  target.key_revoke(slot);
  EXPECT_EQ(initiator.rma_check(p, 0xabc, base, 1, rma_access::remote_read, t),
            core::status::access);
  key_grant g;
  EXPECT_FALSE(target.key_at(slot, g));
}

TEST(emu_rma, event_ring_credits_doorbell_and_order) {
  device target, initiator;
  ASSERT_EQ(target.open(make_params(test_pdid(2))), core::status::ok);
  ASSERT_EQ(initiator.open(make_params(test_pdid(2))), core::status::ok);
  peer_id p = no_peer;
  ASSERT_EQ(initiator.connect(target.local_address(), p), core::status::ok);
  auto drain = [&](std::vector<std::uint8_t>& got, std::size_t budget) {
    return target.poll_events(budget, [&](peer_id, const notification& n) {
      got.push_back(static_cast<std::uint8_t>(n[0]));
    });
  };
  std::vector<std::uint8_t> got;
  EXPECT_EQ(drain(got, 16), 0u);  // nothing rang
  notification n{};
  for (std::uint8_t i = 0; i < 4; ++i) {
    n[0] = std::byte{i};
    ASSERT_EQ(initiator.event_post(p, n), core::status::ok);
  }
  n[0] = std::byte{4};
  EXPECT_EQ(initiator.event_post(p, n), core::status::again);  // four entries, no credit left
  EXPECT_EQ(drain(got, 3), 3u);  // a partial drain rings again for the rest
  ASSERT_EQ(initiator.event_post(p, n), core::status::ok);
  EXPECT_EQ(drain(got, 16), 2u);
  EXPECT_EQ(got, (std::vector<std::uint8_t>{0, 1, 2, 3, 4}));
  // The only ring is taken: a second initiator is told to send its events another way.
  device other;
  ASSERT_EQ(other.open(make_params(test_pdid(2))), core::status::ok);
  peer_id q = no_peer;
  ASSERT_EQ(other.connect(target.local_address(), q), core::status::ok);
  EXPECT_EQ(other.event_post(q, n), core::status::not_supported);
  // Closing gives the ring back.
  initiator.close();
  device again;
  ASSERT_EQ(again.open(make_params(test_pdid(2))), core::status::ok);
  peer_id r = no_peer;
  ASSERT_EQ(again.connect(target.local_address(), r), core::status::ok);
  EXPECT_EQ(again.event_post(r, n), core::status::ok);
}

}  // namespace
}  // namespace exanet::dev::emu
