// SPDX-License-Identifier: BSD-2-Clause
// RTRs a sender holds until the send they name is posted (rndv_rtr.cpp, rndv_optimistic.cpp),
// indexed so that a send looks only at the RTRs its tag can match, however many a receiver has
// pre-posted: an RTR without ignore bits sits in the bucket of (peer, queue, tag), one with ignore
// bits in its peer's short list of wide RTRs. Every RTR also sits in its peer's list in arrival
// order, for cancel and peer death. Adding and removing never touch the heap once the pool and
// the peer table have grown. The pool has a limit (set_limit): peers cannot make it grow past
// what the endpoint's attributes allow.
#pragma once
#include <cstdint>
#include <vector>

#include "core/intrusive_list.hpp"
#include "core/pool.hpp"
#include "dev/device.hpp"
#include "match/matcher.hpp"
#include "proto/wire.hpp"

namespace exanet::proto {

/// An RTR that arrived before its target send was issued. Write family: each later send of its
/// class counts down `remaining`, and the send that finds it at 1 is the target. Optimistic: no
/// ticket; the first later send it matches is its target, and `remaining` stays 0.
struct stored_rtr {
  core::list_hook by_peer;  // its peer's RTRs, in arrival order
  core::list_hook by_key;   // its (peer, queue, tag) bucket, or its peer's wide list
  wire::rtr rtr{};
  dev::peer_id peer = dev::no_peer;
  std::uint64_t arrival = 0;
  std::uint32_t remaining = 0;
  bool tagged() const noexcept { return rtr.hdr.flags & wire::flag_tagged; }
  bool wide() const noexcept { return rtr.ignore != 0; }
};

class stored_rtr_index {
 public:
  stored_rtr_index() : buckets_(bucket_count) {}

  bool empty(dev::peer_id p) const noexcept { return p >= peers_.size() || peers_[p].all.empty(); }
  /// At most n RTRs held at once (cfg.stored_rtr_max): add refuses beyond, and the caller
  /// answers NACK, so the receive goes sender-initiated (nothing is lost, nothing grows).
  void set_limit(std::size_t n) noexcept { pool_.set_limit(n); }
  std::size_t size() const noexcept { return pool_.in_use(); }
  /// Memory held: records ever allocated (the pool never shrinks).
  std::size_t capacity() const noexcept { return pool_.capacity(); }

  /// Keeps m from peer p; nullptr at the limit or when out of memory.
  stored_rtr* add(dev::peer_id p, const wire::rtr& m, std::uint32_t remaining) noexcept {
    if (p >= peers_.size()) {
      try {
        peers_.resize(std::size_t{p} + 1);  // cold: the first RTR from this peer
      } catch (...) {
        return nullptr;
      }
    }
    stored_rtr* st = pool_.acquire();
    if (!st) return nullptr;
    st->rtr = m;
    st->peer = p;
    st->arrival = arrivals_++;
    st->remaining = remaining;
    peers_[p].all.push_back(*st);
    key_list_of(*st).push_back(*st);
    return st;
  }

  /// Forgets st (served, withdrawn or answered); st is invalid afterwards.
  void remove(stored_rtr& st) noexcept {
    peers_[st.peer].all.remove(st);
    key_list_of(st).remove(st);
    pool_.release(&st);
  }

  /// Calls f(st) for every RTR from p whose class takes a send of (tagged, tag); f may remove st.
  template <class F>
  void for_each_match(dev::peer_id p, bool tagged, std::uint64_t tag, F&& f) {
    if (empty(p)) return;
    buckets_[bucket_of(p, tagged, tag)].for_each([&](stored_rtr& st) {
      if (st.peer == p && st.tagged() == tagged && st.rtr.tag == tag) f(st);
    });
    peers_[p].wide.for_each([&](stored_rtr& st) {
      if (st.tagged() == tagged && match::tag_matches(st.rtr.tag, st.rtr.ignore, tag)) f(st);
    });
  }

  /// The earliest-arrived RTR from p that takes a send of (tagged, tag) and satisfies pred.
  template <class Pred>
  stored_rtr* oldest_match(dev::peer_id p, bool tagged, std::uint64_t tag, Pred&& pred) {
    stored_rtr* best = nullptr;
    for_each_match(p, tagged, tag, [&](stored_rtr& st) {
      if ((!best || st.arrival < best->arrival) && pred(st)) best = &st;
    });
    return best;
  }

  stored_rtr* find_recv(dev::peer_id p, std::uint64_t recv_id) const noexcept {
    if (empty(p)) return nullptr;
    return peers_[p].all.find([&](const stored_rtr& st) { return st.rtr.recv_id == recv_id; });
  }

  void drop_peer(dev::peer_id p) noexcept {
    if (p >= peers_.size()) return;
    while (stored_rtr* st = peers_[p].all.front()) remove(*st);
  }

 private:
  using peer_list = core::intrusive_list<stored_rtr, &stored_rtr::by_peer>;
  using key_list = core::intrusive_list<stored_rtr, &stored_rtr::by_key>;
  struct per_peer {
    peer_list all;
    key_list wide;
  };
  static constexpr std::size_t bucket_count = 1024;  // power of two

  static std::size_t bucket_of(dev::peer_id p, bool tagged, std::uint64_t tag) noexcept {
    std::uint64_t h = tag * 0x9e3779b97f4a7c15ull ^
                      (std::uint64_t{p} * 2 + (tagged ? 1 : 0)) * 0xc2b2ae3d27d4eb4full;
    h ^= h >> 29;
    return static_cast<std::size_t>(h) & (bucket_count - 1);
  }
  key_list& key_list_of(const stored_rtr& st) noexcept {
    return st.wide() ? peers_[st.peer].wide : buckets_[bucket_of(st.peer, st.tagged(), st.rtr.tag)];
  }

  core::pool<stored_rtr> pool_{64};
  std::vector<key_list> buckets_;
  std::vector<per_peer> peers_;
  std::uint64_t arrivals_ = 0;
};

}  // namespace exanet::proto
