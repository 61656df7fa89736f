// SPDX-License-Identifier: BSD-2-Clause
// Fixed-address object pool: requests and unexpected records are acquired and released on the
// data path without touching the heap; the pool grows by whole chunks in a cold function, and
// objects never move, so wire ids (index + generation) stay valid while in use. A pool of things
// that peers' packets create has a limit (set from the endpoint's attributes): it grows on
// demand up to the limit and no further, so memory is paid only for what is used and never
// exceeds the bound (issue 12 part 5).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

namespace exanet::core {

template <class T>
class pool {
 public:
  explicit pool(std::size_t chunk = 256, std::size_t limit = unlimited)
      : chunk_(chunk ? chunk : 1), limit_(limit) {}
  static constexpr std::size_t unlimited = ~std::size_t{0};
  pool(const pool&) = delete;
  pool& operator=(const pool&) = delete;
  ~pool() = default;

  /// Returns a default-constructed T, or nullptr when memory is exhausted or limit() objects are
  /// in use.
  T* acquire() noexcept {
    if (free_.empty() && !grow()) return nullptr;
    slot* s = free_.back();
    free_.pop_back();
    s->in_use = true;
    ++s->generation;
    ::new (&s->storage) T();
    ++in_use_;
    return s->object();
  }

  void release(T* obj) noexcept {
    slot* s = reinterpret_cast<slot*>(reinterpret_cast<char*>(obj) - offsetof(slot, storage));
    obj->~T();
    s->in_use = false;
    free_.push_back(s);  // capacity reserved in grow(): never allocates
    --in_use_;
  }

  /// A 64-bit id that names obj on the wire: (index << 24) | (generation & 0xffffff).
  std::uint64_t id_of(const T* obj) const noexcept {
    const slot* s =
        reinterpret_cast<const slot*>(reinterpret_cast<const char*>(obj) - offsetof(slot, storage));
    return (std::uint64_t{s->index} << 24) | (s->generation & 0xffffff);
  }

  /// The object an id names, or nullptr if it was released or reused since (stale or forged id).
  T* from_id(std::uint64_t id) const noexcept {
    const std::uint64_t index = id >> 24;
    if (index >= slots_.size()) return nullptr;
    slot* s = slots_[index];
    if (!s->in_use || (s->generation & 0xffffff) != (id & 0xffffff)) return nullptr;
    return s->object();
  }

  std::size_t in_use() const noexcept { return in_use_; }
  /// Objects ever constructed storage for (what the pool costs in memory).
  std::size_t capacity() const noexcept { return slots_.size(); }
  std::size_t limit() const noexcept { return limit_; }
  /// At most n objects in use at once. Cold: called at open, before any acquire.
  void set_limit(std::size_t n) noexcept { limit_ = n; }

 private:
  struct slot {
    alignas(T) unsigned char storage[sizeof(T)];
    std::uint32_t index = 0;
    std::uint32_t generation = 0;
    bool in_use = false;
    T* object() noexcept { return std::launder(reinterpret_cast<T*>(&storage)); }
  };

  [[gnu::cold, gnu::noinline]] bool grow() noexcept try {
    if (slots_.size() >= limit_) return false;
    const std::size_t n = std::min(chunk_, limit_ - slots_.size());  // the last chunk may be short
    auto chunk = std::make_unique<slot[]>(n);
    slots_.reserve(slots_.size() + n);
    free_.reserve(slots_.size() + n);
    for (std::size_t i = 0; i < n; ++i) {
      chunk[i].index = static_cast<std::uint32_t>(slots_.size());
      slots_.push_back(&chunk[i]);
    }
    for (std::size_t i = n; i-- > 0;) free_.push_back(&chunk[i]);
    chunks_.push_back(std::move(chunk));
    return true;
  } catch (...) {
    return false;
  }

  std::size_t chunk_;
  std::size_t limit_;
  std::size_t in_use_ = 0;
  std::vector<std::unique_ptr<slot[]>> chunks_;
  std::vector<slot*> slots_;
  std::vector<slot*> free_;
};

}  // namespace exanet::core
