// SPDX-License-Identifier: BSD-2-Clause
#include "match/matcher.hpp"

#include <new>

namespace exanet::match {

bool matcher::grow_sources(source_id src) noexcept try {
  // posted_ last: ensure_source takes its size as proof that the others are as large.
  if (src >= wide_.size()) wide_.resize(std::size_t{src} + 1);
  if (src >= unexpected_.size()) unexpected_.resize(std::size_t{src} + 1);
  if (src >= posted_.size()) posted_.resize(std::size_t{src} + 1);
  return true;
} catch (...) {
  return false;
}

posted_entry* matcher::take_posted(source_id src, std::uint64_t tag) noexcept {
  posted_entry* e = peek_posted(src, tag);
  if (e) remove_posted(*e);
  return e;
}

bool matcher::add_unexpected(unexpected_entry& u) noexcept {
  // A sender may be heard from before any receive names it: its queue starts existing here.
  if (!ensure_source(u.source)) return false;
  u.seq = arrival_seq_++;
  all_unexpected_.push_back(u);
  // An unidentified sender's message is reachable only through the arrival-ordered queue.
  if (u.source != any_source) {
    unexpected_[u.source].push_back(u);
    unexpected_buckets_[bucket_of(u.source, u.tag)].push_back(u);
  }
  return true;
}

unexpected_entry* matcher::search_unexpected(source_id src, std::uint64_t tag,
                                           std::uint64_t ignore) const noexcept {
  if (src == any_source)
    return all_unexpected_.find(
        [&](const unexpected_entry& u) { return tag_matches(tag, ignore, u.tag); });
  if (src >= unexpected_.size()) return nullptr;
  if (ignore == 0)  // one tag: its bucket holds that (source, tag) in arrival order
    return unexpected_buckets_[bucket_of(src, tag)].find(
        [&](const unexpected_entry& u) { return u.source == src && u.tag == tag; });
  return unexpected_[src].find(
      [&](const unexpected_entry& u) { return tag_matches(tag, ignore, u.tag); });
}

void matcher::remove_unexpected(unexpected_entry& u) noexcept {
  all_unexpected_.remove(u);
  if (u.peer_hook.linked()) {
    unexpected_[u.source].remove(u);
    unexpected_buckets_[bucket_of(u.source, u.tag)].remove(u);
  }
}

}  // namespace exanet::match
