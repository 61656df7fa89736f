// SPDX-License-Identifier: BSD-2-Clause
// Control packets owed to a peer whose mailbox is full (endpoint::send_control, issue 12 part 5):
// a peer that floods requests (here rtr_cancel, each answered) and never drains its mailbox gets
// at most 2 x notify_slots + tx_size answers queued, the rest dropped and counted; and it holds
// back only its own answers, not the ones other peers are waiting for.
#include <gtest/gtest.h>
#include <unistd.h>

#include <vector>

#include "endpoint_pair.hpp"
#include "forger.hpp"

namespace exanet::proto {
namespace {

using testing_pair::forger;

class control_queue_test : public ::testing::Test, protected testing_pair::endpoint_pair {
 protected:
  forger f;  // never polls its mailbox
  void SetUp() override {
    cfg.pdid = 3900 + static_cast<std::uint32_t>(getpid() % 1000);
    cfg.mailbox_slots = 64;
    cfg.notify_slots = 64;
    cfg.tx_size = 64;
    // Answers stay in progress only while they wait for the forger's staging area, which it
    // never drains: cross-memory attach would land them whether it polls or not.
    cfg.dma_engine = dev::dma_engine_mode::staged;
    open_pair();
    f.open(cfg.pdid, b.address());  // its mailbox has 64 slots
  }
  // A rendezvous from the honest peer a to b (receive posted first) completes intact.
  void expect_honest_rendezvous(std::size_t len, std::uint64_t tag) {
    std::vector<std::byte> out(len, std::byte{7}), in(len);
    iovec ov{out.data(), out.size()}, iv{in.data(), in.size()};
    recv_args r;
    r.iov = {&iv, 1};
    r.tag = tag;
    r.peer = b_to_a;
    ASSERT_EQ(b.recv(r), core::status::ok);
    send_args sa;
    sa.iov = {&ov, 1};
    sa.tag = tag;
    sa.peer = a_to_b;
    ASSERT_EQ(a.send(sa), core::status::ok);
    pump_until([&] { return !a_tx.entries.empty() && !b_rx.entries.empty(); });
    EXPECT_EQ(b_rx.entries.front().err, 0);
    EXPECT_EQ(in, out);
  }
};

TEST_F(control_queue_test, a_peer_that_never_drains_gets_a_bounded_queue_and_blocks_nobody) {
  const std::size_t cap = 2 * cfg.notify_slots + cfg.tx_size;
  const std::size_t flood = 64 + cap + 500;  // its mailbox, the cap, and more
  wire::rtr_answer cancel{};
  cancel.hdr = wire::make_header(wire::pkt_type::rtr_cancel, 0);
  for (std::size_t i = 0; i < flood; ++i) {
    cancel.recv_id = 1000 + i;
    f.send(cancel, b);
    b.progress();
  }
  for (int i = 0; i < 100; ++i) b.progress();
  const endpoint_stats s = b.stats();
  EXPECT_EQ(s.drop_backlog, flood - 64 - cap) << "what did not fit its mailbox or the cap";
  EXPECT_GT(s.mailbox_full, 0u);

  // The honest peer still gets its answers: a receive posted at b sends an RTR to a (a control
  // packet queued behind nothing of a's), and a's rendezvous send completes through it.
  expect_honest_rendezvous(1 << 20, 9);
}

// RMA read requests answered for a peer: a correct one has at most notify_slots out (each names
// one of its slots); one that asks more while its staging area stays full (it never drains) gets
// the rest dropped and counted instead of growing the answering endpoint.
TEST_F(control_queue_test, rma_requests_answered_for_a_peer_are_bounded) {
  std::vector<std::byte> region(4096, std::byte{1});
  dev::key_grant g;
  g.key = 5;
  g.va = g.addr_base = reinterpret_cast<std::uint64_t>(region.data());
  g.len = region.size();
  g.access = dev::rma_access::remote_read;
  std::uint32_t key_slot;
  ASSERT_EQ(b.expose(g, key_slot), core::status::ok);
  // The forger arms one slot with a landing window and names it in every request.
  std::vector<std::byte> landing(4096);
  std::uint32_t slot, gen;
  ASSERT_TRUE(f.dev.notify_alloc(slot, gen));
  f.dev.window_open(slot, reinterpret_cast<std::uint64_t>(landing.data()), landing.size());
  const std::size_t asked = cfg.notify_slots + 100;
  wire::rma_read_req q{};
  q.hdr = wire::make_header(wire::pkt_type::rma_read_req, wire::flag_last);
  q.key = 5;
  q.remote_addr = g.va;
  q.len = 2048;
  q.reply_addr = reinterpret_cast<std::uint64_t>(landing.data());
  q.notify_slot = slot;
  q.notify_gen = gen;
  for (std::size_t i = 0; i < asked; ++i) {
    f.send(q, b);
    b.progress();
  }
  for (int i = 0; i < 100; ++i) b.progress();
  // The forger's staging area (4 chunks) and mailbox fill, so answers stay in progress at b.
  const endpoint_stats s = b.stats();
  EXPECT_GE(s.drop_backlog, asked - cfg.notify_slots - 8) << "answers in progress beyond the bound";
  EXPECT_LE(s.drop_backlog, asked - cfg.notify_slots);
  expect_honest_rendezvous(300000, 4);  // b still answers its honest peer
}

}  // namespace
}  // namespace exanet::proto
