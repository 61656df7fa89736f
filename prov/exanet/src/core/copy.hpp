// SPDX-License-Identifier: BSD-2-Clause
// Byte copies whose speed does not depend on where the user's buffers sit (issue 17).
//
// glibc copies large blocks with `rep movsb`. On AMD cores that instruction is fast only when
// source and destination share their position within a cache line; otherwise it takes a slower
// microcoded path: 20-40% slower on the Zen 5 these benchmarks run on, several times slower on
// earlier cores (a 1 MiB staged copy at 16 bytes past a page took 7x as long as at 0 in the
// issue's measurement). Every data path of exanet copies user memory, and users place their
// buffers where they like, so:
//   - copies between mutually aligned buffers, and short ones, go to memcpy (its best case);
//   - the others take a loop of unaligned loads and aligned stores, which cannot fall into that
//     path, if this CPU's memcpy was measured slower than the loop for them (copy_calibrate), or
//     if the user asked for it.
// The staging areas of the device place data at the destination's offset within a cache line,
// so one of the two copies of a staged transfer is always mutually aligned.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace exanet::core {

/// How copies between buffers that disagree within a cache line are made.
enum class copy_policy : std::uint8_t {
  automatic,  // measured once per process (copy_calibrate)
  libc,       // always memcpy
  vector,     // always the aligned-store loop
};

/// What copy_calibrate found and chose, for logs and benchmarks.
struct copy_choice {
  bool vector = false;         // misaligned copies take the loop
  double libc_ns = 0;          // best time of one misaligned 64 KiB memcpy (0: not measured)
  double vector_ns = 0;        // the same copy through the loop
  const char* isa = "none";    // the loop's instruction set: "avx2", "sse2" or "none"
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
void copy_misaligned(void* dst, const void* src, std::size_t n) noexcept;
}  // namespace detail

/// memcpy for non-overlapping buffers, at full speed whatever their alignment.
inline void copy_bytes(void* dst, const void* src, std::size_t n) noexcept {
  const auto skew = (reinterpret_cast<std::uintptr_t>(dst) ^ reinterpret_cast<std::uintptr_t>(src)) &
                    (detail::cache_line - 1);
  if (n >= detail::vector_copy_min && skew != 0 &&
      detail::misaligned_vector.load(std::memory_order_relaxed)) [[unlikely]] {
    detail::copy_misaligned(dst, src, n);
    return;
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
