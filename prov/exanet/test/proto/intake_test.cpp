// SPDX-License-Identifier: BSD-2-Clause
// The bounds of what peers' packets make an endpoint keep (intake.cpp, issue 12 part 5): a flood
// of unexpected messages stops at the budget the attributes give (records and medium payload),
// the sender meets back-pressure instead of the receiver growing, packets that answer the
// receiver's own sends still get through, and everything is delivered once the application
// receives. Stored RTRs stop at their cap; the receives beyond it complete sender-initiated.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <vector>

#include "endpoint_pair.hpp"
#include "proto/endpoint.hpp"

namespace exanet::proto {
namespace {

using testing_pair::pattern;

class intake_test : public ::testing::Test, protected testing_pair::endpoint_pair {
 protected:
  void open(std::size_t rx_size, std::size_t tx_size) {
    cfg.pdid = 1900 + static_cast<std::uint32_t>(getpid() % 1000);
    cfg.rx_size = rx_size;
    cfg.tx_size = tx_size;
    cfg.notify_slots = 4096;
    // A small mailbox (and so a small held queue, twice as large): the sender meets
    // -FI_EAGAIN after a few hundred packets rather than a few thousand.
    cfg.mailbox_slots = 128;
    open_pair();
  }
  static send_args to(dev::peer_id p, const iovec& v, std::uint64_t tag) {
    send_args s;
    s.iov = {&v, 1};
    s.tag = tag;
    s.peer = p;
    return s;
  }
  static recv_args from(dev::peer_id p, const iovec& v, std::uint64_t tag) {
    recv_args r;
    r.iov = {&v, 1};
    r.tag = tag;
    r.peer = p;
    return r;
  }
};

// 600 medium messages of 8 KiB (4.8 MB) at a receiver whose rx_size is 16: its budget is 256
// records and 16 x 8 KiB of payload. The sender must meet -FI_EAGAIN long before the end.
TEST_F(intake_test, an_unexpected_flood_stops_at_the_budget_and_nothing_is_lost) {
  open(16, 1024);
  const config& c = b.cfg();
  ASSERT_EQ(c.unexpected_max, 256u);
  ASSERT_EQ(c.unexpected_bytes, 16u * c.medium_max);
  constexpr int count = 600;
  const std::size_t len = c.medium_max;
  std::vector<std::vector<std::byte>> data;
  for (int i = 0; i < count; ++i) data.push_back(pattern(len, static_cast<unsigned>(i)));
  std::vector<iovec> iov(count);
  int sent = 0;
  long stuck = 0;  // consecutive -FI_EAGAIN while both progress
  auto flood = [&](const std::function<bool()>& enough) {
    while (sent < count && stuck < 20000 && !enough()) {
      iov[sent] = {data[sent].data(), len};
      const core::status s = a.send(to(a_to_b, iov[sent], 1000 + sent));
      if (s == core::status::again) {
        ++stuck;
      } else {
        ASSERT_EQ(s, core::status::ok);
        ++sent;
        stuck = 0;
      }
      a.progress();
      b.progress();
    }
  };
  // Until the receiver holds a mailbox's worth at its bound; from then on the sender's sends are
  // refused (the receiver's intake_held word), so the held queue only absorbs what was in flight.
  flood([&] { return b.held_packets() >= 128; });
  ASSERT_GE(b.held_packets(), 128u);
  const std::size_t sent_at_hold = sent;
  for (int i = 0; i < 100; ++i) {
    iovec v{data[sent].data(), len};
    EXPECT_EQ(a.send(to(a_to_b, v, 1000 + sent)), core::status::again)
        << "a sender may not add message packets while the receiver holds";
    a.progress();
  }
  EXPECT_EQ(sent, sent_at_hold);

  // A send of the receiver's own still completes while it holds: the RTR (or CTS) that answers
  // it arrives behind the held packets in its mailbox and must not wait for them.
  auto big = pattern(1 << 20, 77);
  iovec bv{big.data(), big.size()};
  std::vector<std::byte> big_out(big.size());
  iovec bov{big_out.data(), big_out.size()};
  ASSERT_EQ(a.recv(from(a_to_b, bov, 5)), core::status::ok);
  core::status bs;
  while ((bs = b.send(to(b_to_a, bv, 5))) == core::status::again) a.progress();
  ASSERT_EQ(bs, core::status::ok);
  pump_until([&] { return !b_tx.entries.empty() && !a_rx.entries.empty(); });
  EXPECT_EQ(big_out, big);
  b_tx.entries.clear();
  a_rx.entries.clear();

  // Then until the sender is stopped: the receiver holds no more than its budget.
  flood([] { return false; });
  EXPECT_LT(sent, count) << "no back-pressure: the receiver kept everything";
  EXPECT_LE(b.unexpected_in_use(), c.unexpected_max);
  EXPECT_LE(b.unexpected_bytes(), c.unexpected_bytes);
  EXPECT_LE(b.stats().unexpected_max, c.unexpected_max);
  EXPECT_GT(b.stats().intake_held, 0u);

  // The application receives, in reverse order: every message arrives intact, including those
  // the sender could only post once room was made.
  std::vector<std::vector<std::byte>> out(count, std::vector<std::byte>(len));
  std::vector<iovec> oiov(count);
  for (int i = count - 1; i >= 0; --i) {
    oiov[i] = {out[i].data(), len};
    recv_args r = from(b_to_a, oiov[i], 1000 + i);
    r.context = &out[i];
    ASSERT_EQ(b.recv(r), core::status::ok);
    if (i % 16 == 0) {
      a.progress();
      b.progress();
    }
  }
  for (long spins = 0; sent < count && spins < 10'000'000; ++spins) {
    iov[sent] = {data[sent].data(), len};
    const core::status s = a.send(to(a_to_b, iov[sent], 1000 + sent));
    if (s == core::status::ok) ++sent;
    else ASSERT_EQ(s, core::status::again);
    a.progress();
    b.progress();
  }
  ASSERT_EQ(sent, count);
  pump_until([&] { return b_rx.entries.size() == static_cast<std::size_t>(count); });
  for (const completion& e : b_rx.entries) EXPECT_EQ(e.err, 0);
  for (int i = 0; i < count; ++i) ASSERT_EQ(out[i], data[i]) << "message " << i;
  EXPECT_EQ(b.unexpected_in_use(), 0u);
  EXPECT_EQ(b.unexpected_bytes(), 0u);
  EXPECT_EQ(b.held_packets(), 0u);
}

// Eager, train, short medium and RTS floods count against the records (their payload is in the
// record, up to unexpected_inline_max, or not sent), not against the payload budget.
TEST_F(intake_test, eager_and_rendezvous_floods_stop_at_the_record_bound) {
  open(4, 1024);  // 64 records
  const config& c = b.cfg();
  constexpr int count = 400;
  std::vector<std::vector<std::byte>> data;
  for (int i = 0; i < count; ++i)
    data.push_back(pattern(i % 4 == 0   ? 8
                           : i % 4 == 1 ? 64
                           : i % 4 == 2 ? unexpected_inline_max
                                        : 2 * c.medium_max,
                           static_cast<unsigned>(i)));
  std::vector<iovec> iov(count);
  int sent = 0;
  long stuck = 0;
  while (sent < count && stuck < 20000) {
    iov[sent] = {data[sent].data(), data[sent].size()};
    const core::status s = a.send(to(a_to_b, iov[sent], 7));  // one tag: order matters too
    if (s == core::status::again) ++stuck;
    else { ASSERT_EQ(s, core::status::ok); ++sent; stuck = 0; }
    a.progress();
    b.progress();
  }
  EXPECT_LT(sent, count);
  EXPECT_LE(b.stats().unexpected_max, c.unexpected_max);
  EXPECT_GT(b.stats().train_recv, 0u) << "no 64-byte message went as a train";
  EXPECT_GT(b.stats().medium_recv, 0u) << "no 276-byte message went through the ring";
  EXPECT_EQ(b.unexpected_bytes(), 0u) << "these messages' bytes belong in their records";
  std::vector<std::vector<std::byte>> out(count);
  std::vector<iovec> oiov(count);
  for (int i = 0; i < count; ++i) {
    out[i].assign(data[i].size(), std::byte{0});
    oiov[i] = {out[i].data(), out[i].size()};
    ASSERT_EQ(b.recv(from(b_to_a, oiov[i], 7)), core::status::ok);
    a.progress();
    b.progress();
    while (sent < count) {
      iov[sent] = {data[sent].data(), data[sent].size()};
      const core::status s = a.send(to(a_to_b, iov[sent], 7));
      if (s != core::status::ok) break;
      ++sent;
    }
  }
  for (long spins = 0; sent < count && spins < 10'000'000; ++spins) {
    iov[sent] = {data[sent].data(), data[sent].size()};
    if (a.send(to(a_to_b, iov[sent], 7)) == core::status::ok) ++sent;
    a.progress();
    b.progress();
  }
  ASSERT_EQ(sent, count);
  pump_until([&] { return b_rx.entries.size() == static_cast<std::size_t>(count); });
  for (int i = 0; i < count; ++i) ASSERT_EQ(out[i], data[i]) << "message " << i << " (send order)";
}

// 1500 directed receives above medium_max each send an RTR; the sender (tx_size 16) keeps at
// most 64 of them and NACKs the rest, whose receives then complete sender-initiated.
TEST_F(intake_test, stored_rtrs_stop_at_their_cap_and_every_receive_completes) {
  open(1024, 16);
  const std::size_t cap = a.cfg().stored_rtr_max;
  ASSERT_EQ(cap, 64u);
  constexpr int count = 1500;
  const std::size_t len = 2 * b.cfg().medium_max;
  std::vector<std::vector<std::byte>> out(count, std::vector<std::byte>(len));
  std::vector<iovec> oiov(count);
  for (int i = 0; i < count; ++i) {
    oiov[i] = {out[i].data(), len};
    ASSERT_EQ(b.recv(from(b_to_a, oiov[i], 50000 + i)), core::status::ok);
  }
  for (int i = 0; i < 20000; ++i) {
    a.progress();
    b.progress();
  }
  EXPECT_GT(b.stats().rtr_sent, static_cast<std::uint64_t>(cap)) << "the receiver sent few RTRs";
  EXPECT_LE(a.stored_rtrs(), cap);
  EXPECT_LE(a.stats().rtr_stored, cap);
  EXPECT_EQ(a.stats().rtr_stored + a.stats().rtr_stale, b.stats().rtr_sent);
  // Now the sends: every receive completes with its own data.
  std::vector<std::vector<std::byte>> data;
  for (int i = 0; i < count; ++i) data.push_back(pattern(len, static_cast<unsigned>(i)));
  std::vector<iovec> iov(count);
  for (int i = 0; i < count; ++i) {
    iov[i] = {data[i].data(), len};
    core::status s;
    while ((s = a.send(to(a_to_b, iov[i], 50000 + i))) == core::status::again) {
      a.progress();
      b.progress();
    }
    ASSERT_EQ(s, core::status::ok);
  }
  pump_until([&] {
    return b_rx.entries.size() == static_cast<std::size_t>(count) &&
           a_tx.entries.size() == static_cast<std::size_t>(count);
  });
  for (const completion& e : b_rx.entries) EXPECT_EQ(e.err, 0);
  for (int i = 0; i < count; ++i) ASSERT_EQ(out[i], data[i]) << "receive " << i;
  EXPECT_EQ(a.stored_rtrs(), 0u);
}

}  // namespace
}  // namespace exanet::proto
