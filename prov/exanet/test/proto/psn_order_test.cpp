// SPDX-License-Identifier: BSD-2-Clause
// The psn window (psn_order.cpp, issue 12 part 4): a packet far ahead of its sender's next psn,
// or one that opens a gap nothing can fill, is dropped and counted instead of parking that
// sender's traffic for ever; gaps a pending write can fill still park; the parked queue is
// bounded. Packets come from a forger on the device, since no correct sender makes them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "endpoint_pair.hpp"
#include "forger.hpp"

namespace exanet::proto {
namespace {

using testing_pair::forger;

class psn_window_test : public ::testing::Test, protected testing_pair::endpoint_pair {
 protected:
  forger f;
  dev::peer_id b_to_f = dev::no_peer;
  static constexpr std::uint32_t window = 64 + 2 * 64;  // notify_slots + 2 * mailbox_slots
  static constexpr std::size_t parked_max = window + 2 * 64;

  void SetUp() override {
    cfg.pdid = 2900 + static_cast<std::uint32_t>(getpid() % 1000);
    cfg.mailbox_slots = 64;
    cfg.notify_slots = 64;
    open_pair();
    f.open(cfg.pdid, b.address());
    ASSERT_EQ(b.connect(f.dev.local_address(), b_to_f), core::status::ok);
  }
  void post(std::uint64_t tag, void* buf, std::size_t len, dev::peer_id from, void* ctx) {
    iovec v{buf, len};
    recv_args r;
    r.iov = {&v, 1};
    r.tag = tag;
    r.peer = from;
    r.context = ctx;
    ASSERT_EQ(b.recv(r), core::status::ok);
  }
  bool completed(void* ctx) {
    for (const completion& c : b_rx.entries)
      if (c.context == ctx && c.err == 0) return true;
    return false;
  }
};

TEST_F(psn_window_test, far_future_psn_is_dropped_and_later_packets_flow) {
  std::uint64_t got = 0;
  int ctx;
  post(5, &got, sizeof got, dev::no_peer, &ctx);
  f.send(forger::eager(window + 1, 5, 99), b);  // one past the window (watermark 0)
  f.send(forger::eager(1, 5, 11), b);           // the sender's real next message
  pump_until([&] { return completed(&ctx); });
  EXPECT_EQ(got, 11u);
  EXPECT_EQ(b.stats().psn_window_drops, 1u);
  EXPECT_EQ(b.stats().parked, 0u);
}

TEST_F(psn_window_test, gap_no_write_can_fill_is_dropped) {
  std::uint64_t got = 0;
  int ctx;
  post(5, &got, sizeof got, dev::no_peer, &ctx);
  f.send(forger::eager(3, 5, 99), b);  // inside the window, but no RTR of b's waits on f
  f.send(forger::eager(1, 5, 11), b);
  pump_until([&] { return completed(&ctx); });
  EXPECT_EQ(got, 11u);
  EXPECT_EQ(b.stats().psn_window_drops, 1u);
}

TEST_F(psn_window_test, fillable_gap_parks_within_the_window_and_the_queue_is_bounded) {
  // A directed receive large enough for an RTR: a write from f could fill psn 1.
  std::vector<std::byte> big(1 << 20);
  int ctx;
  post(9, big.data(), big.size(), b_to_f, &ctx);
  ASSERT_EQ(b.stats().rtr_sent, 1u);
  f.send(forger::eager(2, 5, 1), b);           // waits for psn 1: parked
  f.send(forger::eager(window + 1, 5, 2), b);  // past the window: dropped, not parked
  f.send(forger::eager(window, 5, 3), b);      // the window's last psn: parked
  testing_pair::progress_for(b, 20);
  EXPECT_EQ(b.stats().parked, 2u);
  EXPECT_EQ(b.stats().psn_window_drops, 1u);
  // Control packets behind them park too (nothing overtakes a parked packet), up to the bound.
  wire::rtr_answer nack{};
  nack.hdr = wire::make_header(wire::pkt_type::rtr_nack, 0);
  nack.recv_id = 777;
  const std::size_t extra = 50;
  for (std::size_t i = 0; i < parked_max - 2 + extra; ++i) f.send(nack, b);
  testing_pair::progress_for(b, 20);
  EXPECT_EQ(b.stats().parked, parked_max);
  EXPECT_EQ(b.stats().psn_window_drops, 1u + extra);
}

}  // namespace
}  // namespace exanet::proto
