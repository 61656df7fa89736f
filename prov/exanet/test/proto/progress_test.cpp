// The rendezvous timeout (progress.cpp, issue 12 part 4): a receive matched to an RTS whose
// sender, alive, never writes fails with FI_ETIMEDOUT after rndv_timeout_ms instead of waiting
// for ever, whether it answered with a CTS or its RTR was out when the RTS came; 0 disables it.
// The "sender" is a forger on the device that announces and then does nothing.
#include <gtest/gtest.h>
#include <rdma/fi_errno.h>
#include <unistd.h>

#include <vector>

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
  void expect_timeout() {
    if (GetParam() == 0) {
      EXPECT_EQ(outcome_within(1000), -1) << "disabled: the receive keeps waiting";
      EXPECT_EQ(b.stats().rndv_timeouts, 0u);
      return;
    }
    EXPECT_EQ(outcome_within(100), -1) << "failed before the timeout";
    EXPECT_EQ(outcome_within(5000), FI_ETIMEDOUT);
    EXPECT_EQ(b.stats().rndv_timeouts, 1u);
  }
};

TEST_P(rndv_timeout_test, cts_answered_but_no_write) {
  post(dev::no_peer);  // any source: no RTR, so the RTS gets a CTS
  f.send(forger::rts(1, 7, buf.size()), b);
  expect_timeout();
}

TEST_P(rndv_timeout_test, rtr_out_rts_matched_but_no_write) {
  post(b_to_f);  // directed: its RTR goes to f, which never answers it
  ASSERT_EQ(b.stats().rtr_sent, 1u);
  f.send(forger::rts(1, 7, buf.size()), b);
  expect_timeout();
}

INSTANTIATE_TEST_SUITE_P(timeout_ms, rndv_timeout_test, ::testing::Values(400u, 0u));

}  // namespace
}  // namespace exanet::proto
