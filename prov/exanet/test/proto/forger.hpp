// SPDX-License-Identifier: BSD-2-Clause
// A third party on the emulated device that writes raw protocol packets into an endpoint's
// mailbox, the way a buggy or hostile peer could (issue 12): the proto tests use it to send what
// no correct sender sends.
#pragma once
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>

#include "dev/emu/device.hpp"
#include "proto/endpoint.hpp"
#include "proto/wire.hpp"

namespace exanet::proto::testing_pair {

struct forger {
  dev::emu::device dev;
  dev::peer_id to = dev::no_peer;

  void open(std::uint32_t pdid, const dev::address& target) {
    dev::emu::params p;
    p.self.pdid = pdid;
    p.geo.mailbox_slots = 64;
    p.geo.notify_slots = 64;
    p.geo.bounce_peers = 4;
    p.geo.bounce_ring_bytes = 1 << 16;
    p.geo.staging_chunks = 4;
    p.geo.staging_chunk_bytes = 4096;
    ASSERT_EQ(dev.open(p), core::status::ok);
    ASSERT_EQ(dev.connect(target, to), core::status::ok);
  }
  /// Sends one packet, progressing `target` while its mailbox is full.
  template <class P>
  void send(const P& pkt, endpoint& target) {
    dev::packet raw{};
    wire::write(raw.data(), pkt);
    for (int i = 0; i < 1'000'000; ++i) {
      const core::status s = dev.mailbox_send(to, raw);
      if (s == core::status::ok) return;
      ASSERT_EQ(s, core::status::again);
      target.progress();
    }
    FAIL() << "the target's mailbox stayed full";
  }
  static wire::env_data eager(wire::psn_t psn, std::uint64_t tag, std::uint64_t value) {
    wire::env_data p{};
    p.hdr = wire::make_header(wire::pkt_type::env_data, wire::flag_tagged, sizeof value);
    p.tag = tag;
    p.psn = psn;
    std::memcpy(p.payload, &value, sizeof value);
    return p;
  }
  static wire::rts rts(wire::psn_t psn, std::uint64_t tag, std::uint64_t len) {
    wire::rts p{};
    p.hdr = wire::make_header(wire::pkt_type::rts, wire::flag_tagged);
    p.tag = tag;
    p.psn = psn;
    p.msg_len = len;
    p.send_id = 12345;  // names no send of ours: nobody will ever write
    return p;
  }
};

/// Progresses ep for about ms milliseconds of wall time.
inline void progress_for(endpoint& ep, int ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < until) ep.progress();
}

}  // namespace exanet::proto::testing_pair
