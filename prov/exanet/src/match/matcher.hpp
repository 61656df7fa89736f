// SPDX-License-Identifier: BSD-2-Clause
// The tag-matching engine (DESIGN.md §4, "Matching cost"): posted receives sit in a queue per
// source peer or, for FI_ADDR_UNSPEC, in one wildcard queue; unexpected messages sit in a queue per
// source and in one arrival-ordered queue. Sequence numbers decide between queues, so the earliest
// posted matching receive wins (fi_tagged(3)) without a global scan.
//
// Matching looks up rather than scans where it can: a directed receive without ignore bits also
// sits in a hash bucket of (source, tag), one with ignore bits in its source's short list of wide
// receives; unexpected messages sit in the bucket of their (source, tag) too. A message then
// visits its bucket, its source's wide receives and the wildcard queue, however many receives
// with other tags its source has posted (UCX indexes exact tags the same way).
//
// Pure data structure: it owns nothing, allocates only when a new peer appears, and knows nothing
// of devices or libfabric.
#pragma once
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "core/intrusive_list.hpp"

namespace exanet::match {

using source_id = std::uint32_t;
inline constexpr source_id any_source = ~source_id{0};

constexpr bool tag_matches(std::uint64_t want, std::uint64_t ignore, std::uint64_t got) noexcept {
  return ((want ^ got) & ~ignore) == 0;
}

/// Embedded in a posted receive.
struct posted_entry {
  core::list_hook hook;      // its source's queue (or the wildcard queue), in posting order
  core::list_hook key_hook;  // directed: its (source, tag) bucket, or its source's wide list
  std::uint64_t seq = 0;  // posting order
  source_id source = any_source;
  std::uint64_t tag = 0;
  std::uint64_t ignore = 0;
  bool matches(source_id src, std::uint64_t t) const noexcept {
    return (source == any_source || source == src) && tag_matches(tag, ignore, t);
  }
};

/// Embedded in an unexpected message record.
struct unexpected_entry {
  core::list_hook peer_hook;
  core::list_hook all_hook;
  core::list_hook key_hook;  // identified sender: the bucket of its (source, tag)
  std::uint64_t seq = 0;  // arrival order
  source_id source = any_source;  // any_source: the sender could not be identified
  std::uint64_t tag = 0;
};

class matcher {
 public:
  /// Queues a receive. May allocate when e.source is a peer never seen before (throws
  /// std::bad_alloc; call ensure_source first on paths that must not throw). Inline: every
  /// receive posts.
  void post(posted_entry& e) {
    if (!ensure_source(e.source)) [[unlikely]] throw std::bad_alloc();
    e.seq = post_seq_++;
    if (e.source == any_source) {
      wildcard_.push_back(e);
    } else {
      posted_[e.source].push_back(e);
      key_queue_of(e).push_back(e);
    }
    ++posted_count_;
  }
  /// Makes per-source queues exist up to src; false if memory ran out. Inline: every post asks.
  bool ensure_source(source_id src) noexcept {
    // posted_ grows last (grow_sources), so its size bounds the other per-source vectors'.
    return src == any_source || src < posted_.size() || grow_sources(src);
  }

  /// Removes and returns the earliest-posted receive matching a message, or nullptr.
  posted_entry* take_posted(source_id src, std::uint64_t tag) noexcept;
  /// The earliest-posted receive matching a message, left in place. Inline, as remove_posted:
  /// every arriving message asks (take_posted of the protocol).
  [[gnu::always_inline]] posted_entry* peek_posted(source_id src, std::uint64_t tag) const noexcept {
    auto match = [&](const posted_entry& e) { return e.matches(src, tag); };
    auto earlier = [](posted_entry* a, posted_entry* b) {
      return !a || (b && b->seq < a->seq) ? b : a;
    };
    posted_entry* best = wildcard_.empty() ? nullptr : wildcard_.find(match);
    if (src < posted_.size()) {
      // Each queue is in posting order: its first match is its earliest.
      best = earlier(best, buckets_[bucket_of(src, tag)].find([&](const posted_entry& e) {
        return e.source == src && e.tag == tag;
      }));
      if (!wide_[src].empty()) best = earlier(best, wide_[src].find(match));
    }
    return best;
  }
  void remove_posted(posted_entry& e) noexcept {
    if (e.source == any_source) {
      wildcard_.remove(e);
    } else {
      posted_[e.source].remove(e);
      key_queue_of(e).remove(e);
    }
    --posted_count_;
  }

  /// Records a message no posted receive matched. False only if memory for a new source's queue
  /// ran out (the message is then not recorded).
  [[nodiscard]] bool add_unexpected(unexpected_entry& u) noexcept;
  /// The earliest-arrived unexpected message a receive (src or any_source, tag, ignore) matches.
  unexpected_entry* find_unexpected(source_id src, std::uint64_t tag,
                                    std::uint64_t ignore) const noexcept {
    // Inline for the common answer: a program that keeps up has nothing unexpected.
    return all_unexpected_.empty() ? nullptr : search_unexpected(src, tag, ignore);
  }
  void remove_unexpected(unexpected_entry& u) noexcept;
  bool has_unexpected() const noexcept { return !all_unexpected_.empty(); }

  std::size_t posted_count() const noexcept { return posted_count_; }
  std::size_t unexpected_count() const noexcept { return all_unexpected_.size(); }

  /// Visits every posted receive (cold paths: endpoint close, dead peer); f may remove it.
  template <class F>
  void for_each_posted(F&& f) {
    wildcard_.for_each(f);
    for (auto& q : posted_) q.for_each(f);
  }
  /// Visits the receives that could take a message (src, tag): src's receives for exactly that
  /// tag, src's receives with ignore bits, and the wildcard queue. Not in posting order (compare
  /// seq); f must not remove entries.
  template <class F>
  void for_each_posted_for(source_id src, std::uint64_t tag, F&& f) {
    wildcard_.for_each(f);
    if (src >= posted_.size()) return;
    buckets_[bucket_of(src, tag)].for_each([&](posted_entry& e) {
      if (e.source == src && e.tag == tag) f(e);
    });
    wide_[src].for_each(f);
  }
  /// Visits, in posting order, the receives posted for one source (any_source: the wildcard
  /// queue); f may remove the entry it is given.
  template <class F>
  void for_each_posted_at(source_id src, F&& f) {
    if (src == any_source) wildcard_.for_each(f);
    else if (src < posted_.size()) posted_[src].for_each(f);
  }
  template <class F>
  void for_each_unexpected(F&& f) {
    all_unexpected_.for_each(f);
  }

 private:
  using posted_queue = core::intrusive_list<posted_entry, &posted_entry::hook>;
  using posted_key_queue = core::intrusive_list<posted_entry, &posted_entry::key_hook>;
  using peer_unexpected_queue = core::intrusive_list<unexpected_entry, &unexpected_entry::peer_hook>;
  using all_unexpected_queue = core::intrusive_list<unexpected_entry, &unexpected_entry::all_hook>;
  using unexpected_key_queue = core::intrusive_list<unexpected_entry, &unexpected_entry::key_hook>;
  static constexpr std::size_t bucket_count = 1024;  // power of two

  static std::size_t bucket_of(source_id src, std::uint64_t tag) noexcept {
    std::uint64_t h = tag * 0x9e3779b97f4a7c15ull ^ std::uint64_t{src} * 0xc2b2ae3d27d4eb4full;
    h ^= h >> 29;
    return static_cast<std::size_t>(h) & (bucket_count - 1);
  }
  [[gnu::cold, gnu::noinline]] bool grow_sources(source_id src) noexcept;
  unexpected_entry* search_unexpected(source_id src, std::uint64_t tag,
                                      std::uint64_t ignore) const noexcept;
  posted_key_queue& key_queue_of(const posted_entry& e) noexcept {
    return e.ignore ? wide_[e.source] : buckets_[bucket_of(e.source, e.tag)];
  }

  std::vector<posted_queue> posted_;  // indexed by source
  std::vector<posted_key_queue> wide_;  // indexed by source: directed receives with ignore bits
  std::vector<posted_key_queue> buckets_ = std::vector<posted_key_queue>(bucket_count);
  std::vector<unexpected_key_queue> unexpected_buckets_ =
      std::vector<unexpected_key_queue>(bucket_count);
  posted_queue wildcard_;
  std::vector<peer_unexpected_queue> unexpected_;  // indexed by source
  all_unexpected_queue all_unexpected_;
  std::uint64_t post_seq_ = 0;
  std::uint64_t arrival_seq_ = 0;
  std::size_t posted_count_ = 0;
};

}  // namespace exanet::match
