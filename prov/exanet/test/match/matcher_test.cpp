// SPDX-License-Identifier: BSD-2-Clause
// The matcher against its rules (fi_tagged(3)): the earliest-posted matching receive wins across
// the per-source and wildcard queues; an unexpected message goes to the first receive that
// matches it, in arrival order; plus a seeded differential test against a plain list model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <random>
#include <vector>

#include "match/matcher.hpp"

namespace exanet::match {
namespace {

TEST(matcher, earliest_posted_wins_between_directed_and_wildcard) {
  matcher m;
  posted_entry wild{}, directed{};
  wild.source = any_source;
  wild.tag = 5;
  directed.source = 2;
  directed.tag = 5;
  m.post(directed);
  m.post(wild);
  EXPECT_EQ(m.take_posted(2, 5), &directed);
  EXPECT_EQ(m.take_posted(2, 5), &wild);
  EXPECT_EQ(m.take_posted(2, 5), nullptr);
  m.post(wild);
  m.post(directed);
  EXPECT_EQ(m.take_posted(2, 5), &wild);
  EXPECT_EQ(m.posted_count(), 1u);
}

TEST(matcher, ignore_masks_and_sources_select) {
  matcher m;
  posted_entry r{};
  r.source = 1;
  r.tag = 0x1200;
  r.ignore = 0xff;
  m.post(r);
  EXPECT_EQ(m.take_posted(0, 0x1234), nullptr);   // other source
  EXPECT_EQ(m.take_posted(1, 0x1334), nullptr);   // bit outside the ignore mask differs
  EXPECT_EQ(m.take_posted(1, 0x12ff), &r);
}

TEST(matcher, unexpected_messages_in_arrival_order_by_source_or_any) {
  matcher m;
  unexpected_entry u[4]{};
  const source_id src[4] = {0, 1, 0, 1};
  for (int i = 0; i < 4; ++i) {
    u[i].source = src[i];
    u[i].tag = 9;
    ASSERT_TRUE(m.add_unexpected(u[i]));
  }
  EXPECT_EQ(m.find_unexpected(1, 9, 0), &u[1]);
  EXPECT_EQ(m.find_unexpected(any_source, 9, 0), &u[0]);
  m.remove_unexpected(u[0]);
  EXPECT_EQ(m.find_unexpected(any_source, 9, 0), &u[1]);
  EXPECT_EQ(m.find_unexpected(0, 9, 0), &u[2]);
  EXPECT_EQ(m.find_unexpected(0, 8, 0), nullptr);
  EXPECT_EQ(m.find_unexpected(0, 8, 1), &u[2]);
  EXPECT_EQ(m.unexpected_count(), 3u);
}

TEST(matcher, a_source_heard_before_any_receive_named_it_is_found_by_directed_receives) {
  matcher m;
  unexpected_entry u{};
  u.source = 1000;  // never posted for, never ensured
  u.tag = 3;
  ASSERT_TRUE(m.add_unexpected(u));
  EXPECT_EQ(m.find_unexpected(1000, 3, 0), &u);
}

// Reference: one list of posted receives and one of unexpected messages, scanned in order.
struct model {
  struct recv { int id; source_id src; std::uint64_t tag, ignore; };
  struct msg { int id; source_id src; std::uint64_t tag; };
  std::vector<recv> posted;
  std::vector<msg> unexpected;
  static bool match(const recv& r, source_id s, std::uint64_t t) {
    return (r.src == any_source || r.src == s) && tag_matches(r.tag, r.ignore, t);
  }
};

// Tags from a small range make matches frequent; from a wide one (more tags than hash buckets),
// receives with other tags pile up and buckets are shared.
class differential : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(differential, against_a_list_model) {
  const std::uint64_t tag_range = GetParam();
  const char* forced = std::getenv("EXANET_MATCH_SEED");
  const unsigned seed =
      forced ? static_cast<unsigned>(std::strtoul(forced, nullptr, 10)) : std::random_device{}();
  std::printf("seed %u (rerun with EXANET_MATCH_SEED=%u)\n", seed, seed);
  std::mt19937 rng(seed);
  matcher m;
  model ref;
  std::deque<posted_entry> posted_store;
  std::deque<unexpected_entry> unexp_store;
  std::vector<int> posted_id_of;  // index in posted_store -> id
  for (int step = 0; step < 20000; ++step) {
    const source_id src = rng() % 4;
    const std::uint64_t tag = rng() % tag_range;
    if (rng() % 2) {  // a receive is posted
      const source_id rsrc = rng() % 5 == 0 ? any_source : src;
      const std::uint64_t ignore = rng() % 4 == 0 ? 3 : 0;
      auto* found = m.find_unexpected(rsrc, tag, ignore);
      auto it = std::find_if(ref.unexpected.begin(), ref.unexpected.end(), [&](const model::msg& u) {
        return (rsrc == any_source || rsrc == u.src) && tag_matches(tag, ignore, u.tag);
      });
      if (it == ref.unexpected.end()) {
        ASSERT_EQ(found, nullptr) << "step " << step;
        posted_store.push_back({});
        posted_entry& e = posted_store.back();
        e.source = rsrc;
        e.tag = tag;
        e.ignore = ignore;
        m.post(e);
        ref.posted.push_back({static_cast<int>(posted_store.size() - 1), rsrc, tag, ignore});
      } else {
        ASSERT_NE(found, nullptr) << "step " << step;
        ASSERT_EQ(found, &unexp_store[it->id]) << "step " << step;
        m.remove_unexpected(*found);
        ref.unexpected.erase(it);
      }
    } else {  // a message arrives
      posted_entry* got = m.take_posted(src, tag);
      auto it = std::find_if(ref.posted.begin(), ref.posted.end(),
                             [&](const model::recv& r) { return model::match(r, src, tag); });
      if (it == ref.posted.end()) {
        ASSERT_EQ(got, nullptr) << "step " << step;
        unexp_store.push_back({});
        unexpected_entry& u = unexp_store.back();
        u.source = src;
        u.tag = tag;
        ASSERT_TRUE(m.add_unexpected(u));
        ref.unexpected.push_back({static_cast<int>(unexp_store.size() - 1), src, tag});
      } else {
        ASSERT_EQ(got, &posted_store[it->id]) << "step " << step;
        ref.posted.erase(it);
      }
    }
    ASSERT_EQ(m.posted_count(), ref.posted.size());
    ASSERT_EQ(m.unexpected_count(), ref.unexpected.size());
    if (step % 97 == 0) {  // the receives a message could reach, as the RTR tickets ask
      const source_id s = rng() % 4;
      const std::uint64_t t = rng() % tag_range;
      std::size_t visited = 0;
      m.for_each_posted_for(s, t, [&](posted_entry& e) {
        ++visited;
        ASSERT_TRUE(e.source == any_source || e.source == s);
        ASSERT_TRUE(e.source == any_source || e.ignore != 0 || e.tag == t);
      });
      const auto expected = std::count_if(ref.posted.begin(), ref.posted.end(), [&](const model::recv& r) {
        return r.src == any_source || (r.src == s && (r.ignore != 0 || r.tag == t));
      });
      ASSERT_EQ(visited, static_cast<std::size_t>(expected)) << "step " << step;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(matcher, differential, ::testing::Values(8u, 5000u));

}  // namespace
}  // namespace exanet::match
