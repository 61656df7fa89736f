// SPDX-License-Identifier: BSD-2-Clause
// The sender's index of stored RTRs: a send sees exactly the RTRs its tag can match (exact ones
// through their bucket, wide ones through their peer's list), in arrival order, whatever else is
// stored; removal, cancel lookup and peer death leave nothing behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "proto/stored_rtrs.hpp"

namespace exanet::proto {
namespace {

wire::rtr make(std::uint64_t tag, std::uint64_t ignore, std::uint64_t recv_id, bool tagged = true) {
  wire::rtr m{};
  m.hdr = wire::make_header(wire::pkt_type::rtr, tagged ? wire::flag_tagged : 0);
  m.tag = tag;
  m.ignore = ignore;
  m.recv_id = recv_id;
  return m;
}

std::vector<std::uint64_t> matches(stored_rtr_index& ix, dev::peer_id p, bool tagged,
                                   std::uint64_t tag) {
  std::vector<std::uint64_t> ids;
  ix.for_each_match(p, tagged, tag, [&](stored_rtr& st) { ids.push_back(st.rtr.recv_id); });
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(stored_rtrs, a_send_sees_exactly_the_rtrs_its_tag_matches) {
  stored_rtr_index ix;
  ASSERT_TRUE(ix.empty(0));
  for (std::uint64_t t = 0; t < 5000; ++t) ASSERT_NE(ix.add(0, make(100 + t, 0, t), 1), nullptr);
  ASSERT_NE(ix.add(0, make(7, 0, 9001), 1), nullptr);
  ASSERT_NE(ix.add(0, make(0, 0xf, 9002), 1), nullptr);         // tags 0..15
  ASSERT_NE(ix.add(0, make(7, 0, 9003, false), 1), nullptr);    // the untagged queue
  ASSERT_NE(ix.add(1, make(7, 0, 9004), 1), nullptr);           // another peer
  EXPECT_EQ(matches(ix, 0, true, 7), (std::vector<std::uint64_t>{9001, 9002}));
  EXPECT_EQ(matches(ix, 0, true, 100), (std::vector<std::uint64_t>{0}));
  EXPECT_EQ(matches(ix, 0, true, 15), (std::vector<std::uint64_t>{9002}));
  EXPECT_EQ(matches(ix, 0, true, 16), (std::vector<std::uint64_t>{}));
  EXPECT_EQ(matches(ix, 0, false, 7), (std::vector<std::uint64_t>{9003}));
  EXPECT_EQ(matches(ix, 1, true, 7), (std::vector<std::uint64_t>{9004}));
  EXPECT_EQ(matches(ix, 2, true, 7), (std::vector<std::uint64_t>{}));
}

TEST(stored_rtrs, oldest_match_is_by_arrival_across_exact_and_wide) {
  stored_rtr_index ix;
  ix.add(0, make(0, ~0ull, 1), 0);  // wide, first
  ix.add(0, make(5, 0, 2), 0);      // exact, second
  ix.add(0, make(5, 0, 3), 2);
  auto any = [](const stored_rtr&) { return true; };
  EXPECT_EQ(ix.oldest_match(0, true, 5, any)->rtr.recv_id, 1u);
  EXPECT_EQ(ix.oldest_match(0, true, 5, [](const stored_rtr& st) { return st.remaining == 2; })
                ->rtr.recv_id,
            3u);
  ix.remove(*ix.oldest_match(0, true, 5, any));
  EXPECT_EQ(ix.oldest_match(0, true, 5, any)->rtr.recv_id, 2u);
  EXPECT_EQ(ix.oldest_match(0, true, 6, any), nullptr);
}

TEST(stored_rtrs, removal_while_visiting_and_cancel_lookup) {
  stored_rtr_index ix;
  for (std::uint64_t i = 0; i < 10; ++i) ix.add(3, make(1, i % 2 ? 1 : 0, i), 1);
  ix.for_each_match(3, true, 1, [&](stored_rtr& st) {
    if (st.rtr.recv_id % 3 == 0) ix.remove(st);
  });
  EXPECT_EQ(matches(ix, 3, true, 1), (std::vector<std::uint64_t>{1, 2, 4, 5, 7, 8}));
  ASSERT_NE(ix.find_recv(3, 5), nullptr);
  EXPECT_EQ(ix.find_recv(3, 6), nullptr);
  EXPECT_EQ(ix.find_recv(4, 5), nullptr);
  ix.remove(*ix.find_recv(3, 5));
  EXPECT_EQ(matches(ix, 3, true, 1), (std::vector<std::uint64_t>{1, 2, 4, 7, 8}));
}

TEST(stored_rtrs, a_dead_peer_takes_its_rtrs_and_nothing_else) {
  stored_rtr_index ix;
  for (std::uint64_t i = 0; i < 100; ++i) ix.add(static_cast<dev::peer_id>(i % 4), make(i % 7, i % 5 ? 0 : 3, i), 1);
  ix.drop_peer(2);
  EXPECT_TRUE(ix.empty(2));
  for (std::uint64_t t = 0; t < 7; ++t) EXPECT_TRUE(matches(ix, 2, true, t).empty());
  std::size_t left = 0;
  for (dev::peer_id p : {0u, 1u, 3u})
    for (std::uint64_t t = 0; t < 8; ++t) left += matches(ix, p, true, t).size();
  EXPECT_GT(left, 0u);
  for (dev::peer_id p : {0u, 1u, 3u}) ix.drop_peer(p);
  for (dev::peer_id p : {0u, 1u, 2u, 3u}) EXPECT_TRUE(ix.empty(p));
}

}  // namespace
}  // namespace exanet::proto
