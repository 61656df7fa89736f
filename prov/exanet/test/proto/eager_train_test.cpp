// SPDX-License-Identifier: BSD-2-Clause
// Eager trains (eager_train.cpp): messages above one packet, up to FI_EXANET_EAGER_MAX, as
// eager_data packets then the env_data. Two endpoints check that every size around every packet
// boundary and the threshold moves the right bytes by the right protocol, expected and
// unexpected, from scattered iovecs; that a sender whose mailbox fills in mid-train loses and
// duplicates nothing; and, with a forger on the device, that a train packet out of order, of
// another message, beyond the limit or of a taken psn is dropped and counted, and that an
// env_data whose train did not arrive whole is never matched nor written anywhere.
#include <gtest/gtest.h>
#include <rdma/fabric.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <vector>

#include "endpoint_pair.hpp"
#include "forger.hpp"

namespace exanet::proto {
namespace {

using testing_pair::forger;

using testing_pair::pattern;

constexpr std::size_t train_bytes = wire::eager_train_limit;  // 276

class train_pair_test : public ::testing::Test, protected testing_pair::endpoint_pair {
 protected:
  void SetUp() override {
    cfg.pdid = 3900 + static_cast<std::uint32_t>(getpid() % 1000);
    cfg.eager_max = train_bytes;
    cfg.mailbox_slots = 64;
  }
  /// Sends data from iovecs cut at random points (retrying on a full mailbox).
  core::status send(std::span<const std::byte> data, std::uint64_t tag, std::mt19937& rng) {
    std::vector<iovec> iov;
    std::size_t at = 0;
    const std::size_t pieces = 1 + rng() % 4;
    for (std::size_t i = 0; i < pieces; ++i) {
      const std::size_t n = i + 1 == pieces ? data.size() - at : rng() % (data.size() - at + 1);
      iov.push_back({const_cast<std::byte*>(data.data()) + at, n});
      at += n;
    }
    send_args s;
    s.iov = {iov.data(), iov.size()};
    s.tag = tag;
    s.peer = a_to_b;
    s.kind = queue_kind::tagged;
    core::status st;
    while ((st = a.send(s)) == core::status::again) b.progress();
    return st;
  }
  void recv(std::byte* buf, std::size_t len, std::uint64_t tag, void* ctx) {
    const iovec v{buf, len};
    recv_args r = testing_pair::recv_into(v, tag, b_to_a);
    r.context = ctx;
    ASSERT_EQ(b.recv(r), core::status::ok);
  }
};

TEST_F(train_pair_test, every_size_around_the_packet_boundaries_arrives_whole) {
  open_pair();
  std::mt19937 rng(17);
  std::vector<std::size_t> sizes;
  for (std::size_t edge = wire::eager_payload_max; edge <= train_bytes;
       edge += wire::eager_data_bytes)
    for (std::size_t n : {edge - 1, edge, edge + 1}) sizes.push_back(n);
  sizes.push_back(train_bytes + 1);  // the first medium size
  int ctx = 0;
  for (bool pre_post : {true, false}) {
    for (std::size_t n : sizes) {
      SCOPED_TRACE(testing::Message() << "size " << n << " pre_post " << pre_post);
      const auto data = pattern(n, static_cast<unsigned>(n + pre_post));
      // The receive buffer at every offset within a cache line, guarded on both sides.
      const std::size_t off = rng() % 64;
      std::vector<std::byte> out(n + off + 64, std::byte{0xee});
      const endpoint_stats before = b.stats();
      if (pre_post) recv(out.data() + off, n, 9, &ctx);
      ASSERT_EQ(send(data, 9, rng), core::status::ok);
      if (!pre_post) {
        for (int i = 0; i < 50; ++i) b.progress();  // it arrives unexpected
        ASSERT_EQ(b.unexpected_in_use(), 1u);
        // Up to unexpected_inline_max the record holds the bytes; longer trains (and medium
        // messages) take a buffer counted in the unexpected payload budget.
        EXPECT_EQ(b.unexpected_bytes(), n <= unexpected_inline_max ? 0u : n);
        recv(out.data() + off, n, 9, &ctx);
      }
      pump_until([&] { return !b_rx.entries.empty(); });
      const completion c = b_rx.entries.front();
      b_rx.entries.pop_front();
      EXPECT_EQ(c.err, 0);
      EXPECT_EQ(c.len, n);
      EXPECT_EQ(b.unexpected_bytes(), 0u);
      EXPECT_EQ(std::memcmp(out.data() + off, data.data(), n), 0);
      for (std::size_t i = 0; i < out.size(); ++i) {
        if (i < off || i >= off + n) {
          ASSERT_EQ(out[i], std::byte{0xee}) << "byte " << i;
        }
      }
      const endpoint_stats after = b.stats();
      const bool train = n > wire::eager_payload_max && n <= train_bytes;
      EXPECT_EQ(after.train_recv - before.train_recv, train ? 1u : 0u);
      EXPECT_EQ(after.drop_bad_field, before.drop_bad_field);
    }
  }
  a_tx.entries.clear();
}

TEST_F(train_pair_test, the_threshold_is_eager_max) {
  cfg.eager_max = 100;
  open_pair();
  EXPECT_EQ(a.protocols().choose(op_kind::tagged_send, situation::transmit_complete, 100),
            protocol::eager_train);
  EXPECT_EQ(a.protocols().choose(op_kind::tagged_send, situation::transmit_complete, 101),
            protocol::medium);
  std::mt19937 rng(5);
  int ctx = 0;
  for (std::size_t n : {std::size_t{36}, std::size_t{37}, std::size_t{100}, std::size_t{101}}) {
    SCOPED_TRACE(n);
    const endpoint_stats before = a.stats();
    const auto data = pattern(n, 1);
    std::vector<std::byte> out(n);
    recv(out.data(), n, 3, &ctx);
    ASSERT_EQ(send(data, 3, rng), core::status::ok);
    pump_until([&] { return !b_rx.entries.empty(); });
    b_rx.entries.clear();
    EXPECT_EQ(std::memcmp(out.data(), data.data(), n), 0);
    const endpoint_stats after = a.stats();
    EXPECT_EQ(after.eager_sent - before.eager_sent, n <= 36 ? 1u : 0u);
    EXPECT_EQ(after.train_sent - before.train_sent, n > 36 && n <= 100 ? 1u : 0u);
    EXPECT_EQ(after.medium_sent - before.medium_sent, n > 100 ? 1u : 0u);
  }
}

TEST_F(train_pair_test, injects_of_train_sizes_go_as_trains_without_a_completion) {
  cfg.eager_max = 84;
  open_pair();
  int ctx = 0;
  for (std::size_t n : {std::size_t{36}, std::size_t{37}, std::size_t{64}, std::size_t{84},
                        std::size_t{85}}) {
    SCOPED_TRACE(n);
    const endpoint_stats before = a.stats();
    const auto data = pattern(n, 9);
    std::vector<std::byte> out(n);
    recv(out.data(), n, 2, &ctx);
    core::status st;
    while ((st = a.send_one(a_to_b, data.data(), n, 2, 77, true, queue_kind::tagged, {})) ==
           core::status::again)
      b.progress();
    ASSERT_EQ(st, core::status::ok);
    pump_until([&] { return !b_rx.entries.empty(); });
    const completion c = b_rx.entries.front();
    b_rx.entries.clear();
    EXPECT_EQ(c.len, n);
    EXPECT_EQ(c.data, 77u);
    EXPECT_EQ(std::memcmp(out.data(), data.data(), n), 0);
    const endpoint_stats after = a.stats();
    EXPECT_EQ(after.train_sent - before.train_sent, n > 36 && n <= 84 ? 1u : 0u);
    EXPECT_EQ(after.medium_sent - before.medium_sent, n > 84 ? 1u : 0u);
  }
  EXPECT_TRUE(a_tx.entries.empty()) << "an inject wrote a send completion";
}

TEST_F(train_pair_test, a_train_cut_by_a_full_mailbox_is_sent_again_whole_and_once) {
  cfg.mailbox_slots = 16;
  open_pair();
  // The receiver progresses only when the sender meets a full mailbox. Messages of 190 to 219
  // bytes are trains of 5 packets and 16 slots are not a multiple of 5: sends are cut in
  // mid-train. Every message is retried until it goes; each arrives once, intact, in order.
  constexpr int messages = 40;
  std::vector<std::vector<std::byte>> sent;
  std::vector<std::vector<std::byte>> got(messages, std::vector<std::byte>(256));
  std::vector<int> ctx(messages);
  for (int i = 0; i < messages; ++i) recv(got[i].data(), 256, 4, &ctx[i]);
  int cut = 0;
  for (int i = 0; i < messages; ++i) {
    sent.push_back(pattern(190 + i % 30, static_cast<unsigned>(i)));
    iovec v{sent.back().data(), sent.back().size()};
    send_args s;
    s.iov = {&v, 1};
    s.tag = 4;
    s.peer = a_to_b;
    core::status st;
    while ((st = a.send(s)) == core::status::again) {
      ++cut;
      b.progress();
    }
    ASSERT_EQ(st, core::status::ok);
  }
  EXPECT_GT(cut, 0) << "the mailbox never filled: the test proves nothing";
  pump_until([&] { return b_rx.entries.size() == messages; });
  for (int i = 0; i < messages; ++i) {
    const completion& c = b_rx.entries[i];
    EXPECT_EQ(c.context, &ctx[i]);
    EXPECT_EQ(c.err, 0);
    ASSERT_EQ(c.len, sent[i].size());
    EXPECT_EQ(std::memcmp(got[i].data(), sent[i].data(), c.len), 0) << "message " << i;
  }
  EXPECT_EQ(b.stats().train_recv, std::uint64_t{messages});
  EXPECT_EQ(b.stats().drop_bad_field, 0u);
}

// ---- what no correct sender sends ------------------------------------------------------------

class train_forgery_test : public ::testing::Test, protected testing_pair::endpoint_pair {
 protected:
  forger f;
  dev::peer_id b_to_f = dev::no_peer;
  std::vector<std::byte> buf = std::vector<std::byte>(512, std::byte{0xee});
  int ctx = 0;

  void SetUp() override {
    cfg.pdid = 4900 + static_cast<std::uint32_t>(getpid() % 1000);
    cfg.eager_max = train_bytes;
    open_pair();
    f.open(cfg.pdid, b.address());
    ASSERT_EQ(b.connect(f.dev.local_address(), b_to_f), core::status::ok);
    iovec v{buf.data(), 300};
    recv_args r;
    r.iov = {&v, 1};
    r.tag = 6;
    r.peer = b_to_f;
    r.context = &ctx;
    ASSERT_EQ(b.recv(r), core::status::ok);
  }
  static wire::eager_data data(wire::psn_t psn, std::uint32_t offset, std::size_t len,
                               unsigned char fill) {
    wire::eager_data d{};
    d.hdr = wire::make_header(wire::pkt_type::eager_data, 0, static_cast<std::uint32_t>(len));
    d.psn = psn;
    d.offset = offset;
    std::memset(d.payload, fill, sizeof d.payload);
    return d;
  }
  static wire::env_data head(wire::psn_t psn, std::size_t len, unsigned char fill) {
    wire::env_data p{};
    p.hdr = wire::make_header(wire::pkt_type::env_data, wire::flag_tagged | wire::flag_train,
                              static_cast<std::uint32_t>(len));
    p.tag = 6;
    p.psn = psn;
    std::memset(p.payload, fill, sizeof p.payload);
    return p;
  }
  void settle() {
    for (int i = 0; i < 200; ++i) b.progress();
  }
  bool untouched() const {
    for (std::byte x : buf)
      if (x != std::byte{0xee}) return false;
    return true;
  }
  /// A correct train of 36 + 2 * 48 bytes with psn p: the receive takes it, bytes as sent.
  void send_good(wire::psn_t p) {
    f.send(data(p, 0, 48, 0x11), b);
    f.send(data(p, 48, 48, 0x22), b);
    f.send(head(p, 132, 0x33), b);
    settle();
  }
  void expect_good_delivery() {
    ASSERT_EQ(b_rx.entries.size(), 1u);
    EXPECT_EQ(b_rx.entries.front().err, 0);
    EXPECT_EQ(b_rx.entries.front().len, 132u);
    for (std::size_t i = 0; i < 132; ++i)
      ASSERT_EQ(buf[i], std::byte(i < 48 ? 0x11 : i < 96 ? 0x22 : 0x33)) << "byte " << i;
    for (std::size_t i = 132; i < buf.size(); ++i) ASSERT_EQ(buf[i], std::byte{0xee});
  }
};

TEST_F(train_forgery_test, a_continuation_without_its_start_is_dropped) {
  f.send(data(1, 48, 48, 0x77), b);  // no offset-0 packet before it
  settle();
  EXPECT_EQ(b.stats().drop_bad_field, 1u);
  f.send(data(1, 0, 48, 0x11), b);
  f.send(data(1, 48, 48, 0x22), b);
  f.send(head(1, 132, 0x33), b);
  settle();
  expect_good_delivery();  // the forged bytes were written nowhere
}

TEST_F(train_forgery_test, a_continuation_of_another_message_or_out_of_order_is_dropped) {
  f.send(data(1, 0, 48, 0x11), b);
  f.send(data(2, 48, 48, 0x77), b);  // another psn
  f.send(data(1, 96, 48, 0x77), b);  // skips offset 48
  f.send(data(1, 0 + 47, 48, 0x77), b);  // overlaps
  settle();
  EXPECT_EQ(b.stats().drop_bad_field, 3u);
  EXPECT_TRUE(b_rx.entries.empty());
  f.send(data(1, 48, 48, 0x22), b);
  f.send(head(1, 132, 0x33), b);
  settle();
  expect_good_delivery();
}

TEST_F(train_forgery_test, an_env_data_whose_train_is_incomplete_is_never_delivered) {
  // Partial: one of the two data packets, then the env_data that claims 132 bytes.
  f.send(data(1, 0, 48, 0x11), b);
  f.send(head(1, 132, 0x33), b);
  settle();
  EXPECT_TRUE(b_rx.entries.empty()) << "a partial message was matched";
  EXPECT_TRUE(untouched());
  EXPECT_EQ(b.stats().train_recv, 0u);
  EXPECT_EQ(b.stats().drop_bad_field, 1u);
  // No train at all, and an env_data longer than one packet without the train flag.
  f.send(head(2, 84, 0x33), b);
  wire::env_data plain = head(3, 84, 0x33);
  plain.hdr.flags = wire::flag_tagged;
  f.send(plain, b);
  settle();
  EXPECT_TRUE(b_rx.entries.empty());
  EXPECT_TRUE(untouched());
  EXPECT_EQ(b.stats().drop_bad_field, 3u);
  // The sender's next correct message still arrives.
  send_good(4);
  expect_good_delivery();
}

TEST_F(train_forgery_test, train_packets_beyond_the_limit_or_of_a_taken_psn_are_dropped) {
  f.send(data(1, 0, 49, 0x77), b);  // more than a packet's payload
  f.send(data(1, 0, 0, 0x77), b);   // empty
  f.send(data(1, train_bytes - wire::eager_payload_max, 1, 0x77), b);  // past the buffer
  f.send(data(1, 0xfffffff0u, 48, 0x77), b);                           // offset wraps
  f.send(data(1'000'000, 0, 48, 0x77), b);                             // beyond the window
  settle();
  EXPECT_EQ(b.stats().drop_bad_field, 5u);
  // An env_data longer than the train buffer, after a full-length train.
  for (std::uint32_t off = 0; off < train_bytes - wire::eager_payload_max; off += 48)
    f.send(data(1, off, 48, 0x77), b);
  f.send(head(1, train_bytes + 1, 0x77), b);
  settle();
  EXPECT_EQ(b.stats().drop_bad_field, 6u);
  EXPECT_TRUE(b_rx.entries.empty());
  EXPECT_TRUE(untouched());
  // psn 1 is taken now (its env_data was admitted, then dropped): a train naming it is stale.
  f.send(data(1, 0, 48, 0x77), b);
  settle();
  EXPECT_EQ(b.stats().drop_bad_field, 7u);
  send_good(2);
  expect_good_delivery();
}

}  // namespace
}  // namespace exanet::proto
