// SPDX-License-Identifier: BSD-2-Clause
// Two proto endpoints over the emulated device in one process, connected both ways, with their
// completions collected: the fixture the proto tests share.
#pragma once
#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <vector>

#include "proto/endpoint.hpp"

namespace exanet::proto::testing_pair {

/// A CQ for tests: every entry the endpoint pushes is moved at once into `entries`.
struct collected {
  std::deque<completion> entries;
  completion_ring ring;
  collected() {
    ring.reserve(64);
    ring.set_hook(this, &collected::take);
    ring.watch();  // for good: every push calls take
  }
  collected(const collected&) = delete;
  static void take(void* self) noexcept {
    auto& c = *static_cast<collected*>(self);
    for (; c.ring.size() > 0; c.ring.pop()) c.entries.push_back(c.ring.front());
  }
  completion_sink sink() { return {&ring}; }
};

/// n bytes that differ with seed: a message whose bytes show if they were moved, cut or mixed.
inline std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::byte(static_cast<unsigned char>(i * 131 + seed));
  return v;
}

/// A receive into the one buffer v (which must outlive the post).
inline recv_args recv_into(const iovec& v, std::uint64_t tag, dev::peer_id from,
                           queue_kind kind = queue_kind::tagged) {
  recv_args r;
  r.iov = {&v, 1};
  r.tag = tag;
  r.peer = from;
  r.kind = kind;
  return r;
}

/// A send of the one buffer v (which must outlive the post), through the general path.
inline send_args send_from(const iovec& v, std::uint64_t tag, dev::peer_id to,
                           queue_kind kind = queue_kind::tagged) {
  send_args s;
  s.iov = {&v, 1};
  s.tag = tag;
  s.peer = to;
  s.kind = kind;
  return s;
}

struct endpoint_pair {
  config cfg;
  endpoint a, b;
  collected a_tx, a_rx, b_tx, b_rx;
  dev::peer_id a_to_b = dev::no_peer, b_to_a = dev::no_peer;

  /// Opens both endpoints with cfg and connects them; call from SetUp after setting cfg.
  void open_pair() {
    ASSERT_EQ(a.open(cfg, {}), core::status::ok);
    ASSERT_EQ(b.open(cfg, {}), core::status::ok);
    a.set_sinks({.tx = a_tx.sink(), .rx = a_rx.sink()});
    b.set_sinks({.tx = b_tx.sink(), .rx = b_rx.sink()});
    ASSERT_EQ(a.connect(b.address(), a_to_b), core::status::ok);
    ASSERT_EQ(b.connect(a.address(), b_to_a), core::status::ok);
  }
  /// Progresses both until done() holds (bounded: fails rather than hang).
  void pump_until(const std::function<bool()>& done) {
    for (int i = 0; i < 10'000'000 && !done(); ++i) {
      a.progress();
      b.progress();
    }
    ASSERT_TRUE(done());
  }
};

}  // namespace exanet::proto::testing_pair
