// SPDX-License-Identifier: BSD-2-Clause
// The target's atomic arithmetic (proto/atomic_ops.hpp): which pairs exist, the counts
// fi_query_atomic reports, and the element-wise results, including the paths the conformance test
// cannot pick (an element misaligned for a compare-and-swap takes the striped lock) and threads
// updating one word at once (the compare-and-swap must lose no update).
#include <gtest/gtest.h>

#include <atomic>
#include <complex>
#include <cstring>
#include <thread>
#include <vector>

#include "proto/atomic_ops.hpp"

namespace exanet::proto::atomics {
namespace {

TEST(AtomicOps, PairsAndCounts) {
  // Ordering needs an order: no min, max or ordered compare-swap on complex numbers.
  EXPECT_FALSE(valid(FI_DOUBLE_COMPLEX, FI_MIN, family::base));
  EXPECT_FALSE(valid(FI_FLOAT_COMPLEX, FI_CSWAP_GT, family::compare));
  EXPECT_TRUE(valid(FI_FLOAT_COMPLEX, FI_CSWAP, family::compare));
  // Bits need bits: no bit operations or masked swap on floating point.
  EXPECT_FALSE(valid(FI_DOUBLE, FI_BXOR, family::fetch));
  EXPECT_FALSE(valid(FI_LONG_DOUBLE, FI_MSWAP, family::compare));
  EXPECT_TRUE(valid(FI_UINT128, FI_MSWAP, family::compare));
  // Each op in its family only.
  EXPECT_FALSE(valid(FI_INT32, FI_ATOMIC_READ, family::base));
  EXPECT_TRUE(valid(FI_INT32, FI_ATOMIC_READ, family::fetch));
  EXPECT_FALSE(valid(FI_INT32, FI_CSWAP, family::fetch));
  EXPECT_FALSE(valid(FI_INT32, FI_SUM, family::compare));
  EXPECT_FALSE(valid(FI_DATATYPE_LAST + 2, FI_SUM, family::base));
  EXPECT_FALSE(valid(FI_INT32, FI_ATOMIC_OP_LAST, family::base));
  EXPECT_EQ(max_count(FI_UINT8, FI_SUM, family::base), 4096u);
  EXPECT_EQ(max_count(FI_UINT64, FI_CSWAP, family::compare), 256u);  // two buffers in the room
  EXPECT_EQ(max_count(FI_LONG_DOUBLE_COMPLEX, FI_SUM, family::fetch), 4096u / (2 * sizeof(long double)));
  EXPECT_EQ(max_count(FI_DOUBLE_COMPLEX, FI_MAX, family::base), 0u);
}

template <class T>
T run(int dt, int op, T target, T operand, T compare, T* result = nullptr, std::size_t shift = 0) {
  alignas(64) std::byte mem[64 + sizeof(T)];
  std::memcpy(mem + shift, &target, sizeof(T));
  std::byte res[sizeof(T)];
  perform(dt, op, mem + shift, reinterpret_cast<const std::byte*>(&operand),
          reinterpret_cast<const std::byte*>(&compare), res, 1);
  if (result) std::memcpy(static_cast<void*>(result), res, sizeof(T));
  T out;
  std::memcpy(static_cast<void*>(&out), mem + shift, sizeof(T));
  return out;
}

TEST(AtomicOps, ElementResults) {
  for (std::size_t shift : {0u, 1u}) {  // aligned: compare-and-swap; misaligned: the lock
    std::int32_t old = 0;
    EXPECT_EQ(run<std::int32_t>(FI_INT32, FI_SUM, 40, 2, 0, &old, shift), 42);
    EXPECT_EQ(old, 40);
    EXPECT_EQ(run<std::int8_t>(FI_INT8, FI_SUM, 127, 1, 0, nullptr, shift), -128);  // wraps
    EXPECT_EQ(run<std::uint16_t>(FI_UINT16, FI_MSWAP, 0x00ff, 0xabcd, 0x0ff0, nullptr, shift), 0x0bcf);
    EXPECT_EQ(run<std::int64_t>(FI_INT64, FI_CSWAP_GT, 5, 9, 6, nullptr, shift), 9);  // 6 > 5
    EXPECT_EQ(run<std::int64_t>(FI_INT64, FI_CSWAP_GT, 5, 9, 5, nullptr, shift), 5);
    EXPECT_EQ(run<double>(FI_DOUBLE, FI_LXOR, 2.5, 0.0, 0, nullptr, shift), 1.0);
    EXPECT_EQ(run<float>(FI_FLOAT, FI_MIN, 3.0f, -1.0f, 0, nullptr, shift), -1.0f);
    using cf = std::complex<float>;
    EXPECT_EQ(run<cf>(FI_FLOAT_COMPLEX, FI_PROD, cf(1, 2), cf(3, 4), cf(), nullptr, shift), cf(-5, 10));
    using cld = std::complex<long double>;
    EXPECT_EQ(run<cld>(FI_LONG_DOUBLE_COMPLEX, FI_CSWAP_NE, cld(1, 1), cld(7, 0), cld(1, 2), nullptr, shift),
              cld(7, 0));
    unsigned __int128 big = static_cast<unsigned __int128>(1) << 100, r128 = 0;
    EXPECT_TRUE(run<unsigned __int128>(FI_UINT128, FI_BOR, big, 1, 0, &r128, shift) == (big | 1));
    EXPECT_TRUE(r128 == big);
    long double ld = 0;
    EXPECT_EQ(run<long double>(FI_LONG_DOUBLE, FI_ATOMIC_READ, 2.5L, 0, 0, &ld, shift), 2.5L);
    EXPECT_EQ(ld, 2.5L);
  }
}

TEST(AtomicOps, ConcurrentUpdatesLoseNothing) {
  // Both paths: a word the compare-and-swap updates, and a 16-byte element under the lock.
  alignas(16) std::uint64_t word = 0;
  alignas(16) unsigned __int128 wide = 0;
  constexpr int threads = 4, adds = 200000;
  std::atomic<int> ready{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      ready.fetch_add(1);
      while (ready.load() < threads) {  // all start together, so the updates overlap
      }
      const std::uint64_t one = 1;
      const unsigned __int128 one128 = 1;
      for (int i = 0; i < adds; ++i) {
        perform(FI_UINT64, FI_SUM, reinterpret_cast<std::byte*>(&word),
                reinterpret_cast<const std::byte*>(&one), nullptr, nullptr, 1);
        perform(FI_UINT128, FI_SUM, reinterpret_cast<std::byte*>(&wide),
                reinterpret_cast<const std::byte*>(&one128), nullptr, nullptr, 1);
      }
    });
  for (auto& th : pool) th.join();
  EXPECT_EQ(word, std::uint64_t{threads} * adds);
  EXPECT_TRUE(wide == static_cast<unsigned __int128>(threads) * adds);
}

}  // namespace
}  // namespace exanet::proto::atomics
