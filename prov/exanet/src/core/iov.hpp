// SPDX-License-Identifier: BSD-2-Clause
// Scatter/gather copies between an iovec list and a flat buffer, starting at a byte offset into the
// list. Every message path uses these, so truncation and partial rendezvous segments share one
// bounds-checked implementation.
#pragma once
#include <sys/uio.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "core/copy.hpp"

namespace exanet::core {

inline std::size_t iov_length(std::span<const iovec> iov) noexcept {
  std::size_t n = 0;
  for (const iovec& v : iov) n += v.iov_len;
  return n;
}

/// The address of the first byte an iovec list describes (0 if it describes none): where a
/// copy from or to the list starts, which decides its alignment.
inline std::uintptr_t first_byte(std::span<const iovec> iov) noexcept {
  for (const iovec& v : iov)
    if (v.iov_len) return reinterpret_cast<std::uintptr_t>(v.iov_base);
  return 0;
}

/// Copies up to len bytes from iov (starting offset bytes in) to dst; returns bytes copied.
inline std::size_t copy_from_iov(void* dst, std::span<const iovec> iov, std::size_t offset,
                                 std::size_t len) noexcept {
  auto* out = static_cast<std::byte*>(dst);
  std::size_t done = 0;
  for (const iovec& v : iov) {
    if (done == len) break;
    if (offset >= v.iov_len) { offset -= v.iov_len; continue; }
    const std::size_t n = std::min(v.iov_len - offset, len - done);
    copy_bytes(out + done, static_cast<const std::byte*>(v.iov_base) + offset, n);
    done += n;
    offset = 0;
  }
  return done;
}

/// Copies up to len bytes from src into iov (starting offset bytes in); returns bytes copied.
inline std::size_t copy_to_iov(std::span<const iovec> iov, std::size_t offset, const void* src,
                               std::size_t len) noexcept {
  auto* in = static_cast<const std::byte*>(src);
  std::size_t done = 0;
  for (const iovec& v : iov) {
    if (done == len) break;
    if (offset >= v.iov_len) { offset -= v.iov_len; continue; }
    const std::size_t n = std::min(v.iov_len - offset, len - done);
    copy_bytes(static_cast<std::byte*>(v.iov_base) + offset, in + done, n);
    done += n;
    offset = 0;
  }
  return done;
}

/// The slice [offset, offset + len) of an iovec list as at most max iovecs; returns how many.
/// Cross-memory attach takes lists, so the DMA paths describe user buffers without copying.
inline std::size_t slice_iov(std::span<const iovec> src, std::size_t offset, std::size_t len,
                             iovec* out, std::size_t max) noexcept {
  std::size_t n = 0;
  for (const iovec& v : src) {
    if (len == 0 || n == max) break;
    if (offset >= v.iov_len) { offset -= v.iov_len; continue; }
    const std::size_t take = std::min(v.iov_len - offset, len);
    out[n++] = {static_cast<std::byte*>(v.iov_base) + offset, take};
    len -= take;
    offset = 0;
  }
  return n;
}

}  // namespace exanet::core
