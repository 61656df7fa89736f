#include "match/matcher.hpp"

#include <new>

namespace exanet::match {

bool matcher::ensure_source(source_id src) noexcept try {
  if (src == any_source) return true;
  if (src >= posted_.size()) posted_.resize(std::size_t{src} + 1);
  if (src >= unexpected_.size()) unexpected_.resize(std::size_t{src} + 1);
  return true;
} catch (...) {
  return false;
}

void matcher::post(posted_entry& e) {
  if (!ensure_source(e.source)) throw std::bad_alloc();
  e.seq = post_seq_++;
  (e.source == any_source ? wildcard_ : posted_[e.source]).push_back(e);
  ++posted_count_;
}

posted_entry* matcher::peek_posted(source_id src, std::uint64_t tag) const noexcept {
  auto match = [&](const posted_entry& e) { return e.matches(src, tag); };
  posted_entry* directed = src < posted_.size() ? posted_[src].find(match) : nullptr;
  posted_entry* wild = wildcard_.empty() ? nullptr : wildcard_.find(match);
  if (!directed) return wild;
  if (!wild) return directed;
  return wild->seq < directed->seq ? wild : directed;
}

posted_entry* matcher::take_posted(source_id src, std::uint64_t tag) noexcept {
  posted_entry* e = peek_posted(src, tag);
  if (e) remove_posted(*e);
  return e;
}

void matcher::remove_posted(posted_entry& e) noexcept {
  (e.source == any_source ? wildcard_ : posted_[e.source]).remove(e);
  --posted_count_;
}

bool matcher::add_unexpected(unexpected_entry& u) noexcept {
  // A sender may be heard from before any receive names it: its queue starts existing here.
  if (!ensure_source(u.source)) return false;
  u.seq = arrival_seq_++;
  all_unexpected_.push_back(u);
  // An unidentified sender's message is reachable only through the arrival-ordered queue.
  if (u.source != any_source) unexpected_[u.source].push_back(u);
  return true;
}

unexpected_entry* matcher::find_unexpected(source_id src, std::uint64_t tag,
                                           std::uint64_t ignore) const noexcept {
  if (src == any_source)
    return all_unexpected_.find(
        [&](const unexpected_entry& u) { return tag_matches(tag, ignore, u.tag); });
  if (src >= unexpected_.size()) return nullptr;
  return unexpected_[src].find(
      [&](const unexpected_entry& u) { return tag_matches(tag, ignore, u.tag); });
}

void matcher::remove_unexpected(unexpected_entry& u) noexcept {
  all_unexpected_.remove(u);
  if (u.peer_hook.linked()) unexpected_[u.source].remove(u);
}

}  // namespace exanet::match
