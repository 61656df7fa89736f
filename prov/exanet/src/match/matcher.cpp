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

void matcher::post(posted_entry& e) {
  if (!ensure_source(e.source)) throw std::bad_alloc();
  e.seq = post_seq_++;
  if (e.source == any_source) {
    wildcard_.push_back(e);
  } else {
    posted_[e.source].push_back(e);
    key_queue_of(e).push_back(e);
  }
  ++posted_count_;
}

posted_entry* matcher::peek_posted(source_id src, std::uint64_t tag) const noexcept {
  auto match = [&](const posted_entry& e) { return e.matches(src, tag); };
  auto earlier = [](posted_entry* a, posted_entry* b) { return !a || (b && b->seq < a->seq) ? b : a; };
  posted_entry* best = wildcard_.empty() ? nullptr : wildcard_.find(match);
  if (src < posted_.size()) {
    // Each queue is in posting order: its first match is its earliest.
    best = earlier(best, buckets_[bucket_of(src, tag)].find(
                             [&](const posted_entry& e) { return e.source == src && e.tag == tag; }));
    if (!wide_[src].empty()) best = earlier(best, wide_[src].find(match));
  }
  return best;
}

posted_entry* matcher::take_posted(source_id src, std::uint64_t tag) noexcept {
  posted_entry* e = peek_posted(src, tag);
  if (e) remove_posted(*e);
  return e;
}

void matcher::remove_posted(posted_entry& e) noexcept {
  if (e.source == any_source) {
    wildcard_.remove(e);
  } else {
    posted_[e.source].remove(e);
    key_queue_of(e).remove(e);
  }
  --posted_count_;
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

unexpected_entry* matcher::find_unexpected(source_id src, std::uint64_t tag,
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
