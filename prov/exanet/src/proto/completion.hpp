// SPDX-License-Identifier: BSD-2-Clause
// How the protocols report finished operations upward without knowing the fi/ objects. A
// completion goes into a completion_ring that the CQ owns, written inline by the protocol (no
// call through a pointer for the common entry: that call, its frame and a second copy of the
// entry were a tenth of an 8 B MPI message's provider instructions); whoever must hear of a
// push (a thread asleep in fi_cq_sread, a wait fd armed by fi_trywait, a wait set) makes the
// ring call its owner back. Counters are a (object, function) pair fixed when the endpoint is
// bound (STYLE.md rule 10): no virtual dispatch.
#pragma once
#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include "core/lock.hpp"

namespace exanet::proto {

/// One finished operation. Flags use libfabric's completion flag values (FI_SEND, FI_RECV,
/// FI_TAGGED, FI_MSG, FI_REMOTE_CQ_DATA, FI_MULTI_RECV ...).
struct completion {
  void* context = nullptr;
  std::uint64_t flags = 0;
  std::size_t len = 0;        // bytes delivered (after truncation)
  void* buf = nullptr;        // FI_MULTI_RECV: where this message starts; else null
  std::uint64_t data = 0;     // remote CQ data when flags has FI_REMOTE_CQ_DATA
  std::uint64_t tag = 0;      // the sender's full tag
  std::uint64_t src = ~0ull;  // fi_addr_t of the sender, or FI_ADDR_NOTAVAIL
  int err = 0;                // positive FI_E* value; 0 for success
  int prov_errno = 0;
  std::size_t olen = 0;       // FI_ETRUNC: bytes that did not fit
};

/// The entries of one completion queue, in the order they were pushed, successes and errors
/// alike. The protocols push; the owner (fi_cq) reads the front and pops under lock(). A push
/// returns nothing to check: a full ring doubles (only out of memory is the entry dropped, as
/// before this ring). Not copyable: endpoints hold its address.
class completion_ring {
 public:
  /// Called after a push, outside the lock, while some watch() is standing.
  using hook_fn = void (*)(void* owner) noexcept;

  completion_ring() = default;
  completion_ring(const completion_ring&) = delete;
  completion_ring& operator=(const completion_ring&) = delete;

  /// Room for at least n entries (a power of two); before any push. Throws std::bad_alloc or
  /// std::length_error (control path).
  void reserve(std::size_t n) {
    const std::size_t cap = std::bit_ceil(std::max<std::size_t>(n, 1));
    slots_ = std::make_unique<completion[]>(cap);
    mask_ = cap - 1;
    head_ = count_ = 0;
  }
  void enable_lock(bool on) noexcept { lock_.enable(on); }
  void set_hook(void* owner, hook_fn fn) noexcept {
    owner_ = owner;
    hook_ = fn;
  }

  /// A party that must hear of every push from now on (a sleeper, an armed fd, a wait set)
  /// counts itself in, and out when it no longer must. push reads the count under the lock
  /// (seq_cst): a sleeper that counted itself in before its last look at size() under the lock
  /// either saw the entry or is called.
  void watch() noexcept { watchers_.fetch_add(1, std::memory_order_seq_cst); }
  void unwatch() noexcept { watchers_.fetch_sub(1, std::memory_order_seq_cst); }
  /// For a wake word that counts its sleepers here too (fi/wait.hpp).
  std::atomic<std::uint32_t>& watchers() noexcept { return watchers_; }

  void push(const completion& c) noexcept {
    bool tell;
    {
      core::level_guard g(lock_);
      // Full (mask + 1 entries): grow, or, out of memory, drop.
      if (count_ > mask_ && !grow()) [[unlikely]] return;
      put(slots_[(head_ + count_) & mask_], c);
      ++count_;
      tell = watchers_.load(std::memory_order_seq_cst) != 0;
    }
    if (tell) [[unlikely]] hook_(owner_);
  }

  /// The reader's side: under lock() (or with the lock off, from the one thread allowed).
  core::level_lock& lock() noexcept { return lock_; }
  std::size_t size() const noexcept { return count_; }
  const completion& front() const noexcept { return slots_[head_]; }
  void pop() noexcept {
    head_ = (head_ + 1) & mask_;
    --count_;
  }

 private:
  // Field by field, not as one struct copy: the caller builds c in place just before, and a
  // struct copy moves it in 16-byte loads that each read two 8-byte stores still in flight (the
  // store buffer cannot forward those), where fields copied one by one go from register to slot.
  [[gnu::always_inline]] static void put(completion& to, const completion& c) noexcept {
    to.context = c.context;
    to.flags = c.flags;
    to.len = c.len;
    to.buf = c.buf;
    to.data = c.data;
    to.tag = c.tag;
    to.src = c.src;
    to.err = c.err;
    to.prov_errno = c.prov_errno;
    to.olen = c.olen;
  }
  static_assert(sizeof(completion) == 72, "put() copies every field");

  [[gnu::cold, gnu::noinline]] bool grow() noexcept {
    const std::size_t cap = std::max<std::size_t>((mask_ + 1) * 2, 64);
    std::unique_ptr<completion[]> bigger(new (std::nothrow) completion[cap]);
    if (!bigger) return false;
    for (std::size_t i = 0; i < count_; ++i) bigger[i] = slots_[(head_ + i) & mask_];
    slots_ = std::move(bigger);
    mask_ = cap - 1;
    head_ = 0;
    return true;
  }

  core::level_lock lock_;
  std::unique_ptr<completion[]> slots_;
  std::size_t mask_ = 0, head_ = 0, count_ = 0;  // a power of two minus one; positions wrap
  std::atomic<std::uint32_t> watchers_{0};
  void* owner_ = nullptr;
  hook_fn hook_ = nullptr;
};

/// Where completions of one direction go (a CQ's ring). write() cannot fail.
struct completion_sink {
  completion_ring* ring = nullptr;
  explicit operator bool() const noexcept { return ring != nullptr; }
  void write(const completion& c) const noexcept { ring->push(c); }
};

/// A counter bound to an event class (FI_SEND, FI_RECV, ...).
struct counter_sink {
  void* self = nullptr;
  void (*add)(void* self, bool error) noexcept = nullptr;
  explicit operator bool() const noexcept { return add != nullptr; }
};

}  // namespace exanet::proto
