// SPDX-License-Identifier: BSD-2-Clause
// send_one (fi_tsend, fi_send and their inject and data forms) takes eager, train and medium
// messages straight to their protocol (eager.cpp, send_one_now), not through send_now's table
// walk. These tests hold it to the walk, differentially: each message goes once by send() and
// once by send_one(), and the two must move the same protocol counters and deliver the same
// bytes, at every size around every threshold, for protocol tables that start eager, train or
// medium at different sizes, in every protocol family. Then the medium path without ring
// credit: it must fall back to the table's rendezvous, lose nothing and keep the order.
#include <gtest/gtest.h>
#include <rdma/fabric.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "endpoint_pair.hpp"

namespace exanet::proto {
namespace {

using testing_pair::pattern;

/// The sender counters that name the protocol a send took.
struct taken {
  std::uint64_t eager, train, medium, rts, ri;
  bool operator==(const taken&) const = default;
};
taken counters_of(const endpoint_stats& s) {
  return {s.eager_sent, s.train_sent, s.medium_sent, s.rndv_sent, s.ri_sent};
}
taken operator-(const taken& x, const taken& y) {
  return {x.eager - y.eager, x.train - y.train, x.medium - y.medium, x.rts - y.rts, x.ri - y.ri};
}
std::ostream& operator<<(std::ostream& o, const taken& t) {
  return o << "{eager " << t.eager << ", train " << t.train << ", medium " << t.medium << ", rts "
           << t.rts << ", ri " << t.ri << "}";
}

struct table_case {
  const char* name;
  std::size_t eager_max, medium_max;
  protocol_family family;
};

class direct_send_test : public ::testing::TestWithParam<table_case>,
                         protected testing_pair::endpoint_pair {
 protected:
  void SetUp() override {
    cfg.pdid = 4700 + static_cast<std::uint32_t>(getpid() % 1000);
    cfg.eager_max = GetParam().eager_max;
    cfg.medium_max = GetParam().medium_max;
    cfg.protocol = GetParam().family;
  }
  void post(std::vector<std::byte>& out, std::uint64_t tag, queue_kind kind) {
    const iovec v{out.data(), out.size()};
    ASSERT_EQ(b.recv(testing_pair::recv_into(v, tag, b_to_a, kind)), core::status::ok);
  }
  /// One message of n bytes, by send() (general) or send_one() (direct), its receive posted
  /// first or after the message was taken in; returns the counters it moved at the sender.
  taken one(std::size_t n, bool direct, bool posted_first, queue_kind kind, unsigned seed) {
    const auto data = pattern(n, seed);
    std::vector<std::byte> out(n, std::byte{0});
    const std::uint64_t tag = kind == queue_kind::tagged ? 40 + seed : 0;
    if (posted_first) post(out, tag, kind);
    const taken before = counters_of(a.stats());
    core::status st;
    for (;;) {
      if (direct) {
        st = a.send_one(a_to_b, data.data(), n, tag, seed, true, kind,
                        {.context = nullptr, .inject = false, .completion = true});
      } else {
        const iovec v{const_cast<std::byte*>(data.data()), n};
        send_args s = testing_pair::send_from(v, tag, a_to_b, kind);
        s.cq_data = seed;
        s.has_cq_data = true;
        st = a.send(s);
      }
      if (st != core::status::again) break;
      a.progress();
      b.progress();
    }
    EXPECT_EQ(st, core::status::ok);
    const taken moved = counters_of(a.stats()) - before;
    if (!posted_first) {
      for (int i = 0; i < 1000; ++i) b.progress();  // taken in as unexpected
      post(out, tag, kind);
    }
    pump_until([&] { return !b_rx.entries.empty() && a_tx.entries.size() >= 1; });
    const completion c = b_rx.entries.front();
    b_rx.entries.clear();
    a_tx.entries.clear();
    EXPECT_EQ(c.err, 0);
    EXPECT_EQ(c.len, n);
    EXPECT_EQ(c.data, seed);
    EXPECT_TRUE(n == 0 || std::memcmp(out.data(), data.data(), n) == 0)  // no null to memcmp
        << n << " bytes arrived wrong";
    return moved;
  }
};

TEST_P(direct_send_test, send_one_takes_the_protocol_the_table_walk_takes_at_every_threshold) {
  open_pair();
  std::vector<std::size_t> sizes{0, 1};
  for (std::size_t edge : {wire::eager_payload_max, cfg.eager_max, wire::eager_train_limit,
                           cfg.medium_max, a.cfg().medium_max})
    for (std::size_t n : {edge - 1, edge, edge + 1})
      if (n <= 2 * cfg.medium_max + 1) sizes.push_back(n);
  sizes.push_back(64);
  sizes.push_back(200);
  unsigned seed = 1;
  for (const queue_kind kind : {queue_kind::tagged, queue_kind::msg})
    for (const bool posted_first : {true, false})
      for (const std::size_t n : sizes) {
        SCOPED_TRACE(::testing::Message() << n << " bytes, "
                                          << (kind == queue_kind::tagged ? "tagged" : "untagged")
                                          << (posted_first ? ", posted first" : ", unexpected"));
        const taken walked = one(n, false, posted_first, kind, seed++);
        const taken direct = one(n, true, posted_first, kind, seed++);
        EXPECT_EQ(direct, walked);
        // Each took exactly one protocol (an RTS that an RTR crossed counts in both).
        EXPECT_GE(direct.eager + direct.train + direct.medium + direct.rts + direct.ri, 1u);
      }
}

INSTANTIATE_TEST_SUITE_P(
    tables, direct_send_test,
    ::testing::Values(table_case{"default", 84, 16384, protocol_family::write},
                      table_case{"no_train", 36, 16384, protocol_family::write},
                      table_case{"longest_train", 276, 16384, protocol_family::write},
                      table_case{"trains_to_medium_max", 276, 200, protocol_family::write},
                      table_case{"no_eager", 0, 4096, protocol_family::write},
                      table_case{"read_family", 84, 4096, protocol_family::read},
                      table_case{"optimistic_family", 84, 4096, protocol_family::optimistic}),
    [](const auto& info) { return std::string(info.param.name); });

// The ring full (the receiver has not progressed): medium sends by send_one fall back to the
// rendezvous, and every message still arrives once, whole and in order.
TEST(direct_send_credit, a_full_ring_sends_by_rendezvous_and_keeps_order) {
  testing_pair::endpoint_pair p;
  p.cfg.pdid = 5800 + static_cast<std::uint32_t>(getpid() % 1000);
  p.cfg.bounce_ring_bytes = 65536;  // room for about seven 8 KiB messages
  p.cfg.mailbox_slots = 256;
  p.open_pair();
  constexpr int messages = 24;
  constexpr std::size_t n = 8192;
  std::vector<std::vector<std::byte>> sent;
  for (int i = 0; i < messages; ++i) {
    sent.push_back(pattern(n, static_cast<unsigned>(i)));
    core::status st;
    // Only the sender progresses: the receiver drains nothing, so its ring runs out of credit.
    while ((st = p.a.send_one(p.a_to_b, sent.back().data(), n, 7, 0, false, queue_kind::tagged,
                              {.context = nullptr, .inject = false, .completion = false})) ==
           core::status::again)
      p.a.progress();
    ASSERT_EQ(st, core::status::ok) << "message " << i;
  }
  const endpoint_stats s = p.a.stats();
  EXPECT_GT(s.medium_sent, 0u);
  EXPECT_GT(s.rndv_sent, 0u) << "no send found the ring full";
  EXPECT_EQ(s.medium_sent + s.rndv_sent, static_cast<std::uint64_t>(messages));
  std::vector<std::vector<std::byte>> got(messages, std::vector<std::byte>(n));
  for (int i = 0; i < messages; ++i) {
    const iovec v{got[i].data(), n};
    ASSERT_EQ(p.b.recv(testing_pair::recv_into(v, 7, p.b_to_a)), core::status::ok);
  }
  p.pump_until([&] { return p.b_rx.entries.size() == messages; });
  for (int i = 0; i < messages; ++i) {
    EXPECT_EQ(p.b_rx.entries[i].err, 0);
    EXPECT_EQ(got[i], sent[i]) << "message " << i << " out of order or damaged";
  }
}

}  // namespace
}  // namespace exanet::proto
