// SPDX-License-Identifier: BSD-2-Clause
// The rendezvous probe (progress.cpp expire_rendezvous, rndv_probe.cpp; issue 12 part 4): a
// receive matched to an RTS whose data has not come for rndv_timeout_ms asks the sender whether
// the send exists, every period. A sender that does not answer (alive, not progressing: an MPI
// rank computing between Isend and Wait) is waited for; one that answers "no such send" (a forged
// or stale RTS) fails the receive with FI_EIO; 0 disables the probes. Both matches: a CTS sent,
// or the receive's RTR out when the RTS came. The silent "sender" is a forger on the device; the
// answering one is the real endpoint a, whose identity a forged RTS claims.
#include <gtest/gtest.h>
#include <rdma/fi_errno.h>
#include <unistd.h>

#include <vector>

#include "dev/emu/segment.hpp"

#include "endpoint_pair.hpp"
#include "forger.hpp"

namespace exanet::proto {
namespace {

using testing_pair::forger;

class rndv_timeout_test : public ::testing::TestWithParam<unsigned>,
                          protected testing_pair::endpoint_pair {
 protected:
  forger f;
  dev::peer_id b_to_f = dev::no_peer;
  std::vector<std::byte> buf = std::vector<std::byte>(1 << 20);
  int ctx = 0;

  void SetUp() override {
    cfg.pdid = 3900 + static_cast<std::uint32_t>(getpid() % 1000);
    cfg.rndv_timeout_ms = GetParam();
    cfg.dead_peer_check_ms = 20;
    open_pair();
    f.open(cfg.pdid, b.address());
    ASSERT_EQ(b.connect(f.dev.local_address(), b_to_f), core::status::ok);
  }
  void post(dev::peer_id from) {
    iovec v{buf.data(), buf.size()};
    recv_args r;
    r.iov = {&v, 1};
    r.tag = 7;
    r.peer = from;
    r.context = &ctx;
    ASSERT_EQ(b.recv(r), core::status::ok);
  }
  // Progresses b for up to ms; the receive's completion error, or -1 if none came.
  int outcome_within(int ms) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < until) {
      b.progress();
      for (const completion& c : b_rx.entries)
        if (c.context == &ctx) return c.err;
    }
    return -1;
  }
  // Takes what b sent the forger; true if a probe for the RTS's send was among it.
  bool forger_got_probe() {
    bool seen = false;
    f.dev.poll_mailbox(64, [&](dev::peer_id, const dev::packet& p) {
      if (static_cast<wire::pkt_type>(p[0]) == wire::pkt_type::rndv_probe &&
          wire::read<wire::rndv_probe>(p).send_id == 12345)
        seen = true;
    });
    return seen;
  }
  void expect_probe_and_wait() {
    EXPECT_EQ(outcome_within(GetParam() == 0 ? 1000 : 3 * GetParam()), -1)
        << "a silent sender is waited for, not failed";
    if (GetParam() == 0) {
      EXPECT_EQ(b.stats().rndv_timeouts, 0u);
      EXPECT_FALSE(forger_got_probe());
      return;
    }
    EXPECT_GE(b.stats().rndv_timeouts, 2u) << "a probe every period";
    EXPECT_TRUE(forger_got_probe());
    // The forger now answers as a sender without that send would: the receive fails.
    wire::rndv_probe reply{};
    reply.hdr = wire::make_header(wire::pkt_type::rndv_probe_reply, 0);
    reply.send_id = 12345;
    reply.recv_id = last_probe_recv_id();
    f.send(reply, b);
    EXPECT_EQ(outcome_within(2000), FI_EIO);
  }
  std::uint64_t last_probe_recv_id() {
    // Wait for the next probe and take its receive id.
    std::uint64_t id = 0;
    for (int i = 0; i < 200 && id == 0; ++i) {
      outcome_within(GetParam() / 4 + 1);
      f.dev.poll_mailbox(64, [&](dev::peer_id, const dev::packet& p) {
        if (static_cast<wire::pkt_type>(p[0]) == wire::pkt_type::rndv_probe)
          id = wire::read<wire::rndv_probe>(p).recv_id;
      });
    }
    return id;
  }
};

TEST_P(rndv_timeout_test, cts_answered_but_no_write) {
  post(dev::no_peer);  // any source: no RTR, so the RTS gets a CTS
  f.send(forger::rts(1, 7, buf.size()), b);
  expect_probe_and_wait();
}

TEST_P(rndv_timeout_test, rtr_out_rts_matched_but_no_write) {
  post(b_to_f);  // directed: its RTR goes to f, which never answers it
  ASSERT_EQ(b.stats().rtr_sent, 1u);
  f.send(forger::rts(1, 7, buf.size()), b);
  expect_probe_and_wait();
}

// A forged RTS that claims to come from a (a real endpoint that progresses): a has no such send
// and says so; the receive fails with FI_EIO.
TEST_P(rndv_timeout_test, a_real_sender_disowns_a_forged_rts) {
  if (GetParam() == 0) GTEST_SKIP() << "probes disabled";
  post(dev::no_peer);
  // Published into b's mailbox with a's identity, as any process of the user could.
  const dev::address& ba = b.address();
  dev::emu::shm_segment seg;
  ASSERT_EQ(dev::emu::shm_segment::open(dev::emu::segment_name(getuid(), ba.pdid, ba.port), seg),
            core::status::ok);
  const auto v = dev::emu::segment_view::of(seg.data(), static_cast<dev::emu::segment_header*>(seg.data())->geo);
  const std::uint64_t pos = v.mbox_ctl->tail.fetch_add(1);
  dev::emu::mailbox_slot& slot = v.mailbox[pos & (v.header->geo.mailbox_slots - 1)];
  ASSERT_EQ(slot.seq.load(), pos);
  wire::write(slot.data.data(), forger::rts(1, 7, buf.size()));  // a has sent b nothing yet
  slot.pdid = a.address().pdid;
  slot.src_port = a.address().port;
  slot.src_node = a.address().node;
  slot.seq.store(pos + 1, std::memory_order_release);
  int err = -1;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (err == -1 && std::chrono::steady_clock::now() < until) {
    a.progress();
    b.progress();
    for (const completion& c : b_rx.entries)
      if (c.context == &ctx) err = c.err;
  }
  EXPECT_EQ(err, FI_EIO);
}

// The opt-in hard limit: with FI_EXANET_RNDV_DEADLINE_MS a receive whose silent sender never
// writes fails with FI_ETIMEDOUT, probes or not; its window is closed, so nothing lands later.
TEST_P(rndv_timeout_test, an_opt_in_deadline_fails_a_silent_rendezvous) {
  b.close();
  cfg.rndv_deadline_ms = 600;
  ASSERT_EQ(b.open(cfg, {}), core::status::ok);
  b.set_sinks({.tx = b_tx.sink(), .rx = b_rx.sink()});
  ASSERT_EQ(b.connect(a.address(), b_to_a), core::status::ok);
  forger g;  // f mapped the closed endpoint; a new forger for the new one
  g.open(cfg.pdid, b.address());
  dev::peer_id b_to_g;
  ASSERT_EQ(b.connect(g.dev.local_address(), b_to_g), core::status::ok);
  post(dev::no_peer);
  g.send(forger::rts(1, 7, buf.size()), b);
  EXPECT_EQ(outcome_within(300), -1) << "failed before the deadline";
  EXPECT_EQ(outcome_within(3000), FI_ETIMEDOUT);
  EXPECT_EQ(b.stats().rndv_deadlines, 1u);
}

INSTANTIATE_TEST_SUITE_P(timeout_ms, rndv_timeout_test, ::testing::Values(400u, 0u));

// A send that finds its peer gone fails that peer's other operations at once (fail_lost_peers),
// not at the next liveness check: the application must not see the first error while the rest
// still looks pending (and, for a killed peer, while its segment is still there: the peer-death
// matrix checks that part with real processes). The periodic check is set to an hour here, so
// only the send's own discovery can fail the pending rendezvous.
class dead_peer_found_test : public ::testing::Test, protected testing_pair::endpoint_pair {
 protected:
  void SetUp() override {
    cfg.pdid = 4900 + static_cast<std::uint32_t>(getpid() % 1000);
    cfg.dead_peer_check_ms = 3'600'000;
    open_pair();
  }
};

TEST_F(dead_peer_found_test, a_send_that_finds_the_peer_closed_fails_its_pending_rendezvous) {
  std::vector<std::byte> big(1 << 20), small(8);
  iovec vb{big.data(), big.size()}, vs{small.data(), small.size()};
  int rndv_ctx = 0, eager_ctx = 0;
  send_args s;
  s.iov = {&vb, 1};
  s.tag = 7;
  s.peer = a_to_b;
  s.context = &rndv_ctx;
  ASSERT_EQ(a.send(s), core::status::ok);  // announced; b never answers
  ASSERT_TRUE(a_tx.entries.empty());
  b.close();
  s.iov = {&vs, 1};
  s.context = &eager_ctx;
  EXPECT_EQ(a.send(s), core::status::peer_dead);
  // No progress call in between: the failed send itself settled the peer.
  ASSERT_EQ(a_tx.entries.size(), 1u) << "the pending rendezvous still looks alive";
  EXPECT_EQ(a_tx.entries.front().context, &rndv_ctx);
  EXPECT_EQ(a_tx.entries.front().err, FI_ECONNRESET);
  EXPECT_EQ(a.stats().dead_peers, 1u);
}

}  // namespace
}  // namespace exanet::proto
