// SPDX-License-Identifier: BSD-2-Clause
// The ExaNeST link and topology model (issue 16): what a packet or a DMA write would take on the
// thesis's network, so that a backend running on one host (the emulation) can hold each one back
// until its modelled arrival time. Pure arithmetic and the process's settings; the emulated
// device applies it (dev/emu), and a backend on a real network has no use for it.
//
// The network (seed-000 §1.1): QFDBs of 4 FPGAs, all-to-all inside a QFDB (16 GB/s links), the
// QFDBs in a 3D torus (10 GB/s links). A process sits on one (QFDB, FPGA). A QFDB reaches the
// torus through its FPGA 0 (the model's assumption: the thesis does not say which FPGA carries
// the torus links), so a path between QFDBs costs the torus distance plus one hop at each end
// whose FPGA is not FPGA 0. A path crossing any torus link runs at the inter-QFDB bandwidth.
//
// Timing (seeds-002-004 §C.7, T_link(x) = alpha + x / beta), per sender-receiver pair, FIFO:
//   start   = max(now, when the pair's last transfer finished injecting) + injection overhead
//   arrival = start + bytes / bandwidth + hops x per-hop latency
// A mailbox packet counts 64 bytes; a medium message's bounce-ring bytes and a DMA write's bytes
// occupy the pair's link before the packet or notification that announces them. The sender
// computes an arrival time, the receiver holds what it receives until then: every process of a
// job runs with the model or none does.
//
// Off by default. The settings are the process's (they come from its environment, as every
// FI_EXANET_* parameter): the fi layer sets them at each domain open and the emulated device
// copies them when an endpoint opens, so the layers between need not carry them.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <utility>
#include <vector>

namespace exanet::dev {

/// Where a process sits: its QFDB's coordinates in the torus and its FPGA on the QFDB.
struct torus_position {
  std::uint16_t x = 0, y = 0, z = 0;
  std::uint8_t fpga = 0;
  friend bool operator==(const torus_position&, const torus_position&) = default;
};

inline constexpr unsigned fpgas_per_qfdb = 4;
inline constexpr unsigned max_torus_side = 255;  // a coordinate fits 8 bits in the segment
/// A position as a segment header stores it (the 8-bit fields of x, y, z and fpga); none: the
/// endpoint's process runs without the model.
inline constexpr std::uint32_t no_position = ~0u;
constexpr std::uint32_t encode_position(torus_position p) noexcept {
  return (std::uint32_t{p.x} << 24) | (std::uint32_t{p.y} << 16) | (std::uint32_t{p.z} << 8) |
         p.fpga;
}
constexpr torus_position decode_position(std::uint32_t v) noexcept {
  return {static_cast<std::uint16_t>(v >> 24), static_cast<std::uint16_t>((v >> 16) & 0xff),
          static_cast<std::uint16_t>((v >> 8) & 0xff), static_cast<std::uint8_t>(v & 0xff)};
}

struct link_params {
  bool enabled = false;
  std::uint32_t hop_ns = 500;          // per-hop latency (the model's own guess; the thesis
                                       // gives none)
  std::uint32_t intra_mbps = 16000;    // link bandwidth inside a QFDB (MB/s, 1e6 B/s)
  std::uint32_t inter_mbps = 10000;    // torus link bandwidth between QFDBs
  std::uint32_t inject_ns = 0;         // per-packet (and per-DMA-write) injection overhead
  std::uint16_t torus[3] = {4, 4, 2};  // QFDBs per dimension: the testbed's 32
  // Polls that find nothing due give the core away now and then (emu device: link_idle_poll):
  // with more processes than cores a poller would otherwise keep its core until the scheduler's
  // tick while the process whose packet is due waits for one (run.sh's collectives).
  bool yield_when_idle = false;
};

/// Where this process sits, the first that applies: an explicit position; its entry (by rank,
/// or by port when there is no rank) in a placement file; the linear order of its rank (or
/// port): index i is FPGA i % 4 of QFDB i / 4, QFDBs numbered x first (the thesis's "sorted
/// hostfile").
struct link_placement {
  bool has_position = false;
  torus_position position{};
  bool by_port = false;    // placement "port": the port even when a launcher gives a rank
  std::int64_t rank = -1;  // from the job launcher; -1: none
  std::vector<std::pair<std::uint64_t, torus_position>> entries;  // placement file
};

/// QFDBs in the torus (at least 1).
constexpr std::uint32_t qfdb_count(const link_params& p) noexcept {
  return std::uint32_t{p.torus[0]} * p.torus[1] * p.torus[2];
}

/// The position of linear index i (wrapping at the torus's size).
constexpr torus_position position_of_index(const link_params& p, std::uint64_t i) noexcept {
  const std::uint64_t slots = std::uint64_t{qfdb_count(p)} * fpgas_per_qfdb;
  i %= slots;
  const std::uint64_t q = i / fpgas_per_qfdb;
  return {static_cast<std::uint16_t>(q % p.torus[0]),
          static_cast<std::uint16_t>(q / p.torus[0] % p.torus[1]),
          static_cast<std::uint16_t>(q / (std::uint64_t{p.torus[0]} * p.torus[1])),
          static_cast<std::uint8_t>(i % fpgas_per_qfdb)};
}

/// Where the process owning `port` sits.
inline torus_position place(const link_params& p, const link_placement& where,
                            std::uint32_t port) noexcept {
  if (where.has_position) return where.position;
  const std::uint64_t key = where.by_port || where.rank < 0
                                ? std::uint64_t{port}
                                : static_cast<std::uint64_t>(where.rank);
  for (const auto& [k, pos] : where.entries)
    if (k == key) return pos;
  return position_of_index(p, key);
}

/// Links crossed between two positions, and whether one of them is a torus link.
struct path {
  std::uint32_t hops = 0;
  bool crosses_torus = false;
};

constexpr std::uint32_t ring_distance(std::uint32_t a, std::uint32_t b,
                                      std::uint32_t side) noexcept {
  const std::uint32_t d = a > b ? a - b : b - a;
  return std::min(d, side - d);
}

constexpr path path_between(const link_params& p, torus_position a, torus_position b) noexcept {
  if (a.x == b.x && a.y == b.y && a.z == b.z) return {a.fpga == b.fpga ? 0u : 1u, false};
  const std::uint32_t torus_hops = ring_distance(a.x, b.x, p.torus[0]) +
                                   ring_distance(a.y, b.y, p.torus[1]) +
                                   ring_distance(a.z, b.z, p.torus[2]);
  return {torus_hops + (a.fpga != 0 ? 1u : 0u) + (b.fpga != 0 ? 1u : 0u), true};
}

/// The timing of one sender-receiver pair: what the sender keeps per peer.
struct link_timing {
  std::uint64_t latency_ns = 0;  // hops x per-hop latency
  std::uint32_t mbps = 1;        // the path's bandwidth (its slowest link)
  std::uint32_t inject_ns = 0;
  std::uint64_t free_ns = 0;  // when the last transfer finished injecting

  static constexpr link_timing between(const link_params& p, torus_position from,
                                       torus_position to) noexcept {
    const path r = path_between(p, from, to);
    link_timing t;
    t.latency_ns = std::uint64_t{r.hops} * p.hop_ns;
    t.mbps = std::max<std::uint32_t>(
        1, r.crosses_torus ? std::min(p.inter_mbps, p.intra_mbps) : p.intra_mbps);
    t.inject_ns = p.inject_ns;
    return t;
  }
  /// Nanoseconds bytes take on the path's slowest link (1 MB/s is one byte per microsecond).
  constexpr std::uint64_t serialize_ns(std::uint64_t bytes) const noexcept {
    return (bytes * 1000 + mbps - 1) / mbps;
  }
  /// Bytes that occupy the link with no arrival of their own (a bounce-ring copy that the next
  /// packet announces).
  constexpr void occupy(std::uint64_t now_ns, std::uint64_t bytes) noexcept {
    free_ns = std::max(now_ns, free_ns) + serialize_ns(bytes);
  }
  /// One packet or notification of `bytes` (after whatever occupies the link already): its
  /// arrival time at the receiver. Arrivals of one pair never decrease: FIFO holds.
  constexpr std::uint64_t send(std::uint64_t now_ns, std::uint64_t bytes) noexcept {
    free_ns = std::max(now_ns, free_ns) + inject_ns + serialize_ns(bytes);
    return free_ns + latency_ns;
  }
};

// ---- the process's settings -----------------------------------------------------------------

namespace link_detail {
struct settings {
  link_params params;
  link_placement placement;
};
inline std::mutex& lock() noexcept {
  static std::mutex m;
  return m;
}
inline settings& current() noexcept {
  static settings s;
  return s;
}
}  // namespace link_detail

/// Sets the model for endpoints opened from now on (the fi layer, at domain open).
inline void set_link_params(const link_params& p, link_placement where) noexcept {
  std::lock_guard g(link_detail::lock());
  link_detail::current().params = p;
  link_detail::current().placement = std::move(where);
}
/// The model in force, and where an endpoint at `port` of this process sits (a backend, at
/// endpoint open).
inline link_params current_link_params(std::uint32_t port, torus_position& where) noexcept {
  std::lock_guard g(link_detail::lock());
  const link_detail::settings& s = link_detail::current();
  where = place(s.params, s.placement, port);
  return s.params;
}

}  // namespace exanet::dev
