// SPDX-License-Identifier: BSD-2-Clause
// Heap buffers in power-of-two size classes, kept after release for the next acquire, up to a
// bound in bytes and in buffers per class. The unexpected-message path takes one buffer per
// medium message (1 B up to medium_max, 8 KiB by default): glibc serves sizes above its
// per-thread cache (1 KiB) from its bins, and the malloc/free pair then costs about as much as
// copying the message. Buffers start on a cache line, so copies into them are line-aligned.
// Single-threaded: the owner serialises access (an endpoint under its lock).
#pragma once
#include <array>
#include <bit>
#include <cstddef>
#include <cstdlib>
#include <vector>

namespace exanet::core {

class buffer_cache {
 public:
  static constexpr unsigned min_class = 6;   // 64 B
  static constexpr unsigned max_class = 20;  // 1 MiB: larger buffers are not kept
  static constexpr std::size_t per_class = 64;

  explicit buffer_cache(std::size_t keep_bytes = std::size_t{1} << 20) : keep_bytes_(keep_bytes) {
    for (auto& f : free_) f.reserve(per_class);  // release never allocates
  }
  buffer_cache(const buffer_cache&) = delete;
  buffer_cache& operator=(const buffer_cache&) = delete;
  ~buffer_cache() { trim(); }

  /// A buffer of at least len bytes (release it with the same len), or nullptr.
  std::byte* acquire(std::size_t len) noexcept {
    const unsigned c = class_of(len);
    if (c <= max_class) {
      auto& f = free_[c - min_class];
      if (!f.empty()) {
        std::byte* b = f.back();
        f.pop_back();
        kept_ -= size_of(c);
        return b;
      }
    }
    // Above max_class: the length rounded up to a line (aligned_alloc needs a multiple).
    const std::size_t bytes = c <= max_class ? size_of(c) : (len + 63) / 64 * 64;
    return static_cast<std::byte*>(std::aligned_alloc(64, bytes));
  }

  void release(std::byte* b, std::size_t len) noexcept {
    if (!b) return;
    const unsigned c = class_of(len);
    if (c <= max_class) {
      auto& f = free_[c - min_class];
      if (f.size() < per_class && kept_ + size_of(c) <= keep_bytes_) {
        f.push_back(b);
        kept_ += size_of(c);
        return;
      }
    }
    std::free(b);
  }

  /// Frees every kept buffer.
  void trim() noexcept {
    for (auto& f : free_) {
      for (std::byte* b : f) std::free(b);
      f.clear();
    }
    kept_ = 0;
  }

  std::size_t kept_bytes() const noexcept { return kept_; }

  static unsigned class_of(std::size_t len) noexcept {
    const unsigned c = len <= 1 ? 0u : static_cast<unsigned>(std::bit_width(len - 1));
    if (c < min_class) return min_class;
    return c > max_class ? max_class + 1 : c;  // max_class + 1: not kept
  }

 private:
  static std::size_t size_of(unsigned c) noexcept { return std::size_t{1} << c; }

  std::array<std::vector<std::byte*>, max_class - min_class + 1> free_;
  std::size_t keep_bytes_;
  std::size_t kept_ = 0;
};

}  // namespace exanet::core
