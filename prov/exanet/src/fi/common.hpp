// SPDX-License-Identifier: BSD-2-Clause
// Shared vocabulary of the fi/ layer: the guard at the C boundary, casts from fid pointers, and the
// progress hook that CQs and counters use to drive the endpoints bound to them (manual progress).
#pragma once
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <sys/uio.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstddef>
#include <new>

#include "core/status.hpp"

namespace exanet::fi {

// core::status values are negated errno numbers; libfabric's are the same numbers.
static_assert(FI_EAGAIN == EAGAIN && FI_EINVAL == EINVAL && FI_ENOMEM == ENOMEM &&
              FI_ENOMSG == ENOMSG && FI_ECANCELED == ECANCELED && FI_EACCES == EACCES &&
              FI_ETRUNC == 265 && FI_ENOSYS == ENOSYS && FI_ECONNRESET == ECONNRESET &&
              FI_EHOSTUNREACH == EHOSTUNREACH && FI_EIO == EIO && FI_ENOENT == ENOENT &&
              FI_EOPNOTSUPP == EOPNOTSUPP);

/// Runs control-path code that may allocate; nothing escapes into C callers.
template <class F>
int fi_guard(F&& f) noexcept try {
  return static_cast<int>(f());
} catch (const std::bad_alloc&) {
  return -FI_ENOMEM;
} catch (...) {
  return -FI_EOTHER;
}

/// Every fi object is a standard-layout class whose first member is its fid struct; this is the
/// only cast between the two.
template <class T, class Fid>
T& from_fid(Fid* f) noexcept {
  return *reinterpret_cast<T*>(f);
}

/// Checks the iovecs of a data-path call and sums them: at most `limit` entries, no NULL base
/// with a length, a total that neither wraps size_t nor exceeds `max_total`. -FI_EINVAL for a
/// malformed array, -FI_EMSGSIZE for a total over the limit; nothing is posted either way.
inline int check_iov(const iovec* iov, std::size_t count, std::size_t limit, std::size_t max_total,
                     std::size_t& total) noexcept {
  total = 0;
  if (count > limit || (count && !iov)) return -FI_EINVAL;
  for (std::size_t i = 0; i < count; ++i) {
    if (iov[i].iov_len && !iov[i].iov_base) return -FI_EINVAL;
    if (iov[i].iov_len > SIZE_MAX - total) return -FI_EINVAL;  // the sum would wrap
    total += iov[i].iov_len;
  }
  return total > max_total ? -FI_EMSGSIZE : 0;
}

/// How a transfer was asked for. The inject calls (fi_inject, fi_tinject, fi_injectdata,
/// fi_inject_write, ...) never write a completion (fi_msg(3), fi_rma(3)). Every other call does,
/// FI_INJECT among its flags or not (that flag only returns the buffer to the caller at once),
/// unless selective completion leaves FI_COMPLETION out.
enum class call_family { ordinary, inject };

/// What an idle endpoint gives a thread about to sleep on it: the futex word its device's peers
/// on this host change and the word's value now, and, when its network side is on, the fd that
/// turns readable on a network arrival (dev::sleep_descriptor).
struct sleep_target {
  const std::atomic<std::uint32_t>* word = nullptr;
  std::uint32_t expected = 0;
  int fd = -1;
  bool word_in_use = true;  // with fd: peers may still change the word, which poll(2) cannot see
  int word_fd = -1;         // readable once peers changed the word (dev::sleep_descriptor)
  // In: the sleeper blocks in the application's own poll(2) on a wait fd (fi_trywait), so the
  // descriptors must cover every arrival (the word is not looked at).
  bool app_polls = false;
  // Out, with app_polls: a progress thread serves the endpoint (its completions signal the wait
  // fd): nothing was announced and no sleep_end follows.
  bool served = false;
  std::uint32_t look_again_ms = 0;  // out: come back within this (0: no need)
};

/// The sooner of two look_again_ms bounds, 0 meaning none.
constexpr std::uint32_t sooner_look(std::uint32_t a, std::uint32_t b) noexcept {
  return a == 0 ? b : b == 0 ? a : (a < b ? a : b);
}

/// Something a CQ or counter read must progress (an endpoint, under manual progress). The
/// other three let a blocking wait sleep until the endpoint has something (fi/wait.hpp,
/// arrival_sleep); entries without progress only hold the object open.
struct progress_source {
  void* self = nullptr;
  void (*progress)(void* self) noexcept = nullptr;
  /// True: idle, and a sleeper announced (target says on what); false: progress instead.
  bool (*sleep_prepare)(void* self, sleep_target& target) noexcept = nullptr;
  void (*sleep_end)(void* self) noexcept = nullptr;
  /// The periodic checks an idle progress makes now and then (a sleeper woke up: do them now).
  void (*timers)(void* self) noexcept = nullptr;
  friend bool operator==(const progress_source& a, const progress_source& b) noexcept {
    return a.self == b.self;
  }
};

}  // namespace exanet::fi
