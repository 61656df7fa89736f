// SPDX-License-Identifier: BSD-2-Clause
#include "core/copy.hpp"

#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace exanet::core {
namespace detail {

std::atomic<bool> misaligned_vector{false};
std::atomic<bool> ahead_backward{false};

namespace {

#if defined(__x86_64__)
// Both loops: one unaligned store for the head, aligned stores from the first destination line
// on, and an unaligned store that ends exactly at the last byte (it may rewrite a few bytes the
// loop already stored, with the same values). Sources are read unaligned throughout.
__attribute__((target("avx2"))) void copy_avx2(std::byte* d, const std::byte* s, std::size_t n) noexcept {
  using v = __m256i;
  _mm256_storeu_si256(reinterpret_cast<v*>(d), _mm256_loadu_si256(reinterpret_cast<const v*>(s)));
  const std::size_t head = 32 - (reinterpret_cast<std::uintptr_t>(d) & 31);
  const std::byte* const end_s = s + n;
  std::byte* const end_d = d + n;
  d += head;
  s += head;
  n -= head;
  for (; n >= 128; n -= 128, d += 128, s += 128) {
    const v a = _mm256_loadu_si256(reinterpret_cast<const v*>(s));
    const v b = _mm256_loadu_si256(reinterpret_cast<const v*>(s + 32));
    const v c = _mm256_loadu_si256(reinterpret_cast<const v*>(s + 64));
    const v e = _mm256_loadu_si256(reinterpret_cast<const v*>(s + 96));
    _mm256_store_si256(reinterpret_cast<v*>(d), a);
    _mm256_store_si256(reinterpret_cast<v*>(d + 32), b);
    _mm256_store_si256(reinterpret_cast<v*>(d + 64), c);
    _mm256_store_si256(reinterpret_cast<v*>(d + 96), e);
  }
  for (; n >= 32; n -= 32, d += 32, s += 32)
    _mm256_store_si256(reinterpret_cast<v*>(d), _mm256_loadu_si256(reinterpret_cast<const v*>(s)));
  if (n)
    _mm256_storeu_si256(reinterpret_cast<v*>(end_d - 32),
                        _mm256_loadu_si256(reinterpret_cast<const v*>(end_s - 32)));
}

void copy_sse2(std::byte* d, const std::byte* s, std::size_t n) noexcept {
  using v = __m128i;
  _mm_storeu_si128(reinterpret_cast<v*>(d), _mm_loadu_si128(reinterpret_cast<const v*>(s)));
  const std::size_t head = 16 - (reinterpret_cast<std::uintptr_t>(d) & 15);
  const std::byte* const end_s = s + n;
  std::byte* const end_d = d + n;
  d += head;
  s += head;
  n -= head;
  for (; n >= 64; n -= 64, d += 64, s += 64) {
    const v a = _mm_loadu_si128(reinterpret_cast<const v*>(s));
    const v b = _mm_loadu_si128(reinterpret_cast<const v*>(s + 16));
    const v c = _mm_loadu_si128(reinterpret_cast<const v*>(s + 32));
    const v e = _mm_loadu_si128(reinterpret_cast<const v*>(s + 48));
    _mm_store_si128(reinterpret_cast<v*>(d), a);
    _mm_store_si128(reinterpret_cast<v*>(d + 16), b);
    _mm_store_si128(reinterpret_cast<v*>(d + 32), c);
    _mm_store_si128(reinterpret_cast<v*>(d + 48), e);
  }
  for (; n >= 16; n -= 16, d += 16, s += 16)
    _mm_store_si128(reinterpret_cast<v*>(d), _mm_loadu_si128(reinterpret_cast<const v*>(s)));
  if (n)
    _mm_storeu_si128(reinterpret_cast<v*>(end_d - 16),
                     _mm_loadu_si128(reinterpret_cast<const v*>(end_s - 16)));
}

// Backward: the first and last 32 (16) bytes are loaded and stored unaligned, the rest from the
// last whole destination block down with aligned stores, so each load is ahead of (below) every
// store already made. The first block's load is taken before any store: the buffers do not
// overlap, but a caller's stale pointer arithmetic should not turn into a torn head.
__attribute__((target("avx2"))) void copy_avx2_backward(std::byte* d, const std::byte* s,
                                                         std::size_t n) noexcept {
  using v = __m256i;
  const v first = _mm256_loadu_si256(reinterpret_cast<const v*>(s));
  std::byte* ed = d + n;
  const std::byte* es = s + n;
  _mm256_storeu_si256(reinterpret_cast<v*>(ed - 32), _mm256_loadu_si256(reinterpret_cast<const v*>(es - 32)));
  const std::size_t tail = reinterpret_cast<std::uintptr_t>(ed) & 31;
  ed -= tail;
  es -= tail;
  std::size_t m = static_cast<std::size_t>(ed - d);  // >= n - 31: ed is now aligned
  for (; m >= 128 + 32; m -= 128) {
    ed -= 128;
    es -= 128;
    const v a = _mm256_loadu_si256(reinterpret_cast<const v*>(es + 96));
    const v b = _mm256_loadu_si256(reinterpret_cast<const v*>(es + 64));
    const v c = _mm256_loadu_si256(reinterpret_cast<const v*>(es + 32));
    const v e = _mm256_loadu_si256(reinterpret_cast<const v*>(es));
    _mm256_store_si256(reinterpret_cast<v*>(ed + 96), a);
    _mm256_store_si256(reinterpret_cast<v*>(ed + 64), b);
    _mm256_store_si256(reinterpret_cast<v*>(ed + 32), c);
    _mm256_store_si256(reinterpret_cast<v*>(ed), e);
  }
  for (; m >= 32 + 32; m -= 32) {
    ed -= 32;
    es -= 32;
    _mm256_store_si256(reinterpret_cast<v*>(ed), _mm256_loadu_si256(reinterpret_cast<const v*>(es)));
  }
  // 32 <= m < 64 bytes are left in [d, ed): the block ending at ed, then the first block.
  if (m > 32)
    _mm256_storeu_si256(reinterpret_cast<v*>(ed - 32), _mm256_loadu_si256(reinterpret_cast<const v*>(es - 32)));
  _mm256_storeu_si256(reinterpret_cast<v*>(d), first);
}

void copy_sse2_backward(std::byte* d, const std::byte* s, std::size_t n) noexcept {
  using v = __m128i;
  const v first = _mm_loadu_si128(reinterpret_cast<const v*>(s));
  std::byte* ed = d + n;
  const std::byte* es = s + n;
  _mm_storeu_si128(reinterpret_cast<v*>(ed - 16), _mm_loadu_si128(reinterpret_cast<const v*>(es - 16)));
  const std::size_t tail = reinterpret_cast<std::uintptr_t>(ed) & 15;
  ed -= tail;
  es -= tail;
  std::size_t m = static_cast<std::size_t>(ed - d);
  for (; m >= 64 + 16; m -= 64) {
    ed -= 64;
    es -= 64;
    const v a = _mm_loadu_si128(reinterpret_cast<const v*>(es + 48));
    const v b = _mm_loadu_si128(reinterpret_cast<const v*>(es + 32));
    const v c = _mm_loadu_si128(reinterpret_cast<const v*>(es + 16));
    const v e = _mm_loadu_si128(reinterpret_cast<const v*>(es));
    _mm_store_si128(reinterpret_cast<v*>(ed + 48), a);
    _mm_store_si128(reinterpret_cast<v*>(ed + 32), b);
    _mm_store_si128(reinterpret_cast<v*>(ed + 16), c);
    _mm_store_si128(reinterpret_cast<v*>(ed), e);
  }
  for (; m >= 16 + 16; m -= 16) {
    ed -= 16;
    es -= 16;
    _mm_store_si128(reinterpret_cast<v*>(ed), _mm_loadu_si128(reinterpret_cast<const v*>(es)));
  }
  if (m > 16)
    _mm_storeu_si128(reinterpret_cast<v*>(ed - 16), _mm_loadu_si128(reinterpret_cast<const v*>(es - 16)));
  _mm_storeu_si128(reinterpret_cast<v*>(d), first);
}

// Initialised by a constructor of this module, which may run before libgcc's own CPU probe:
// ask for the probe first.
const bool g_avx2 = [] {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") != 0;
}();
#endif

double now_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

}  // namespace

void copy_misaligned(void* dst, const void* src, std::size_t n) noexcept {
#if defined(__x86_64__)
  // n >= vector_copy_min: the head and tail stores never reach outside [dst, dst + n).
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  if (g_avx2)
    copy_avx2(d, s, n);
  else
    copy_sse2(d, s, n);
#else
  std::memcpy(dst, src, n);
#endif
}

void copy_backward(void* dst, const void* src, std::size_t n) noexcept {
#if defined(__x86_64__)
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  if (g_avx2)
    copy_avx2_backward(d, s, n);
  else
    copy_sse2_backward(d, s, n);
#else
  std::memcpy(dst, src, n);
#endif
}

}  // namespace detail

namespace {

const char* loop_isa() noexcept {
#if defined(__x86_64__)
  return detail::g_avx2 ? "avx2" : "sse2";
#else
  return "none";
#endif
}

// Two cases, 64 KiB each, both buffers in cache; best of several rounds, interleaved so a
// frequency change hits both ways alike:
//   - misaligned: from 16 bytes past a page into a page-aligned buffer (memcpy or the forward
//     loop), the staged path's copy in;
//   - ahead: from a page-aligned buffer to 16 bytes past a page (memcpy or the backward loop),
//     where the destination is 16 bytes ahead of the source modulo a page.
copy_choice measure() noexcept {
  copy_choice c;
  c.isa = loop_isa();
#if defined(__x86_64__)
  constexpr std::size_t len = 65536, page = 4096;
  auto* src = static_cast<std::byte*>(std::aligned_alloc(page, len + page));
  auto* dst = static_cast<std::byte*>(std::aligned_alloc(page, len + page));
  if (!src || !dst) {
    std::free(src);
    std::free(dst);
    return c;
  }
  std::memset(src, 0x5a, len + page);
  std::memset(dst, 0, len + page);
  double best[4] = {1e18, 1e18, 1e18, 1e18};
  for (int round = 0; round < 12; ++round) {
    const double t0 = detail::now_ns();
    std::memcpy(dst, src + 16, len);
    const double t1 = detail::now_ns();
    detail::copy_misaligned(dst, src + 16, len);
    const double t2 = detail::now_ns();
    std::memcpy(dst + 16, src, len);
    const double t3 = detail::now_ns();
    detail::copy_backward(dst + 16, src, len);
    const double t4 = detail::now_ns();
    if (round >= 2) {  // the first rounds fault pages in and warm the caches
      const double took[4] = {t1 - t0, t2 - t1, t3 - t2, t4 - t3};
      for (int i = 0; i < 4; ++i) best[i] = std::min(best[i], took[i]);
    }
  }
  std::free(src);
  std::free(dst);
  c.libc_ns = best[0];
  c.vector_ns = best[1];
  c.ahead_libc_ns = best[2];
  c.ahead_loop_ns = best[3];
  // A margin, so that noise between two close numbers does not flip the choice run to run.
  c.vector = best[0] > 1.25 * best[1];
  c.backward = best[2] > 1.25 * best[3];
#endif
  return c;
}

}  // namespace

copy_choice copy_calibrate(copy_policy p) noexcept {
  static std::once_flag once;
  static copy_choice chosen;
  std::call_once(once, [p] {
    switch (p) {
      case copy_policy::automatic: chosen = measure(); break;
      case copy_policy::libc: chosen = {.vector = false, .backward = false, .isa = loop_isa()}; break;
      case copy_policy::vector: chosen = {.vector = true, .backward = true, .isa = loop_isa()}; break;
    }
    detail::misaligned_vector.store(chosen.vector, std::memory_order_relaxed);
    detail::ahead_backward.store(chosen.backward, std::memory_order_relaxed);
  });
  return chosen;
}

}  // namespace exanet::core
