// SPDX-License-Identifier: BSD-2-Clause
#include "core/checked_memory.hpp"

#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

namespace exanet::core {
namespace {

std::uintptr_t page_bytes() noexcept {
  static const auto bytes = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  return bytes;
}

// The whole pages [from, end) that hold [p, p + len), len > 0; false if the range wraps or
// reaches the top page (never ours, and a length reaching it rounds to 0 pages in the kernel).
bool page_span(const void* p, std::size_t len, std::uintptr_t& from, std::uintptr_t& end) noexcept {
  const auto first = reinterpret_cast<std::uintptr_t>(p);
  if (len - 1 > UINTPTR_MAX - first) return false;
  const std::uintptr_t page = page_bytes();
  from = first & ~(page - 1);
  end = ((first + (len - 1)) & ~(page - 1)) + page;
  return end != 0;
}

}  // namespace

bool range_mapped(const void* p, std::size_t len) noexcept {
  if (len == 0) return true;
  std::uintptr_t from, end;
  if (!page_span(p, len, from, end)) return false;
  // msync fails with ENOMEM on any unmapped page of the range and touches nothing (MS_ASYNC is a
  // no-op for the data since Linux 2.6.19); it needs no buffer, whatever the length.
  return msync(reinterpret_cast<void*>(from), end - from, MS_ASYNC) == 0;
}

bool copy_or_fault(void* dst, const void* src, std::size_t len) noexcept {
  const pid_t self = getpid();
  std::size_t done = 0;
  while (done < len) {
    const iovec local{const_cast<std::byte*>(static_cast<const std::byte*>(src)) + done, len - done};
    const iovec remote{static_cast<std::byte*>(dst) + done, len - done};
    const ssize_t r = process_vm_writev(self, &local, 1, &remote, 1, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;  // EFAULT: a page of either side is not there or not writable
    done += static_cast<std::size_t>(r);
  }
  return true;
}

bool range_readable(const void* p, std::size_t len) noexcept {
  if (len == 0) return true;
  const auto first = reinterpret_cast<std::uintptr_t>(p);
  if (len - 1 > UINTPTR_MAX - first) return false;
  const std::uintptr_t page = page_bytes();
  const std::uintptr_t last = first + (len - 1);
  const pid_t self = getpid();
  // One byte of every page, up to 64 pages per system call.
  constexpr std::size_t batch = 64;
  char sink[batch];
  const std::uintptr_t last_page = last & ~(page - 1);
  std::uintptr_t at = first;  // the next byte to read: the first, then each page's first
  for (bool more = true; more;) {
    iovec remote[batch];
    std::size_t n = 0;
    while (more && n < batch) {
      remote[n++] = {reinterpret_cast<void*>(at), 1};
      more = (at & ~(page - 1)) != last_page;
      at = (at & ~(page - 1)) + page;
    }
    const iovec local{sink, n};
    ssize_t r;
    do {
      r = process_vm_readv(self, &local, 1, remote, n, 0);
    } while (r < 0 && errno == EINTR);
    if (r != static_cast<ssize_t>(n)) return false;
  }
  return true;
}

writable range_writable(void* p, std::size_t len) noexcept {
#ifdef MADV_POPULATE_WRITE
  if (len == 0) return writable::yes;
  std::uintptr_t from, end;
  if (!page_span(p, len, from, end)) return writable::no;
  // EINVAL is also the answer of a kernel that lacks the advice: asked once of a page that is
  // certainly writable.
  static const bool supported = [] {
    void* q = mmap(nullptr, page_bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (q == MAP_FAILED) return false;
    const bool ok = madvise(q, page_bytes(), MADV_POPULATE_WRITE) == 0;
    munmap(q, page_bytes());
    return ok;
  }();
  if (!supported) return writable::unknown;
  int rc;
  do {
    rc = madvise(reinterpret_cast<void*>(from), end - from, MADV_POPULATE_WRITE);
  } while (rc != 0 && errno == EINTR);
  return rc == 0 ? writable::yes : writable::no;
#else
  (void)p;
  (void)len;
  return writable::unknown;
#endif
}

}  // namespace exanet::core
