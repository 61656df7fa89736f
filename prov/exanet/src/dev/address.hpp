// The name of an Exanet endpoint: what fi_getname returns and fi_av_insert accepts.
// Global virtual addresses on ExaNeST are (node, PDID, virtual address); an endpoint adds a port
// that names its mailbox on that node. Fixed-size and trivially copyable: it crosses processes.
#pragma once
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

struct address {
  std::uint32_t magic = address_magic;
  std::uint16_t node = 0;     // node id; the emulated backend is one node
  std::uint16_t version = 1;  // layout version of this struct
  std::uint32_t pdid = 0;     // protection domain: only equal PDIDs may talk
  std::uint32_t port = 0;     // mailbox on the node

  friend bool operator==(const address&, const address&) = default;
  bool valid() const noexcept { return magic == address_magic && version == 1; }
};
static_assert(sizeof(address) == 16 && std::is_trivially_copyable_v<address>);

}  // namespace exanet::dev

