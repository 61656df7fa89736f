// SPDX-License-Identifier: BSD-2-Clause
// The emulated ExaNeST device with real processes and real shared memory: the mailbox ring under
// several producer processes, back-pressure, PDID protection, bounce-ring credits, notification
// generations, DMA writes across processes (CMA and the staged fallback), dead peers and the
// reclaiming of their segments.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "dev/emu/device.hpp"

namespace exanet::dev::emu {
namespace {

// A distinct PDID per test program run keeps parallel runs apart. Taken from the pid of the
// test process once, so forked children compute the same value.
const pid_t g_test_pid = getpid();
std::uint32_t test_pdid(std::uint32_t salt) { return 5000 + (g_test_pid % 10000) * 16 + salt; }

params make_params(std::uint32_t pdid, std::uint32_t slots = 64) {
  params p;
  p.self.pdid = pdid;
  p.geo.mailbox_slots = slots;
  p.geo.notify_slots = 64;
  p.geo.bounce_peers = 4;
  p.geo.bounce_ring_bytes = 1 << 16;
  p.geo.staging_chunks = 4;
  p.geo.staging_chunk_bytes = 4096;
  return p;
}

bool segment_exists(const address& a) {
  struct stat st {};
  return stat(("/dev/shm" + segment_name(getuid(), a.pdid, a.port)).c_str(), &st) == 0;
}

bool wake_socket_exists(const address& a) {
  struct stat st {};
  return stat((shm_dir + wake_socket_name(segment_name(getuid(), a.pdid, a.port))).c_str(), &st) == 0 &&
         S_ISSOCK(st.st_mode);
}

// Whether fd turns readable within ms.
bool readable(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, ms) == 1;
}

// What another process with access to the segment sees of it.
segment_view view_of(shm_segment& seg) {
  return segment_view::of(seg.data(), static_cast<segment_header*>(seg.data())->geo);
}

packet numbered(std::uint8_t type, std::uint32_t producer, std::uint64_t n) {
  packet p{};
  p[0] = std::byte{type};
  std::memcpy(p.data() + 8, &producer, 4);
  std::memcpy(p.data() + 16, &n, 8);
  return p;
}

TEST(emu_device, packets_flow_both_ways_and_to_self) {
  device a, b;
  ASSERT_EQ(a.open(make_params(test_pdid(1))), core::status::ok);
  ASSERT_EQ(b.open(make_params(test_pdid(1))), core::status::ok);
  peer_id ab, aa;
  ASSERT_EQ(a.connect(b.local_address(), ab), core::status::ok);
  ASSERT_EQ(a.connect(a.local_address(), aa), core::status::ok);
  ASSERT_EQ(a.mailbox_send(ab, numbered(1, 0, 7)), core::status::ok);
  ASSERT_EQ(a.mailbox_send(aa, numbered(1, 0, 8)), core::status::ok);
  std::uint64_t got = 0;
  peer_id from = no_peer;
  EXPECT_EQ(b.poll_mailbox(8, [&](peer_id p, const packet& pk) {
    from = p;
    std::memcpy(&got, pk.data() + 16, 8);
  }), 1u);
  EXPECT_EQ(got, 7u);
  EXPECT_EQ(b.peer_address(from), a.local_address());  // the sender is identified and connected
  EXPECT_EQ(a.poll_mailbox(8, [&](peer_id, const packet& pk) { std::memcpy(&got, pk.data() + 16, 8); }), 1u);
  EXPECT_EQ(got, 8u);
}

// has_arrivals() lets an idle progress call skip every poll: it must say true whenever one of
// them has something (a packet, a notification bell) and false once all were taken.
TEST(emu_device, has_arrivals_sees_packets_and_bells_until_taken) {
  device a, b;
  ASSERT_EQ(a.open(make_params(test_pdid(1))), core::status::ok);
  ASSERT_EQ(b.open(make_params(test_pdid(1))), core::status::ok);
  peer_id ab, bb;
  ASSERT_EQ(a.connect(b.local_address(), ab), core::status::ok);
  ASSERT_EQ(b.connect(b.local_address(), bb), core::status::ok);
  EXPECT_FALSE(b.has_arrivals());
  for (int round = 0; round < 70; ++round) {  // more than the ring: the head wraps
    ASSERT_EQ(a.mailbox_send(ab, numbered(1, 0, round)), core::status::ok);
    EXPECT_TRUE(b.has_arrivals()) << round;
    EXPECT_EQ(b.poll_mailbox(8, [](peer_id, const packet&) {}), 1u);
    EXPECT_FALSE(b.has_arrivals()) << round;
  }
  std::uint32_t slot, gen;
  ASSERT_TRUE(b.notify_alloc(slot, gen));
  std::byte data[8] = {};
  iovec v{data, sizeof data};
  dma_write w;
  w.peer = bb;
  w.src = {&v, 1};
  w.dst_addr = reinterpret_cast<std::uint64_t>(data);
  w.len = 0;
  w.notify = true;
  w.notify_slot = slot;
  w.notify_gen = gen;
  dma_state st;
  ASSERT_EQ(b.dma_post(w, st), core::status::ok);
  EXPECT_TRUE(b.has_arrivals()) << "a notification landed: its bell rang";
  EXPECT_TRUE(b.take_notify_bells([](std::uint32_t) {}));
  EXPECT_FALSE(b.has_arrivals());
}

TEST(emu_device, full_mailbox_says_again_and_loses_nothing) {
  device a, b;
  ASSERT_EQ(a.open(make_params(test_pdid(2), 16)), core::status::ok);
  ASSERT_EQ(b.open(make_params(test_pdid(2), 16)), core::status::ok);
  peer_id ab;
  ASSERT_EQ(a.connect(b.local_address(), ab), core::status::ok);
  std::uint64_t sent = 0, received = 0;
  for (int round = 0; round < 5; ++round) {
    while (a.mailbox_send(ab, numbered(1, 0, sent)) == core::status::ok) ++sent;
    EXPECT_EQ(sent, 16u * (round + 1));
    b.poll_mailbox(1000, [&](peer_id, const packet& pk) {
      std::uint64_t n;
      std::memcpy(&n, pk.data() + 16, 8);
      EXPECT_EQ(n, received++);
    });
  }
  EXPECT_EQ(received, sent);
}

TEST(emu_device, many_producer_processes_keep_fifo_per_producer) {
  constexpr int producers = 4;
  constexpr std::uint64_t per_producer = 200000;
  device consumer;
  ASSERT_EQ(consumer.open(make_params(test_pdid(3), 64)), core::status::ok);
  const address target = consumer.local_address();
  std::vector<pid_t> kids;
  for (int p = 0; p < producers; ++p) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      alarm(120);
      device d;
      peer_id to;
      if (d.open(make_params(test_pdid(3), 64)) != core::status::ok || d.connect(target, to) != core::status::ok)
        _exit(3);
      for (std::uint64_t n = 0; n < per_producer;) {
        const core::status s = d.mailbox_send(to, numbered(1, static_cast<std::uint32_t>(p), n));
        if (s == core::status::ok) ++n;
        else if (s != core::status::again) _exit(4);
      }
      d.close();
      _exit(0);
    }
    kids.push_back(pid);
  }
  std::vector<std::uint64_t> next(producers, 0);
  std::uint64_t total = 0;
  bool order_ok = true;
  const auto deadline = time(nullptr) + 120;
  while (total < producers * per_producer && time(nullptr) < deadline) {
    total += consumer.poll_mailbox(256, [&](peer_id, const packet& pk) {
      std::uint32_t p;
      std::uint64_t n;
      std::memcpy(&p, pk.data() + 8, 4);
      std::memcpy(&n, pk.data() + 16, 8);
      if (p >= producers || n != next[p]) order_ok = false;
      else ++next[p];
    });
  }
  for (pid_t k : kids) {
    int st = 0;
    waitpid(k, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  EXPECT_TRUE(order_ok) << "a producer's packets arrived out of order, duplicated or corrupted";
  EXPECT_EQ(total, producers * per_producer) << "packets lost";
  for (int p = 0; p < producers; ++p) EXPECT_EQ(next[p], per_producer);
  // Nothing more than what was sent.
  EXPECT_EQ(consumer.poll_mailbox(16, [](peer_id, const packet&) {}), 0u);
}

TEST(emu_device, other_pdids_cannot_connect_and_foreign_packets_are_dropped) {
  device a, b;
  ASSERT_EQ(a.open(make_params(test_pdid(4))), core::status::ok);
  ASSERT_EQ(b.open(make_params(test_pdid(5))), core::status::ok);
  peer_id p;
  address other = b.local_address();
  EXPECT_NE(a.connect(other, p), core::status::ok);
  other.pdid = a.local_address().pdid;  // pretend: same port, our PDID: no such segment
  EXPECT_EQ(a.connect(other, p), core::status::unreachable);
  // A packet stamped with a foreign PDID (as a misbehaving packetizer would deliver it) is dropped.
  shm_segment seg;
  ASSERT_EQ(shm_segment::open(segment_name(getuid(), b.local_address().pdid, b.local_address().port), seg),
            core::status::ok);
  const segment_view v = view_of(seg);
  const std::uint64_t pos = v.mbox_ctl->tail.fetch_add(1);
  mailbox_slot& s = v.mailbox[pos % 64];
  s.data = numbered(1, 9, 9);
  s.pdid = a.local_address().pdid;
  s.src_port = a.local_address().port;
  s.src_node = 0;
  s.seq.store(pos + 1, std::memory_order_release);
  int delivered = 0;
  b.poll_mailbox(8, [&](peer_id, const packet&) { ++delivered; });
  EXPECT_EQ(delivered, 0);
  EXPECT_EQ(b.foreign_pdid_drops(), 1u);
}

TEST(emu_device, a_corrupt_mailbox_slot_is_an_error_not_a_spin) {
  device a, b;
  ASSERT_EQ(a.open(make_params(test_pdid(14))), core::status::ok);
  ASSERT_EQ(b.open(make_params(test_pdid(14))), core::status::ok);
  peer_id ab;
  ASSERT_EQ(a.connect(b.local_address(), ab), core::status::ok);
  ASSERT_EQ(a.mailbox_send(ab, numbered(1, 1, 1)), core::status::ok);
  // Someone with access to b's segment writes a sequence number ahead of the tail.
  shm_segment seg;
  ASSERT_EQ(shm_segment::open(segment_name(getuid(), b.local_address().pdid, b.local_address().port), seg),
            core::status::ok);
  const segment_view v = view_of(seg);
  const std::uint64_t pos = v.mbox_ctl->tail.load();
  v.mailbox[pos % 64].seq.store(pos + 1000, std::memory_order_release);
  EXPECT_EQ(a.mailbox_send(ab, numbered(1, 1, 2)), core::status::io);
  int delivered = 0;
  b.poll_mailbox(8, [&](peer_id, const packet&) { ++delivered; });
  EXPECT_EQ(delivered, 1);  // what was sent before the corruption arrives
}

TEST(emu_device, bounce_ring_credits_and_no_wrapping_messages) {
  device a, b;
  ASSERT_EQ(a.open(make_params(test_pdid(6))), core::status::ok);
  ASSERT_EQ(b.open(make_params(test_pdid(6))), core::status::ok);
  peer_id ab, ba;
  ASSERT_EQ(a.connect(b.local_address(), ab), core::status::ok);
  ASSERT_EQ(b.connect(a.local_address(), ba), core::status::ok);
  const std::size_t ring = 1 << 16, len = 24000;  // does not divide the ring: forces skips
  std::uint64_t consumed = 0, tail = 0;
  std::uint32_t held = 0;  // the ring a holds at b
  for (int i = 0; i < 40; ++i) {
    std::uint32_t r;
    std::uint64_t off;
    const std::uintptr_t like = 0x1000 + 13u * i;  // every offset within a line, in turn
    std::byte* dst = a.bounce_acquire(ab, len, like, r, off);
    if (!dst) {  // out of credit: the receiver consumes everything, then it must succeed
      b.bounce_consume(r, consumed);
      tail = consumed;
      dst = a.bounce_acquire(ab, len, like, r, off);
      ASSERT_NE(dst, nullptr);
    }
    EXPECT_LE((off % ring) + len, ring) << "a message straddles the end of the ring";
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(dst) % 64, like % 64)
        << "the space is not placed like the buffer it is copied from";
    std::memset(dst, i, len);
    a.bounce_commit(ab, off + len);
    const std::byte* seen = b.bounce_data(ba, r, off, len);
    ASSERT_NE(seen, nullptr);
    // The bound is the receiver's own tail, not the sender's head: at most one ring past what
    // it consumed (8 bytes at a line, never straddling the ring's end).
    const std::uint64_t lap_end = (tail + ring) & ~std::uint64_t{63};
    EXPECT_EQ(b.bounce_data(ba, r, lap_end + 64, 8), nullptr) << "past one ring of credit";
    EXPECT_NE(b.bounce_data(ba, r, lap_end - 64, 8), nullptr) << "within one ring of credit";
    EXPECT_EQ(b.bounce_data(ba, (r + 1) % 4, off, len), nullptr) << "a ring the sender does not hold";
    EXPECT_EQ(seen[0], std::byte(i));
    EXPECT_EQ(seen[len - 1], std::byte(i));
    consumed = off + len;
    held = r;
  }
  std::uint32_t r;
  std::uint64_t off;
  EXPECT_EQ(a.bounce_acquire(ab, ring, 0, r, off), nullptr) << "a message larger than half a ring";
  EXPECT_EQ(b.bounce_data(ba, 0, ring - 8, 64), nullptr) << "a range outside the ring";
  // The last message is still there for its sender, and for nobody else.
  peer_id bb;  // b itself: a sender that holds no ring at b
  ASSERT_EQ(b.connect(b.local_address(), bb), core::status::ok);
  ASSERT_NE(b.bounce_data(ba, held, consumed - len, 8), nullptr);
  EXPECT_EQ(b.bounce_data(bb, held, consumed - len, 8), nullptr) << "another sender's ring";
  b.bounce_consume(held, consumed);
  EXPECT_EQ(b.bounce_data(ba, held, consumed - len, 8), nullptr) << "bytes already consumed";
}

// a and b know each other: ab is b as a's peer, ba is a as b's.
void connect_pair(device& a, device& b, peer_id& ab, peer_id& ba) {
  ASSERT_EQ(a.connect(b.local_address(), ab), core::status::ok);
  ASSERT_EQ(b.connect(a.local_address(), ba), core::status::ok);
}

// One medium message's bytes through from's ring at to: len bytes of `fill`, committed; what the
// receiver reads at the position the sender was given (nullptr if refused, or if the sender got
// no room: then ring is ~0u).
const std::byte* bounce_through(device& from, peer_id at_to, device& to, peer_id at_from,
                                std::size_t len, std::byte fill, std::uint32_t& ring,
                                std::uint64_t& off) {
  ring = ~0u;  // bounce_acquire sets it only when it gives room
  std::byte* dst = from.bounce_acquire(at_to, len, 0, ring, off);
  if (!dst) return nullptr;
  std::memset(dst, std::to_integer<int>(fill), len);
  from.bounce_commit(at_to, off + len);
  return to.bounce_data(at_from, ring, off, len);
}

// A sender that closes right after a medium send (an inject, then fi_close) leaves its last
// messages in its ring: they are still read as its own, and the ring is freed once drained.
TEST(emu_device, a_closed_senders_last_bounce_messages_are_still_its_own) {
  device a, b;
  ASSERT_EQ(a.open(make_params(test_pdid(16))), core::status::ok);
  ASSERT_EQ(b.open(make_params(test_pdid(16))), core::status::ok);
  peer_id ab, ba;
  ASSERT_NO_FATAL_FAILURE(connect_pair(a, b, ab, ba));
  std::uint32_t ring;
  std::uint64_t off;
  (void)bounce_through(a, ab, b, ba, 1000, std::byte{0x3c}, ring, off);
  ASSERT_NE(ring, ~0u);
  a.close();
  const std::byte* seen = b.bounce_data(ba, ring, off, 1000);
  ASSERT_NE(seen, nullptr) << "the closed sender's message was refused";
  EXPECT_EQ(seen[999], std::byte{0x3c});
  b.bounce_consume(ring, off + 1000);
  shm_segment seg;
  ASSERT_EQ(shm_segment::open(segment_name(getuid(), b.local_address().pdid, b.local_address().port), seg),
            core::status::ok);
  EXPECT_EQ(view_of(seg).bounce[ring].owner.load(), 0u) << "a drained ring of a closed sender is free";
}

// A forging sender names bytes past what it produced (the receiver bounds by its own tail, not
// by the sender's head) and so has the receiver consume past the head, then closes. The ring is
// freed, whether the receiver consumed before the close or after it, and the next sender that
// claims it is not refused: it continues after both positions.
TEST(emu_device, a_ring_consumed_past_its_head_serves_the_next_sender) {
  device b;
  ASSERT_EQ(b.open(make_params(test_pdid(19))), core::status::ok);
  shm_segment seg;
  ASSERT_EQ(shm_segment::open(segment_name(getuid(), b.local_address().pdid, b.local_address().port), seg),
            core::status::ok);
  std::uint32_t first_ring = ~0u;
  // Two forgers, then an honest sender (the last round).
  for (const int round : {0, 1, 2}) {
    SCOPED_TRACE(round == 0 ? "consumed before the close" : round == 1 ? "consumed after the close"
                                                                       : "the next sender");
    device a;
    ASSERT_EQ(a.open(make_params(test_pdid(19))), core::status::ok);
    peer_id ab, ba;
    ASSERT_NO_FATAL_FAILURE(connect_pair(a, b, ab, ba));
    std::uint32_t ring;
    std::uint64_t off;
    const std::byte fill{0x5a};
    const std::byte* seen = bounce_through(a, ab, b, ba, 100, fill, ring, off);
    ASSERT_NE(ring, ~0u) << "a sender after a forging one was refused ring space";
    if (first_ring == ~0u) first_ring = ring;
    ASSERT_EQ(ring, first_ring) << "the test meant every sender to take the same ring";
    ASSERT_NE(seen, nullptr) << "a sender after a forging one had its message refused";
    EXPECT_EQ(seen[99], fill);
    if (round == 2) break;
    // The forged packet: 4000 bytes where the sender produced 100.
    ASSERT_NE(b.bounce_data(ba, ring, off, 4000), nullptr);
    if (round == 0) b.bounce_consume(ring, off + 4000);
    a.close();
    if (round == 1) b.bounce_consume(ring, off + 4000);
    EXPECT_EQ(view_of(seg).bounce[ring].owner.load(), 0u) << "a closed sender's drained ring stays held";
  }
}

TEST(emu_device, notification_generations_never_alias) {
  device a;
  ASSERT_EQ(a.open(make_params(test_pdid(7))), core::status::ok);
  peer_id self;
  ASSERT_EQ(a.connect(a.local_address(), self), core::status::ok);
  std::uint32_t slot, gen1, gen2;
  ASSERT_TRUE(a.notify_alloc(slot, gen1));
  notification out{};
  EXPECT_FALSE(a.notify_test(slot, gen1, out));
  std::byte data[8] = {};
  iovec v{data, sizeof data};
  dma_write w;
  w.peer = self;
  w.src = {&v, 1};
  w.dst_addr = reinterpret_cast<std::uint64_t>(data);
  w.len = 0;
  w.notify = true;
  w.notify_slot = slot;
  w.notify_gen = gen1;
  w.notify_data[0] = std::byte{42};
  dma_state st;
  ASSERT_EQ(a.dma_post(w, st), core::status::ok);
  ASSERT_TRUE(a.notify_test(slot, gen1, out));
  EXPECT_EQ(out[0], std::byte{42});
  a.notify_free(slot);
  std::uint32_t slot2;
  ASSERT_TRUE(a.notify_alloc(slot2, gen2));
  ASSERT_EQ(slot2, slot);  // reused...
  EXPECT_NE(gen2, gen1);
  EXPECT_FALSE(a.notify_test(slot2, gen2, out)) << "...but the old write does not satisfy the new use";
}

// The child owns a buffer; the parent DMA-writes into it, dst_skew bytes past a 64-byte boundary,
// and the child checks data, the bytes around it, then notification order.
void dma_into_other_process(bool cma, std::size_t len, std::uint32_t salt, std::size_t dst_skew = 0) {
  params pp = make_params(test_pdid(salt));
  pp.dma_engine = cma ? dma_engine_mode::cross_memory_attach : dma_engine_mode::staged;
  int to_child[2], to_parent[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(to_parent), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(60);
    device d;
    if (d.open(pp) != core::status::ok) _exit(2);
    std::vector<std::byte> whole(len + 192, std::byte{0x11});
    auto* line = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(whole.data()) + 63) & ~std::uintptr_t{63});
    std::byte* const buf = line + dst_skew;
    const std::size_t before = static_cast<std::size_t>(buf - whole.data());
    std::uint32_t slot, gen;
    d.notify_alloc(slot, gen);
    d.window_open(slot, reinterpret_cast<std::uint64_t>(buf), len);
    struct { address a; std::uint64_t addr; std::uint32_t slot, gen; } msg{d.local_address(),
        reinterpret_cast<std::uint64_t>(buf), slot, gen};
    if (write(to_parent[1], &msg, sizeof msg) != sizeof msg) _exit(3);
    notification n{};
    while (!d.notify_test(slot, gen, n)) d.poll_mailbox(16, [](peer_id, const packet&) {});
    // Data first, then the notification: everything is there now.
    for (std::size_t i = 0; i < len; ++i)
      if (buf[i] != std::byte(static_cast<unsigned char>(i * 7 + 1))) _exit(4);
    for (std::size_t i = 0; i < whole.size(); ++i)
      if ((i < before || i >= before + len) && whole[i] != std::byte{0x11}) _exit(5);
    if (n[0] != std::byte{0x5e}) _exit(6);
    char c;
    if (read(to_child[0], &c, 1) != 1) _exit(7);
    _exit(0);
  }
  struct { address a; std::uint64_t addr; std::uint32_t slot, gen; } msg{};
  ASSERT_EQ(read(to_parent[0], &msg, sizeof msg), static_cast<ssize_t>(sizeof msg));
  device d;
  ASSERT_EQ(d.open(pp), core::status::ok);
  peer_id p;
  ASSERT_EQ(d.connect(msg.a, p), core::status::ok);
  // Source: three iovecs, starting 5 bytes into the first.
  std::vector<std::byte> src(len + 5);
  for (std::size_t i = 0; i < len; ++i) src[i + 5] = std::byte(static_cast<unsigned char>(i * 7 + 1));
  const std::size_t cut1 = std::min<std::size_t>(len + 5, 100), cut2 = std::min<std::size_t>(len + 5, cut1 + len / 2);
  iovec iov[3] = {{src.data(), cut1}, {src.data() + cut1, cut2 - cut1}, {src.data() + cut2, len + 5 - cut2}};
  dma_write w;
  w.peer = p;
  w.src = {iov, 3};
  w.src_offset = 5;
  w.dst_addr = msg.addr;
  w.len = len;
  w.notify = true;
  w.notify_slot = msg.slot;
  w.notify_gen = msg.gen;
  w.notify_data[0] = std::byte{0x5e};
  dma_state st;
  core::status s;
  const auto deadline = time(nullptr) + 60;
  while ((s = d.dma_post(w, st)) == core::status::again && time(nullptr) < deadline) {
  }
  EXPECT_EQ(s, core::status::ok);
  ASSERT_EQ(write(to_child[1], "x", 1), 1);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
}

TEST(emu_device, dma_write_into_another_process_with_cma) {
  for (std::size_t len : {std::size_t{0}, std::size_t{1}, std::size_t{4095}, std::size_t{65536},
                          std::size_t{(1 << 20) + 7}})
    dma_into_other_process(true, len, 8);
}

TEST(emu_device, dma_write_into_another_process_staged_without_cma) {
  for (std::size_t len : {std::size_t{0}, std::size_t{1}, std::size_t{4095}, std::size_t{65536},
                          std::size_t{(1 << 20) + 7}})
    dma_into_other_process(false, len, 9);
}

// Staged chunks hold their payload at the destination's offset within a line: every offset
// must land exactly, with nothing written around it.
TEST(emu_device, staged_writes_land_exactly_at_every_destination_offset) {
  for (std::size_t skew : {std::size_t{1}, std::size_t{16}, std::size_t{40}, std::size_t{63}})
    for (std::size_t len : {std::size_t{63}, std::size_t{4096 * 3 + 17}})
      dma_into_other_process(false, len, 10, skew);
}

// An endpoint in a child process that lives until it is killed (at the latest when this goes:
// a failed assertion leaves no process behind; open() reclaims its segment later).
struct child_endpoint {
  pid_t pid = -1;
  address addr{};
  explicit child_endpoint(std::uint32_t pdid) {
    int to_parent[2];
    if (pipe(to_parent) != 0) return;
    const pid_t child = fork();
    if (child == 0) {
      ::close(to_parent[0]);
      device d;
      if (d.open(make_params(pdid)) != core::status::ok) _exit(2);
      address a = d.local_address();
      if (write(to_parent[1], &a, sizeof a) != sizeof a) _exit(3);
      pause();
      _exit(0);
    }
    ::close(to_parent[1]);
    if (child > 0) {
      pid = child;
      if (read(to_parent[0], &addr, sizeof addr) != sizeof addr) kill();
    }
    ::close(to_parent[0]);
  }
  child_endpoint(const child_endpoint&) = delete;
  child_endpoint& operator=(const child_endpoint&) = delete;
  ~child_endpoint() { kill(); }
  void kill() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pid = -1;
  }
};

std::vector<peer_id> lost_peers(device& d, std::uint64_t now_ms = 0) {
  std::vector<peer_id> lost;
  d.take_lost_peers(now_ms, [&](peer_id p) { lost.push_back(p); });
  std::sort(lost.begin(), lost.end());
  return lost;
}

// Lost peers come as events: a live peer is never reported; a killed one and one that closed its
// endpoint are, each exactly once (also while not forgotten); forgetting the killed one reclaims
// the segment it could not unlink.
TEST(emu_device, lost_peers_are_reported_once_each_and_live_ones_never) {
  alarm(30);
  child_endpoint live(test_pdid(10)), killed(test_pdid(10));
  ASSERT_GT(live.pid, 0);
  ASSERT_GT(killed.pid, 0);
  params pp = make_params(test_pdid(10));
  pp.liveness_period_ms = 0;  // asks at every call
  device d, closing;
  ASSERT_EQ(d.open(pp), core::status::ok);
  ASSERT_EQ(closing.open(make_params(test_pdid(10))), core::status::ok);
  peer_id pl, pk, pc;
  ASSERT_EQ(d.connect(live.addr, pl), core::status::ok);
  ASSERT_EQ(d.connect(killed.addr, pk), core::status::ok);
  ASSERT_EQ(d.connect(closing.local_address(), pc), core::status::ok);
  EXPECT_FALSE(d.take_lost_peers(0, [](peer_id) {})) << "nobody is gone yet";

  killed.kill();
  closing.close();
  EXPECT_EQ(lost_peers(d), (std::vector<peer_id>{pk, pc}));
  EXPECT_TRUE(lost_peers(d).empty()) << "reported again before being forgotten";
  EXPECT_FALSE(d.take_lost_peers(0, [](peer_id) {}));
  EXPECT_FALSE(d.peer_forgotten(pk));

  EXPECT_TRUE(segment_exists(killed.addr)) << "a killed process cannot unlink its own segment";
  d.forget_dead_peer(pk);
  d.forget_dead_peer(pc);
  EXPECT_TRUE(d.peer_forgotten(pk));
  EXPECT_FALSE(segment_exists(killed.addr));
  EXPECT_EQ(d.mailbox_send(pk, numbered(1, 0, 0)), core::status::peer_dead);
  EXPECT_EQ(d.mailbox_send(pl, numbered(1, 0, 0)), core::status::ok) << "the live peer";
  EXPECT_TRUE(lost_peers(d).empty());

  live.kill();  // and reclaim its segment
  EXPECT_EQ(lost_peers(d), std::vector<peer_id>{pl});
  d.forget_dead_peer(pl);
  EXPECT_FALSE(segment_exists(live.addr));
  alarm(0);
}

// The emulation asks the kernel at most once per the period it was told at open (by the
// caller's clock, given here), however often it is called; and at once, about every peer, when
// an operation found a peer gone, which leaves the periodic schedule as it was.
TEST(emu_device, lost_peers_are_looked_for_once_per_period_or_after_a_death_found) {
  alarm(30);
  child_endpoint killed(test_pdid(8)), killed_later(test_pdid(8));
  ASSERT_GT(killed.pid, 0);
  ASSERT_GT(killed_later.pid, 0);
  constexpr std::uint64_t period = 3'600'000, t0 = 10'000'000;
  params pp = make_params(test_pdid(8));
  pp.liveness_period_ms = period;
  device d, closing;
  ASSERT_EQ(d.open(pp), core::status::ok);
  ASSERT_EQ(closing.open(make_params(test_pdid(8))), core::status::ok);
  peer_id pk, pl, pc;
  ASSERT_EQ(d.connect(killed.addr, pk), core::status::ok);
  ASSERT_EQ(d.connect(killed_later.addr, pl), core::status::ok);
  ASSERT_EQ(d.connect(closing.local_address(), pc), core::status::ok);
  EXPECT_TRUE(lost_peers(d, t0).empty());  // the first call looks: nobody is gone

  killed.kill();
  EXPECT_TRUE(lost_peers(d, t0 + period - 1).empty()) << "looked again within the period";
  EXPECT_FALSE(d.take_dead_found());

  closing.close();
  EXPECT_EQ(d.mailbox_send(pc, numbered(1, 0, 0)), core::status::peer_dead);
  EXPECT_TRUE(d.take_dead_found());
  EXPECT_FALSE(d.take_dead_found()) << "once";
  EXPECT_EQ(lost_peers(d, t0 + period - 1), (std::vector<peer_id>{pk, pc}))
      << "a death found: every peer looked at";

  killed_later.kill();
  EXPECT_TRUE(lost_peers(d, t0 + period - 1).empty()) << "within the period";
  EXPECT_EQ(lost_peers(d, t0 + period), std::vector<peer_id>{pl})
      << "a period after the last periodic look (the one after the death found does not count)";
  for (peer_id p : {pk, pl, pc}) d.forget_dead_peer(p);
  EXPECT_FALSE(segment_exists(killed.addr));
  EXPECT_FALSE(segment_exists(killed_later.addr));
  alarm(0);
}

// A process that exits without closing its endpoint (a forgotten fi_close, MPI_Abort, a child
// that returns from main) leaves no segment behind; a child it forked, exiting first, does not
// remove its parent's.
TEST(emu_device, a_process_that_exits_without_closing_leaves_no_segment) {
  int to_parent[2];
  ASSERT_EQ(pipe(to_parent), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(to_parent[0]);
    auto* d = new device;  // never closed nor destroyed, as by a program that forgets fi_close
    if (d->open(make_params(test_pdid(14))) != core::status::ok || !d->arm_wake_socket()) _exit(2);
    const address a = d->local_address();
    const pid_t grandchild = fork();
    if (grandchild == 0) std::exit(0);  // inherits the endpoint's memory, not its segment
    int st = 0;
    waitpid(grandchild, &st, 0);
    const bool kept = segment_exists(a);
    if (write(to_parent[1], &a, sizeof a) != sizeof a) _exit(3);
    if (write(to_parent[1], &kept, sizeof kept) != sizeof kept) _exit(3);
    std::exit(0);
  }
  ::close(to_parent[1]);
  address a{};
  bool kept_after_child = false;
  ASSERT_EQ(read(to_parent[0], &a, sizeof a), static_cast<ssize_t>(sizeof a));
  ASSERT_EQ(read(to_parent[0], &kept_after_child, sizeof kept_after_child),
            static_cast<ssize_t>(sizeof kept_after_child));
  ::close(to_parent[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  EXPECT_TRUE(kept_after_child) << "a forked child's exit removed its parent's segment";
  EXPECT_FALSE(segment_exists(a)) << "the segment outlived the process that exited";
  EXPECT_FALSE(wake_socket_exists(a)) << "the wake socket outlived the process that exited";
}

TEST(emu_device, open_reclaims_segments_of_dead_processes) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    device d;
    if (d.open(make_params(test_pdid(11))) != core::status::ok || !d.arm_wake_socket()) _exit(2);
    kill(getpid(), SIGKILL);  // dies holding its segment and its wake socket
  }
  waitpid(pid, nullptr, 0);
  address stale{};
  stale.pdid = test_pdid(11);
  bool found = false;
  for (std::uint32_t port = first_auto_port; port < port_limit && !found; ++port) {
    address a = stale;
    a.port = port;
    if (segment_exists(a)) {
      stale = a;
      found = true;
    }
  }
  ASSERT_TRUE(found) << "the killed child's segment should be left behind";
  EXPECT_TRUE(wake_socket_exists(stale)) << "the killed child's wake socket should be left too";
  device fresh;
  ASSERT_EQ(fresh.open(make_params(test_pdid(12))), core::status::ok);
  EXPECT_FALSE(segment_exists(stale)) << "open() did not reclaim a dead process's segment";
  EXPECT_FALSE(wake_socket_exists(stale)) << "open() reclaimed the segment, not its wake socket";
}

// A creator killed while it made its segment (before the header said ready, or even before the
// file had its size) leaves a file no owner's lock guards and nothing else removes: open()
// reclaims it once it has not changed for a while. One just made, or one whose lock is held (a
// live creator), stays.
TEST(emu_device, open_reclaims_segments_left_unfinished_by_a_dead_creator) {
  const auto make = [](std::uint32_t port, bool old, int& fd, bool sized = true) {
    const std::string name = segment_name(getuid(), test_pdid(18), port);
    fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(fchmod(fd, 0600), 0);
    if (sized) {
      ASSERT_EQ(ftruncate(fd, 1 << 16), 0);  // a header of zeros: not ready
    }
    if (old) {
      timespec t[2];
      clock_gettime(CLOCK_REALTIME, &t[0]);
      t[0].tv_sec -= 10 * shm_segment::unfinished_after_s;
      t[1] = t[0];
      ASSERT_EQ(futimens(fd, t), 0);
    }
  };
  address abandoned{}, fresh{}, locked{}, empty{}, empty_fresh{};
  abandoned.pdid = fresh.pdid = locked.pdid = empty.pdid = empty_fresh.pdid = test_pdid(18);
  abandoned.port = first_auto_port + 1;
  fresh.port = first_auto_port + 2;
  locked.port = first_auto_port + 3;
  empty.port = first_auto_port + 4;
  empty_fresh.port = first_auto_port + 5;
  int fd_abandoned, fd_fresh, fd_locked, fd_empty, fd_empty_fresh;
  ASSERT_NO_FATAL_FAILURE(make(abandoned.port, true, fd_abandoned));
  ASSERT_NO_FATAL_FAILURE(make(fresh.port, false, fd_fresh));
  ASSERT_NO_FATAL_FAILURE(make(locked.port, true, fd_locked));
  ASSERT_NO_FATAL_FAILURE(make(empty.port, true, fd_empty, false));
  ASSERT_NO_FATAL_FAILURE(make(empty_fresh.port, false, fd_empty_fresh, false));
  ASSERT_EQ(flock(fd_locked, LOCK_EX | LOCK_NB), 0);  // as a creator still making it holds
  ::close(fd_abandoned);
  ::close(fd_fresh);
  ::close(fd_empty);
  ::close(fd_empty_fresh);
  device d;
  ASSERT_EQ(d.open(make_params(test_pdid(19))), core::status::ok);
  EXPECT_FALSE(segment_exists(abandoned)) << "an unfinished segment of a dead creator was kept";
  EXPECT_TRUE(segment_exists(fresh)) << "a segment being made now was taken from its creator";
  EXPECT_TRUE(segment_exists(locked)) << "a segment whose creator holds its lock was taken";
  EXPECT_FALSE(segment_exists(empty)) << "an empty segment of a dead creator was kept";
  EXPECT_TRUE(segment_exists(empty_fresh)) << "an empty segment being made now was taken";
  ::close(fd_locked);
  shm_unlink(segment_name(getuid(), fresh.pdid, fresh.port).c_str());
  shm_unlink(segment_name(getuid(), locked.pdid, locked.port).c_str());
  shm_unlink(segment_name(getuid(), empty_fresh.pdid, empty_fresh.port).c_str());
}

// A sleeper that polls other fds too (the network side's) cannot wait on the futex word: with a
// wake socket armed, every wake of a sleeping owner also makes the socket readable, and only
// then (no datagram for an owner awake). The socket is this user's alone and goes at close; a
// stale one of the same name (its owner killed) is replaced.
TEST(emu_device, a_sleeping_owner_is_woken_through_its_wake_socket) {
  device a, b;
  ASSERT_EQ(a.open(make_params(test_pdid(17))), core::status::ok);
  ASSERT_EQ(b.open(make_params(test_pdid(17))), core::status::ok);
  const address at = b.local_address();
  {
    // A socket file left at b's name, as by a killed owner whose segment name b now has.
    const int s = ::socket(AF_UNIX, SOCK_DGRAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string path = shm_dir + wake_socket_name(segment_name(getuid(), at.pdid, at.port));
    std::strcpy(addr.sun_path, path.c_str());
    ASSERT_EQ(::bind(s, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
    ::close(s);
  }
  EXPECT_EQ(b.wake_fd(), -1);
  ASSERT_TRUE(b.arm_wake_socket()) << "a stale socket at the name should be replaced";
  ASSERT_GE(b.wake_fd(), 0);
  struct stat st {};
  ASSERT_EQ(stat((shm_dir + wake_socket_name(segment_name(getuid(), at.pdid, at.port))).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  peer_id ab, ba;
  ASSERT_NO_FATAL_FAILURE(connect_pair(a, b, ab, ba));

  const std::atomic<std::uint32_t>* word = nullptr;
  std::uint32_t expected = 0;
  ASSERT_TRUE(b.sleep_prepare(word, expected));
  EXPECT_FALSE(readable(b.wake_fd(), 0)) << "nothing arrived yet";
  ASSERT_EQ(a.mailbox_send(ab, numbered(3, 1, 1)), core::status::ok);
  EXPECT_TRUE(readable(b.wake_fd(), 2000)) << "the sleeper's socket was not woken";
  EXPECT_NE(word->load(), expected) << "the futex word is woken as well";
  b.sleep_end();
  std::size_t got = 0;
  b.poll_mailbox(8, [&](peer_id, const packet&) { ++got; });
  EXPECT_EQ(got, 1u);

  // The next sleep starts from a drained socket; an owner awake is sent nothing.
  ASSERT_TRUE(b.sleep_prepare(word, expected));
  EXPECT_FALSE(readable(b.wake_fd(), 0)) << "the last sleep's datagram was not drained";
  b.sleep_end();
  ASSERT_EQ(a.mailbox_send(ab, numbered(3, 1, 2)), core::status::ok);
  EXPECT_FALSE(readable(b.wake_fd(), 50)) << "a datagram for an owner that was not asleep";

  b.close();
  EXPECT_FALSE(wake_socket_exists(at)) << "close left the wake socket";
}

// A process that can write into the target's mailbox (any process of the user can) publishes
// device packets of its own making; the target copies only into what it armed.
struct forger {
  shm_segment seg;
  segment_view v{};
  explicit forger(const address& target) {
    EXPECT_EQ(shm_segment::open(segment_name(getuid(), target.pdid, target.port), seg),
              core::status::ok);
    v = view_of(seg);
  }
  // Publishes a staged write of `bytes` for dst through chunk 0 (claimed like a sender would).
  void staged(std::uint64_t dst, std::span<const std::byte> bytes, std::uint32_t slot,
              std::uint32_t gen, std::uint32_t key_slot = no_key_slot, bool notify = false,
              std::uint32_t chunk = 0) {
    const geometry& g = v.header->geo;
    if (chunk < g.staging_chunks && !bytes.empty()) {
      v.staging_ctl->free_mask.fetch_and(~(1ull << chunk));
      std::memcpy(v.staging_data + staging_payload_offset(g, chunk, dst), bytes.data(), bytes.size());
    }
    staging_packet sp{};
    sp.type = static_cast<std::uint8_t>(device_packet::staged_write);
    sp.notify = notify;
    sp.chunk = bytes.empty() ? ~0u : chunk;
    sp.dst_addr = dst;
    sp.len = bytes.size();
    sp.notify_slot = slot;
    sp.notify_gen = gen;
    sp.key_slot = key_slot;
    const std::uint64_t pos = v.mbox_ctl->tail.fetch_add(1);
    mailbox_slot& m = v.mailbox[pos & (g.mailbox_slots - 1)];
    std::memcpy(m.data.data(), &sp, sizeof sp);
    m.pdid = v.header->pdid;
    m.src_port = v.header->port;  // claims to be the target itself
    m.src_node = v.header->node;
    m.seq.store(pos + 1, std::memory_order_release);
  }
};

alignas(64) std::byte g_unposted[256];  // a global nobody armed: a forged write aims here

TEST(emu_device, dma_writes_land_only_where_the_target_armed_them) {
  params pp = make_params(test_pdid(15));
  pp.dma_engine = dma_engine_mode::staged;
  device t, ini;
  ASSERT_EQ(t.open(pp), core::status::ok);
  ASSERT_EQ(ini.open(pp), core::status::ok);
  peer_id to_t;
  ASSERT_EQ(ini.connect(t.local_address(), to_t), core::status::ok);
  auto drain = [&] { t.poll_mailbox(64, [](peer_id, const packet&) {}); };

  alignas(64) std::byte buf[256];
  std::memset(buf, 0x11, sizeof buf);
  std::memset(g_unposted, 0x22, sizeof g_unposted);
  std::uint32_t slot, gen;
  ASSERT_TRUE(t.notify_alloc(slot, gen));
  t.window_open(slot, reinterpret_cast<std::uint64_t>(buf + 64), 64);
  std::byte src[64];
  std::memset(src, 0x5a, sizeof src);
  iovec v{src, sizeof src};

  // The initiator's engine checks the target's window before anything moves.
  dma_write w;
  w.peer = to_t;
  w.src = {&v, 1};
  w.dst_addr = reinterpret_cast<std::uint64_t>(buf + 65);  // one byte past the window's end
  w.len = 64;
  w.notify_slot = slot;
  w.notify_gen = gen;
  dma_state st;
  EXPECT_EQ(ini.dma_post(w, st), core::status::access);
  EXPECT_EQ(ini.drops().dma_refused, 1u);
  w.dst_addr = reinterpret_cast<std::uint64_t>(buf + 64);
  w.notify_gen = gen + 1;  // a generation the target never armed
  st = {};
  EXPECT_EQ(ini.dma_post(w, st), core::status::access);
  w.notify_gen = gen;
  st = {};
  ASSERT_EQ(ini.dma_post(w, st), core::status::ok);
  drain();
  for (int i = 0; i < 256; ++i)
    ASSERT_EQ(buf[i], std::byte(i >= 64 && i < 128 ? 0x5a : 0x11)) << "byte " << i;

  // Forged packets skip the initiator's check: the target's own copy decides.
  forger f(t.local_address());
  const std::span<const std::byte> bytes{src, 64};
  const auto at = [](std::byte* p) { return reinterpret_cast<std::uint64_t>(p); };
  std::uint64_t refused = t.drops().dma_refused;
  f.staged(at(g_unposted), bytes, slot, gen);               // nowhere near the window
  f.staged(at(buf + 100), bytes, slot, gen);                // straddles its end
  f.staged(at(buf + 64), bytes, slot, gen + 1);             // the window, another generation
  f.staged(0x10, bytes, slot, gen);                         // the address that crashed a victim
  f.staged(at(buf + 64), bytes, 1000000, gen);              // a slot that does not exist
  drain();
  EXPECT_EQ(t.drops().dma_refused, refused + 5);
  for (std::byte b : g_unposted) ASSERT_EQ(b, std::byte{0x22});
  for (int i = 0; i < 64; ++i) ASSERT_EQ(buf[i], std::byte{0x11});
  for (int i = 128; i < 256; ++i) ASSERT_EQ(buf[i], std::byte{0x11});

  // A notification only for the armed slot and generation.
  f.staged(0, {}, slot, gen + 7, no_key_slot, true);
  drain();
  notification n{};
  EXPECT_FALSE(t.notify_test(slot, gen + 7, n));
  EXPECT_EQ(t.drops().notify_refused, 1u);
  f.staged(0, {}, slot, gen, no_key_slot, true);
  drain();
  EXPECT_TRUE(t.notify_test(slot, gen, n));

  // A freed slot's window is shut: a late write for its last use is refused.
  t.notify_free(slot);
  refused = t.drops().dma_refused;
  std::memset(buf, 0x11, sizeof buf);
  f.staged(at(buf + 64), bytes, slot, gen);
  drain();
  EXPECT_EQ(t.drops().dma_refused, refused + 1);
  for (std::byte b : buf) ASSERT_EQ(b, std::byte{0x11});

  // Writes through a registration: inside it, with the right, and while it lives.
  alignas(64) std::byte region[192];
  std::memset(region, 0x33, sizeof region);
  key_grant g;
  g.key = 77;
  g.va = g.addr_base = at(region + 64);
  g.len = 64;
  g.access = rma_access::remote_write;
  std::uint32_t key_slot;
  ASSERT_EQ(t.key_publish(g, key_slot), core::status::ok);
  g.key = 78;
  g.va = g.addr_base = at(region + 128);
  g.access = rma_access::remote_read;  // readable only
  std::uint32_t read_only;
  ASSERT_EQ(t.key_publish(g, read_only), core::status::ok);
  refused = t.drops().dma_refused;
  f.staged(at(region + 64), bytes, 0, 0, key_slot);   // lands
  f.staged(at(region + 65), bytes, 0, 0, key_slot);   // one byte past the registration
  f.staged(at(region + 128), bytes, 0, 0, read_only);  // no remote-write right
  f.staged(at(region + 64), bytes, 0, 0, 9999);       // no such slot
  drain();
  EXPECT_EQ(t.drops().dma_refused, refused + 3);
  for (int i = 0; i < 192; ++i)
    ASSERT_EQ(region[i], std::byte(i >= 64 && i < 128 ? 0x5a : 0x33)) << "byte " << i;
  t.key_revoke(key_slot);
  std::memset(region, 0x33, sizeof region);
  f.staged(at(region + 64), bytes, 0, 0, key_slot);
  drain();
  EXPECT_EQ(t.drops().dma_refused, refused + 4);
  for (std::byte b : region) ASSERT_EQ(b, std::byte{0x33});

  // A chunk or type the device does not have: dropped and counted, nothing freed twice.
  f.staged(at(buf + 64), bytes, slot, gen, no_key_slot, false, 1000);
  drain();
  EXPECT_EQ(t.drops().bad_field, 1u);
}

// The interface's remote ring write: bounce_reserve claims room (no side effect until the write),
// bounce_write gathers the iovecs into it and makes it the receiver's, placed at the source's
// offset within a cache line. Through dev::interface_of, as the protocols hold a device.
TEST(emu_device, a_ring_write_through_the_interface_lands_placed_and_whole) {
  interface_of<device> a;
  device b;
  ASSERT_EQ(a.open(make_params(test_pdid(17))), core::status::ok);
  ASSERT_EQ(b.open(make_params(test_pdid(17))), core::status::ok);
  peer_id ab, ba;
  ASSERT_EQ(a.connect(b.local_address(), ab), core::status::ok);
  ASSERT_EQ(b.connect(a.local_address(), ba), core::status::ok);
  alignas(64) std::byte first[64 + 300], second[400];
  for (std::size_t i = 0; i < sizeof first; ++i) first[i] = std::byte(i * 3 + 1);
  for (std::size_t i = 0; i < sizeof second; ++i) second[i] = std::byte(i * 5 + 2);
  const iovec v[2] = {{first + 24, 300}, {second, 400}};
  ring_space sp, again;
  ASSERT_TRUE(a.bounce_reserve(ab, 700, reinterpret_cast<std::uintptr_t>(first + 24), sp));
  ASSERT_TRUE(a.bounce_reserve(ab, 700, reinterpret_cast<std::uintptr_t>(first + 24), again));
  EXPECT_EQ(again.offset, sp.offset) << "a reservation alone must not use the ring";
  a.bounce_write(ab, sp, v, 700);
  const std::byte* seen = b.bounce_data(ba, sp.ring, sp.offset, 700);
  ASSERT_NE(seen, nullptr) << "the written range is not the sender's at the receiver";
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(seen) & 63, 24u) << "placed like the source";
  EXPECT_EQ(std::memcmp(seen, first + 24, 300), 0);
  EXPECT_EQ(std::memcmp(seen + 300, second, 400), 0);
  ring_space next;
  ASSERT_TRUE(a.bounce_reserve(ab, 10, 0, next));
  EXPECT_GE(next.offset, sp.offset + 700) << "the write made its bytes used";
  b.bounce_consume(sp.ring, sp.offset + 700);
}

// bounce_prepare takes the lines the next write would fill by storing into them, so it must
// never touch a byte the receiver may still read: not the unconsumed messages, not the rest of
// the line the last one ends in, nothing past the credit the sender knows. Messages of odd
// lengths at every placement fill the ring with nothing consumed, a prepare after each (with a
// length far beyond the free room), and every message is checked byte by byte afterwards.
TEST(emu_device, preparing_the_next_ring_write_never_touches_unread_bytes) {
  interface_of<device> a;
  device b;
  ASSERT_EQ(a.open(make_params(test_pdid(18))), core::status::ok);
  ASSERT_EQ(b.open(make_params(test_pdid(18))), core::status::ok);
  peer_id ab, ba;
  ASSERT_EQ(a.connect(b.local_address(), ab), core::status::ok);
  ASSERT_EQ(b.connect(a.local_address(), ba), core::status::ok);
  const std::size_t ring = 1 << 16;
  std::vector<std::byte> src(ring / 2 + 64);
  struct sent { std::uint32_t ring; std::uint64_t offset; std::size_t len; std::uint8_t seed; };
  std::uint64_t consumed = 0;
  bool saw_prepared_line = false;
  for (int lap = 0; lap < 3; ++lap) {
    std::vector<sent> unread;
    for (int i = 0;; ++i) {
      const std::size_t len = 1000 + 997 * std::size_t(i % 7) + 13 * lap;
      const std::size_t place = std::size_t(i * 29 + lap) % 64;
      const auto seed = static_cast<std::uint8_t>(i * 7 + lap * 3 + 1);
      for (std::size_t k = 0; k < len; ++k) src[place + k] = std::byte(seed + k * 31);
      const iovec v{src.data() + place, len};
      ring_space sp;
      if (!a.bounce_reserve(ab, len, reinterpret_cast<std::uintptr_t>(src.data() + place), sp))
        break;  // out of credit: the ring holds only unread messages and prepared room
      a.bounce_write(ab, sp, {&v, 1}, len);
      unread.push_back({sp.ring, sp.offset, len, seed});
      // The first line after this write, within the ring and the credit: an earlier lap's
      // message left a byte there that the prepare should replace.
      const std::uint64_t next_line = (sp.offset + len + 63) & ~std::uint64_t{63};
      const std::byte* line = nullptr;
      if (next_line + 64 <= consumed + ring && (next_line % ring) != 0)
        line = b.bounce_data(ba, sp.ring, sp.offset, len) + (next_line - sp.offset);
      const std::byte before = line ? line[0] : std::byte{0};
      a.bounce_prepare(ab, len);       // the usual call: as long as the last write
      a.bounce_prepare(ab, ring / 2);  // the longest message: clipped by the credit
      if (line && before != std::byte{0}) saw_prepared_line |= line[0] == std::byte{0};
    }
    ASSERT_GE(unread.size(), 5u);
    for (const sent& m : unread) {
      const std::byte* seen = b.bounce_data(ba, m.ring, m.offset, m.len);
      ASSERT_NE(seen, nullptr);
      for (std::size_t k = 0; k < m.len; ++k)
        ASSERT_EQ(seen[k], std::byte(m.seed + k * 31))
            << "lap " << lap << ": byte " << k << " of the message at " << m.offset
            << " changed after the sender prepared its next write";
    }
    consumed = unread.back().offset + unread.back().len;
    b.bounce_consume(unread.back().ring, consumed);
  }
  EXPECT_TRUE(saw_prepared_line) << "prepare never took a line of the free room";
}

// A staged write alone in the target's staging area is cut into quarters of at least 16 KiB, so
// the target copies one out while the next goes in; one that finds chunks in flight (a stream)
// takes whole chunks. Either way the bytes land exactly and the notification comes with the last.
TEST(emu_device, a_lone_staged_write_is_pipelined_in_pieces_and_a_streamed_one_is_not) {
  params pp = make_params(test_pdid(16));
  pp.dma_engine = dma_engine_mode::staged;
  pp.geo.staging_chunks = 8;
  pp.geo.staging_chunk_bytes = 65536;
  device t, ini;
  ASSERT_EQ(t.open(pp), core::status::ok);
  ASSERT_EQ(ini.open(pp), core::status::ok);
  peer_id to_t;
  ASSERT_EQ(ini.connect(t.local_address(), to_t), core::status::ok);
  forger view(t.local_address());  // the target's segment, as another process maps it
  std::vector<std::byte> src(65536), dst(65536 + 64);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = std::byte(i * 7 + 3);
  iovec iv{src.data(), src.size()};
  const auto write_64k = [&](std::size_t& packets) {
    std::fill(dst.begin(), dst.end(), std::byte{0});
    std::uint32_t slot, gen;
    EXPECT_TRUE(t.notify_alloc(slot, gen));
    t.window_open(slot, reinterpret_cast<std::uint64_t>(dst.data() + 16), src.size());
    dma_write w;
    w.peer = to_t;
    w.src = {&iv, 1};
    w.dst_addr = reinterpret_cast<std::uint64_t>(dst.data() + 16);
    w.len = src.size();
    w.notify = true;
    w.notify_slot = slot;
    w.notify_gen = gen;
    dma_state st;
    EXPECT_EQ(ini.dma_post(w, st), core::status::ok);
    packets = 0;
    t.poll_mailbox(64, [&](peer_id, const packet&) { ++packets; });  // protocol packets: none
    notification n{};
    EXPECT_TRUE(t.notify_test(slot, gen, n));
    t.notify_free(slot);
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin() + 16));
    for (std::size_t i = 0; i < 16; ++i) EXPECT_EQ(dst[i], std::byte{0});
  };
  // Count the engine's packets through the mailbox tail (they never reach on_packet).
  auto& tail = view.v.mbox_ctl->tail;
  std::size_t protocol_packets = 0;
  std::uint64_t before = tail.load();
  write_64k(protocol_packets);
  EXPECT_EQ(tail.load() - before, 4u) << "alone: four 16 KiB pieces";
  EXPECT_EQ(protocol_packets, 0u);
  // Chunks in flight (another sender's, here claimed by hand): one whole chunk.
  auto& mask = view.v.staging_ctl->free_mask;
  mask.fetch_and(~0x3ull);
  before = tail.load();
  write_64k(protocol_packets);
  EXPECT_EQ(tail.load() - before, 1u) << "streaming: one 64 KiB chunk";
  mask.fetch_or(0x3ull);
}

TEST(emu_device, a_live_endpoint_keeps_its_chosen_port) {
  params p = make_params(test_pdid(13));
  p.self.port = 4000 + getpid() % 1000;
  device a, b;
  ASSERT_EQ(a.open(p), core::status::ok);
  EXPECT_EQ(b.open(p), core::status::exists);
  a.close();
  EXPECT_EQ(b.open(p), core::status::ok);
}

// A producer that died between claiming a slot and publishing it (issue 12, found by the
// peer-death matrix: the survivor's own loopback stopped): the slot is skipped once it stayed
// unpublished over two calls, and the packets behind it flow again.
TEST(emu_device, slot_claimed_by_a_dead_producer_is_skipped) {
  device dead, live, b;
  ASSERT_EQ(dead.open(make_params(test_pdid(15))), core::status::ok);
  ASSERT_EQ(live.open(make_params(test_pdid(15))), core::status::ok);
  ASSERT_EQ(b.open(make_params(test_pdid(15))), core::status::ok);
  peer_id db, lb;
  ASSERT_EQ(dead.connect(b.local_address(), db), core::status::ok);
  ASSERT_EQ(live.connect(b.local_address(), lb), core::status::ok);
  auto count = [&] { return b.poll_mailbox(8, [](peer_id, const packet&) {}); };
  ASSERT_EQ(live.mailbox_send(lb, numbered(1, 0, 1)), core::status::ok);
  mailbox_reservation never_published;
  ASSERT_EQ(dead.mailbox_reserve(db, never_published), core::status::ok);
  ASSERT_EQ(live.mailbox_send(lb, numbered(1, 0, 2)), core::status::ok);
  EXPECT_EQ(count(), 1u);                 // the packet before the claimed slot
  EXPECT_EQ(count(), 0u);                 // stopped at the claimed slot
  EXPECT_TRUE(b.mailbox_unstick());       // first look: watched, not skipped
  EXPECT_EQ(count(), 0u);
  EXPECT_TRUE(b.mailbox_unstick());       // still unpublished: skipped
  EXPECT_EQ(b.stuck_slots_skipped(), 1u);
  EXPECT_EQ(count(), 1u);                 // the packet behind it
  EXPECT_FALSE(b.mailbox_unstick());      // empty: nothing more to watch
  ASSERT_EQ(live.mailbox_send(lb, numbered(1, 0, 3)), core::status::ok);
  EXPECT_EQ(count(), 1u);                 // the ring works on
}

}  // namespace
}  // namespace exanet::dev::emu
