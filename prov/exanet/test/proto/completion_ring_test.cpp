// SPDX-License-Identifier: BSD-2-Clause
// proto::completion_ring: entries come out in the order they went in, every field intact, across
// the wrap of the ring and its doubling when full (an fi_cq never drops an entry it has room
// for); the owner is called after a push exactly while someone watches.
#include <gtest/gtest.h>

#include <cstdint>

#include "proto/completion.hpp"

namespace exanet::proto {
namespace {

completion numbered(std::uint64_t i) {
  completion c;
  c.context = reinterpret_cast<void*>(static_cast<std::uintptr_t>(i + 1));
  c.flags = i * 3;
  c.len = i * 5;
  c.buf = reinterpret_cast<void*>(static_cast<std::uintptr_t>(i * 7));
  c.data = i * 11;
  c.tag = i * 13;
  c.src = i * 17;
  c.err = static_cast<int>(i % 5);
  c.prov_errno = static_cast<int>(i % 7);
  c.olen = i * 19;
  return c;
}

void expect_numbered(const completion& c, std::uint64_t i) {
  const completion want = numbered(i);
  EXPECT_EQ(c.context, want.context) << i;
  EXPECT_EQ(c.flags, want.flags) << i;
  EXPECT_EQ(c.len, want.len) << i;
  EXPECT_EQ(c.buf, want.buf) << i;
  EXPECT_EQ(c.data, want.data) << i;
  EXPECT_EQ(c.tag, want.tag) << i;
  EXPECT_EQ(c.src, want.src) << i;
  EXPECT_EQ(c.err, want.err) << i;
  EXPECT_EQ(c.prov_errno, want.prov_errno) << i;
  EXPECT_EQ(c.olen, want.olen) << i;
}

TEST(CompletionRing, KeepsOrderAndFieldsAcrossWrapAndGrowth) {
  completion_ring r;
  r.reserve(8);
  std::uint64_t in = 0, out = 0;
  // Move the head into the middle, so the doubling copies a wrapped ring.
  for (; in < 5; ++in) r.push(numbered(in));
  for (; out < 5; ++out, r.pop()) expect_numbered(r.front(), out);
  // 8 fill it (wrapping), 100 more make it double (8 -> 16 -> ... -> 128) while wrapped.
  for (; in < 5 + 108; ++in) r.push(numbered(in));
  EXPECT_EQ(r.size(), 108u);
  for (; r.size() > 0; ++out, r.pop()) expect_numbered(r.front(), out);
  EXPECT_EQ(out, in);
  // Interleaved after growth: still first in, first out.
  for (int round = 0; round < 300; ++round) {
    r.push(numbered(in++));
    r.push(numbered(in++));
    expect_numbered(r.front(), out++);
    r.pop();
  }
  for (; r.size() > 0; ++out, r.pop()) expect_numbered(r.front(), out);
  EXPECT_EQ(out, in);
}

TEST(CompletionRing, CallsItsOwnerOnlyWhileWatched) {
  struct owner {
    completion_ring r;
    int calls = 0;
    std::size_t size_seen = 0;
  } o;
  o.r.reserve(4);
  o.r.set_hook(&o, [](void* self) noexcept {
    auto& me = *static_cast<owner*>(self);
    ++me.calls;
    me.size_seen = me.r.size();  // called after the entry is in
  });
  o.r.push(numbered(0));
  EXPECT_EQ(o.calls, 0);
  o.r.watch();
  o.r.push(numbered(1));
  EXPECT_EQ(o.calls, 1);
  EXPECT_EQ(o.size_seen, 2u);
  o.r.watch();  // two parties: still one call per push
  o.r.push(numbered(2));
  EXPECT_EQ(o.calls, 2);
  o.r.unwatch();
  o.r.push(numbered(3));
  EXPECT_EQ(o.calls, 3);
  o.r.unwatch();
  o.r.push(numbered(4));  // also grows: 5 entries in a ring of 4
  EXPECT_EQ(o.calls, 3);
  EXPECT_EQ(o.r.size(), 5u);
  for (std::uint64_t i = 0; o.r.size() > 0; ++i, o.r.pop()) expect_numbered(o.r.front(), i);
}

}  // namespace
}  // namespace exanet::proto
