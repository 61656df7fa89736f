// SPDX-License-Identifier: BSD-2-Clause
// The endpoint name's compact form (dev/address.hpp, version 3): every version 2 name it takes
// comes back bit for bit, and a name it would not keep whole is left in the long form.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "dev/address.hpp"

namespace exanet::dev {
namespace {

address network_name(std::mt19937_64& rng) {
  address a{};
  a.version = 2;
  a.node = static_cast<std::uint16_t>(rng());
  a.pdid = static_cast<std::uint32_t>(rng());
  a.port = static_cast<std::uint32_t>(rng() % port_limit);
  a.host = (rng() & id_mask) | 1;
  a.incarnation = (rng() & id_mask) | 1;
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = static_cast<std::uint16_t>(rng());
  sin.sin_addr.s_addr = static_cast<std::uint32_t>(rng());
  std::memcpy(a.lower_name.data(), &sin, sizeof sin);
  a.lower_len = sizeof sin;
  return a;
}

TEST(compact_address, a_network_name_over_ipv4_round_trips_bit_for_bit) {
  std::mt19937_64 rng(20261206);
  for (int i = 0; i < 100000; ++i) {
    const address a = network_name(rng);
    compact_address c;
    ASSERT_TRUE(to_compact(a, c));
    EXPECT_EQ(name_length(&c), compact_address::bytes);
    const address back = from_compact(c);
    ASSERT_EQ(std::memcmp(&back, &a, sizeof a), 0) << "name " << i;
    EXPECT_TRUE(back.valid());
  }
}

TEST(compact_address, names_it_cannot_keep_whole_stay_long) {
  std::mt19937_64 rng(7);
  const address base = network_name(rng);
  compact_address c;
  auto refused = [&](auto change) {
    address a = base;
    change(a);
    return !to_compact(a, c);
  };
  EXPECT_TRUE(refused([](address& a) { a.version = 1; }));
  EXPECT_TRUE(refused([](address& a) { a.magic ^= 1; }));
  EXPECT_TRUE(refused([](address& a) { a.port = port_limit; }));
  EXPECT_TRUE(refused([](address& a) { a.host |= std::uint64_t{1} << id_bits; }));
  EXPECT_TRUE(refused([](address& a) { a.incarnation |= std::uint64_t{1} << 63; }));
  EXPECT_TRUE(refused([](address& a) { a.lower_len = 28; }));  // IPv6's length
  EXPECT_TRUE(refused([](address& a) {
    sockaddr_in6 six{};
    six.sin6_family = AF_INET6;
    std::memcpy(a.lower_name.data(), &six, sizeof(sockaddr_in));
  }));
  // Any byte past the family, port and IPv4 address would be lost.
  for (std::size_t i = 8; i < lower_name_bytes; ++i)
    EXPECT_TRUE(refused([i](address& a) { a.lower_name[i] = std::byte{1}; })) << "byte " << i;
  EXPECT_FALSE(refused([](address&) {}));
}

TEST(compact_address, the_length_comes_from_the_version) {
  address v1{};
  EXPECT_EQ(name_length(&v1), address::v1_bytes);
  address v2 = v1;
  v2.version = 2;
  EXPECT_EQ(name_length(&v2), sizeof(address));
  address v4 = v1;
  v4.version = 4;
  EXPECT_EQ(name_length(&v4), 0u);
  address foreign = v1;
  foreign.magic = 0;
  EXPECT_EQ(name_length(&foreign), 0u);
}

}  // namespace
}  // namespace exanet::dev
