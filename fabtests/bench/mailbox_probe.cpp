// SPDX-License-Identifier: BSD-2-Clause
// The floor the emulated mailbox sets under every small message: two processes on cpus 0 and 1
// ping-pong one 64-byte packet through the device alone (dev/emu: mailbox_send, poll_mailbox), with
// no protocol, matching or completion queue above it. The one-way latency it prints is what the
// ExaNeST mailbox primitive costs here; tagged_bench's 8 B latency minus this is what proto and fi
// add. A benchmark tool, not a test: it judges nothing.
//
//   mailbox_probe [round_trips_per_block]      prints: mailbox_one_way_ns N (median of 31 blocks)
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

}  // namespace

int main(int argc, char** argv) {
  const long per_block = argc > 1 ? std::atol(argv[1]) : 20000;
  int sv[2];
  must(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
  const emu::params params = probe_params();  // one pdid for both: computed before the fork
  const pid_t child = fork();
  must(child >= 0, "fork");
  const bool echo = child == 0;
  pin(echo ? 1 : 0);
  const int sock = echo ? sv[1] : sv[0];
  emu::device d;
  must(d.open(params) == exanet::core::status::ok, "device open");
  dev::address mine = d.local_address(), theirs{};
  must(write(sock, &mine, sizeof mine) == sizeof mine, "write");
  must(read(sock, &theirs, sizeof theirs) == sizeof theirs, "read");
  dev::peer_id peer = dev::no_peer;
  must(d.connect(theirs, peer) == exanet::core::status::ok, "connect");
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
  int status = 0;
  waitpid(child, &status, 0);
  std::sort(one_way.begin(), one_way.end());
  std::printf("mailbox_one_way_ns %.1f (min %.1f, max %.1f)\n", one_way[blocks / 2], one_way.front(),
              one_way.back());
  return 0;
}
