// SPDX-License-Identifier: BSD-2-Clause
// RMA reads between two proto endpoints over the emulated device, with cross-memory attach
// asked for (FI_EXANET_DMA_ENGINE=cma): which way each read goes (rma/read-direct or
// rma/read-request, chosen per read from the peer and the placement, protocol_select.cpp), that
// it delivers the right bytes either way, that the target counts each access exactly once
// whichever way it went, and that refused reads fail alike at every placement.
#include <gtest/gtest.h>
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "endpoint_pair.hpp"
#include "proto/endpoint.hpp"

namespace exanet::proto {
namespace {

constexpr std::size_t page = 4096;
constexpr std::size_t max_len = 4u << 20;

struct page_buffer {
  std::unique_ptr<std::byte, decltype(&std::free)> mem{nullptr, &std::free};
  explicit page_buffer(std::size_t n)
      : mem(static_cast<std::byte*>(std::aligned_alloc(page, n)), &std::free) {}
  std::byte* at(std::size_t off) const { return mem.get() + off; }
};

// What the target's sink heard: the accesses it counts (endpoint and MR counters in fi/).
struct access_log {
  std::size_t ops = 0, regions = 0, bytes = 0, events = 0;
  static void on_access(void* self, const rma_target_event& e) noexcept {
    auto* l = static_cast<access_log*>(self);
    ++l->events;
    l->bytes += e.len;
    l->ops += e.op_end;
    l->regions += e.region_end;
  }
};

// One read's placement: the remote (source) buffer `src` bytes past a page, the local
// (destination) buffer `dst` bytes past one, as xfer_bench -P S:R names them for a read.
struct placement {
  std::size_t src, dst;
};

std::string name(placement p) {
  return std::to_string(p.src) + ":" + std::to_string(p.dst);
}

class rma_read_test : public ::testing::Test, protected testing_pair::endpoint_pair {
 protected:
  static constexpr std::uint64_t key = 0x5151;
  page_buffer remote{max_len + 2 * page}, local{max_len + 2 * page};
  dev::key_grant grant;
  access_log heard;

  void SetUp() override {
    cfg.pdid = 1700 + static_cast<std::uint32_t>(getpid() % 1000);
    cfg.dma_engine = dev::dma_engine_mode::cross_memory_attach;
    open_pair();
    b.set_sinks({.tx = b_tx.sink(), .rx = b_rx.sink(),
                 .rma_target = {&heard, &access_log::on_access}});
    grant.key = key;
    grant.va = grant.addr_base = reinterpret_cast<std::uint64_t>(remote.at(0));
    grant.len = max_len + 2 * page;
    grant.access = dev::rma_access::remote_read;
    grant.events = true;  // the target counts reads: initiators report each one
    std::uint32_t slot = 0;
    ASSERT_EQ(b.expose(grant, slot), core::status::ok);
    ASSERT_TRUE(a.protocols().inputs().dma_engine == dev::dma_engine_mode::cross_memory_attach);
  }

  // Fills the remote range with a pattern of its own and the local one with 0xee.
  void fill(placement p, std::size_t len, unsigned seed) {
    for (std::size_t i = 0; i < len; ++i)
      *remote.at(p.src + i) = std::byte(static_cast<unsigned char>((i * 251 + seed) >> 3 ^ i));
    std::memset(local.at(p.dst), 0xee, len + 64);
  }
  bool landed(placement p, std::size_t len) const {
    return std::memcmp(local.at(p.dst), remote.at(p.src), len) == 0 &&
           *local.at(p.dst + len) == std::byte{0xee};
  }

  // Reads len bytes at placement p, the remote side split into `ranges` ranges and the local
  // side into `pieces` iovecs (uneven, so their ends do not meet); returns its completion.
  completion read(placement p, std::size_t len, std::size_t ranges = 1, std::size_t pieces = 1,
                  std::uint64_t with_key = key, std::uint64_t past_end = 0) {
    std::vector<remote_range> rr;
    std::size_t off = 0;
    for (std::size_t i = 0; i < ranges; ++i) {
      const std::size_t n = i + 1 == ranges ? len - off : len / ranges + 3 * i;
      rr.push_back({grant.addr_base + p.src + off + past_end, n, with_key});
      off += n;
    }
    std::vector<iovec> iov;
    off = 0;
    for (std::size_t i = 0; i < pieces; ++i) {
      const std::size_t n = i + 1 == pieces ? len - off : len / pieces - 5 * (i + 1);
      iov.push_back({local.at(p.dst + off), n});
      off += n;
    }
    int ctx = 0;
    rma_args r{.iov = iov, .remote = rr, .peer = a_to_b, .context = &ctx};
    r.read = true;
    EXPECT_EQ(a.rma(r), core::status::ok);
    pump_until([&] { return !a_tx.entries.empty(); });
    const completion c = a_tx.entries.front();
    a_tx.entries.clear();
    EXPECT_EQ(c.context, &ctx);
    return c;
  }

  protocol expected(placement p, std::size_t len) const {
    const bool aliased = core::page_aliased(reinterpret_cast<std::uintptr_t>(local.at(p.dst)),
                                            reinterpret_cast<std::uintptr_t>(remote.at(p.src)));
    return a.protocols().choose(
        op_kind::rma_read, aliased ? situation::peer_readable_aliased : situation::peer_readable,
        len);
  }
};

// A destination 1-63 bytes ahead of its source modulo a page (the kernel's copy runs several
// times slower there): from 2 KiB on, the read goes by request and the target answers through
// its staging area, not with the kernel's copy. Every range and local piece boundary included.
TEST_F(rma_read_test, an_aliased_read_goes_by_request_and_delivers_its_data) {
  unsigned seed = 1;
  for (placement p : {placement{0, 24}, placement{0, 8}, placement{16, 40}, placement{4000, 4040}})
    for (std::size_t len : {std::size_t{2048}, std::size_t{65536}, std::size_t{(1u << 20) + 13},
                            max_len})
      for (auto [ranges, pieces] : {std::pair{1, 1}, std::pair{3, 1}, std::pair{1, 2},
                                    std::pair{3, 2}}) {
        SCOPED_TRACE(testing::Message() << name(p) << " len " << len << " ranges " << ranges
                                        << " pieces " << pieces);
        ASSERT_EQ(expected(p, len), protocol::rma_read_request);
        fill(p, len, seed++);
        const endpoint_stats ab = a.stats(), bb = b.stats();
        const access_log before = heard;
        const completion c = read(p, len, ranges, pieces);
        EXPECT_EQ(c.err, 0);
        EXPECT_EQ(c.len, len);
        EXPECT_EQ(c.flags, FI_RMA | FI_READ);
        EXPECT_TRUE(landed(p, len));
        const endpoint_stats as = a.stats(), bs = b.stats();
        EXPECT_EQ(as.rma_reads - ab.rma_reads, 1u);
        // One request per local piece within each range, each answered by a staged write.
        EXPECT_GE(bs.rma_read_requests_served - bb.rma_read_requests_served,
                  static_cast<std::uint64_t>(std::max(ranges, pieces)));
        EXPECT_EQ(bs.dma_writes_staged - bb.dma_writes_staged,
                  bs.rma_read_requests_served - bb.rma_read_requests_served);
        EXPECT_EQ(bs.dma_writes_direct, bb.dma_writes_direct);
        // The target counted it once, as it answered: one operation, one region, every byte.
        pump_until([&] { return heard.ops > before.ops; });
        EXPECT_EQ(heard.ops - before.ops, 1u);
        EXPECT_EQ(heard.regions - before.regions, 1u);
        EXPECT_EQ(heard.bytes - before.bytes, len);
      }
}

// Plain placements (the same offset, or a destination behind its source), and aliased reads
// below 2 KiB, read the target's memory directly: no request, and the initiator reports each
// range to the target.
TEST_F(rma_read_test, a_plain_or_small_read_stays_direct) {
  unsigned seed = 100;
  const std::vector<std::pair<placement, std::size_t>> cases = {
      {{0, 0}, 65536},  {{8, 8}, 1u << 20}, {{24, 0}, 65536}, {{40, 8}, max_len},
      {{0, 64}, 65536}, {{0, 24}, 2047},    {{16, 40}, 1},    {{0, 0}, 0}};
  for (const auto& [p, len] : cases)
    for (auto [ranges, pieces] : {std::pair{1, 1}, std::pair{3, 2}}) {
      if (len < 64 && ranges > 1) continue;
      SCOPED_TRACE(testing::Message() << name(p) << " len " << len << " ranges " << ranges
                                      << " pieces " << pieces);
      ASSERT_EQ(expected(p, len), protocol::rma_read_direct);
      fill(p, len, seed++);
      const endpoint_stats bb = b.stats();
      const access_log before = heard;
      const completion c = read(p, len, ranges, pieces);
      EXPECT_EQ(c.err, 0);
      EXPECT_EQ(c.len, len);
      EXPECT_TRUE(landed(p, len));
      EXPECT_EQ(b.stats().rma_read_requests_served, bb.rma_read_requests_served);
      pump_until([&] { return heard.ops > before.ops; });
      EXPECT_EQ(heard.ops - before.ops, 1u);
      EXPECT_EQ(heard.bytes - before.bytes, len);
      EXPECT_EQ(heard.events - before.events, static_cast<std::size_t>(ranges));
    }
}

// A refused read fails with the same error at every placement, moves nothing, and asks the
// target nothing (the engine's check comes before the choice of path).
TEST_F(rma_read_test, a_refused_read_fails_alike_at_every_placement) {
  for (placement p : {placement{0, 0}, placement{0, 24}, placement{16, 40}})
    for (std::size_t len : {std::size_t{64}, std::size_t{65536}}) {
      SCOPED_TRACE(testing::Message() << name(p) << " len " << len);
      fill(p, len, 7);
      const endpoint_stats ab = a.stats(), bb = b.stats();
      const access_log before = heard;
      completion c = read(p, len, 1, 1, key + 1);  // no such key
      EXPECT_EQ(c.err, FI_EACCES);
      EXPECT_EQ(c.len, 0u);
      c = read(p, len, 2, 1, key, max_len + 2 * page);  // past the registration's end
      EXPECT_EQ(c.err, FI_EACCES);
      EXPECT_EQ(*local.at(p.dst), std::byte{0xee});
      EXPECT_EQ(*local.at(p.dst + len - 1), std::byte{0xee});
      EXPECT_EQ(a.stats().rma_reads, ab.rma_reads);
      EXPECT_EQ(b.stats().rma_read_requests_served, bb.rma_read_requests_served);
      for (int i = 0; i < 1000; ++i) b.progress();
      EXPECT_EQ(heard.events, before.events);
    }
}

}  // namespace
}  // namespace exanet::proto
