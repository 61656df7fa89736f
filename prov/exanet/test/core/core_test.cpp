// Pools, intrusive lists, iovec copies and the threading-level lock.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "core/intrusive_list.hpp"
#include "core/iov.hpp"
#include "core/lock.hpp"
#include "core/pool.hpp"

namespace exanet::core {
namespace {

struct item {
  list_hook hook;
  int value = 0;
};
using item_list = intrusive_list<item, &item::hook>;

TEST(pool, ids_name_live_objects_only) {
  pool<item> p(4);
  std::vector<item*> got;
  for (int i = 0; i < 10; ++i) got.push_back(p.acquire());  // grows across chunks
  for (int i = 0; i < 10; ++i) got[i]->value = i;
  for (int i = 0; i < 10; ++i) EXPECT_EQ(p.from_id(p.id_of(got[i]))->value, i);  // addresses stable
  const std::uint64_t id = p.id_of(got[3]);
  p.release(got[3]);
  EXPECT_EQ(p.from_id(id), nullptr) << "a released object's id must not resolve";
  item* again = p.acquire();
  EXPECT_EQ(again, got[3]);                 // reused...
  EXPECT_NE(p.id_of(again), id);            // ...under a new generation
  EXPECT_EQ(p.from_id(id), nullptr);
  EXPECT_EQ(p.from_id(~0ull), nullptr);
  EXPECT_EQ(p.in_use(), 10u);
}

TEST(intrusive_list, order_removal_and_moves) {
  item a, b, c;
  item_list l;
  l.push_back(a);
  l.push_back(b);
  l.push_back(c);
  l.remove(b);
  EXPECT_FALSE(b.hook.linked());
  EXPECT_EQ(l.front(), &a);
  item_list moved(std::move(l));
  EXPECT_TRUE(l.empty());
  EXPECT_EQ(moved.size(), 2u);
  EXPECT_EQ(moved.pop_front(), &a);
  EXPECT_EQ(moved.pop_front(), &c);
  EXPECT_EQ(moved.pop_front(), nullptr);
  moved.push_back(a);
  moved.push_back(b);
  moved.for_each([&](item& i) { moved.remove(i); });  // removal while walking
  EXPECT_TRUE(moved.empty());
}

TEST(iov, copies_across_segment_boundaries_from_an_offset) {
  char s1[3] = {'a', 'b', 'c'}, s2[1] = {'d'}, s3[4] = {'e', 'f', 'g', 'h'};
  iovec iov[4] = {{s1, 3}, {nullptr, 0}, {s2, 1}, {s3, 4}};
  char out[8] = {};
  EXPECT_EQ(iov_length(iov), 8u);
  EXPECT_EQ(copy_from_iov(out, iov, 2, 5), 5u);
  EXPECT_EQ(std::string(out, 5), "cdefg");
  EXPECT_EQ(copy_from_iov(out, iov, 6, 10), 2u);  // clipped at the end
  EXPECT_EQ(copy_to_iov(iov, 1, "XYZW", 4), 4u);
  EXPECT_EQ(std::string(s1, 3), "aXY");
  EXPECT_EQ(s2[0], 'Z');
  EXPECT_EQ(s3[0], 'W');
}

TEST(level_lock, protects_when_enabled) {
  level_lock lock(true);
  long counter = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 100000; ++i) {
        level_guard g(lock);
        ++counter;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, 400000);
}

}  // namespace
}  // namespace exanet::core
