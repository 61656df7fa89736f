// SPDX-License-Identifier: BSD-2-Clause
// Two proto endpoints over the emulated device in one process: every path (eager, medium,
// rendezvous; expected and unexpected; truncation; iovecs; both DMA backends) moves the right
// bytes and reports the right completions, without any libfabric object in between.
#include <gtest/gtest.h>
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <numeric>
#include <vector>

#include "proto/endpoint.hpp"
#include "endpoint_pair.hpp"

namespace exanet::proto {
namespace {

using testing_pair::collected;

using testing_pair::pattern;

class pair_test : public ::testing::TestWithParam<dev::dma_engine_mode>, protected testing_pair::endpoint_pair {
 protected:
  void SetUp() override {
    cfg.pdid = 900 + static_cast<std::uint32_t>(getpid() % 1000);
    cfg.dma_engine = GetParam();
    open_pair();
  }
  core::status send(std::span<const std::byte> data, std::uint64_t tag, void* ctx,
                    queue_kind kind = queue_kind::tagged) {
    const iovec v{const_cast<std::byte*>(data.data()), data.size()};
    send_args s = testing_pair::send_from(v, tag, a_to_b, kind);
    s.context = ctx;
    core::status st;
    while ((st = a.send(s)) == core::status::again) {
      a.progress();
      b.progress();
    }
    return st;
  }
  core::status recv(std::span<std::byte> buf, std::uint64_t tag, std::uint64_t ignore, void* ctx,
                    queue_kind kind = queue_kind::tagged) {
    iovec v{buf.data(), buf.size()};
    recv_args r;
    r.iov = {&v, 1};
    r.tag = tag;
    r.ignore = ignore;
    r.context = ctx;
    r.kind = kind;
    return b.recv(r);
  }

};

TEST_P(pair_test, every_size_expected_and_unexpected) {
  const std::size_t sizes[] = {0, 1, 40, 41, 4096, 16384, 16385, 65536, 1 << 20, (4 << 20) + 3};
  int ctx_send = 0, ctx_recv = 0;
  for (bool pre_post : {true, false}) {
    for (std::size_t n : sizes) {
      SCOPED_TRACE(testing::Message() << "size " << n << " pre_post " << pre_post);
      auto data = pattern(n, static_cast<unsigned>(n));
      std::vector<std::byte> out(n + 16, std::byte{0xee});
      if (pre_post) {
        ASSERT_EQ(recv({out.data(), n}, 7, 0, &ctx_recv), core::status::ok);
      }
      ASSERT_EQ(send(data, 7, &ctx_send), core::status::ok);
      if (!pre_post) {
        for (int i = 0; i < 100; ++i) b.progress();  // let it arrive unexpected
        ASSERT_EQ(recv({out.data(), n}, 7, 0, &ctx_recv), core::status::ok);
      } else {
        ASSERT_EQ(b_rx.entries.size(), 0u);
      }
      pump_until([&] { return !b_rx.entries.empty() && !a_tx.entries.empty(); });
      const completion rc = b_rx.entries.front();
      b_rx.entries.pop_front();
      const completion sc = a_tx.entries.front();
      a_tx.entries.pop_front();
      EXPECT_EQ(rc.err, 0);
      EXPECT_EQ(rc.context, &ctx_recv);
      EXPECT_EQ(rc.len, n);
      EXPECT_EQ(rc.tag, 7u);
      EXPECT_EQ(rc.flags, FI_RECV | FI_TAGGED);
      EXPECT_EQ(sc.err, 0);
      EXPECT_EQ(sc.context, &ctx_send);
      EXPECT_EQ(sc.flags, FI_SEND | FI_TAGGED);
      if (n) {  // memcmp of a NULL (empty) buffer is undefined
        EXPECT_EQ(std::memcmp(out.data(), data.data(), n), 0);
      }
      for (std::size_t i = n; i < out.size(); ++i) {
        ASSERT_EQ(out[i], std::byte{0xee});
      }
    }
  }
}

TEST_P(pair_test, truncation_reports_olen_and_writes_nothing_past_the_buffer) {
  // Posted first, and arriving first (an unexpected eager, train or medium message completes
  // within the receive's post, without a request record: endpoint::take_unexpected_at_post).
  for (bool pre_post : {true, false}) {
    for (std::size_t n : {std::size_t{30}, std::size_t{60}, std::size_t{8000}, std::size_t{1} << 20}) {
      SCOPED_TRACE(testing::Message() << "size " << n << " pre_post " << pre_post);
      auto data = pattern(n, 3);
      const std::size_t cap = n / 2;
      std::vector<std::byte> out(cap + 64, std::byte{0x5a});
      int ctx = 0;
      if (pre_post) {
        ASSERT_EQ(recv({out.data(), cap}, 1, 0, &ctx), core::status::ok);
      }
      ASSERT_EQ(send(data, 1, nullptr), core::status::ok);
      if (!pre_post) {
        for (int i = 0; i < 100; ++i) b.progress();  // let it arrive unexpected
        ASSERT_EQ(recv({out.data(), cap}, 1, 0, &ctx), core::status::ok);
      }
      pump_until([&] { return !b_rx.entries.empty(); });
      const completion c = b_rx.entries.front();
      b_rx.entries.clear();
      a_tx.entries.clear();
      EXPECT_EQ(c.err, FI_ETRUNC);
      EXPECT_EQ(c.len, cap);
      EXPECT_EQ(c.olen, n - cap);
      EXPECT_EQ(c.context, &ctx);
      EXPECT_EQ(std::memcmp(out.data(), data.data(), cap), 0);
      for (std::size_t i = cap; i < out.size(); ++i) ASSERT_EQ(out[i], std::byte{0x5a});
    }
  }
}

TEST_P(pair_test, a_message_waiting_at_post_completes_as_a_posted_one_would) {
  // Every field of the completion, scattered iovecs, remote CQ data, an untagged queue, and a
  // receive that asked for no success completion: for each size class that can complete within
  // the post (eager, train, medium) and for a rendezvous, which still goes through a request.
  for (std::size_t n : {std::size_t{8}, std::size_t{60}, std::size_t{3000}, std::size_t{200000}}) {
    for (queue_kind kind : {queue_kind::tagged, queue_kind::msg}) {
      SCOPED_TRACE(testing::Message() << "size " << n << " tagged " << (kind == queue_kind::tagged));
      const auto data = pattern(n, 11);
      iovec sv{const_cast<std::byte*>(data.data()), n};
      send_args s;
      s.iov = {&sv, 1};
      s.tag = 0x4242;
      s.peer = a_to_b;
      s.kind = kind;
      s.cq_data = 0xfeedull;
      s.has_cq_data = true;
      ASSERT_EQ(a.send(s), core::status::ok);
      for (int i = 0; i < 100; ++i) b.progress();  // it arrives before any receive
      // Three uneven buffers, the first shorter than an eager payload, with gaps between them.
      std::vector<std::byte> out(n + 64, std::byte{0x77});
      const std::size_t first = 3, second = n / 3, gap = 8;
      iovec rv[3] = {{out.data(), first},
                     {out.data() + first + gap, second},
                     {out.data() + first + second + 2 * gap, n - first - second}};
      auto gathered = [&] {
        std::vector<std::byte> v;
        for (const iovec& x : rv)
          v.insert(v.end(), static_cast<std::byte*>(x.iov_base),
                   static_cast<std::byte*>(x.iov_base) + x.iov_len);
        return v;
      };
      auto gaps_untouched = [&] {
        for (std::size_t i = 0; i < gap; ++i)
          if (out[first + i] != std::byte{0x77} || out[first + second + gap + i] != std::byte{0x77})
            return false;
        for (std::size_t i = n + 2 * gap; i < out.size(); ++i)
          if (out[i] != std::byte{0x77}) return false;
        return true;
      };
      recv_args r;
      r.iov = {rv, 3};
      r.tag = kind == queue_kind::tagged ? 0x4240 : 0;
      r.ignore = kind == queue_kind::tagged ? 0x000f : 0;
      r.peer = b_to_a;
      int ctx = 0;
      r.context = &ctx;
      r.kind = kind;
      ASSERT_EQ(b.recv(r), core::status::ok);
      pump_until([&] { return !b_rx.entries.empty() && !a_tx.entries.empty(); });
      const completion c = b_rx.entries.front();
      b_rx.entries.clear();
      a_tx.entries.clear();
      EXPECT_EQ(c.err, 0);
      EXPECT_EQ(c.context, &ctx);
      EXPECT_EQ(c.len, n);
      EXPECT_EQ(c.data, 0xfeedull);
      EXPECT_EQ(c.tag, kind == queue_kind::tagged ? 0x4242u : 0u);
      EXPECT_EQ(c.flags, FI_RECV | FI_REMOTE_CQ_DATA |
                             (kind == queue_kind::tagged ? FI_TAGGED : FI_MSG));
      EXPECT_EQ(gathered(), data);
      EXPECT_TRUE(gaps_untouched());

      // No success completion asked for: the message is still taken, and nothing is written.
      ASSERT_EQ(a.send(s), core::status::ok);
      for (int i = 0; i < 100; ++i) b.progress();
      r.completion = false;
      ASSERT_EQ(b.recv(r), core::status::ok);
      pump_until([&] { return !a_tx.entries.empty(); });
      for (int i = 0; i < 100; ++i) b.progress();
      EXPECT_TRUE(b_rx.entries.empty());
      EXPECT_EQ(b.unexpected_in_use(), 0u);
      EXPECT_EQ(gathered(), data);
      EXPECT_TRUE(gaps_untouched());
      a_tx.entries.clear();
    }
  }
}

TEST_P(pair_test, earliest_posted_receive_wins_and_ignore_masks_match) {
  std::array<std::byte, 8> x{}, y{};
  int first = 0, second = 0;
  ASSERT_EQ(recv(x, 0x100, 0xff, &first), core::status::ok);  // any of 0x100..0x1ff
  ASSERT_EQ(recv(y, 0x105, 0, &second), core::status::ok);    // exactly 0x105
  auto d = pattern(8, 1);
  ASSERT_EQ(send(d, 0x105, nullptr), core::status::ok);
  pump_until([&] { return !b_rx.entries.empty(); });
  EXPECT_EQ(b_rx.entries.front().context, &first);
  EXPECT_EQ(b_rx.entries.front().tag, 0x105u);
}

TEST_P(pair_test, messages_of_one_sender_match_in_send_order) {
  constexpr int count = 3000;  // beyond the mailbox: exercises "again" and the backlog
  // Rendezvous sends read their buffer until they complete: keep every one alive.
  std::vector<std::vector<std::byte>> sent(count);
  for (int i = 0; i < count; ++i) {
    std::uint32_t v = static_cast<std::uint32_t>(i);
    sent[i].resize(i % 3 == 0 ? 4 : (i % 3 == 1 ? 2000 : 20000));
    std::memcpy(sent[i].data(), &v, 4);
    ASSERT_EQ(send(sent[i], 9, nullptr), core::status::ok);
  }
  std::vector<std::byte> buf(20000);
  for (int i = 0; i < count; ++i) {
    ASSERT_EQ(recv(buf, 9, 0, nullptr), core::status::ok);
    pump_until([&] { return !b_rx.entries.empty(); });
    std::uint32_t v = 0;
    std::memcpy(&v, buf.data(), 4);
    ASSERT_EQ(v, static_cast<std::uint32_t>(i));
    b_rx.entries.pop_front();
  }
}

TEST_P(pair_test, many_unexpected_of_every_protocol_match_in_reverse_posting_order) {
  constexpr int count = 1000;
  auto size_of = [](int i) -> std::size_t { return i % 3 == 0 ? 8 : (i % 3 == 1 ? 2048 : 65536); };
  std::vector<std::vector<std::byte>> sent(count), got(count);
  for (int i = 0; i < count; ++i) {
    sent[i] = pattern(size_of(i), static_cast<unsigned>(i));
    iovec v{sent[i].data(), sent[i].size()};
    send_args s;
    s.iov = {&v, 1};
    s.tag = 1000 + i;
    s.peer = a_to_b;
    ASSERT_EQ(a.send(s), core::status::ok) << "send " << i;  // no receiver progress at all
  }
  for (int i = 0; i < 10; ++i) b.progress();
  for (int i = count - 1; i >= 0; --i) {
    got[i].assign(size_of(i), std::byte{0});
    ASSERT_EQ(recv(got[i], 1000 + i, 0, &got[i]), core::status::ok);
  }
  pump_until([&] { return b_rx.entries.size() == count; });
  for (const completion& c : b_rx.entries) {
    ASSERT_EQ(c.err, 0);
    const int i = static_cast<int>(c.tag - 1000);
    ASSERT_EQ(c.context, &got[i]);
    ASSERT_EQ(got[i], sent[i]) << "message " << i;
  }
}

TEST_P(pair_test, directed_receive_finds_messages_that_arrived_before_the_sender_was_known) {
  endpoint c;  // has never heard of a
  ASSERT_EQ(c.open(cfg, {}), core::status::ok);
  collected c_rx;
  c.set_sinks({.rx = c_rx.sink()});
  dev::peer_id a_to_c = dev::no_peer, c_to_a = dev::no_peer;
  ASSERT_EQ(a.connect(c.address(), a_to_c), core::status::ok);
  for (std::size_t n : {std::size_t{8}, std::size_t{2048}, std::size_t{65536}}) {
    auto d = pattern(n, 4);
    iovec v{d.data(), n};
    send_args s;
    s.iov = {&v, 1};
    s.tag = n;
    s.peer = a_to_c;
    ASSERT_EQ(a.send(s), core::status::ok);
    for (int i = 0; i < 10; ++i) c.progress();  // arrives unexpected from an unknown sender
    if (c_to_a == dev::no_peer) {
      ASSERT_EQ(c.connect(a.address(), c_to_a), core::status::ok);
    }
    std::vector<std::byte> out(n);
    iovec rv{out.data(), n};
    recv_args r;
    r.iov = {&rv, 1};
    r.tag = n;
    r.peer = c_to_a;
    ASSERT_EQ(c.recv(r), core::status::ok);
    pump_until([&] { c.progress(); return !c_rx.entries.empty(); });
    EXPECT_EQ(c_rx.entries.front().err, 0);
    EXPECT_EQ(out, d);
    c_rx.entries.clear();
  }
}

TEST_P(pair_test, msg_and_tagged_queues_are_separate) {
  std::array<std::byte, 16> t{}, m{};
  int tctx = 0, mctx = 0;
  ASSERT_EQ(recv(t, 0, ~0ull, &tctx, queue_kind::tagged), core::status::ok);
  ASSERT_EQ(recv(m, 0, 0, &mctx, queue_kind::msg), core::status::ok);
  auto d = pattern(16, 2);
  ASSERT_EQ(send(d, 0, nullptr, queue_kind::msg), core::status::ok);
  pump_until([&] { return !b_rx.entries.empty(); });
  EXPECT_EQ(b_rx.entries.front().context, &mctx);
  EXPECT_EQ(b_rx.entries.front().flags, FI_RECV | FI_MSG);
}

TEST_P(pair_test, peek_claim_and_discard_answer_through_the_cq) {
  recv_args probe;
  probe.tag = 5;
  int ctx = 0;
  probe.context = &ctx;
  ASSERT_EQ(b.peek(probe, false, false, nullptr), core::status::ok);
  ASSERT_EQ(b_rx.entries.size(), 1u);
  EXPECT_EQ(b_rx.entries.front().err, FI_ENOMSG);
  EXPECT_EQ(b_rx.entries.front().context, &ctx);
  b_rx.entries.clear();

  for (std::size_t n : {std::size_t{16}, std::size_t{9000}, std::size_t{100000}}) {
    SCOPED_TRACE(n);
    auto data = pattern(n, 9);
    ASSERT_EQ(send(data, 5, nullptr), core::status::ok);
    ASSERT_EQ(send(data, 6, nullptr), core::status::ok);
    pump_until([&] {
      b_rx.entries.clear();
      EXPECT_EQ(b.peek(probe, false, false, nullptr), core::status::ok);
      return !b_rx.entries.empty() && b_rx.entries.front().err == 0;
    });
    EXPECT_EQ(b_rx.entries.front().len, n);
    EXPECT_EQ(b_rx.entries.front().tag, 5u);
    b_rx.entries.clear();

    // Peek + claim takes it out of matching: an ordinary receive no longer sees it.
    void* handle = nullptr;
    ASSERT_EQ(b.peek(probe, true, false, &handle), core::status::ok);
    ASSERT_NE(handle, nullptr);
    b_rx.entries.clear();
    ASSERT_EQ(b.peek(probe, false, false, nullptr), core::status::ok);
    EXPECT_EQ(b_rx.entries.front().err, FI_ENOMSG);
    b_rx.entries.clear();

    std::vector<std::byte> out(n);
    recv_args take = probe;
    iovec v{out.data(), n};
    take.iov = {&v, 1};
    ASSERT_EQ(b.claim(take, handle, false), core::status::ok);
    pump_until([&] { return !b_rx.entries.empty(); });
    EXPECT_EQ(b_rx.entries.front().err, 0);
    EXPECT_EQ(b_rx.entries.front().len, n);
    EXPECT_EQ(std::memcmp(out.data(), data.data(), n), 0);
    b_rx.entries.clear();

    // Peek + discard drops tag 6; the rendezvous sender still completes.
    recv_args drop = probe;
    drop.tag = 6;
    ASSERT_EQ(b.peek(drop, false, true, nullptr), core::status::ok);
    EXPECT_EQ(b_rx.entries.front().err, 0);
    b_rx.entries.clear();
    pump_until([&] { return a_tx.entries.size() == 2; });
    a_tx.entries.clear();
    ASSERT_EQ(b.peek(drop, false, false, nullptr), core::status::ok);
    EXPECT_EQ(b_rx.entries.front().err, FI_ENOMSG);
    b_rx.entries.clear();
  }
}

INSTANTIATE_TEST_SUITE_P(dma, pair_test,
                         ::testing::Values(dev::dma_engine_mode::cross_memory_attach,
                                           dev::dma_engine_mode::staged,
                                           dev::dma_engine_mode::automatic),
                         [](const auto& info) { return dev::dma_engine_name(info.param); });

}  // namespace
}  // namespace exanet::proto
