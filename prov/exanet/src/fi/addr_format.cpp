// SPDX-License-Identifier: BSD-2-Clause
#include "fi/addr_format.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <unistd.h>

#include <rdma/fi_errno.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace exanet::fi {
namespace {

constexpr const char* exanet_scheme = "fi_exanet://";

bool is_local_ip(const sockaddr* sa) noexcept {
  if (sa->sa_family == AF_INET) {
    const in_addr a = reinterpret_cast<const sockaddr_in*>(sa)->sin_addr;
    if ((ntohl(a.s_addr) >> 24) == 127) return true;
  } else if (sa->sa_family == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127) return true;
  } else {
    return false;
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* i = list; i && !found; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != sa->sa_family) continue;
    if (sa->sa_family == AF_INET)
      found = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr ==
              reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr;
    else
      found = std::memcmp(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr,
                          &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr,
                          sizeof(in6_addr)) == 0;
  }
  freeifaddrs(list);
  return found;
}

/// A numeric address (no name lookup) into ss; false if text is not one.
bool parse_numeric(const char* text, sockaddr_storage& ss) noexcept {
  ss = {};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  if (inet_pton(AF_INET, text, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    return true;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET6, text, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    return true;
  }
  return false;
}

bool parse_port(const char* text, std::size_t n, std::uint32_t& port) noexcept {
  if (n == 0 || n > 5) return false;
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    v = v * 10 + static_cast<std::uint32_t>(text[i] - '0');
  }
  if (v >= dev::port_limit) return false;
  port = v;
  return true;
}

bool is_this_host(const char* node) noexcept {
  if (!node || !*node) return true;
  if (std::strcmp(node, "localhost") == 0 || std::strcmp(node, "localhost.localdomain") == 0)
    return true;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) {
    if (std::strcmp(node, host) == 0) return true;
    // A short name matches the host's fully qualified name and the other way round.
    const std::size_t n = std::strcspn(host, ".");
    if (std::strncmp(node, host, n) == 0 && (node[n] == '\0' || node[n] == '.')) return true;
  }
  sockaddr_storage ss;
  return parse_numeric(node, ss) && is_local_ip(reinterpret_cast<sockaddr*>(&ss));
}

/// An address of another host, numeric or a name, into ss (port 0); false if none.
bool resolve_host(const char* node, sockaddr_storage& ss) noexcept {
  if (parse_numeric(node, ss)) return true;
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(node, nullptr, &hints, &res) != 0 || !res) return false;
  const bool ok = (res->ai_family == AF_INET || res->ai_family == AF_INET6) &&
                  res->ai_addrlen <= sizeof ss;
  if (ok) std::memcpy(&ss, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  return ok;
}

/// The endpoint listening at host ss, port: an address of another host, which names a peer
/// only with the network backend on (as tcp names its peers; dev::by_network_address).
int remote_by_address(const addr_codec& c, const sockaddr_storage& ss, std::uint32_t port,
                      std::uint32_t pdid, dev::address& out) noexcept {
  if (!c.network) return -FI_EADDRNOTAVAIL;
  if (port == 0 || port >= dev::port_limit) return -FI_EINVAL;  // a peer has a port
  out = dev::by_network_address(ss, static_cast<std::uint16_t>(port), c.node, pdid);
  return 0;
}

/// The same for a host given by name or numeric address.
int remote_by_name(const addr_codec& c, const char* host, std::uint32_t port, std::uint32_t pdid,
                   dev::address& out) noexcept {
  sockaddr_storage ss{};
  if (!c.network) return -FI_EADDRNOTAVAIL;
  if (!resolve_host(host, ss)) return -FI_EINVAL;
  return remote_by_address(c, ss, port, pdid, out);
}

int from_sockaddr(const addr_codec& c, const sockaddr* sa, std::size_t len, dev::address& out,
                  port_any any) noexcept {
  std::uint16_t port = 0;
  if (sa->sa_family == AF_INET && len >= sizeof(sockaddr_in))
    port = ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  else if (sa->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6))
    port = ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
  else
    return -FI_EINVAL;
  if (port == 0 && any == port_any::refused) return -FI_EINVAL;
  if (!is_local_ip(sa)) {
    sockaddr_storage ss{};
    std::memcpy(&ss, sa, sa->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    return remote_by_address(c, ss, port, c.pdid, out);
  }
  out = {};
  out.node = c.node;
  out.pdid = c.pdid;
  out.port = port;
  return 0;
}

int hex_digit(char ch) noexcept {
  return ch >= '0' && ch <= '9'   ? ch - '0'
         : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
         : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                  : -1;
}

/// The version 2 fields of a string name, its query "?node=N&host=X&inc=X&lower=X" (hex; lower
/// the lower provider's name, byte by byte). host and inc are required, node and lower may be
/// left out; an unknown or repeated key, or a value out of range, makes the name malformed.
bool parse_v2_query(const char* q, dev::address& a) noexcept {
  bool seen[4] = {};
  constexpr std::string_view keys[4] = {"node", "host", "inc", "lower"};
  while (*q) {
    const char* eq = std::strchr(q, '=');
    if (!eq) return false;
    const std::string_view key(q, static_cast<std::size_t>(eq - q));
    const char* val = eq + 1;
    const std::size_t vn = std::strcspn(val, "&");
    int k = 0;
    while (k < 4 && keys[k] != key) ++k;
    if (k == 4 || seen[k]) return false;
    seen[k] = true;
    if (k == 3) {
      if (vn % 2 != 0 || vn / 2 > dev::lower_name_bytes) return false;
      for (std::size_t i = 0; i < vn / 2; ++i) {
        unsigned byte = 0;
        for (std::size_t j = 0; j < 2; ++j) {
          const int d = hex_digit(val[2 * i + j]);
          if (d < 0) return false;
          byte = byte * 16 + static_cast<unsigned>(d);
        }
        a.lower_name[i] = static_cast<std::byte>(byte);
      }
      a.lower_len = static_cast<std::uint8_t>(vn / 2);
    } else {
      if (vn == 0 || vn > 16) return false;
      std::uint64_t v = 0;
      for (std::size_t i = 0; i < vn; ++i) {
        const int d = hex_digit(val[i]);
        if (d < 0) return false;
        v = v * 16 + static_cast<std::uint64_t>(d);
      }
      if (k == 0) {
        if (v > 0xffff) return false;
        a.node = static_cast<std::uint16_t>(v);
      } else {
        (k == 1 ? a.host : a.incarnation) = v;
      }
    }
    q = val + vn;
    if (*q == '&') {
      ++q;
      if (!*q) return false;
    }
  }
  return seen[1] && seen[2];
}

/// "scheme://HOST:PORT[/PDID][?V2]"; HOST a name, an IPv4 address or [an IPv6 address]. With
/// the version 2 query (parse_v2_query) the name is of any host: its host field says which,
/// and HOST only has to be well formed; without it HOST must be this host.
int from_string(const addr_codec& c, const char* s, std::size_t max, dev::address& out,
                port_any any) noexcept {
  const std::size_t n = strnlen(s, max);
  if (n == max || n >= addr_str_max) return -FI_EINVAL;
  const char* sep = std::strstr(s, "://");
  if (!sep) return -FI_EINVAL;
  const std::string_view scheme(s, static_cast<std::size_t>(sep - s));
  const bool native = scheme == "fi_exanet";
  if (!native && scheme != "fi_sockaddr_in" && scheme != "fi_sockaddr_in6" && scheme != "fi_sockaddr")
    return -FI_EINVAL;
  const char* host = sep + 3;
  const char* host_end;
  const char* after;
  if (*host == '[') {
    ++host;
    host_end = std::strchr(host, ']');
    if (!host_end || host_end[1] != ':') return -FI_EINVAL;
    after = host_end + 2;
  } else {
    host_end = std::strchr(host, ':');
    if (!host_end) return -FI_EINVAL;
    after = host_end + 1;
  }
  char name[256];
  const auto hn = static_cast<std::size_t>(host_end - host);
  if (hn == 0 || hn >= sizeof name) return -FI_EINVAL;
  std::memcpy(name, host, hn);
  name[hn] = '\0';
  const char* query = std::strchr(after, '?');
  const std::size_t rest = query ? static_cast<std::size_t>(query - after) : std::strlen(after);
  const char* slash = static_cast<const char*>(std::memchr(after, '/', rest));
  const std::size_t pn = slash ? static_cast<std::size_t>(slash - after) : rest;
  std::uint32_t port = 0;
  if (!parse_port(after, pn, port) || (port == 0 && any == port_any::refused)) return -FI_EINVAL;
  std::uint32_t pdid = c.pdid;
  if (slash) {
    if (!native) return -FI_EINVAL;
    const char* end_of_pdid = after + rest;
    std::uint64_t v = 0;
    const char* d = slash + 1;
    if (d == end_of_pdid || end_of_pdid - d > 10) return -FI_EINVAL;
    for (; d < end_of_pdid; ++d) {
      if (*d < '0' || *d > '9') return -FI_EINVAL;
      v = v * 10 + static_cast<std::uint64_t>(*d - '0');
    }
    if (v == 0 || v > 0xffffffffu) return -FI_EINVAL;
    pdid = static_cast<std::uint32_t>(v);
  }
  dev::address a{};
  a.node = c.node;
  a.pdid = pdid;
  a.port = port;
  if (query) {
    if (!native || !slash) return -FI_EINVAL;  // version 2 fields only in exanet's own form
    a.version = 2;
    if (!parse_v2_query(query + 1, a) || !a.valid()) return -FI_EINVAL;
  } else if (!is_this_host(name)) {
    return remote_by_name(c, name, port, pdid, out);  // by address and port alone
  }
  out = a;
  return 0;
}

/// The host part of a version 2 name's string: the IP address in its lower name when that is
/// a socket address (tcp's), which says where the endpoint is; else the codec's.
void host_text(const addr_codec& c, const dev::address& a, char (&host)[INET6_ADDRSTRLEN],
               bool& v6) noexcept {
  sockaddr_storage ss = c.host;
  if (a.version == 2 && a.lower_len >= sizeof(sockaddr_in)) {
    sa_family_t family = 0;
    std::memcpy(&family, a.lower_name.data(), sizeof family);
    if (family == AF_INET || (family == AF_INET6 && a.lower_len >= sizeof(sockaddr_in6)))
      std::memcpy(&ss, a.lower_name.data(),
                  family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
  }
  v6 = ss.ss_family == AF_INET6;
  std::strcpy(host, "127.0.0.1");
  if (v6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, host, sizeof host);
  else
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, host, sizeof host);
}

}  // namespace

bool addr_format_supported(std::uint32_t format) noexcept {
  return format == FI_FORMAT_UNSPEC || format == FI_SOCKADDR || format == FI_SOCKADDR_IN ||
         format == FI_SOCKADDR_IN6 || format == FI_ADDR_STR;
}

addr_codec addr_codec_for(std::uint32_t format, const void* addr, std::size_t len,
                          const proto::config& cfg) noexcept {
  addr_codec c;
  c.node = cfg.node;
  c.pdid = cfg.pdid;
  c.network = cfg.network != dev::open_params::network::use::off;
  // A socket address of the right family gives the host part (the address of this host the
  // application chose); a string form takes either family. Anything else: loopback.
  const sockaddr* sa = addr && len >= sizeof(sockaddr) ? static_cast<const sockaddr*>(addr) : nullptr;
  const std::size_t family_len = !sa                          ? 0
                                 : sa->sa_family == AF_INET  ? sizeof(sockaddr_in)
                                 : sa->sa_family == AF_INET6 ? sizeof(sockaddr_in6)
                                                             : 0;
  if (family_len && len < family_len) sa = nullptr;
  c.format = format != FI_SOCKADDR                             ? format
             : sa && sa->sa_family == AF_INET6                 ? std::uint32_t{FI_SOCKADDR_IN6}
                                                               : std::uint32_t{FI_SOCKADDR_IN};
  const bool v6 = c.format == FI_SOCKADDR_IN6;
  const bool usable = sa && family_len &&
                      (c.format == FI_ADDR_STR ||
                       (c.format == FI_SOCKADDR_IN && sa->sa_family == AF_INET) ||
                       (v6 && sa->sa_family == AF_INET6));
  if (usable) {
    std::memcpy(&c.host, sa, family_len);
  } else if (v6) {
    auto* h = reinterpret_cast<sockaddr_in6*>(&c.host);
    h->sin6_family = AF_INET6;
    h->sin6_addr = in6addr_loopback;
  } else {
    auto* h = reinterpret_cast<sockaddr_in*>(&c.host);
    h->sin_family = AF_INET;
    h->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  if (c.host.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(&c.host)->sin_port = 0;
  else
    reinterpret_cast<sockaddr_in6*>(&c.host)->sin6_port = 0;
  return c;
}

std::size_t addr_stride(std::uint32_t format, const void* first) noexcept {
  switch (format) {
    case FI_SOCKADDR_IN: return sizeof(sockaddr_in);
    case FI_SOCKADDR_IN6: return sizeof(sockaddr_in6);
    case FI_ADDR_STR: return 0;
    default: {
      if (!first) return dev::address::v1_bytes;
      const std::size_t n = dev::name_length(first);
      return n ? n : dev::address::v1_bytes;
    }
  }
}

int addr_decode(const addr_codec& c, const void* addr, std::size_t len, dev::address& out,
                port_any any) noexcept {
  if (!addr) return -FI_EINVAL;
  switch (c.format) {
    case FI_SOCKADDR_IN:
    case FI_SOCKADDR_IN6:
      if (len < sizeof(sockaddr)) return -FI_EINVAL;
      return from_sockaddr(c, static_cast<const sockaddr*>(addr), len, out, any);
    case FI_ADDR_STR:
      return from_string(c, static_cast<const char*>(addr), len ? len : addr_str_max, out, any);
    default: {
      // The version says how long the name is: 16 bytes (version 1), 32 (version 3, the
      // compact form of version 2) or 64 (version 2).
      if (len < dev::address::v1_bytes) return -FI_EINVAL;
      const std::size_t n = dev::name_length(addr);
      if (n == 0 || len != n) return -FI_EINVAL;
      if (n == dev::compact_address::bytes) {
        dev::compact_address c;
        std::memcpy(&c, addr, n);
        out = dev::from_compact(c);
        return 0;
      }
      dev::address a;
      std::memcpy(static_cast<void*>(&a), addr, n);
      if (!a.valid()) return -FI_EINVAL;
      out = a;
      return 0;
    }
  }
}

int addr_encode(const addr_codec& c, const dev::address& a, void* out, std::size_t* len) noexcept {
  if (!len) return -FI_EINVAL;
  const std::size_t room = out ? *len : 0;
  if (c.format == FI_ADDR_STR) {
    char host[INET6_ADDRSTRLEN];
    bool v6 = false;
    host_text(c, a, host, v6);
    char text[addr_str_max];
    int n = std::snprintf(text, sizeof text, "%s%s%s%s:%u/%u", exanet_scheme, v6 ? "[" : "", host,
                          v6 ? "]" : "", a.port, a.pdid);
    if (a.version == 2) {  // the fields that find it from another host (parse_v2_query)
      n += std::snprintf(text + n, sizeof text - static_cast<std::size_t>(n),
                         "?node=%x&host=%llx&inc=%llx&lower=", a.node,
                         static_cast<unsigned long long>(a.host),
                         static_cast<unsigned long long>(a.incarnation));
      for (std::size_t i = 0; i < a.lower_len && i < dev::lower_name_bytes; ++i)
        n += std::snprintf(text + n, sizeof text - static_cast<std::size_t>(n), "%02x",
                           static_cast<unsigned>(a.lower_name[i]));
    }
    *len = static_cast<std::size_t>(n) + 1;
    if (room < *len) return -FI_ETOOSMALL;
    std::memcpy(out, text, *len);
    return 0;
  }
  if (c.format == FI_SOCKADDR_IN || c.format == FI_SOCKADDR_IN6) {
    if (a.port >= dev::port_limit) return -FI_EINVAL;
    sockaddr_storage ss = c.host;
    if (c.format == FI_SOCKADDR_IN)
      reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(static_cast<std::uint16_t>(a.port));
    else
      reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(static_cast<std::uint16_t>(a.port));
    *len = addr_stride(c.format);
    if (room < *len) return -FI_ETOOSMALL;
    std::memcpy(out, &ss, *len);
    return 0;
  }
  // A version 2 name in 32 bytes when that loses nothing (dev::to_compact): programs that keep
  // a name in 32 bytes then work across hosts too.
  if (dev::compact_address compact; dev::to_compact(a, compact)) {
    *len = sizeof compact;
    if (room < *len) return -FI_ETOOSMALL;
    std::memcpy(out, &compact, *len);
    return 0;
  }
  *len = a.name_bytes();
  if (room < *len) return -FI_ETOOSMALL;
  std::memcpy(out, &a, *len);
  return 0;
}

int addr_from_node_service(const addr_codec& c, const char* node, const char* service,
                           dev::address& out) noexcept {
  if (c.format == FI_ADDR_STR && node && std::strstr(node, "://")) {
    if (service && *service) return -FI_EINVAL;  // fi_getinfo(3): the string is the whole name
    return from_string(c, node, addr_str_max, out, port_any::allowed);
  }
  std::uint32_t port = 0;
  if (service && *service && !parse_port(service, std::strlen(service), port)) return -FI_EINVAL;
  if (!is_this_host(node)) return remote_by_name(c, node, port, c.pdid, out);
  out = {};
  out.node = c.node;
  out.pdid = c.pdid;
  out.port = port;
  return 0;
}

}  // namespace exanet::fi
