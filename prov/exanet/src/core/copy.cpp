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

}  // namespace detail

namespace {

const char* loop_isa() noexcept {
#if defined(__x86_64__)
  return detail::g_avx2 ? "avx2" : "sse2";
#else
  return "none";
#endif
}

// The staged path's case: 64 KiB from 16 bytes past a page into a page-aligned chunk, both
// in cache. Best of several rounds each, interleaved so a frequency change hits both.
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
  double best_libc = 1e18, best_loop = 1e18;
  for (int round = 0; round < 12; ++round) {
    double t0 = detail::now_ns();
    std::memcpy(dst, src + 16, len);
    double t1 = detail::now_ns();
    detail::copy_misaligned(dst, src + 16, len);
    double t2 = detail::now_ns();
    if (round >= 2) {  // the first rounds fault pages in and warm the caches
      best_libc = std::min(best_libc, t1 - t0);
      best_loop = std::min(best_loop, t2 - t1);
    }
  }
  std::free(src);
  std::free(dst);
  c.libc_ns = best_libc;
  c.vector_ns = best_loop;
  // A margin, so that noise between two close numbers does not flip the choice run to run.
  c.vector = best_libc > 1.25 * best_loop;
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
      case copy_policy::libc: chosen = {.vector = false, .isa = loop_isa()}; break;
      case copy_policy::vector: chosen = {.vector = true, .isa = loop_isa()}; break;
    }
    detail::misaligned_vector.store(chosen.vector, std::memory_order_relaxed);
  });
  return chosen;
}

}  // namespace exanet::core
