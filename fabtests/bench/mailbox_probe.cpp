// SPDX-License-Identifier: BSD-2-Clause
// The floor the emulated mailbox sets under every small message: two processes on cpus 0 and 1
// pass 64-byte packets through the device alone (dev/emu: mailbox_send, poll_mailbox), with no
// protocol, matching or completion queue above it. A benchmark tool, not a test: it judges
// nothing beyond the order of what it passed.
//
//   mailbox_probe [round_trips_per_block]
//       ping-pong one packet; prints: mailbox_one_way_ns N (median of 31 blocks). The ExaNeST
//       mailbox primitive's latency here: tagged_bench's 8 B latency minus this is what proto
//       and fi add.
//   mailbox_probe stream [packets_per_block [window]]
//       one process streams, at most window packets (default 64; 0: no limit) ahead of what the
//       other has taken; the other consumes and times blocks of packets: ns per packet, median
//       of 31 blocks per path, the paths taking turns block by block in one run:
//         mailbox        the emulated mailbox, whole 64-byte packets (mailbox_send);
//         mailbox_line1  the same, writing only the packet's first 40 bytes, those in the
//                        slot's first line (an 8 B message's packet: wire::write_prefix);
//       and plain rings in shared memory, 256 records, one producer, one consumer:
//         ring64         64-byte records, one per line; the producer writes without reading,
//                        the consumer publishes its position every quarter ring;
//         ring32         the same with 32-byte records, two per line (the size of a small
//                        message in a transport that packs header and payload together, as
//                        Open MPI's vader fast boxes do);
//         ring64_claim   ring64, and the producer claims each position with a locked
//                        compare-and-swap on a tail word, as a mailbox with many senders must;
//         ring64_slot_free  ring64, but the consumer frees each record by writing its seq and
//                        the producer reads that seq before it writes, as the mailbox does;
//         ring64_claim_slot_free  both of the last two: the mailbox's protocol, one line;
//         ring128_claim_slot_free the same with 128-byte records, the second line of each
//                        never written: the mailbox's slot stride, with a small packet;
//         split          what a mailbox laid out as two arrays would cost: slot i's seq,
//                        stamp and the packet's first 40 bytes in line i of one array, the
//                        packet's last 24 bytes in line i of another; the producer claims and
//                        frees as the mailbox does and writes the first line only, the consumer
//                        copies the packet out whole (first 40 bytes, then the 24 it left).
//       What separates the mailbox from the rings is what a small message's cache-line traffic
//       costs when streamed (BENCHMARKS.md, "a mailbox packet, streamed").
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <new>
#include <vector>

#include "dev/emu/device.hpp"

namespace emu = exanet::dev::emu;
namespace dev = exanet::dev;

namespace {

constexpr int blocks = 31;

double now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return double(t.tv_sec) * 1e9 + double(t.tv_nsec);
}

void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  if (sched_setaffinity(0, sizeof s, &s) != 0) {
    std::fprintf(stderr, "mailbox_probe: cannot run on cpu %d\n", cpu);
    std::exit(2);
  }
}

void must(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "mailbox_probe: %s\n", what);
    std::exit(1);
  }
}

emu::params probe_params() {
  emu::params p;
  p.self.pdid = 7000 + static_cast<std::uint32_t>(getpid() % 1000);
  p.geo.mailbox_slots = 256;  // the provider's default
  p.geo.notify_slots = 64;
  p.geo.bounce_peers = 2;
  p.geo.bounce_ring_bytes = 1 << 16;
  p.geo.staging_chunks = 2;
  p.geo.staging_chunk_bytes = 4096;
  return p;
}

// Forks the other process (this one on cpu 0, the child on cpu 1), opens each side's device and
// connects it to the other's over a socket pair (sock, kept for the sides' handshakes); true in
// the child. The parent reaps it with wait().
bool start_pair(emu::device& d, dev::peer_id& peer, int& sock) {
  int sv[2];
  must(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
  const emu::params params = probe_params();  // one pdid for both: computed before the fork
  const pid_t child = fork();
  must(child >= 0, "fork");
  const bool is_child = child == 0;
  pin(is_child ? 1 : 0);
  sock = is_child ? sv[1] : sv[0];
  must(d.open(params) == exanet::core::status::ok, "device open");
  dev::address mine = d.local_address(), theirs{};
  must(write(sock, &mine, sizeof mine) == sizeof mine, "write");
  must(read(sock, &theirs, sizeof theirs) == sizeof theirs, "read");
  must(d.connect(theirs, peer) == exanet::core::status::ok, "connect");
  return is_child;
}

// Waits for one packet and returns its first 8 bytes.
std::uint64_t receive(emu::device& d) {
  std::uint64_t v = 0;
  while (d.poll_mailbox(1, [&](dev::peer_id, const dev::packet& pk) { std::memcpy(&v, pk.data() + 8, 8); }) == 0) {
  }
  return v;
}

void send(emu::device& d, dev::peer_id to, std::uint64_t v) {
  dev::packet pk{};
  pk[0] = std::byte{1};
  std::memcpy(pk.data() + 8, &v, 8);
  while (d.mailbox_send(to, pk) == exanet::core::status::again) {
  }
}

// ---- streaming -------------------------------------------------------------------------------

// A single-producer, single-consumer ring of Bytes-byte records in memory both processes map: a
// record holds data when its seq is position + 1; the consumer publishes how far it has read
// (head) every quarter ring, and the producer reads head only when the ring looks full.
template <std::size_t Bytes>
struct plain_ring {
  static constexpr std::size_t records = 256;
  struct alignas(Bytes) record {
    std::atomic<std::uint64_t> seq;  // position + 1: holds a record
    std::uint64_t value;
    std::byte rest[Bytes - 16];
  };
  static_assert(sizeof(record) == Bytes);
  alignas(64) std::atomic<std::uint64_t> head;  // the consumer's position, published lazily
  alignas(64) record slots[records];
};

// How a ring's producer claims a record (the paths of the same names, above).
enum class claim_mode { blind, claim, slot_free, claim_slot_free };

template <class Ring, claim_mode Mode = claim_mode::blind>
struct ring_ends {
  Ring* r;
  std::atomic<std::uint64_t>* shared_tail = nullptr;  // claim
  std::uint64_t tail = 0, head_seen = 0;  // producer
  std::uint64_t head = 0;                 // consumer
  void send(std::uint64_t v) {
    auto& s = r->slots[tail % Ring::records];
    if constexpr (Mode == claim_mode::slot_free || Mode == claim_mode::claim_slot_free) {
      // Free when seq == tail (or, on the first lap, 0 and tail < records).
      for (;;) {
        const std::uint64_t q = s.seq.load(std::memory_order_acquire);
        if (q == tail || (q == 0 && tail < Ring::records)) break;
      }
    } else {
      while (tail - head_seen >= Ring::records) head_seen = r->head.load(std::memory_order_acquire);
    }
    if constexpr (Mode == claim_mode::claim || Mode == claim_mode::claim_slot_free) {
      std::uint64_t pos = tail;
      while (!shared_tail->compare_exchange_weak(pos, pos + 1, std::memory_order_seq_cst,
                                                 std::memory_order_relaxed)) {
      }
    }
    s.value = v;
    s.seq.store(tail + 1, std::memory_order_release);
    ++tail;
  }
  std::uint64_t receive() {
    auto& s = r->slots[head % Ring::records];
    while (s.seq.load(std::memory_order_acquire) != head + 1) {
    }
    const std::uint64_t v = s.value;
    if constexpr (Mode == claim_mode::slot_free || Mode == claim_mode::claim_slot_free) {
      s.seq.store(head + Ring::records, std::memory_order_release);
      ++head;
    } else if (++head % (Ring::records / 4) == 0) {
      r->head.store(head, std::memory_order_release);
    }
    return v;
  }
};

enum class path : int {
  mailbox,
  mailbox_line1,
  ring64,
  ring32,
  ring64_claim,
  ring64_slot_free,
  ring64_claim_slot_free,
  ring128_claim_slot_free,
  split,
  count
};
const char* const path_names[] = {"mailbox",          "mailbox_line1",          "ring64",
                                  "ring32",           "ring64_claim",           "ring64_slot_free",
                                  "ring64_claim_slot_free", "ring128_claim_slot_free", "split"};
static_assert(std::size(path_names) == static_cast<std::size_t>(path::count));

// What the consumer has taken, published every 16 packets: a producer with a window sends at
// most that many packets ahead of it (as MPI's streaming benchmarks do: a window, then wait).
struct alignas(64) taken_count {
  std::atomic<std::uint64_t> n;
};

// The split layout (path split): heads and tails in two arrays, one line per slot in each.
struct split_ring {
  static constexpr std::size_t slots = 256;
  struct alignas(64) head_line {
    std::atomic<std::uint64_t> seq;  // == position: free; == position + 1: holds a packet
    std::uint32_t pdid, src_port;
    std::uint16_t src_node;
    std::byte reserved[6];
    std::byte first[40];  // the packet's bytes 0..39
  };
  struct alignas(64) tail_line {
    std::byte last[24];  // the packet's bytes 40..63
  };
  static_assert(sizeof(head_line) == 64 && sizeof(tail_line) == 64);
  head_line heads[slots];
  tail_line tails[slots];
  alignas(64) std::atomic<std::uint64_t> tail;  // next position producers claim
};

struct split_ends {
  split_ring* r;
  std::uint64_t next = 0;  // producer: the position it expects to claim
  std::uint64_t head = 0;  // consumer
  void send(std::uint64_t v) {
    std::uint64_t pos = r->tail.load(std::memory_order_relaxed);
    auto& h = r->heads[pos % split_ring::slots];
    for (;;) {
      const std::uint64_t q = h.seq.load(std::memory_order_acquire);
      if (q == pos || (q == 0 && pos < split_ring::slots)) break;
    }
    while (!r->tail.compare_exchange_weak(pos, pos + 1, std::memory_order_seq_cst,
                                          std::memory_order_relaxed)) {
    }
    alignas(8) std::byte pk[40] = {};  // a small packet: its first 40 bytes
    std::memcpy(pk + 8, &v, 8);
    h.pdid = 7;
    h.src_port = 1;
    h.src_node = 0;
    std::memcpy(h.first, pk, sizeof pk);
    h.seq.store(pos + 1, std::memory_order_release);
  }
  std::uint64_t receive() {
    auto& h = r->heads[head % split_ring::slots];
    while (h.seq.load(std::memory_order_acquire) != head + 1) {
    }
    exanet::dev::packet pk;
    std::memcpy(pk.data(), h.first, 40);
    std::memcpy(pk.data() + 40, r->tails[head % split_ring::slots].last, 24);
    std::uint64_t v;
    std::memcpy(&v, pk.data() + 8, 8);
    h.seq.store(head + split_ring::slots, std::memory_order_release);
    ++head;
    return v;
  }
};

using r64 = plain_ring<64>;
using r32 = plain_ring<32>;
using r128 = plain_ring<128>;
struct shared_rings {
  r128 claim_free128;
  alignas(64) std::atomic<std::uint64_t> claim_free128_tail;
  r64 plain64, claim64, free64, claim_free64;
  r32 plain32;
  alignas(64) std::atomic<std::uint64_t> claim_tail;  // ring64_claim's tail word
  alignas(64) std::atomic<std::uint64_t> claim_free_tail;
  split_ring split;
  taken_count taken;
};

int stream(long per_block, long window) {
  void* mem = mmap(nullptr, sizeof(shared_rings), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  must(mem != MAP_FAILED, "mmap");
  auto* sh = new (mem) shared_rings{};
  taken_count* const taken = &sh->taken;
  emu::device d;
  dev::peer_id peer = dev::no_peer;
  int sock = -1;
  const bool consumer = start_pair(d, peer, sock);
  ring_ends<r64> e64{&sh->plain64};
  ring_ends<r32> e32{&sh->plain32};
  ring_ends<r64, claim_mode::claim> c64{&sh->claim64, &sh->claim_tail};
  ring_ends<r64, claim_mode::slot_free> f64{&sh->free64};
  ring_ends<r64, claim_mode::claim_slot_free> cf64{&sh->claim_free64, &sh->claim_free_tail};
  ring_ends<r128, claim_mode::claim_slot_free> cf128{&sh->claim_free128, &sh->claim_free128_tail};
  split_ends sp{&sh->split};
  std::uint64_t split_sent = 0;
  std::uint64_t next_mailbox = 0;
  // Each block: both sides agree on the path over the socket, the consumer times the block.
  std::vector<double> ns[static_cast<int>(path::count)];
  char go = 0;
  const int rounds = blocks + 1;  // the first round warms up
  // Sends n packets with send_one(), never more than window ahead of what the consumer took.
  auto produce = [&](std::uint64_t sent, long n, auto&& send_one) {
    std::uint64_t acked = sent;
    for (long i = 0; i < n; ++i, ++sent) {
      while (window > 0 && sent - acked >= static_cast<std::uint64_t>(window))
        acked = taken->n.load(std::memory_order_acquire);
      send_one();
    }
  };
  auto produce_ring = [&](auto& e, std::uint64_t sent) {
    produce(sent, per_block, [&] { e.send(e.tail); });
  };
  for (int round = 0; round < rounds; ++round) {
    for (int k = 0; k < static_cast<int>(path::count); ++k) {
      const auto which = static_cast<path>((k + round) % static_cast<int>(path::count));
      must(write(sock, &go, 1) == 1 && read(sock, &go, 1) == 1, "sync");
      if (!consumer) {
        const std::uint64_t sent = taken->n.load(std::memory_order_acquire);
        switch (which) {
          case path::mailbox:
            produce(sent, per_block, [&] { send(d, peer, next_mailbox++); });
            break;
          case path::mailbox_line1:
            // The packet's first 40 bytes only: the part of it that shares the slot's first
            // line with seq (dev/emu/layout.hpp), as a small message's packet needs.
            produce(sent, per_block, [&] {
              dev::packet pk{};
              pk[0] = std::byte{1};
              const std::uint64_t v = next_mailbox++;
              std::memcpy(pk.data() + 8, &v, 8);
              dev::mailbox_reservation r;
              while (d.mailbox_reserve(peer, r) == exanet::core::status::again) {
              }
              std::memcpy(r.data(), pk.data(), emu::packet_in_seq_line);
              d.mailbox_publish(r);
            });
            break;
          case path::ring64: produce_ring(e64, sent); break;
          case path::ring32: produce_ring(e32, sent); break;
          case path::ring64_claim: produce_ring(c64, sent); break;
          case path::ring64_slot_free: produce_ring(f64, sent); break;
          case path::ring64_claim_slot_free: produce_ring(cf64, sent); break;
          case path::ring128_claim_slot_free: produce_ring(cf128, sent); break;
          default: produce(sent, per_block, [&] { sp.send(split_sent++); }); break;
        }
        continue;
      }
      const double t0 = now_ns();
      std::uint64_t n = taken->n.load(std::memory_order_relaxed);
      auto took = [&] {
        if (++n % 16 == 0) taken->n.store(n, std::memory_order_release);
      };
      auto consume = [&](auto& e) {
        for (long i = 0; i < per_block; ++i, took()) must(e.receive() == e.head - 1, "ring order");
      };
      switch (which) {
        case path::mailbox:
        case path::mailbox_line1:
          for (long got = 0; got < per_block;) {
            got += static_cast<long>(d.poll_mailbox(64, [&](dev::peer_id, const dev::packet& pk) {
              std::uint64_t v = 0;
              std::memcpy(&v, pk.data() + 8, 8);
              must(v == next_mailbox++, "mailbox order");
              took();
            }));
          }
          break;
        case path::ring64: consume(e64); break;
        case path::ring32: consume(e32); break;
        case path::ring64_claim: consume(c64); break;
        case path::ring64_slot_free: consume(f64); break;
        case path::ring64_claim_slot_free: consume(cf64); break;
        case path::ring128_claim_slot_free: consume(cf128); break;
        default: consume(sp); break;
      }
      taken->n.store(n, std::memory_order_release);
      if (round > 0) ns[static_cast<int>(which)].push_back((now_ns() - t0) / double(per_block));
    }
  }
  must(write(sock, &go, 1) == 1 && read(sock, &go, 1) == 1, "end");
  if (!consumer) {
    wait(nullptr);
    return 0;
  }
  for (int k = 0; k < static_cast<int>(path::count); ++k) {
    auto& v = ns[k];
    std::sort(v.begin(), v.end());
    std::printf("stream_%s_ns_per_packet %.2f (min %.2f, max %.2f)\n", path_names[k],
                v[v.size() / 2], v.front(), v.back());
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "stream") == 0)
    return stream(argc > 2 ? std::atol(argv[2]) : 200000, argc > 3 ? std::atol(argv[3]) : 64);
  const long per_block = argc > 1 ? std::atol(argv[1]) : 20000;
  emu::device d;
  dev::peer_id peer = dev::no_peer;
  int sock = -1;
  const bool echo = start_pair(d, peer, sock);
  char go = 0;
  must(write(sock, &go, 1) == 1 && read(sock, &go, 1) == 1, "sync");

  const long total = blocks * per_block + per_block / 4;  // a warm-up quarter block first
  if (echo) {
    for (long i = 0; i < total; ++i) send(d, peer, receive(d) + 1);
    must(read(sock, &go, 1) == 1, "end");  // the other side's device stays open until we are done
    return 0;
  }
  for (long i = 0; i < per_block / 4; ++i) {
    send(d, peer, std::uint64_t(i));
    must(receive(d) == std::uint64_t(i) + 1, "echo");
  }
  std::vector<double> one_way;
  for (int b = 0; b < blocks; ++b) {
    const double t0 = now_ns();
    for (long i = 0; i < per_block; ++i) {
      send(d, peer, std::uint64_t(i));
      must(receive(d) == std::uint64_t(i) + 1, "echo");
    }
    one_way.push_back((now_ns() - t0) / double(per_block) / 2);
  }
  must(write(sock, &go, 1) == 1, "end");
  wait(nullptr);
  std::sort(one_way.begin(), one_way.end());
  std::printf("mailbox_one_way_ns %.1f (min %.1f, max %.1f)\n", one_way[blocks / 2], one_way.front(),
              one_way.back());
  return 0;
}
