// SPDX-License-Identifier: BSD-2-Clause
// Doubly linked intrusive list: queues of requests and unexpected messages link through hooks
// embedded in the pooled objects, so enqueue and removal never allocate and removal from the
// middle (cancel, match) is O(1).
#pragma once
#include <cstddef>

namespace exanet::core {

struct list_hook {
  list_hook* prev = nullptr;
  list_hook* next = nullptr;
  bool linked() const noexcept { return next != nullptr; }
};

/// T must have a `list_hook` member named by `Hook`. Elements are never owned.
template <class T, list_hook T::*Hook>
class intrusive_list {
 public:
  intrusive_list() noexcept { head_.prev = head_.next = &head_; }
  intrusive_list(const intrusive_list&) = delete;
  intrusive_list& operator=(const intrusive_list&) = delete;
  // Moving re-points the neighbours at the new sentinel (vectors of lists grow on new peers).
  intrusive_list(intrusive_list&& o) noexcept { take(o); }
  intrusive_list& operator=(intrusive_list&& o) noexcept { take(o); return *this; }

  bool empty() const noexcept { return head_.next == &head_; }
  std::size_t size() const noexcept { return size_; }
  T* front() const noexcept { return empty() ? nullptr : owner(head_.next); }
  /// The element after v, or nullptr at the end.
  T* next(T& v) const noexcept {
    const list_hook* h = (v.*Hook).next;
    return h == &head_ ? nullptr : owner(h);
  }

  void push_back(T& v) noexcept { insert_before(&head_, &(v.*Hook)); }
  void remove(T& v) noexcept {
    list_hook* h = &(v.*Hook);
    h->prev->next = h->next;
    h->next->prev = h->prev;
    h->prev = h->next = nullptr;
    --size_;
  }
  T* pop_front() noexcept {
    T* v = front();
    if (v) remove(*v);
    return v;
  }
  /// First element for which pred is true, in insertion order.
  template <class Pred>
  T* find(Pred&& pred) const noexcept {
    for (list_hook* h = head_.next; h != &head_; h = h->next)
      if (pred(*owner(h))) return owner(h);
    return nullptr;
  }
  /// Visits every element; f may remove the element it is given.
  template <class F>
  void for_each(F&& f) {
    for (list_hook* h = head_.next; h != &head_;) {
      list_hook* next = h->next;
      f(*owner(h));
      h = next;
    }
  }

 private:
  static T* owner(const list_hook* h) noexcept {
    const std::size_t off = reinterpret_cast<std::size_t>(&(static_cast<T*>(nullptr)->*Hook));
    return reinterpret_cast<T*>(reinterpret_cast<char*>(const_cast<list_hook*>(h)) - off);
  }
  void insert_before(list_hook* pos, list_hook* h) noexcept {
    h->next = pos;
    h->prev = pos->prev;
    pos->prev->next = h;
    pos->prev = h;
    ++size_;
  }
  void take(intrusive_list& o) noexcept {
    if (o.empty()) {
      head_.prev = head_.next = &head_;
    } else {
      head_ = o.head_;
      head_.next->prev = &head_;
      head_.prev->next = &head_;
    }
    size_ = o.size_;
    o.head_.prev = o.head_.next = &o.head_;
    o.size_ = 0;
  }
  list_hook head_;
  std::size_t size_ = 0;
};

}  // namespace exanet::core
