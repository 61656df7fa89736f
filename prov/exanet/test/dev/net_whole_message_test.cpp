// SPDX-License-Identifier: BSD-2-Clause
// dev/net's lower message size (dev::net::lower_whole_message_bytes): what the network backend
// assumes the lower provider sends whole when posted, from its name and the ofi_rxm parameters of
// this process. Each expectation is a behaviour measured with fi_pingpong over the provider named
// (see the function's comment); the rest are the clamps and the values ofi_rxm would not parse.
#include <cstdio>
#include <gtest/gtest.h>

#include "dev/net/device.hpp"

namespace exanet::dev::net {
namespace {

constexpr std::size_t kib = 1024;
constexpr std::size_t most = 128 * kib;  // a quarter of a 512 KiB receive buffer

std::size_t whole(const char* prov, const char* buffer_size = nullptr,
                  const char* eager_limit = nullptr, std::size_t limit = most) {
  return lower_whole_message_bytes(prov, buffer_size, eager_limit, limit);
}

TEST(lower_whole_message_bytes, rxm_defaults_to_its_16_kib_buffer) {
  EXPECT_EQ(whole("tcp;ofi_rxm"), 16 * kib);
  EXPECT_EQ(whole("verbs;ofi_rxm"), 16 * kib);
}

TEST(lower_whole_message_bytes, rxm_buffer_size_is_followed) {
  EXPECT_EQ(whole("tcp;ofi_rxm", "17408"), 17408u);
  EXPECT_EQ(whole("verbs;ofi_rxm", "32768"), 32 * kib);
  EXPECT_EQ(whole("tcp;ofi_rxm", "8192"), 8 * kib);
}

TEST(lower_whole_message_bytes, exanets_own_choice_carries_two_16_kib_medium_messages_whole) {
  // rxm_buffer_choice (34816) is what exanet's lower messages may be: two 16 KiB medium
  // messages with their header and an eager train's packets fit, under a receive buffer's
  // quarter.
  char choice[24];
  std::snprintf(choice, sizeof choice, "%zu", rxm_buffer_choice);
  EXPECT_EQ(whole("tcp;ofi_rxm", choice, nullptr, 64 * kib), rxm_buffer_choice);
  EXPECT_GE(rxm_buffer_choice, wire::bundle_bytes(2 * 16 * kib, wire::train_room));
  // A user's 17408 (the choice before 2026-12-07 10:00) is kept; a user's 66560 (fi_exanet(7), OTHER HOSTS) is cut to the quarter: 64 KiB.
  EXPECT_EQ(whole("tcp;ofi_rxm", "17408", nullptr, 64 * kib), 17408u);
  EXPECT_EQ(whole("tcp;ofi_rxm", "66560", nullptr, 64 * kib), 64 * kib);
}

TEST(lower_whole_message_bytes, a_larger_eager_limit_counts_over_a_byte_stream_only) {
  // tcp;ofi_rxm sent 20000 B whole with FI_OFI_RXM_EAGER_LIMIT=32768 and default buffers.
  EXPECT_EQ(whole("tcp;ofi_rxm", nullptr, "32768"), 32 * kib);
  EXPECT_EQ(whole("net;ofi_rxm", "17408", "65536"), 64 * kib);
  // A smaller one does not shrink the buffer (16384 B stayed fast with a limit of 8192).
  EXPECT_EQ(whole("tcp;ofi_rxm", nullptr, "8192"), 16 * kib);
  EXPECT_EQ(whole("tcp;ofi_rxm", "20000", "8192"), 20000u);
  // Over verbs a message past the buffer is segmented whatever the limit.
  EXPECT_EQ(whole("verbs;ofi_rxm", nullptr, "32768"), 16 * kib);
}

TEST(lower_whole_message_bytes, native_stream_rdm_sends_64_kib_whole) {
  EXPECT_EQ(whole("net"), native_whole_bytes);
  EXPECT_EQ(whole("tcp"), native_whole_bytes);
  // The rxm parameters are ofi_rxm's: they do not apply without it.
  EXPECT_EQ(whole("net", "8192", "8192"), native_whole_bytes);
}

TEST(lower_whole_message_bytes, other_providers_get_the_layered_default) {
  EXPECT_EQ(whole("udp;ofi_rxd"), whole_message_default);
  EXPECT_EQ(whole("sockets", "65536"), whole_message_default);
  EXPECT_EQ(whole(""), whole_message_default);
}

TEST(lower_whole_message_bytes, values_rxm_would_not_take_as_a_plain_number_are_ignored) {
  for (const char* v : {"", "16k", "-5", " 17408", "17408 ", "0x4400", "abc"})
    EXPECT_EQ(whole("tcp;ofi_rxm", v), 16 * kib) << '"' << v << '"';
  EXPECT_EQ(whole("tcp;ofi_rxm", "0"), 16 * kib);
}

TEST(lower_whole_message_bytes, the_result_is_clamped_to_what_bundles_and_receive_buffers_take) {
  EXPECT_EQ(whole("tcp;ofi_rxm", "1000"), whole_message_min);
  EXPECT_EQ(whole("tcp;ofi_rxm", "1048576"), most);
  EXPECT_EQ(whole("net", nullptr, nullptr, 32 * kib), 32 * kib);
  // A receive buffer too small for even the least: the least (open refuses such buffers).
  EXPECT_EQ(whole("tcp;ofi_rxm", nullptr, nullptr, 1024), whole_message_min);
}

}  // namespace
}  // namespace exanet::dev::net
