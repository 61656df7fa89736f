// SPDX-License-Identifier: BSD-2-Clause
// The link and topology model (dev/link_model.hpp): its arithmetic (hops in the torus of QFDBs,
// placement, serialization, arrival times, FIFO per pair), and the emulated device under it:
// packets and DMA notifications are not taken before their modelled arrival, in order. No upper
// bound on time is asserted (the machine is shared): only that nothing comes early.
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "dev/emu/device.hpp"
#include "dev/link_model.hpp"

namespace exanet::dev {
namespace {

link_params testbed() {
  link_params p;
  p.enabled = true;
  p.hop_ns = 1000;
  p.intra_mbps = 16000;
  p.inter_mbps = 10000;
  p.inject_ns = 50;
  p.torus[0] = 4;
  p.torus[1] = 4;
  p.torus[2] = 2;
  return p;
}

TEST(link_model, hops_inside_a_qfdb_and_across_the_torus) {
  const link_params p = testbed();
  // Same FPGA: no link. Another FPGA of the QFDB: one all-to-all link.
  EXPECT_EQ(path_between(p, {0, 0, 0, 2}, {0, 0, 0, 2}).hops, 0u);
  EXPECT_EQ(path_between(p, {0, 0, 0, 0}, {0, 0, 0, 3}).hops, 1u);
  EXPECT_FALSE(path_between(p, {0, 0, 0, 0}, {0, 0, 0, 3}).crosses_torus);
  // Neighbouring QFDBs from their FPGA 0 (the torus port): one torus link.
  EXPECT_EQ(path_between(p, {0, 0, 0, 0}, {1, 0, 0, 0}).hops, 1u);
  EXPECT_TRUE(path_between(p, {0, 0, 0, 0}, {1, 0, 0, 0}).crosses_torus);
  // From another FPGA at each end: one more hop at each end (the thesis's 3 hops).
  EXPECT_EQ(path_between(p, {0, 0, 0, 1}, {1, 0, 0, 1}).hops, 3u);
  EXPECT_EQ(path_between(p, {0, 0, 0, 1}, {1, 0, 0, 0}).hops, 2u);
  // Two dimensions away (the thesis's 5 hops).
  EXPECT_EQ(path_between(p, {0, 0, 0, 1}, {2, 1, 0, 1}).hops, 5u);
  // The torus wraps: x 0 and 3 of 4 are neighbours, z 0 and 1 of 2 too.
  EXPECT_EQ(path_between(p, {0, 0, 0, 0}, {3, 0, 0, 0}).hops, 1u);
  EXPECT_EQ(path_between(p, {0, 3, 1, 0}, {0, 0, 0, 0}).hops, 2u);
  EXPECT_EQ(path_between(p, {2, 2, 1, 0}, {0, 0, 0, 0}).hops, 5u);  // the farthest QFDB
  // Symmetric.
  EXPECT_EQ(path_between(p, {2, 1, 0, 1}, {0, 0, 0, 1}).hops, 5u);
}

TEST(link_model, linear_placement_fills_a_qfdb_then_the_next_x_first) {
  const link_params p = testbed();
  for (unsigned i = 0; i < 4; ++i)
    EXPECT_EQ(position_of_index(p, i), (torus_position{0, 0, 0, static_cast<std::uint8_t>(i)}));
  EXPECT_EQ(position_of_index(p, 4), (torus_position{1, 0, 0, 0}));
  EXPECT_EQ(position_of_index(p, 17), (torus_position{0, 1, 0, 1}));
  EXPECT_EQ(position_of_index(p, 64), (torus_position{0, 0, 1, 0}));
  EXPECT_EQ(position_of_index(p, 127), (torus_position{3, 3, 1, 3}));
  EXPECT_EQ(position_of_index(p, 128), (torus_position{0, 0, 0, 0}));  // 32 QFDBs: wraps
  EXPECT_EQ(decode_position(encode_position({3, 2, 1, 3})), (torus_position{3, 2, 1, 3}));
}

TEST(link_model, placement_takes_the_position_then_the_file_then_the_order) {
  const link_params p = testbed();
  link_placement w;
  w.rank = 5;
  EXPECT_EQ(place(p, w, 40000), (torus_position{1, 0, 0, 1})) << "rank 5: QFDB 1, FPGA 1";
  w.entries = {{5, {3, 3, 1, 2}}, {6, {0, 0, 0, 0}}};
  EXPECT_EQ(place(p, w, 40000), (torus_position{3, 3, 1, 2})) << "the file's entry for rank 5";
  w.by_port = true;
  EXPECT_EQ(place(p, w, 6), (torus_position{0, 0, 0, 0})) << "by port: the file's entry for 6";
  EXPECT_EQ(place(p, w, 9), (torus_position{2, 0, 0, 1})) << "by port, no entry: the order";
  w.has_position = true;
  w.position = {1, 1, 1, 1};
  EXPECT_EQ(place(p, w, 6), (torus_position{1, 1, 1, 1})) << "an explicit position wins";
  link_placement none;
  EXPECT_EQ(place(p, none, 7), (torus_position{1, 0, 0, 3})) << "no rank: the port's order";
}

TEST(link_model, arrival_is_injection_plus_serialization_plus_hops_and_fifo_per_pair) {
  const link_params p = testbed();
  link_timing t = link_timing::between(p, {0, 0, 0, 1}, {2, 1, 0, 1});
  EXPECT_EQ(t.latency_ns, 5000u);
  EXPECT_EQ(t.mbps, 10000u) << "a path over the torus runs at the torus links' bandwidth";
  EXPECT_EQ(link_timing::between(p, {0, 0, 0, 0}, {0, 0, 0, 1}).mbps, 16000u);
  EXPECT_EQ(t.serialize_ns(64), 7u);        // 6.4 ns, rounded up
  EXPECT_EQ(t.serialize_ns(10000), 1000u);  // 10 kB at 10 GB/s: 1 us
  // A lone packet: injection, its 64 bytes, five hops.
  const std::uint64_t now = 1'000'000;
  EXPECT_EQ(t.send(now, 64), now + 50 + 7 + 5000);
  // Sent at the same instant, the next waits for the link: arrivals of a pair never reorder.
  EXPECT_EQ(t.send(now, 64), now + 2 * (50 + 7) + 5000);
  // Bounce-ring bytes occupy the link before the packet that announces them.
  link_timing u = link_timing::between(p, {0, 0, 0, 1}, {2, 1, 0, 1});
  u.occupy(now, 10000);
  EXPECT_EQ(u.send(now, 64), now + 1000 + 50 + 7 + 5000);
  // An idle link starts from now, not from its last use.
  EXPECT_EQ(u.send(now + 1'000'000, 64), now + 1'000'000 + 50 + 7 + 5000);
}

// ---- the emulated device under the model ------------------------------------------------------

std::uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

emu::params device_params(std::uint32_t salt) {
  emu::params p;
  p.self.pdid = 7000 + (getpid() % 10000) * 16 + salt;
  p.geo.mailbox_slots = 64;
  p.geo.notify_slots = 64;
  p.geo.bounce_peers = 4;
  p.geo.bounce_ring_bytes = 1 << 16;
  p.geo.staging_chunks = 4;
  p.geo.staging_chunk_bytes = 4096;
  return p;
}

// Opens a at one position and b at another, 3 hops apart, with a per-hop latency long enough
// (20 ms) that a poll right after the send almost always comes before the arrival.
constexpr std::uint32_t slow_hop_ns = 20'000'000;
struct linked_pair {
  emu::device a, b;
  peer_id ab = no_peer;
  linked_pair(std::uint32_t salt, bool on, bool yield = false) {
    link_params p = testbed();
    p.enabled = on;
    p.hop_ns = slow_hop_ns;
    p.yield_when_idle = yield;
    link_placement at_a;
    at_a.has_position = true;
    at_a.position = {0, 0, 0, 1};
    set_link_params(p, at_a);
    EXPECT_EQ(a.open(device_params(salt)), core::status::ok);
    link_placement at_b;
    at_b.has_position = true;
    at_b.position = {1, 0, 0, 1};
    set_link_params(p, at_b);
    EXPECT_EQ(b.open(device_params(salt)), core::status::ok);
    set_link_params(link_params{}, link_placement{});  // other tests run without it
    EXPECT_EQ(a.connect(b.local_address(), ab), core::status::ok);
  }
};

TEST(link_model, packets_are_not_taken_before_their_arrival_and_keep_their_order) {
  linked_pair d(1, true);
  ASSERT_TRUE(d.a.link_model_on());
  EXPECT_EQ(d.b.link_position(), (torus_position{1, 0, 0, 1}));
  EXPECT_EQ(d.a.link_to(d.ab).latency_ns, 3ull * slow_hop_ns) << "3 hops from a to b";
  const std::uint64_t sent = mono_ns();
  for (std::uint8_t k = 0; k < 3; ++k) {
    packet pk{};
    pk[0] = std::byte{1};
    pk[8] = std::byte{k};
    ASSERT_EQ(d.a.mailbox_send(d.ab, pk), core::status::ok);
  }
  const std::uint64_t earliest = sent + 3ull * slow_hop_ns;
  std::vector<int> order;
  std::vector<std::uint64_t> at;
  const auto take = [&] {
    return d.b.poll_mailbox(16, [&](peer_id, const packet& pk) {
      order.push_back(static_cast<int>(pk[8]));
      at.push_back(mono_ns());
    });
  };
  const std::size_t first = take();
  const std::uint64_t looked = mono_ns();
  if (looked < earliest) {
    EXPECT_EQ(first, 0u) << "taken " << (earliest - looked) << " ns before the arrival";
  }
  EXPECT_TRUE(d.b.has_arrivals()) << "a packet in flight keeps the endpoint from sleeping";
  const std::uint64_t give_up = mono_ns() + 10'000'000'000ull;
  while (order.size() < 3 && mono_ns() < give_up) take();
  ASSERT_EQ(order, (std::vector<int>{0, 1, 2})) << "every packet, in sending order";
  for (const std::uint64_t t : at) EXPECT_GE(t, earliest) << "a packet came before its arrival";
}

TEST(link_model, a_dma_notification_is_not_seen_before_its_arrival) {
  linked_pair d(2, true);
  std::uint32_t slot, gen;
  ASSERT_TRUE(d.b.notify_alloc(slot, gen));
  std::byte data[8] = {};
  iovec v{data, sizeof data};
  dma_write w;
  w.peer = d.ab;
  w.src = {&v, 1};
  w.dst_addr = reinterpret_cast<std::uint64_t>(data);
  w.len = 0;
  w.notify = true;
  w.notify_slot = slot;
  w.notify_gen = gen;
  w.notify_data[0] = std::byte{42};
  dma_state st;
  const std::uint64_t sent = mono_ns();
  ASSERT_EQ(d.a.dma_post(w, st), core::status::ok);
  const std::uint64_t earliest = sent + 3ull * slow_hop_ns;
  notification out{};
  int bells = 0;
  const bool seen = d.b.notify_test(slot, gen, out);
  const bool rang = d.b.take_notify_bells([&](std::uint32_t) { ++bells; });
  if (mono_ns() < earliest) {
    EXPECT_FALSE(seen) << "the notification was seen before its arrival";
    EXPECT_EQ(bells, 0) << "its bell was handed over before its arrival";
  }
  (void)rang;
  const std::uint64_t give_up = mono_ns() + 10'000'000'000ull;
  while (bells == 0 && mono_ns() < give_up) d.b.take_notify_bells([&](std::uint32_t) { ++bells; });
  EXPECT_EQ(bells, 1) << "the bell rings again until the notification has arrived";
  EXPECT_GE(mono_ns(), earliest);
  ASSERT_TRUE(d.b.notify_test(slot, gen, out));
  EXPECT_EQ(out[0], std::byte{42});
}

TEST(link_model, with_link_yield_a_poll_that_takes_nothing_gives_the_core_away_now_and_then) {
  constexpr std::uint32_t every = 64;  // emu::device::link_yield_every
  linked_pair d(5, true, true);
  // An empty mailbox still sends every poll to the mailbox, where the idle poll is counted.
  EXPECT_TRUE(d.b.has_arrivals()) << "with link_yield, no poll returns before the mailbox";
  for (std::uint32_t i = 0; i < 10 * every; ++i)
    ASSERT_EQ(d.b.poll_mailbox(16, [](peer_id, const packet&) {}), 0u);
  EXPECT_EQ(d.b.link_yields(), 10u) << "one sched_yield per " << every << " empty polls";
  // A packet in flight (3 hops of 20 ms): polls that find it not yet due are idle too, and it
  // is still taken once it arrives.
  packet pk{};
  pk[0] = std::byte{1};
  pk[8] = std::byte{7};
  const std::uint64_t sent = mono_ns();
  ASSERT_EQ(d.a.mailbox_send(d.ab, pk), core::status::ok);
  int got = -1;
  const std::uint64_t give_up = mono_ns() + 10'000'000'000ull;
  while (got < 0 && mono_ns() < give_up)
    d.b.poll_mailbox(16, [&](peer_id, const packet& p) { got = static_cast<int>(p[8]); });
  EXPECT_EQ(got, 7);
  EXPECT_GE(mono_ns(), sent + 3ull * slow_hop_ns) << "taken before its arrival";
  EXPECT_GT(d.b.link_yields(), 10u) << "60 ms of polls for a packet not yet due never yielded";
  // Without it (the default) polls never yield, and an empty mailbox is quiet.
  linked_pair quiet(6, true);
  EXPECT_FALSE(quiet.b.has_arrivals());
  for (std::uint32_t i = 0; i < 10 * every; ++i) quiet.b.poll_mailbox(16, [](peer_id, const packet&) {});
  EXPECT_EQ(quiet.b.link_yields(), 0u);
}

TEST(link_model, off_by_default_and_then_packets_are_there_at_once) {
  linked_pair d(3, false);
  EXPECT_FALSE(d.a.link_model_on());
  packet pk{};
  pk[0] = std::byte{1};
  ASSERT_EQ(d.a.mailbox_send(d.ab, pk), core::status::ok);
  EXPECT_EQ(d.b.poll_mailbox(16, [](peer_id, const packet&) {}), 1u);
  emu::device plain;
  ASSERT_EQ(plain.open(device_params(4)), core::status::ok);
  EXPECT_FALSE(plain.link_model_on()) << "no settings: no model";
}

}  // namespace
}  // namespace exanet::dev
