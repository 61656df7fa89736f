// SPDX-License-Identifier: BSD-2-Clause
// The protocol table (proto/protocol_select.hpp): its boundaries against the configuration, the
// rules as they stood before the table (restated here independently, so a table that drifts from
// them fails), its printed form, and two endpoints showing that the protocol the table names is
// the one the counters see.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "proto/endpoint.hpp"
#include "proto/protocol_select.hpp"
#include "endpoint_pair.hpp"

namespace exanet::proto {
namespace {

constexpr std::size_t inf = std::numeric_limits<std::size_t>::max();
constexpr std::size_t eager_max = wire::eager_payload_max;

selection_inputs inputs(protocol_family f, std::size_t medium = 8192, std::size_t ring = 262144,
                        std::size_t inject = 4096, std::size_t rma_inline = 65536) {
  selection_inputs in;
  in.eager_max = eager_max;
  in.medium_max = medium;
  in.ring_bytes = ring;
  in.inject_size = inject;
  in.rma_inline_max = rma_inline;
  in.family = f;
  return in;
}

protocol send_at(const protocol_table& t, std::size_t len, bool dc = false,
                 op_kind op = op_kind::send) {
  return t.choose(op, dc ? situation::delivery_complete : situation::transmit_complete, len);
}

TEST(protocol_table, write_family_boundaries_follow_the_configuration) {
  const auto t = protocol_table::build(inputs(protocol_family::write));
  for (op_kind op : {op_kind::send, op_kind::tagged_send}) {
    EXPECT_EQ(send_at(t, 0, false, op), protocol::eager);
    EXPECT_EQ(send_at(t, eager_max, false, op), protocol::eager);
    EXPECT_EQ(send_at(t, eager_max + 1, false, op), protocol::medium);
    EXPECT_EQ(send_at(t, 8192, false, op), protocol::medium);
    EXPECT_EQ(send_at(t, 8193, false, op), protocol::rndv);
    EXPECT_EQ(send_at(t, inf, false, op), protocol::rndv);
    EXPECT_EQ(send_at(t, 0, true, op), protocol::rndv);  // delivery-complete: never buffered
    EXPECT_EQ(send_at(t, 8192, true, op), protocol::rndv);
  }
  // A medium message without ring credit goes by the rendezvous of its size.
  EXPECT_EQ(t.select(op_kind::send, situation::transmit_complete, 8192).fallback, protocol::rndv);
  EXPECT_EQ(t.select(op_kind::send, situation::transmit_complete, 36).fallback, protocol::eager);
  // Inject: the send up to inject_size, refused above.
  EXPECT_EQ(send_at(t, eager_max, false, op_kind::inject), protocol::eager);
  EXPECT_EQ(send_at(t, 4096, false, op_kind::inject), protocol::medium);
  EXPECT_EQ(send_at(t, 4097, false, op_kind::inject), protocol::refused);
  EXPECT_EQ(send_at(t, 4096, true, op_kind::inject), protocol::rndv);
  EXPECT_EQ(send_at(t, 4097, true, op_kind::inject), protocol::refused);
  EXPECT_EQ(t.inject_max(), 4096u);
  // Receives: only a named-source, one-buffer receive above medium_max sends an RTR.
  EXPECT_EQ(t.choose(op_kind::recv, situation::directed, 8192), protocol::recv_matched);
  EXPECT_EQ(t.choose(op_kind::recv, situation::directed, 8193), protocol::recv_rtr);
  EXPECT_EQ(t.choose(op_kind::recv, situation::directed_iov, 8193), protocol::recv_matched);
  EXPECT_EQ(t.choose(op_kind::recv, situation::any_source, inf), protocol::recv_matched);
  EXPECT_EQ(t.choose(op_kind::recv, situation::multi_recv, inf), protocol::recv_matched);
  // RMA writes.
  EXPECT_EQ(t.choose(op_kind::rma_write, situation::transmit_complete, 65536),
            protocol::rma_inline);
  EXPECT_EQ(t.select(op_kind::rma_write, situation::transmit_complete, 65536).fallback,
            protocol::rma_dma);
  EXPECT_EQ(t.choose(op_kind::rma_write, situation::transmit_complete, 65537), protocol::rma_dma);
  EXPECT_EQ(t.choose(op_kind::rma_write, situation::several_ranges, 1), protocol::rma_dma);
  EXPECT_EQ(t.choose(op_kind::rma_write, situation::delivery_complete, 1), protocol::rma_dma);
  EXPECT_EQ(t.choose(op_kind::rma_read, situation::peer_readable, 1), protocol::rma_read_direct);
  EXPECT_EQ(t.choose(op_kind::rma_read, situation::peer_unreadable, 1), protocol::rma_read_request);
  // A read the engine could make, to just ahead of its source: by request from 2 KiB.
  EXPECT_EQ(t.choose(op_kind::rma_read, situation::peer_readable_aliased, 0),
            protocol::rma_read_direct);
  EXPECT_EQ(t.choose(op_kind::rma_read, situation::peer_readable_aliased,
                     aliased_read_request_min - 1),
            protocol::rma_read_direct);
  EXPECT_EQ(t.choose(op_kind::rma_read, situation::peer_readable_aliased,
                     aliased_read_request_min),
            protocol::rma_read_request);
  EXPECT_EQ(t.choose(op_kind::rma_read, situation::peer_readable, inf), protocol::rma_read_direct);
}

TEST(protocol_table, read_family_is_sender_initiated_and_acknowledged) {
  const auto t = protocol_table::build(inputs(protocol_family::read));
  EXPECT_EQ(send_at(t, eager_max), protocol::eager);
  EXPECT_EQ(send_at(t, 8192), protocol::medium);
  EXPECT_EQ(t.select(op_kind::send, situation::transmit_complete, 8192).fallback,
            protocol::rndv_read);
  EXPECT_EQ(send_at(t, 8193), protocol::rndv_read);
  EXPECT_EQ(send_at(t, 0, true), protocol::rndv_read);
  EXPECT_EQ(t.choose(op_kind::recv, situation::directed, inf), protocol::recv_matched);
}

TEST(protocol_table, optimistic_family_splits_at_medium_max_and_refuses_any_source) {
  const auto t = protocol_table::build(inputs(protocol_family::optimistic));
  EXPECT_EQ(send_at(t, 8192), protocol::medium);
  EXPECT_EQ(t.select(op_kind::send, situation::transmit_complete, 8192).fallback,
            protocol::rndv_rts);
  EXPECT_EQ(send_at(t, 8193), protocol::rndv_optimistic);
  EXPECT_EQ(send_at(t, 0, true), protocol::rndv_rts);
  EXPECT_EQ(send_at(t, 8192, true), protocol::rndv_rts);
  EXPECT_EQ(send_at(t, 8193, true), protocol::rndv_optimistic);
  EXPECT_EQ(t.choose(op_kind::recv, situation::directed, 8192), protocol::recv_matched);
  EXPECT_EQ(t.choose(op_kind::recv, situation::directed, 8193), protocol::recv_rtr_only);
  EXPECT_EQ(t.choose(op_kind::recv, situation::directed_iov, 8193), protocol::recv_rtr_only);
  EXPECT_EQ(t.choose(op_kind::recv, situation::any_source, 0), protocol::refused);
  EXPECT_EQ(t.choose(op_kind::recv, situation::multi_recv, inf), protocol::recv_matched);
}

TEST(protocol_table, medium_max_is_clamped_to_half_a_ring) {
  const auto t = protocol_table::build(inputs(protocol_family::write, 1 << 20, 4096));
  EXPECT_EQ(t.medium_max(), 2048u);
  EXPECT_EQ(send_at(t, 2048), protocol::medium);
  EXPECT_EQ(send_at(t, 2049), protocol::rndv);
  EXPECT_EQ(t.choose(op_kind::recv, situation::directed, 2049), protocol::recv_rtr);
}

TEST(protocol_table, a_medium_max_below_the_eager_size_leaves_no_medium_class) {
  const auto t = protocol_table::build(inputs(protocol_family::optimistic, 10));
  EXPECT_EQ(send_at(t, eager_max), protocol::eager);
  EXPECT_EQ(send_at(t, eager_max + 1), protocol::rndv_optimistic);
  // The split of the rendezvous and of receives is at eager_max, where the eager class ends:
  // a receive that small is answered by an eager send, never by one waiting for its RTR.
  EXPECT_EQ(send_at(t, eager_max + 1, true), protocol::rndv_optimistic);
  EXPECT_EQ(send_at(t, eager_max, true), protocol::rndv_rts);
  EXPECT_EQ(t.choose(op_kind::recv, situation::directed, eager_max), protocol::recv_matched);
  EXPECT_EQ(t.choose(op_kind::recv, situation::directed, eager_max + 1), protocol::recv_rtr_only);
  for (std::size_t i = 0; i < t.row(op_kind::send, situation::transmit_complete).count; ++i)
    EXPECT_NE(t.row(op_kind::send, situation::transmit_complete).classes[i].proto,
              protocol::medium);
}

// Atomics, whatever the family: operands in the packet while they fit its 16 spare bytes, which
// remote CQ data takes; else the bounce ring, with the atomic_operands train as the fallback.
TEST(protocol_table, atomic_operands_go_in_the_packet_the_ring_or_a_train) {
  for (protocol_family f :
       {protocol_family::write, protocol_family::read, protocol_family::optimistic}) {
    const auto t = protocol_table::build(inputs(f));
    using enum situation;
    EXPECT_EQ(t.choose(op_kind::atomic, transmit_complete, 0), protocol::atomic_packet);
    EXPECT_EQ(t.choose(op_kind::atomic, transmit_complete, 16), protocol::atomic_packet);
    const size_class& ring = t.select(op_kind::atomic, transmit_complete, 17);
    EXPECT_EQ(ring.proto, protocol::atomic_ring);
    EXPECT_EQ(ring.fallback, protocol::atomic_train);
    EXPECT_EQ(t.choose(op_kind::atomic, transmit_complete, 8192), protocol::atomic_ring);
    EXPECT_EQ(t.choose(op_kind::atomic, cq_data, 0), protocol::atomic_packet);
    EXPECT_EQ(t.select(op_kind::atomic, cq_data, 1).proto, protocol::atomic_ring);
    EXPECT_EQ(t.select(op_kind::atomic, cq_data, 1).fallback, protocol::atomic_train);
  }
  const std::string text = protocol_table::build(inputs(protocol_family::write)).format("a");
  for (const char* expect : {"atomic/packet", "atomic/ring (no ring credit: atomic/train)",
                             "no remote CQ data", "remote CQ data"})
    EXPECT_NE(text.find(expect), std::string::npos) << expect << "\n" << text;
}

TEST(protocol_table, rows_are_sorted_and_end_unbounded) {
  for (protocol_family f :
       {protocol_family::write, protocol_family::read, protocol_family::optimistic}) {
    for (std::size_t inject : {std::size_t{0}, std::size_t{100}, inf}) {
      const auto t = protocol_table::build(inputs(f, 8192, 262144, inject, 0));
      for (const auto& p : protocol_table::pairs) {
        const size_row& r = t.row(p.op, p.s);
        ASSERT_GE(r.count, 1u);
        ASSERT_LE(r.count, max_classes);
        EXPECT_EQ(r.classes[r.count - 1].max_len, inf);
        for (std::size_t i = 1; i < r.count; ++i) {
          EXPECT_LT(r.classes[i - 1].max_len, r.classes[i].max_len);
          EXPECT_FALSE(r.classes[i - 1].proto == r.classes[i].proto &&
                       r.classes[i - 1].fallback == r.classes[i].fallback)
              << "adjacent classes should have been merged";
        }
      }
    }
  }
}

// The rules as the endpoint applied them before the table existed (endpoint.cpp send/recv,
// rndv_rtr.cpp rtr_consider, rma.cpp, fi/ep_xfer.cpp's inject check), written out as
// conditions. The table must agree everywhere.
struct old_rules {
  selection_inputs in;
  // One deliberate change: medium_max below the eager payload now counts as eager_max (before,
  // an optimistic receive in between waited for an RTR that no eager send answers: a hang).
  std::size_t medium() const {
    return std::max(std::min(in.medium_max, in.ring_bytes / 2), in.eager_max);
  }
  protocol rendezvous(std::size_t len) const {
    if (in.family == protocol_family::optimistic)
      return len > medium() ? protocol::rndv_optimistic : protocol::rndv_rts;
    return in.family == protocol_family::read ? protocol::rndv_read : protocol::rndv;
  }
  size_class send(std::size_t len, bool dc) const {
    if (!dc) {
      if (len <= in.eager_max) return {0, protocol::eager, protocol::eager};
      if (len <= medium()) return {0, protocol::medium, rendezvous(len)};
    }
    const protocol p = rendezvous(len);
    return {0, p, p};
  }
  size_class inject(std::size_t len, bool dc) const {
    if (len > in.inject_size) return {0, protocol::refused, protocol::refused};
    return send(len, dc);
  }
  protocol recv(situation s, std::size_t cap) const {
    const bool opt = in.family == protocol_family::optimistic;
    if (opt && s == situation::any_source) return protocol::refused;
    if (s == situation::multi_recv) return protocol::recv_matched;
    if (opt && cap > medium()) return protocol::recv_rtr_only;
    if (in.family == protocol_family::write && s == situation::directed && cap > medium())
      return protocol::recv_rtr;
    return protocol::recv_matched;
  }
  size_class rma_write(situation s, std::size_t len) const {
    // Second deliberate change: a limit of 0 disables the inline path, as documented (before,
    // zero-byte writes still went inline).
    if (s == situation::transmit_complete && in.rma_inline_max > 0 && len <= in.rma_inline_max)
      return {0, protocol::rma_inline, protocol::rma_dma};
    return {0, protocol::rma_dma, protocol::rma_dma};
  }
};

TEST(protocol_table, agrees_with_the_rules_it_replaced_at_every_boundary) {
  std::mt19937_64 rng(17);
  const std::size_t limits[] = {0, 1, 10, 36, 37, 4096, 8192, 65536, 131072, 1 << 20, inf};
  int checked = 0;
  for (protocol_family f :
       {protocol_family::write, protocol_family::read, protocol_family::optimistic}) {
    for (std::size_t medium : limits) {
      for (std::size_t ring : {std::size_t{4096}, std::size_t{262144}}) {
        for (std::size_t inject : {std::size_t{0}, std::size_t{36}, std::size_t{4096}, inf}) {
          for (std::size_t rma_inline : {std::size_t{0}, std::size_t{65536}, inf}) {
            const selection_inputs in = inputs(f, medium, ring, inject, rma_inline);
            const auto t = protocol_table::build(in);
            const old_rules old{in};
            std::vector<std::size_t> sizes = {0, inf, inf - 1};
            for (std::size_t b : {eager_max, old.medium(), inject, rma_inline, ring}) {
              sizes.push_back(b);
              if (b < inf) sizes.push_back(b + 1);
              if (b > 0) sizes.push_back(b - 1);
            }
            for (int i = 0; i < 8; ++i) sizes.push_back(rng() % (1 << 21));
            for (std::size_t n : sizes) {
              SCOPED_TRACE(testing::Message() << "family " << int(f) << " medium " << medium
                                              << " ring " << ring << " inject " << inject
                                              << " rma_inline " << rma_inline << " len " << n);
              for (bool dc : {false, true}) {
                const situation s =
                    dc ? situation::delivery_complete : situation::transmit_complete;
                for (op_kind op : {op_kind::send, op_kind::tagged_send}) {
                  const size_class& c = t.select(op, s, n);
                  EXPECT_EQ(c.proto, old.send(n, dc).proto);
                  EXPECT_EQ(c.fallback, old.send(n, dc).fallback);
                }
                const size_class& c = t.select(op_kind::inject, s, n);
                EXPECT_EQ(c.proto, old.inject(n, dc).proto);
                EXPECT_EQ(c.fallback, old.inject(n, dc).fallback);
              }
              for (situation s : {situation::directed, situation::directed_iov,
                                  situation::any_source, situation::multi_recv})
                EXPECT_EQ(t.choose(op_kind::recv, s, n), old.recv(s, n));
              for (situation s : {situation::transmit_complete, situation::several_ranges,
                                  situation::delivery_complete}) {
                EXPECT_EQ(t.choose(op_kind::rma_write, s, n), old.rma_write(s, n).proto);
                EXPECT_EQ(t.select(op_kind::rma_write, s, n).fallback,
                          old.rma_write(s, n).fallback);
              }
              ++checked;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 5000);
}

TEST(protocol_table, eager_trains_sit_between_one_packet_and_medium_and_are_clamped) {
  auto in = inputs(protocol_family::write);
  in.train_max = 132;
  const auto t = protocol_table::build(in);
  for (op_kind op : {op_kind::send, op_kind::tagged_send, op_kind::inject}) {
    EXPECT_EQ(send_at(t, eager_max, false, op), protocol::eager);
    EXPECT_EQ(send_at(t, eager_max + 1, false, op), protocol::eager_train);
    EXPECT_EQ(send_at(t, 132, false, op), protocol::eager_train);
    EXPECT_EQ(send_at(t, 133, false, op), protocol::medium);
    EXPECT_EQ(send_at(t, 100, true, op), protocol::rndv);  // delivery-complete: never buffered
  }
  EXPECT_EQ(t.train_max(), 132u);
  // No more than the receiver's train buffer takes, nor than medium_max.
  in.train_max = 100000;
  EXPECT_EQ(protocol_table::build(in).train_max(), wire::eager_train_limit);
  EXPECT_EQ(send_at(protocol_table::build(in), wire::eager_train_limit + 1), protocol::medium);
  in.medium_max = 64;
  const auto small = protocol_table::build(in);
  EXPECT_EQ(small.train_max(), 64u);
  EXPECT_EQ(send_at(small, 64), protocol::eager_train);
  EXPECT_EQ(send_at(small, 65), protocol::rndv);
  // At or below one packet: no train class at all.
  in = inputs(protocol_family::write);
  in.train_max = 20;
  const auto none = protocol_table::build(in);
  EXPECT_EQ(send_at(none, eager_max + 1), protocol::medium);
  EXPECT_EQ(none.train_max(), eager_max);
  // Optimistic: a receive the size of a train is posted, so the train always finds it.
  in = inputs(protocol_family::optimistic, 64);
  in.train_max = 276;
  const auto opt = protocol_table::build(in);
  EXPECT_EQ(send_at(opt, 64), protocol::eager_train);
  EXPECT_EQ(opt.choose(op_kind::recv, situation::directed, 64), protocol::recv_matched);
  EXPECT_EQ(opt.choose(op_kind::recv, situation::directed, 65), protocol::recv_rtr_only);
  const std::string text = t.format("x");
  for (const char* expect : {"37..132", "eager/train", "eager_max 132"})
    EXPECT_NE(text.find(expect), std::string::npos) << expect << "\n" << text;
}

TEST(protocol_table, printed_table_names_every_protocol_it_uses_with_its_ranges) {
  const auto w = protocol_table::build(inputs(protocol_family::write));
  const std::string text = w.format("exanet-proto test");
  EXPECT_EQ(text.rfind("exanet-proto test\n", 0), 0u);
  for (const char* expect :
       {"eager", "medium", "rndv/rtr|rts", "recv/match", "recv/match+rtr", "rma/inline",
        "rma/dma", "rma/read-direct", "rma/read-request", "refused", "0..36", "37..8192",
        "8193..inf", "0..4096", "65537..inf", "4097..inf", "no ring credit: rndv/rtr|rts",
        "no ring credit: rma/dma", "medium_max 8192", "inject_size 4096",
        "readable (CMA), aliased  0..2047", "readable (CMA), aliased  2048..inf",
        "aliased: the read's local first byte 1-63 bytes ahead of its remote one"})
    EXPECT_NE(text.find(expect), std::string::npos) << expect << "\n" << text;
  // Protocols of other families are not in it.
  for (const char* absent : {"rndv/opt", "rndv/rts+ack", "recv/rtr-only"})
    EXPECT_EQ(text.find(absent), std::string::npos) << absent;
  // One line per size class of every row, plus the header, limits, two title lines, the
  // note on aliased reads and the legend.
  std::size_t classes = 0, used = 0;
  std::vector<bool> seen(static_cast<std::size_t>(protocol::count));
  for (const auto& p : protocol_table::pairs) {
    const size_row& r = w.row(p.op, p.s);
    classes += r.count;
    for (std::size_t i = 0; i < r.count; ++i) {
      seen[static_cast<std::size_t>(r.classes[i].proto)] = true;
      seen[static_cast<std::size_t>(r.classes[i].fallback)] = true;
    }
  }
  for (bool b : seen) used += b;
  EXPECT_EQ(static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')),
            6 + classes + used);

  const std::string opt = protocol_table::build(inputs(protocol_family::optimistic)).format("o");
  for (const char* expect : {"rndv/opt", "rndv/rts", "recv/rtr-only", "family optimistic"})
    EXPECT_NE(opt.find(expect), std::string::npos) << expect << "\n" << opt;
  const std::string rd = protocol_table::build(inputs(protocol_family::read)).format("r");
  EXPECT_NE(rd.find("rndv/rts+ack"), std::string::npos) << rd;
  for (std::size_t i = 0; i < static_cast<std::size_t>(protocol::count); ++i)
    EXPECT_NE(protocol_name(static_cast<protocol>(i)), "?");
}

// ---- end to end: two endpoints over the emulated device ---------------------------------------

class chosen_protocol_test : public ::testing::TestWithParam<protocol_family>,
                             protected testing_pair::endpoint_pair {
 protected:
  void SetUp() override {
    cfg.pdid = 700 + static_cast<std::uint32_t>(getpid() % 1000);
    cfg.protocol = GetParam();
    cfg.rma_inline_max = 16384;
    open_pair();
  }
};

// What one send of protocol p adds to the sender's counters. A rendezvous of the write family
// into a receive that sent an RTR is written by that RTR (ri_sent); otherwise it sends an RTS.
void expect_counted(protocol p, bool rtr_out, const endpoint_stats& before,
                    const endpoint_stats& after) {
  const auto d = [&](std::uint64_t endpoint_stats::*f) { return after.*f - before.*f; };
  EXPECT_EQ(d(&endpoint_stats::eager_sent), p == protocol::eager ? 1u : 0u);
  EXPECT_EQ(d(&endpoint_stats::medium_sent), p == protocol::medium ? 1u : 0u);
  const bool by_rtr = p == protocol::rndv_optimistic || (p == protocol::rndv && rtr_out);
  const bool by_rts = p == protocol::rndv_rts || p == protocol::rndv_read ||
                      (p == protocol::rndv && !rtr_out);
  EXPECT_EQ(d(&endpoint_stats::ri_sent), by_rtr ? 1u : 0u);
  EXPECT_EQ(d(&endpoint_stats::rndv_sent), by_rts ? 1u : 0u);
  EXPECT_EQ(d(&endpoint_stats::rndv_acked), p == protocol::rndv_read ? 1u : 0u);
}

TEST_P(chosen_protocol_test, each_send_takes_the_protocol_its_table_names) {
  const protocol_table& t = a.protocols();
  const std::size_t m = t.medium_max();
  std::vector<std::byte> src(m + 4096, std::byte{0x5a}), dst(m + 4096);
  int ctx = 0;
  for (bool dc : {false, true}) {
    for (std::size_t n : {std::size_t{0}, eager_max, eager_max + 1, m, m + 1, m + 4096}) {
      SCOPED_TRACE(testing::Message() << "len " << n << " delivery_complete " << dc);
      const protocol recv_p = b.protocols().choose(op_kind::recv, situation::directed, n);
      const protocol send_p =
          t.choose(op_kind::tagged_send,
                   dc ? situation::delivery_complete : situation::transmit_complete, n);
      const endpoint_stats rb = b.stats(), sb = a.stats();
      iovec rv{dst.data(), n};
      ASSERT_EQ(b.recv({.iov = {&rv, 1}, .tag = n, .peer = b_to_a, .context = &ctx}),
                core::status::ok);
      const bool rtr_out = b.stats().rtr_sent - rb.rtr_sent == 1;
      EXPECT_EQ(rtr_out, recv_p == protocol::recv_rtr || recv_p == protocol::recv_rtr_only);
      iovec sv{src.data(), n};
      send_args s{.iov = {&sv, 1}, .tag = n, .peer = a_to_b, .context = &ctx};
      s.delivery_complete = dc;
      core::status st;
      while ((st = a.send(s)) == core::status::again) {
        a.progress();
        b.progress();
      }
      ASSERT_EQ(st, core::status::ok);
      pump_until([&] { return !a_tx.entries.empty() && !b_rx.entries.empty(); });
      EXPECT_EQ(b_rx.entries.back().len, n);
      EXPECT_EQ(b_rx.entries.back().err, 0);
      a_tx.entries.clear();
      b_rx.entries.clear();
      expect_counted(send_p, rtr_out, sb, a.stats());
    }
  }
}

TEST_P(chosen_protocol_test, rma_writes_take_the_protocol_their_table_names) {
  const std::size_t limit = a.protocols().inputs().rma_inline_max;
  ASSERT_EQ(limit, 16384u);
  std::vector<std::byte> src(limit + 1, std::byte{0x33}), dst(limit + 1);
  dev::key_grant g;
  g.key = 0x1717;
  g.va = g.addr_base = reinterpret_cast<std::uint64_t>(dst.data());
  g.len = dst.size();
  g.access = dev::rma_access::remote_write | dev::rma_access::remote_read;
  std::uint32_t slot = 0;
  ASSERT_EQ(b.expose(g, slot), core::status::ok);
  int ctx = 0;
  for (std::size_t n : {std::size_t{1}, limit, limit + 1}) {
    for (bool dc : {false, true}) {
      SCOPED_TRACE(testing::Message() << "len " << n << " delivery_complete " << dc);
      const protocol p = a.protocols().choose(
          op_kind::rma_write, dc ? situation::delivery_complete : situation::transmit_complete, n);
      const endpoint_stats before = a.stats();
      iovec v{src.data(), n};
      const remote_range rr{g.addr_base, n, g.key};
      rma_args w{.iov = {&v, 1}, .remote = {&rr, 1}, .peer = a_to_b, .context = &ctx};
      w.delivery_complete = dc;
      ASSERT_EQ(a.rma(w), core::status::ok);
      pump_until([&] { return !a_tx.entries.empty(); });
      EXPECT_EQ(a_tx.entries.back().err, 0);
      a_tx.entries.clear();
      EXPECT_EQ(a.stats().rma_inline_writes - before.rma_inline_writes,
                p == protocol::rma_inline ? 1u : 0u);
      EXPECT_EQ(a.stats().rma_writes - before.rma_writes, 1u);
    }
  }
  // Only the inline size class, transmit-complete, took the inline path.
  EXPECT_EQ(a.protocols().choose(op_kind::rma_write, situation::transmit_complete, limit),
            protocol::rma_inline);
  EXPECT_EQ(a.protocols().choose(op_kind::rma_write, situation::transmit_complete, limit + 1),
            protocol::rma_dma);
}

// FI_EXANET_MEDIUM_MAX below the eager payload: a small message into a receive of its size
// arrives in every family (the optimistic one used to hang here).
class small_medium_max_test : public chosen_protocol_test {
 protected:
  void SetUp() override {
    cfg.medium_max = 10;
    chosen_protocol_test::SetUp();
  }
};

TEST_P(small_medium_max_test, a_message_between_medium_max_and_the_eager_size_arrives) {
  std::vector<std::byte> src(20, std::byte{0x3c}), dst(20);
  int ctx = 0;
  iovec rv{dst.data(), dst.size()};
  ASSERT_EQ(b.recv({.iov = {&rv, 1}, .tag = 9, .peer = b_to_a, .context = &ctx}),
            core::status::ok);
  iovec sv{src.data(), src.size()};
  core::status st;
  while ((st = a.send({.iov = {&sv, 1}, .tag = 9, .peer = a_to_b, .context = &ctx})) ==
         core::status::again) {
    a.progress();
    b.progress();
  }
  ASSERT_EQ(st, core::status::ok);
  pump_until([&] { return !a_tx.entries.empty() && !b_rx.entries.empty(); });
  EXPECT_EQ(b_rx.entries.back().len, 20u);
  EXPECT_EQ(dst, src);
}

std::string family_name(const ::testing::TestParamInfo<protocol_family>& info) {
  switch (info.param) {
    case protocol_family::write: return "write";
    case protocol_family::read: return "read";
    case protocol_family::optimistic: return "optimistic";
  }
  return "unknown";
}

INSTANTIATE_TEST_SUITE_P(family, small_medium_max_test,
                         ::testing::Values(protocol_family::write, protocol_family::read,
                                           protocol_family::optimistic),
                         family_name);

INSTANTIATE_TEST_SUITE_P(family, chosen_protocol_test,
                         ::testing::Values(protocol_family::write, protocol_family::read,
                                           protocol_family::optimistic),
                         family_name);

}  // namespace
}  // namespace exanet::proto
