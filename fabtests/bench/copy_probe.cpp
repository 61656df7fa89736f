// SPDX-License-Identifier: BSD-2-Clause
// How fast one core copies between two buffers, by where the destination sits relative to the
// source modulo a page: glibc's memcpy against exanet's own copy (core::copy_bytes, with the
// process's FI_EXANET_COPY-equivalent policy chosen by measurement). Both buffers are in this
// core's cache; each cell is the best of 50 copies, in GB/s (1e9 B/s).
//
//   copy_probe [sizes...]        (default 2048 4096 16384 65536 262144)
//
// A destination 1..63 bytes ahead of its source modulo 4096 is where glibc's memcpy was 15-30
// times slower on the machine of BENCHMARKS.md (2026-11-27, "4K aliasing"); see core/copy.hpp.
// A benchmark, not a test: it judges nothing (it does check that every copy was exact).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/copy.hpp"

namespace {

double best_gbps(void (*copy)(void*, const void*, std::size_t), unsigned char* dst,
                 const unsigned char* src, std::size_t n) {
  double best = 1e30;
  for (int rep = 0; rep < 50; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    copy(dst, src, n);
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::nano>(t1 - t0).count());
  }
  return static_cast<double>(n) / best;
}

void libc_copy(void* d, const void* s, std::size_t n) { std::memcpy(d, s, n); }

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::size_t> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::strtoull(argv[i], nullptr, 0));
  if (sizes.empty()) sizes = {2048, 4096, 16384, 65536, 262144};
  const std::size_t most = *std::max_element(sizes.begin(), sizes.end());
  const auto choice = exanet::core::copy_calibrate(exanet::core::copy_policy::automatic);
  std::printf("# exanet's choice: misaligned copies %s, copies just ahead of their source %s\n",
              choice.vector ? "loop" : "memcpy", choice.backward ? "backward loop" : "memcpy");
  auto* src = static_cast<unsigned char*>(std::aligned_alloc(4096, most + 3 * 4096));
  auto* dst = static_cast<unsigned char*>(std::aligned_alloc(4096, most + 3 * 4096));
  if (!src || !dst) return 1;
  for (std::size_t i = 0; i < most + 3 * 4096; ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
  std::memset(dst, 0, most + 3 * 4096);
  std::printf("%-6s %-7s", "ahead", "copy");
  for (std::size_t n : sizes) std::printf(" %9zu", n);
  std::printf("   (GB/s; ahead = (dst - src) mod 4096)\n");
  int bad = 0;
  for (int ahead : {-16, 0, 4, 8, 16, 24, 28, 32, 40, 48, 56, 64, 96}) {
    for (int which = 0; which < 2; ++which) {
      std::printf("%-6d %-7s", ahead, which ? "exanet" : "memcpy");
      for (std::size_t n : sizes) {
        const unsigned char* s = src + 4096;
        unsigned char* d = dst + 4096 + ahead;
        std::printf(" %9.1f", best_gbps(which ? exanet::core::copy_bytes : libc_copy, d, s, n));
        bad += std::memcmp(d, s, n) != 0;
      }
      std::printf("\n");
    }
  }
  std::free(src);
  std::free(dst);
  if (bad) std::fprintf(stderr, "copy_probe: %d copies were not exact\n", bad);
  return bad ? 1 : 0;
}
