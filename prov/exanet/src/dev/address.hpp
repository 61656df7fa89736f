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
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
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

}  // namespace exanet::dev
