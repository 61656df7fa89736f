// SPDX-License-Identifier: BSD-2-Clause
// The name of an Exanet endpoint: what fi_getname returns and fi_av_insert accepts.
// Global virtual addresses on ExaNeST are (node, PDID, virtual address); an endpoint adds a port
// that names its mailbox on that node. Fixed-size and trivially copyable: it crosses processes.
//
// Two layouts share one struct. Version 1 is the first 16 bytes: all an endpoint needs to be
// found on its own host. Version 2 (issue 13: endpoints on other hosts) appends which host the
// endpoint lives on and how another host reaches it: the name of its network backend's lower
// endpoint and the random id (incarnation) that stamps its network packets. A version 1 name
// carries zeros there, and its host is the reader's. fi_getname hands out the shorter layout
// whenever the longer one would add nothing (name_bytes()).
//
// Version 3 (compact_address) is version 2 written in 32 bytes, for the common case of a lower
// provider that names its endpoints by an IPv4 socket address (tcp): programs that keep a peer's
// name in 32 bytes (fabtests' fi_rdm_stress, as efa's and tcp's names fit) work across hosts too.
// It is only an encoding: reading it gives back the version 2 name exactly, so nothing past the
// name's codec sees it. Host identities and incarnations are 48-bit values (id_bits) for that.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace exanet::dev {

inline constexpr std::uint32_t address_magic = 0x584e5445;  // "ETNX": rejects foreign blobs

/// Ports below this bound are chosen by the user (the libfabric "service"); the emulated backend
/// hands out the others, up to port_limit, probing from a place derived from the process id.
/// Every port fits the 16 bits of a sockaddr, so an endpoint can be named as an IP address and a
/// port (FI_SOCKADDR_IN, FI_SOCKADDR_IN6, FI_ADDR_STR) as well as by this struct.
inline constexpr std::uint32_t first_auto_port = 1u << 15;
inline constexpr std::uint32_t port_limit = 1u << 16;

/// Room for a lower provider's endpoint name: tcp's IPv6 socket address takes 28 bytes. A lower
/// provider with longer names is refused when the network backend opens. (The whole name must
/// fit libfabric's FI_NAME_MAX, 64 bytes: Open MPI's fi_getname buffer has that size.)
inline constexpr std::size_t lower_name_bytes = 31;

/// Host identities and incarnations use this many low bits (never 0), so that a version 2 name
/// fits the compact layout whole.
inline constexpr unsigned id_bits = 48;
inline constexpr std::uint64_t id_mask = (std::uint64_t{1} << id_bits) - 1;

/// The host of a name made from a network address alone (another host's IP address and port,
/// as fi_getinfo(node, service) gives; see by_network_address): not this host, which one comes
/// with the endpoint's hello, as does its incarnation (0 until then). No host identity is this.
inline constexpr std::uint64_t unknown_host = id_mask;

struct address {
  // ---- version 1 ---------------------------------------------------------------------------
  std::uint32_t magic = address_magic;
  std::uint16_t node = 0;     // node id; the emulated backend is one node
  std::uint16_t version = 1;  // layout version of this struct
  std::uint32_t pdid = 0;     // protection domain: only equal PDIDs may talk
  std::uint32_t port = 0;     // mailbox on the node
  // ---- version 2 ---------------------------------------------------------------------------
  std::uint64_t host = 0;         // the host's identity (its boot and its /dev/shm); 0: the reader's
  std::uint64_t incarnation = 0;  // this opening of the endpoint; stamps its network packets
  std::uint8_t lower_len = 0;     // bytes of lower_name in use; 0: no network backend
  std::array<std::byte, lower_name_bytes> lower_name{};

  friend bool operator==(const address&, const address&) = default;
  bool valid() const noexcept {
    if (magic != address_magic) return false;
    if (version == 1) return true;
    return version == 2 && lower_len <= lower_name_bytes;
  }
  /// Bytes of this name on the wire and in fi_getname: the version 1 prefix, or all of it.
  std::size_t name_bytes() const noexcept { return version == 1 ? v1_bytes : sizeof(address); }
  static constexpr std::size_t v1_bytes = 16;
};
static_assert(sizeof(address) == 64 && std::is_trivially_copyable_v<address>);
static_assert(offsetof(address, host) == address::v1_bytes, "version 1 is a prefix of version 2");

/// Version 3: a version 2 name whose lower name is an IPv4 socket address, in 32 bytes. magic,
/// node and version are where version 1 has them, so a reader tells the three apart by the
/// first 8 bytes; the 32-bit port of version 1 shrinks to the 16 bits every port has.
struct compact_address {
  std::uint32_t magic = address_magic;
  std::uint16_t node = 0;
  std::uint16_t version = 3;
  std::uint32_t pdid = 0;
  std::uint16_t port = 0;
  std::uint16_t lower_port = 0;  // network byte order, as in the sockaddr_in
  std::uint32_t lower_ipv4 = 0;  // network byte order
  std::array<std::uint8_t, 6> host{};         // little-endian, id_bits
  std::array<std::uint8_t, 6> incarnation{};  // little-endian, id_bits
  static constexpr std::size_t bytes = 32;
};
static_assert(sizeof(compact_address) == compact_address::bytes &&
              std::is_trivially_copyable_v<compact_address>);
static_assert(offsetof(compact_address, version) == offsetof(address, version) &&
              offsetof(compact_address, magic) == offsetof(address, magic));

namespace detail {
inline void put48(std::array<std::uint8_t, 6>& out, std::uint64_t v) noexcept {
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline std::uint64_t get48(const std::array<std::uint8_t, 6>& in) noexcept {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < in.size(); ++i) v |= std::uint64_t{in[i]} << (8 * i);
  return v;
}
}  // namespace detail

/// a in the compact layout, if that keeps every bit of it: version 2, a 16-byte lower name that
/// is an IPv4 socket address with nothing else set, a 16-bit port, 48-bit ids.
inline bool to_compact(const address& a, compact_address& out) noexcept {
  if (a.magic != address_magic || a.version != 2 || a.lower_len != sizeof(sockaddr_in) ||
      a.port > 0xffff || (a.host & ~id_mask) != 0 || (a.incarnation & ~id_mask) != 0)
    return false;
  sockaddr_in sin;
  std::memcpy(&sin, a.lower_name.data(), sizeof sin);
  if (sin.sin_family != AF_INET) return false;
  for (std::size_t i = 0; i < lower_name_bytes; ++i) {
    // Every byte but the family, port and address must be zero, or they would be lost.
    const bool kept = i < offsetof(sockaddr_in, sin_addr) + sizeof sin.sin_addr;
    if (!kept && a.lower_name[i] != std::byte{0}) return false;
  }
  out = {};
  out.node = a.node;
  out.pdid = a.pdid;
  out.port = static_cast<std::uint16_t>(a.port);
  out.lower_port = sin.sin_port;
  out.lower_ipv4 = sin.sin_addr.s_addr;
  detail::put48(out.host, a.host);
  detail::put48(out.incarnation, a.incarnation);
  return true;
}

/// The version 2 name a compact one stands for (to_compact's inverse).
inline address from_compact(const compact_address& c) noexcept {
  address a{};
  a.node = c.node;
  a.version = 2;
  a.pdid = c.pdid;
  a.port = c.port;
  a.host = detail::get48(c.host);
  a.incarnation = detail::get48(c.incarnation);
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = c.lower_port;
  sin.sin_addr.s_addr = c.lower_ipv4;
  std::memcpy(a.lower_name.data(), &sin, sizeof sin);
  a.lower_len = sizeof sin;
  return a;
}

/// The name of the endpoint listening on port at host (an IPv4 or IPv6 socket address, its
/// port ignored): that port is the endpoint's own, which its network backend listens on when
/// the port was chosen (dev/net). Before its hello: host unknown_host, incarnation 0; the
/// network backend learns the rest from the hello that answers the first packet (connect).
inline address by_network_address(const sockaddr_storage& host, std::uint16_t port,
                                  std::uint16_t node, std::uint32_t pdid) noexcept {
  address a{};
  a.version = 2;
  a.node = node;
  a.pdid = pdid;
  a.port = port;
  a.host = unknown_host;
  if (host.ss_family == AF_INET) {
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port);
    sin.sin_addr = reinterpret_cast<const sockaddr_in&>(host).sin_addr;
    std::memcpy(a.lower_name.data(), &sin, sizeof sin);
    a.lower_len = sizeof sin;
  } else {
    sockaddr_in6 six{};
    std::memcpy(&six, &host, sizeof six);
    six.sin6_port = htons(port);
    std::memcpy(a.lower_name.data(), &six, sizeof six);
    a.lower_len = sizeof six;
  }
  return a;
}

/// How many bytes the name starting at first (at least 8 readable) takes: 16, 32 or 64 by its
/// version; 0 if it is not an exanet name.
inline std::size_t name_length(const void* first) noexcept {
  std::uint32_t magic = 0;
  std::uint16_t version = 0;
  std::memcpy(&magic, first, sizeof magic);
  std::memcpy(&version, static_cast<const std::byte*>(first) + offsetof(address, version),
              sizeof version);
  if (magic != address_magic) return 0;
  switch (version) {
    case 1: return address::v1_bytes;
    case 2: return sizeof(address);
    case 3: return compact_address::bytes;
    default: return 0;
  }
}

}  // namespace exanet::dev
