// SPDX-License-Identifier: BSD-2-Clause
// Endpoint names in the address formats applications use (fi_getinfo(3), addr_format).
//
// An exanet endpoint is (node, PDID, port). Besides its own 16-byte struct (FI_FORMAT_UNSPEC,
// what Open MPI and MPICH pass around), exanet names an endpoint the way IP-based programs do:
//
//   FI_SOCKADDR_IN, FI_SOCKADDR_IN6   an address of the endpoint's host and the port in
//   (FI_SOCKADDR: either)             sin_port / sin6_port;
//   FI_ADDR_STR                       "fi_exanet://HOST:PORT" with an optional "/PDID" field
//                                     (fi_getname writes it) and, for a version 2 name, the
//                                     query "?node=N&host=X&inc=X&lower=X" (hex) with the
//                                     fields that find it from another host; fi_sockaddr_in://
//                                     IP:PORT and fi_sockaddr_in6://[IP]:PORT are read as well.
//
// The host part names the node: any address of this host (loopback included) is this node, and
// an address of another host is refused (-FI_EADDRNOTAVAIL): a sockaddr cannot say how the
// network backend reaches it. A version 2 string carries that (its lower name), so its host
// part is only informative (the lower name's IP address when it has one). The PDID is not in a
// sockaddr: it is the reader's own, as an ExaNeST packetizer stamps it. Ports fit 16 bits
// (dev/address.hpp).
#pragma once
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

#include "dev/address.hpp"
#include "proto/config.hpp"

namespace exanet::fi {

/// How one domain writes and reads names: the format, and the host address its names carry.
struct addr_codec {
  std::uint32_t format = FI_FORMAT_UNSPEC;
  sockaddr_storage host{};  // AF_INET or AF_INET6 with port 0; loopback unless the
                            // application named another address of this host
  std::uint16_t node = 0;
  std::uint32_t pdid = 0;
  // The network backend is on: an address of another host names the endpoint listening there
  // (dev::by_network_address) instead of being refused.
  bool network = false;
};

bool addr_format_supported(std::uint32_t format) noexcept;

/// A codec for `format` whose host part comes from `addr` when it is a socket address of this
/// host (else loopback). FI_SOCKADDR becomes its IPv4 or IPv6 form, by addr's family.
addr_codec addr_codec_for(std::uint32_t format, const void* addr, std::size_t len,
                          const proto::config& cfg) noexcept;

/// Bytes of the longest FI_ADDR_STR name, its terminating zero included (a version 2 name with
/// an IPv6 host and a full lower name takes about 200).
inline constexpr std::size_t addr_str_max = 320;

/// Port 0 names no endpoint, except in a source address, where it asks for any free port.
enum class port_any { refused, allowed };

/// Reads a name in the codec's format. For FI_ADDR_STR, addr is the string itself. 0, or
/// -FI_EINVAL (malformed) or -FI_EADDRNOTAVAIL (another host).
int addr_decode(const addr_codec& c, const void* addr, std::size_t len, dev::address& out,
                port_any any = port_any::refused) noexcept;

/// Writes a name in the codec's format; *len is the room on entry and the size needed on return
/// (-FI_ETOOSMALL when it did not fit).
int addr_encode(const addr_codec& c, const dev::address& a, void* out, std::size_t* len) noexcept;

/// The size of one name in a packed array of this format (fi_av_insert); 0 for FI_ADDR_STR,
/// whose array holds char pointers. exanet's own names say their length in their version, so
/// the first name of the array (`first`, when given) sets it for all.
std::size_t addr_stride(std::uint32_t format, const void* first = nullptr) noexcept;

/// node/service as fi_getinfo and fi_av_insertsvc take them: node is a host name or address of
/// this host (or, for FI_ADDR_STR, a whole name), service a port.
int addr_from_node_service(const addr_codec& c, const char* node, const char* service,
                           dev::address& out) noexcept;

}  // namespace exanet::fi
