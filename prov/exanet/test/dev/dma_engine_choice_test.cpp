// SPDX-License-Identifier: BSD-2-Clause
// FI_EXANET_DMA_ENGINE=auto (dev/emu/dma_engine_choice.hpp): the policy alone, with made-up
// costs (warm-up, the cheaper engine chosen, exploration, a change of the machine's state
// followed, an outlier clamped), and the emulated device choosing between its two engines for
// writes into another process: both are measured (the staged one from its first piece until
// the target freed its last chunk), every byte lands, the counters show the split.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "dev/emu/device.hpp"
#include "dev/emu/dma_engine_choice.hpp"

namespace exanet::dev::emu {
namespace {

constexpr std::size_t kib = 1024;

TEST(dma_engine_choice, size_classes_are_powers_of_two_from_4_kib) {
  EXPECT_EQ(dma_engine_choice::class_of(0), 0u);
  EXPECT_EQ(dma_engine_choice::class_of(4 * kib - 1), 0u);
  EXPECT_EQ(dma_engine_choice::class_of(4 * kib), 1u);
  EXPECT_EQ(dma_engine_choice::class_of(8 * kib - 1), 1u);
  EXPECT_EQ(dma_engine_choice::class_of(8 * kib), 2u);
  EXPECT_EQ(dma_engine_choice::class_of(64 * kib), 5u);
  EXPECT_EQ(dma_engine_choice::class_of(std::size_t{1} << 40), dma_engine_choice::classes - 1);
}

// Feeds choose/record with a cost per engine (ns per write) and returns how many of the last
// `tail` writes took cross-memory attach.
struct simulated {
  dma_engine_choice c;
  std::size_t cma = 0;
  void run(std::size_t writes, std::size_t len, std::uint64_t staged_ns, std::uint64_t cma_ns,
           std::size_t tail) {
    cma = 0;
    for (std::size_t i = 0; i < writes; ++i) {
      const dma_engine e = c.choose(len);
      c.record(e, dma_use::alone, len, e == dma_engine::staged ? staged_ns : cma_ns);
      if (i >= writes - tail && e == dma_engine::cross_memory_attach) ++cma;
    }
  }
};

TEST(dma_engine_choice, both_engines_are_measured_before_either_is_preferred) {
  dma_engine_choice c;
  std::vector<dma_engine> first;
  for (int i = 0; i < 4; ++i) {
    const dma_engine e = c.choose(64 * kib);
    first.push_back(e);
    c.record(e, dma_use::alone, 64 * kib, e == dma_engine::staged ? 50'000 : 10'000);
  }
  EXPECT_EQ(c.samples(dma_engine::staged, 64 * kib), 2u);
  EXPECT_EQ(c.samples(dma_engine::cross_memory_attach, 64 * kib), 2u);
  // Another class knows nothing yet.
  EXPECT_EQ(c.samples(dma_engine::staged, 16 * kib), 0u);
  EXPECT_EQ(c.preferred_for(16 * kib), dma_engine::staged);
  EXPECT_EQ(c.preferred_for(64 * kib), dma_engine::cross_memory_attach);
}

TEST(dma_engine_choice, the_cheaper_engine_takes_all_but_the_exploring_writes) {
  constexpr std::size_t shortp = dma_engine_choice::explore_period;
  constexpr std::size_t longp = dma_engine_choice::explore_period_long;
  static_assert(2560 % longp == 0 && shortp < longp);
  simulated s;
  // Close costs: one write in the short period explores.
  s.run(3200, 256 * kib, 100'000, 90'000, 3200 - 8);
  EXPECT_GE(s.cma, 3192u - 3192u / shortp - 1);
  EXPECT_LE(s.cma, 3192u - 3192u / shortp + 1);
  // Far apart (staged 2x dearer): one in the long period.
  simulated far;
  far.run(2568, 256 * kib, 200'000, 100'000, 2560);
  EXPECT_EQ(far.cma, 2560u - 2560u / longp);
  // The other way round.
  simulated staged_wins;
  staged_wins.run(2568, 16 * kib, 3'000, 6'000, 2560);
  EXPECT_EQ(staged_wins.cma, 2560u / longp);
}

TEST(dma_engine_choice, a_change_of_the_machine_is_followed) {
  simulated s;
  s.run(2000, 1024 * kib, 120'000, 80'000, 100);  // today's state: cma (staged explored)
  EXPECT_GE(s.cma, 100u - 100u / dma_engine_choice::explore_period - 1);
  s.run(4000, 1024 * kib, 40'000, 160'000, 1000);  // yesterday's: staging 4x cheaper
  EXPECT_LE(s.cma, 1000u / dma_engine_choice::explore_period_long + 2)
      << "still on cross-memory attach after the state changed";
  s.run(4000, 1024 * kib, 120'000, 80'000, 1000);  // and back
  EXPECT_GE(s.cma, 1000u - 1000u / dma_engine_choice::explore_period - 2)
      << "did not come back to cross-memory attach";
}

// A class where staged writes are never timed (a stream never leaves the staging area free):
// after the warm-up's writes, the measured engine is taken and the other explored.
TEST(dma_engine_choice, an_engine_never_measured_does_not_hold_the_warm_up) {
  dma_engine_choice c;
  std::size_t staged = 0;
  for (int i = 0; i < 320; ++i) {
    const dma_engine e = c.choose(64 * kib);
    if (e == dma_engine::cross_memory_attach)
      c.record(e, dma_use::alone, 64 * kib, 10'000);
    else
      ++staged;
  }
  EXPECT_LE(staged, dma_engine_choice::warmup_writes / 2 + 320 / dma_engine_choice::explore_period + 1);
  EXPECT_GE(staged, 320u / dma_engine_choice::explore_period);  // still explored
}

TEST(dma_engine_choice, slow_outliers_do_not_move_the_estimate_but_a_lasting_change_does) {
  dma_engine_choice c;
  for (int i = 0; i < 8; ++i) c.record(dma_engine::staged, dma_use::alone, 64 * kib, 20'000);
  const double before = c.estimate(dma_engine::staged, 64 * kib);
  c.record(dma_engine::staged, dma_use::alone, 64 * kib, 20'000'000);  // a preempted target: 1000x
  c.record(dma_engine::staged, dma_use::alone, 64 * kib, 400'000);     // a first use's page faults
  EXPECT_DOUBLE_EQ(c.estimate(dma_engine::staged, 64 * kib), before);
  for (std::size_t i = 0; i < dma_engine_choice::recent_samples; ++i)
    c.record(dma_engine::staged, dma_use::alone, 64 * kib, 60'000);  // the machine now copies 3x slower
  EXPECT_NEAR(c.estimate(dma_engine::staged, 64 * kib), 3 * before, before * 1e-3);
  c.record(dma_engine::staged, dma_use::alone, 64 * kib, 10'000);  // faster: at once
  EXPECT_NEAR(c.estimate(dma_engine::staged, 64 * kib), before / 2, before * 1e-3);
}

// A stream of staged writes goes at the slower of its two copies, a write alone at their sum:
// the same engines can rank differently for the two uses, and each use follows its own costs.
TEST(dma_engine_choice, a_destination_just_ahead_of_its_source_is_a_class_of_its_own) {
  // 1..63 bytes ahead modulo a page; 0, 64 and behind are not.
  EXPECT_FALSE(dma_engine_choice::is_aliased(0x10000, 0x20000));
  EXPECT_TRUE(dma_engine_choice::is_aliased(0x10000, 0x20001));
  EXPECT_TRUE(dma_engine_choice::is_aliased(0x10010, 0x20028));
  EXPECT_TRUE(dma_engine_choice::is_aliased(0x10fff, 0x2103e));  // across a page boundary
  EXPECT_FALSE(dma_engine_choice::is_aliased(0x10000, 0x20040));
  EXPECT_FALSE(dma_engine_choice::is_aliased(0x10010, 0x20008));
  // The kernel's copy is cheap for plain placements and dear for aliased ones; the staged
  // engine costs the same for both. Each placement gets the engine that is cheaper for it,
  // whatever the other's samples say, and the classes are measured apart.
  dma_engine_choice c;
  const std::size_t len = 256 * kib;
  for (int i = 0; i < 4; ++i) {
    c.record(dma_engine::cross_memory_attach, dma_use::alone, len, 30'000, false);
    c.record(dma_engine::cross_memory_attach, dma_use::alone, len, 150'000, true);
    c.record(dma_engine::staged, dma_use::alone, len, 60'000, false);
    c.record(dma_engine::staged, dma_use::alone, len, 60'000, true);
  }
  EXPECT_EQ(c.preferred_for(len, dma_use::alone, false), dma_engine::cross_memory_attach);
  EXPECT_EQ(c.preferred_for(len, dma_use::alone, true), dma_engine::staged);
  EXPECT_EQ(c.samples(dma_engine::cross_memory_attach, len, dma_use::alone, true), 4u);
  EXPECT_EQ(c.samples(dma_engine::cross_memory_attach, len, dma_use::alone, false), 4u);
  std::size_t staged = 0;
  for (int i = 0; i < 128; ++i) staged += c.choose(len, dma_use::alone, true) == dma_engine::staged;
  EXPECT_EQ(staged, 128u - 128u / dma_engine_choice::explore_period_long);
}

TEST(dma_engine_choice, a_stream_and_a_write_alone_are_ranked_apart) {
  dma_engine_choice c;
  const std::size_t len = 16 * kib;
  for (int i = 0; i < 4; ++i) {
    c.record(dma_engine::cross_memory_attach, dma_use::alone, len, 3'000);
    c.record(dma_engine::cross_memory_attach, dma_use::stream, len, 3'000);
    c.record(dma_engine::staged, dma_use::alone, len, 4'000);   // copy in, then out
    c.record(dma_engine::staged, dma_use::stream, len, 2'000);  // copy in; out overlaps
  }
  EXPECT_EQ(c.preferred_for(len, dma_use::alone), dma_engine::cross_memory_attach);
  EXPECT_EQ(c.preferred_for(len, dma_use::stream), dma_engine::staged);
  std::size_t staged_in_stream = 0;
  for (int i = 0; i < 160; ++i) staged_in_stream += c.choose(len, dma_use::stream) == dma_engine::staged;
  EXPECT_EQ(staged_in_stream, 160u - 160u / dma_engine_choice::explore_period);
  // A use never measured borrows the other's costs rather than starting from nothing.
  dma_engine_choice d;
  for (int i = 0; i < 4; ++i) {
    d.record(dma_engine::cross_memory_attach, dma_use::alone, len, 3'000);
    d.record(dma_engine::staged, dma_use::alone, len, 2'000);
  }
  EXPECT_EQ(d.preferred_for(len, dma_use::stream), dma_engine::staged);
  EXPECT_DOUBLE_EQ(d.estimate(dma_engine::staged, len, dma_use::stream),
                   d.estimate(dma_engine::staged, len, dma_use::alone));
}

// ---- the emulated device, into another process -------------------------------------------

params make_params(std::uint32_t pdid, dma_engine_mode mode) {
  params p;
  p.self.pdid = pdid;
  p.self.node = 0;
  p.geo.mailbox_slots = 64;
  p.geo.notify_slots = 16;
  p.geo.bounce_peers = 2;
  p.geo.bounce_ring_bytes = 4096;
  p.geo.staging_chunks = 8;
  p.geo.staging_chunk_bytes = 65536;
  p.geo.key_slots = 16;
  p.geo.event_rings = 2;
  p.geo.event_ring_entries = 16;
  p.dma_engine = mode;
  return p;
}

unsigned char pattern(std::size_t round, std::size_t i) {
  return static_cast<unsigned char>(i * 13 + round * 7 + 1);
}

struct offer {
  address a;
  std::uint64_t addr;
  std::uint32_t slot, gen;
};

// The target: each round arms a window over its buffer, tells the parent, waits for the
// notification (copying staged pieces out as it polls), checks every byte, answers.
[[noreturn]] void target(const params& pp, std::size_t len, std::size_t rounds, int to_parent,
                         int from_parent) {
  alarm(60);
  device d;
  if (d.open(pp) != core::status::ok) _exit(2);
  std::vector<std::byte> buf(len);
  for (std::size_t r = 0; r < rounds; ++r) {
    std::memset(buf.data(), 0, len);
    std::uint32_t slot, gen;
    if (!d.notify_alloc(slot, gen)) _exit(3);
    d.window_open(slot, reinterpret_cast<std::uint64_t>(buf.data()), len);
    const offer o{d.local_address(), reinterpret_cast<std::uint64_t>(buf.data()), slot, gen};
    if (write(to_parent, &o, sizeof o) != sizeof o) _exit(4);
    notification n{};
    while (!d.notify_test(slot, gen, n)) d.poll_mailbox(16, [](peer_id, const packet&) {});
    for (std::size_t i = 0; i < len; ++i)
      if (buf[i] != std::byte(pattern(r, i))) _exit(5);
    d.notify_free(slot);
    if (write(to_parent, "k", 1) != 1) _exit(6);
  }
  char c;
  if (read(from_parent, &c, 1) != 1) _exit(7);
  _exit(0);
}

struct run_result {
  std::uint64_t direct = 0, staged = 0;
  std::uint32_t staged_samples = 0, cma_samples = 0;
};

run_result write_rounds(dma_engine_mode mode, std::size_t len, std::size_t rounds,
                        std::uint32_t pdid) {
  const params pp = make_params(pdid, mode);
  int to_parent[2], to_child[2];
  EXPECT_EQ(pipe(to_parent), 0);
  EXPECT_EQ(pipe(to_child), 0);
  const pid_t pid = fork();
  if (pid == 0) target(pp, len, rounds, to_parent[1], to_child[0]);
  fcntl(to_parent[0], F_SETFL, O_NONBLOCK);
  device d;
  EXPECT_EQ(d.open(pp), core::status::ok);
  std::vector<std::byte> src(len);
  peer_id p = no_peer;
  const auto deadline = time(nullptr) + 60;
  // The initiator polls its own device while it waits, as an endpoint's progress does: that is
  // where the end of a timed staged write is seen.
  auto wait_for = [&](void* out, std::size_t n) {
    std::size_t got = 0;
    while (got < n && time(nullptr) < deadline) {
      const ssize_t r = read(to_parent[0], static_cast<char*>(out) + got, n - got);
      if (r > 0) got += static_cast<std::size_t>(r);
      d.poll_mailbox(16, [](peer_id, const packet&) {});
    }
    return got == n;
  };
  for (std::size_t r = 0; r < rounds; ++r) {
    offer o{};
    if (!wait_for(&o, sizeof o)) {
      ADD_FAILURE() << "round " << r << ": no offer from the target";
      break;
    }
    if (p == no_peer) {
      EXPECT_EQ(d.connect(o.a, p), core::status::ok);
    }
    for (std::size_t i = 0; i < len; ++i) src[i] = std::byte(pattern(r, i));
    const iovec v{src.data(), len};
    dma_write w;
    w.peer = p;
    w.src = {&v, 1};
    w.dst_addr = o.addr;
    w.dst_base = o.addr;
    w.len = len;
    w.notify = true;
    w.notify_slot = o.slot;
    w.notify_gen = o.gen;
    dma_state st;
    core::status s;
    while ((s = d.dma_post(w, st)) == core::status::again && time(nullptr) < deadline)
      d.poll_mailbox(16, [](peer_id, const packet&) {});
    EXPECT_EQ(s, core::status::ok);
    char k = 0;
    if (!wait_for(&k, 1)) {
      ADD_FAILURE() << "round " << r << ": the target did not confirm the data";
      break;
    }
  }
  EXPECT_EQ(write(to_child[1], "x", 1), 1);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "target status " << status;
  const route_counts rc = d.routes();
  return {rc.dma_writes_direct, rc.dma_writes_staged,
          d.engine_choice().samples(dma_engine::staged, len),
          d.engine_choice().samples(dma_engine::cross_memory_attach, len)};
}

TEST(emu_dma_engine, auto_measures_both_engines_and_every_write_lands) {
  const std::uint32_t pdid = 70000 + static_cast<std::uint32_t>(getpid() % 10000);
  for (std::size_t len : {std::size_t{20000}, std::size_t{300000}}) {
    const run_result r = write_rounds(dma_engine_mode::automatic, len, 40, pdid);
    EXPECT_EQ(r.direct + r.staged, 40u) << len;
    // Warm-up gives each engine two writes; a staged write is timed when it is alone, which
    // each is here (the target confirms before the next), and the initiator polls meanwhile.
    EXPECT_GE(r.direct, 2u) << len;
    EXPECT_GE(r.staged, 2u) << len;
    EXPECT_EQ(r.cma_samples, r.direct) << len;
    EXPECT_GE(r.staged_samples, 2u) << len << ": staged writes were never timed to their end";
  }
}

TEST(emu_dma_engine, a_fixed_engine_is_not_measured) {
  const std::uint32_t pdid = 80000 + static_cast<std::uint32_t>(getpid() % 10000);
  const run_result s = write_rounds(dma_engine_mode::staged, 100000, 6, pdid);
  EXPECT_EQ(s.staged, 6u);
  EXPECT_EQ(s.direct, 0u);
  EXPECT_EQ(s.staged_samples + s.cma_samples, 0u);
  const run_result c = write_rounds(dma_engine_mode::cross_memory_attach, 100000, 6, pdid);
  EXPECT_EQ(c.direct, 6u);
  EXPECT_EQ(c.staged, 0u);
  EXPECT_EQ(c.staged_samples + c.cma_samples, 0u);
}

}  // namespace
}  // namespace exanet::dev::emu
