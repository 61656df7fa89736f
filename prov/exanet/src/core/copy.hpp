// SPDX-License-Identifier: BSD-2-Clause
// Byte copies whose speed does not depend on where the user's buffers sit (issue 17).
//
// Two placements make glibc's memcpy slow, and users place their buffers where they like:
//   - a destination a little AHEAD of its source modulo a page: (dst - src) mod 4096 in 1..63.
//     The copy's loads then share their low 12 address bits with stores it has just issued, and
//     the core stalls each load on a store it cannot forward ("4K aliasing"). On the Zen 5 these
//     benchmarks run on, a 4-256 KiB memcpy runs at about 2 GB/s instead of 40-80 at distances
//     4-28, and 2-5 times slower at 36-60 (BENCHMARKS.md, 2026-11-27). Copying from the end
//     backwards never loads behind its own recent stores, so it cannot alias that way: such
//     copies take a backward loop when this CPU's memcpy was measured slower than it.
//   - source and destination disagreeing within a cache line, where `rep movsb` may take a
//     slower microcoded path (20-40% on this Zen 5, several times on earlier cores): these take
//     a forward loop of unaligned loads and aligned stores if memcpy was measured slower.
// Short copies (below 2 KiB) always go to memcpy, which is fast there whatever the placement.
// The staging areas of the device place data at the destination's offset within a cache line,
// so one of the two copies of a staged transfer is always mutually aligned.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace exanet::core {

/// How copies at the two placements above are made.
enum class copy_policy : std::uint8_t {
  automatic,  // measured once per process (copy_calibrate)
  libc,       // always memcpy
  vector,     // always exanet's loops
};

/// What copy_calibrate found and chose, for logs and benchmarks.
struct copy_choice {
  bool vector = false;         // misaligned copies take the forward loop
  double libc_ns = 0;          // best time of one misaligned 64 KiB memcpy (0: not measured)
  double vector_ns = 0;        // the same copy through the forward loop
  bool backward = false;       // copies to just ahead of their source take the backward loop
  double ahead_libc_ns = 0;    // best time of one 64 KiB memcpy to 16 bytes ahead of its source
  double ahead_loop_ns = 0;    // the same copy through the backward loop
  const char* isa = "none";    // the loops' instruction set: "avx2", "sse2" or "none"
};

/// Applies a policy for the whole process; automatic measures once (about a millisecond), later
/// calls return the first answer. Thread-safe; copies made before it use memcpy.
copy_choice copy_calibrate(copy_policy p) noexcept;

namespace detail {
inline constexpr std::size_t cache_line = 64;
/// Below this memcpy never uses `rep movsb` (glibc's threshold is 2-8 KiB) and wins anyway.
inline constexpr std::size_t vector_copy_min = 2048;
// Set once by copy_calibrate; atomic because a later domain may calibrate while another
// thread copies (a relaxed load is a plain load on x86).
extern std::atomic<bool> misaligned_vector;
extern std::atomic<bool> ahead_backward;
/// Below this distance ahead (modulo a page) a destination makes memcpy's loads alias its stores.
inline constexpr std::uintptr_t alias_page = 4096, alias_reach = 64;
/// n >= vector_copy_min: the forward loop (unaligned loads, aligned stores).
void copy_misaligned(void* dst, const void* src, std::size_t n) noexcept;
/// n >= vector_copy_min: the same from the last byte down.
void copy_backward(void* dst, const void* src, std::size_t n) noexcept;
}  // namespace detail

/// True when dst lies 1..63 bytes ahead of src modulo a page: a forward copy from src to dst
/// makes its loads alias the stores it has just made (see above). Also the DMA engine's placement
/// class (dev/emu/dma_engine_choice.hpp).
constexpr bool page_aliased(std::uintptr_t dst, std::uintptr_t src) noexcept {
  // 0 wraps to the top and is not taken.
  return ((dst - src) & (detail::alias_page - 1)) - 1 < detail::alias_reach - 1;
}

/// memcpy for non-overlapping buffers, at full speed whatever their alignment.
inline void copy_bytes(void* dst, const void* src, std::size_t n) noexcept {
  const auto d = reinterpret_cast<std::uintptr_t>(dst), s = reinterpret_cast<std::uintptr_t>(src);
  if (n >= detail::vector_copy_min) [[unlikely]] {
    if (page_aliased(d, s) && detail::ahead_backward.load(std::memory_order_relaxed)) {
      detail::copy_backward(dst, src, n);
      return;
    }
    if (((d ^ s) & (detail::cache_line - 1)) != 0 &&
        detail::misaligned_vector.load(std::memory_order_relaxed)) {
      detail::copy_misaligned(dst, src, n);
      return;
    }
  }
  std::memcpy(dst, src, n);
}

/// Copies n <= 64 bytes (a packet's payload) inline: at most two overlapping loads and stores of
/// each width, no library call (a call to memcpy costs more than the copy at these sizes).
inline void copy_small(void* dst, const void* src, std::size_t n) noexcept {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  // Each branch loads both pieces before storing either, so it is right for any n in its range.
  auto two = [&](auto word) {
    decltype(word) head, tail;
    std::memcpy(&head, s, sizeof word);
    std::memcpy(&tail, s + n - sizeof word, sizeof word);
    std::memcpy(d, &head, sizeof word);
    std::memcpy(d + n - sizeof word, &tail, sizeof word);
  };
  struct b16 { std::uint64_t a, b; };
  struct b32 { b16 a, b; };
  if (n >= 32) two(b32{});
  else if (n >= 16) two(b16{});
  else if (n >= 8) two(std::uint64_t{});
  else if (n >= 4) two(std::uint32_t{});
  else if (n >= 2) two(std::uint16_t{});
  else if (n == 1) *d = *s;
}

/// The byte offset within a cache line, which staging areas copy so the copy out is aligned.
constexpr std::size_t line_offset(std::uint64_t addr) noexcept {
  return static_cast<std::size_t>(addr & (detail::cache_line - 1));
}

}  // namespace exanet::core
