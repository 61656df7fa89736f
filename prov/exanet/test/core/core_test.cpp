// SPDX-License-Identifier: BSD-2-Clause
// Pools, intrusive lists, iovec copies and the threading-level lock.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/buffer_cache.hpp"
#include "core/checked_memory.hpp"
#include "core/copy.hpp"
#include "core/idle_yield.hpp"
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

// Every source and destination offset within a line, lengths around the loop's threshold and
// its 128-byte steps: exactly the bytes asked for arrive, and none around them changes.
void check_copy_at_every_skew(void (*copy)(void*, const void*, std::size_t), std::size_t min_len) {
  std::vector<unsigned char> src(20000), dst(20000);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  for (std::size_t len : {std::size_t{0}, std::size_t{1}, std::size_t{63}, std::size_t{2047},
                          std::size_t{2048}, std::size_t{2049}, std::size_t{4096 + 31},
                          std::size_t{16384 + 127}}) {
    if (len < min_len) continue;
    for (std::size_t so = 0; so < 64; so += 3)
      for (std::size_t dof = 0; dof < 64; ++dof) {
        std::fill(dst.begin(), dst.end(), 0xEE);
        auto* d = dst.data() + 64 + ((64 - reinterpret_cast<std::uintptr_t>(dst.data()) % 64) % 64) + dof;
        const auto* s = src.data() + 64 + so;
        copy(d, s, len);
        const auto at = static_cast<std::size_t>(d - dst.data());
        for (std::size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= at && i < at + len;
          const unsigned char want = inside ? s[i - at] : 0xEE;
          ASSERT_EQ(dst[i], want) << "len " << len << " src+" << so << " dst+" << dof << " byte " << i;
        }
      }
  }
}

TEST(copy, copy_bytes_is_exact_at_every_alignment) {
  copy_calibrate(copy_policy::automatic);
  check_copy_at_every_skew(copy_bytes, 0);
}

TEST(copy, the_aligned_store_loop_is_exact_at_every_alignment) {
  // The loop serves lengths from vector_copy_min up (copy_bytes never calls it below).
  check_copy_at_every_skew(detail::copy_misaligned, detail::vector_copy_min);
}

TEST(copy, the_backward_loop_is_exact_at_every_alignment) {
  check_copy_at_every_skew(detail::copy_backward, detail::vector_copy_min);
}

TEST(copy, copy_bytes_is_exact_just_ahead_of_its_source_under_every_policy_path) {
  // Destinations 1..63 bytes ahead of the source modulo a page (the backward loop's case, when
  // chosen) and around it, lengths around the loop's steps; bytes around the copy unchanged.
  copy_calibrate(copy_policy::automatic);
  std::vector<unsigned char> src(3 * 4096 + 40000), dst(3 * 4096 + 40000);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 29 + 5);
  auto page_of = [](std::vector<unsigned char>& v) {
    return v.data() + (4096 - reinterpret_cast<std::uintptr_t>(v.data()) % 4096) % 4096;
  };
  const unsigned char* s0 = page_of(src) + 4096;
  unsigned char* d0 = page_of(dst) + 4096;
  for (std::size_t len : {std::size_t{2048}, std::size_t{2049}, std::size_t{4096 + 33},
                          std::size_t{16384 + 95}, std::size_t{32768 + 1}})
    for (std::size_t so : {std::size_t{0}, std::size_t{5}, std::size_t{40}})
      for (std::size_t ahead = 0; ahead <= 70; ++ahead) {
        std::fill(dst.begin(), dst.end(), 0xEE);
        const unsigned char* s = s0 + so;
        unsigned char* d = d0 + so + ahead;
        copy_bytes(d, s, len);
        const auto at = static_cast<std::size_t>(d - dst.data());
        for (std::size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= at && i < at + len;
          ASSERT_EQ(dst[i], inside ? s[i - at] : 0xEE)
              << "len " << len << " src+" << so << " ahead " << ahead << " byte " << i;
        }
      }
}

TEST(copy, copy_small_is_exact_at_every_length_and_alignment) {
  // Every length it takes (0..64) at every pair of offsets: exactly those bytes, none around.
  unsigned char src[256], dst[256];
  for (std::size_t i = 0; i < sizeof src; ++i) src[i] = static_cast<unsigned char>(i * 37 + 11);
  for (std::size_t len = 0; len <= 64; ++len)
    for (std::size_t so = 0; so < 64; so += 7)
      for (std::size_t dof = 0; dof < 64; ++dof) {
        std::fill(std::begin(dst), std::end(dst), 0xEE);
        copy_small(dst + 64 + dof, src + 64 + so, len);
        for (std::size_t i = 0; i < sizeof dst; ++i) {
          const bool inside = i >= 64 + dof && i < 64 + dof + len;
          const unsigned char want = inside ? src[64 + so + (i - 64 - dof)] : 0xEE;
          ASSERT_EQ(dst[i], want) << "len " << len << " src+" << so << " dst+" << dof << " byte " << i;
        }
      }
}

TEST(copy, calibration_reports_a_measurement_and_keeps_its_first_answer) {
  const copy_choice first = copy_calibrate(copy_policy::automatic);
  const copy_choice again = copy_calibrate(copy_policy::vector);
  EXPECT_EQ(first.vector, again.vector) << "the policy is process-wide and decided once";
#if defined(__x86_64__)
  EXPECT_GT(first.libc_ns, 0.0);
  EXPECT_GT(first.vector_ns, 0.0);
  EXPECT_GT(first.ahead_libc_ns, 0.0);
  EXPECT_GT(first.ahead_loop_ns, 0.0);
#endif
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

// More threads than cores, each holding the lock across a yield: contended lock() calls go to
// sleep and every unlock that may have a sleeper wakes one, so no increment is lost and nobody
// is left asleep (the test would hang at join).
TEST(level_lock, sleepers_are_woken_and_nothing_is_lost) {
  level_lock lock(true);
  long counter = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        level_guard g(lock);
        const long seen = counter;
        if (i % 64 == 0) std::this_thread::yield();  // let a waiter find it held
        counter = seen + 1;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, 32000);
}

// Threads waiting for a lock held a long time sleep instead of spinning: the holder of an
// endpoint's lock inside a long RMA write must keep the CPU (fi_rdm_stress's 32 server threads on
// 2 cores). The process's CPU time while 8 waiters wait 300 ms stays far below what spinning
// burns (8 threads on this machine's cores for 300 ms: 0.6 s of CPU or more).
TEST(level_lock, waiters_sleep_while_the_lock_is_held) {
  level_lock lock(true);
  lock.lock();
  std::atomic<int> started{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      started.fetch_add(1);
      level_guard g(lock);
    });
  while (started.load() < 8) std::this_thread::yield();
  const auto cpu_ms = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000.0 +
           (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1000.0;
  };
  const double before = cpu_ms();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double spent = cpu_ms() - before;
  lock.unlock();
  for (auto& t : threads) t.join();
  EXPECT_LT(spent, 100.0) << "waiters burnt " << spent << " ms of CPU in 300 ms";
}

// The unexpected-payload cache: a released buffer comes back for the next acquire of its size
// class and only of its class, every buffer starts on a line and holds what was asked, and what
// it keeps idle stays within its bounds (bytes, buffers per class, nothing above 1 MiB).
TEST(buffer_cache, reuses_by_size_class_within_its_bounds) {
  buffer_cache c(64 * 1024);
  std::byte* a = c.acquire(1000);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % 64, 0u);
  std::memset(a, 0x5a, 1024);  // the whole class is usable (ASan would catch less)
  c.release(a, 1000);
  EXPECT_EQ(c.kept_bytes(), 1024u);
  std::byte* other = c.acquire(1025);  // the next class up: not a
  EXPECT_NE(other, a);
  EXPECT_EQ(c.acquire(513), a) << "same class (513..1024): the kept buffer";
  EXPECT_EQ(c.kept_bytes(), 0u);
  c.release(a, 700);
  c.release(other, 2048);
  EXPECT_EQ(c.kept_bytes(), 1024u + 2048u);
  // Bytes bound: 64 KiB idle at most, so of 40 buffers of 4 KiB only those that fit are kept.
  std::vector<std::byte*> many;
  for (int i = 0; i < 40; ++i) many.push_back(c.acquire(4096));
  for (std::byte* b : many) c.release(b, 4096);
  EXPECT_LE(c.kept_bytes(), 64u * 1024u);
  // Per-class bound, with room in bytes: 64 buffers of 64 B at most.
  buffer_cache d;
  many.clear();
  for (int i = 0; i < 100; ++i) many.push_back(d.acquire(1));
  for (std::byte* b : many) d.release(b, 1);
  EXPECT_EQ(d.kept_bytes(), buffer_cache::per_class * 64u);
  // Above the largest class nothing is kept; the buffer still holds its length.
  std::byte* big = d.acquire((std::size_t{1} << 20) + 1);
  ASSERT_NE(big, nullptr);
  big[(std::size_t{1} << 20)] = std::byte{1};
  const std::size_t before = d.kept_bytes();
  d.release(big, (std::size_t{1} << 20) + 1);
  EXPECT_EQ(d.kept_bytes(), before);
  d.trim();
  EXPECT_EQ(d.kept_bytes(), 0u);
}

TEST(checked_memory, maps_holes_and_protections_are_reported_not_faulted) {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  auto* a = static_cast<std::byte*>(
      mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(a, MAP_FAILED);
  // [0 rw][1 none][2 hole][3 read-only]
  std::memset(a, 7, 4 * page);
  ASSERT_EQ(mprotect(a + page, page, PROT_NONE), 0);
  ASSERT_EQ(munmap(a + 2 * page, page), 0);
  ASSERT_EQ(mprotect(a + 3 * page, page, PROT_READ), 0);

  EXPECT_TRUE(range_mapped(a, page));
  EXPECT_TRUE(range_mapped(a + 5, page - 5));
  EXPECT_TRUE(range_mapped(a + page, page)) << "PROT_NONE is mapped (protections not checked)";
  EXPECT_FALSE(range_mapped(a + page, page + 1)) << "reaches the hole";
  EXPECT_FALSE(range_mapped(a + 2 * page + 100, 1));
  EXPECT_TRUE(range_mapped(nullptr, 0));
  // The whole address space (MPICH's dynamic window): msync alone would call it mapped, its
  // length rounding to 0 pages.
  EXPECT_FALSE(range_mapped(nullptr, SIZE_MAX));
  EXPECT_FALSE(range_mapped(a, SIZE_MAX)) << "wraps";

  std::byte src[64];
  std::memset(src, 9, sizeof src);
  EXPECT_TRUE(copy_or_fault(a + page - 32, src, 32));
  EXPECT_EQ(a[page - 1], std::byte{9});
  EXPECT_FALSE(copy_or_fault(a + page - 32, src, 64)) << "runs into PROT_NONE";
  EXPECT_FALSE(copy_or_fault(a + 2 * page, src, 1)) << "the hole";
  EXPECT_FALSE(copy_or_fault(a + 3 * page, src, 1)) << "read-only";
  EXPECT_EQ(a[3 * page], std::byte{7});
  std::byte dst[64];
  EXPECT_TRUE(copy_or_fault(dst, a + 3 * page, 64)) << "read-only memory may be read";
  EXPECT_FALSE(copy_or_fault(dst, a + page, 1)) << "PROT_NONE may not";

  if (range_writable(a, 1) != writable::unknown) {  // Linux 5.14 and later
    EXPECT_EQ(range_writable(a + 5, page - 5), writable::yes);
    EXPECT_EQ(range_writable(a + page - 8, 16), writable::no) << "runs into PROT_NONE";
    EXPECT_EQ(range_writable(a + 2 * page, 8), writable::no) << "the hole";
    EXPECT_EQ(range_writable(a + 3 * page, 8), writable::no) << "read-only";
    EXPECT_EQ(range_writable(nullptr, SIZE_MAX), writable::no);
    EXPECT_EQ(a[3 * page], std::byte{7}) << "nothing written";
  }
  EXPECT_TRUE(range_readable(a, page));
  EXPECT_TRUE(range_readable(a + 3 * page, page));
  EXPECT_FALSE(range_readable(a + page - 1, 2));
  EXPECT_FALSE(range_readable(a + 2 * page + 8, 8));
  EXPECT_FALSE(range_readable(nullptr, SIZE_MAX));
  EXPECT_TRUE(range_readable(nullptr, 0));
  // More pages than one system call probes (64): the last one decides.
  auto* big = static_cast<std::byte*>(
      mmap(nullptr, 130 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(big, MAP_FAILED);
  EXPECT_TRUE(range_readable(big + 1, 130 * page - 1));
  ASSERT_EQ(mprotect(big + 129 * page, page, PROT_NONE), 0);
  EXPECT_FALSE(range_readable(big + 1, 130 * page - 1));
  EXPECT_TRUE(range_readable(big + 1, 129 * page - 1));
  munmap(big, 130 * page);
  munmap(a, 2 * page);
  munmap(a + 3 * page, page);
}

}  // namespace
}  // namespace exanet::core

namespace exanet::core {
namespace {

// The poll count at which a poller that keeps finding nothing is told to yield.
std::uint32_t polls_until_yield(idle_yield& y) {
  for (std::uint32_t n = 1; n <= 2 * idle_yield::longest_streak; ++n)
    if (y.after_poll(false)) return n;
  return 0;
}

TEST(idle_yield, never_yields_when_off_and_work_restarts_the_streak) {
  idle_yield off(0);
  EXPECT_EQ(polls_until_yield(off), 0u);
  idle_yield y(8);
  for (int i = 0; i < 7; ++i) EXPECT_FALSE(y.after_poll(false));
  EXPECT_FALSE(y.after_poll(true));  // work: the streak starts over
  EXPECT_EQ(polls_until_yield(y), 8u);
}

TEST(idle_yield, a_shared_core_keeps_the_short_streak_and_an_own_core_backs_off) {
  idle_yield y(8);
  std::uint64_t now = 1'000'000'000;
  // A yield that took `took` ns, `gap` ns after the previous one ended.
  auto yield = [&](std::uint64_t took, std::uint64_t gap) {
    now += gap;
    y.learn({took, now});
  };
  constexpr std::uint64_t quick = 100, close = idle_yield::widest_gap_ns / 4;
  // Yields that let another task run: the next one always after 8 empty polls.
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(polls_until_yield(y), 8u);
    yield(idle_yield::shared_ns, close);
  }
  EXPECT_EQ(y.yields(), 100u);
  EXPECT_EQ(y.shared_yields(), 100u);
  // Quick yields close together: the streak holds for quick_before_backoff of them, then
  // doubles each time up to longest_streak.
  for (std::uint32_t i = 0; i < idle_yield::quick_before_backoff; ++i) {
    ASSERT_EQ(polls_until_yield(y), 8u);
    yield(quick, close);
  }
  std::uint32_t expect = 8;
  while (expect < idle_yield::longest_streak) {
    yield(quick, close);
    expect *= 2;
    ASSERT_EQ(y.streak(), std::min(expect, idle_yield::longest_streak));
  }
  yield(quick, close);
  EXPECT_EQ(y.streak(), idle_yield::longest_streak);
  EXPECT_EQ(polls_until_yield(y), idle_yield::longest_streak);
  // Quick yields far apart (slow polls: the streak lasts too long): it halves, not below 8.
  yield(quick, 3 * idle_yield::widest_gap_ns);
  EXPECT_EQ(y.streak(), idle_yield::longest_streak / 2);
  for (int i = 0; i < 40; ++i) yield(quick, 3 * idle_yield::widest_gap_ns);
  EXPECT_EQ(y.streak(), 8u);
  // Within the band (between half and twice the widest gap): it stays.
  for (int i = 0; i < 4; ++i) yield(quick, close);
  const std::uint32_t held = y.streak();
  yield(quick, idle_yield::widest_gap_ns);
  EXPECT_EQ(y.streak(), held);
  // One yield that let another task run: back to the short streak at once.
  yield(idle_yield::shared_ns + 1, close);
  EXPECT_EQ(polls_until_yield(y), 8u);
  EXPECT_EQ(y.shared_yields(), 101u);
}

TEST(idle_yield, a_streak_beyond_the_longest_is_clamped) {
  idle_yield y(10'000'000);
  EXPECT_EQ(y.streak(), idle_yield::longest_streak);
}

}  // namespace
}  // namespace exanet::core
