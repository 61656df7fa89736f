// SPDX-License-Identifier: BSD-2-Clause
// What the network backend (dev/net) costs under every small message: two processes ping-pong
// one 64-byte mailbox packet through dev/net alone (no protocol, matching or completion queue
// above it), over its lower provider (tcp by default, on 127.0.0.1 or across the namespaces of
// fabtests/bench/net_compare.sh). Compare with fi_pingpong / fi_rdm_pingpong over the same lower
// provider in the same run: the difference is what carrying the primitives costs. A benchmark
// tool, not a test: it judges nothing.
//
//   net_probe pair [round_trips] [provider]             both ends here (fork), 127.0.0.1
//   net_probe serve FILE NODE [round_trips] [provider]  one end; writes its address to FILE
//   net_probe client FILE NODE [round_trips] [provider] the other; prints the result
// Prints: net_mailbox_one_way_us N (median of 11 blocks of round_trips).
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "dev/net/device.hpp"

namespace dev = exanet::dev;
namespace core = exanet::core;

namespace {

constexpr int blocks = 11;

double now_us() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return double(t.tv_sec) * 1e6 + double(t.tv_nsec) / 1e3;
}

bool open_dev(dev::net::device& d, const std::string& node, const std::string& prov) {
  dev::open_params p;
  p.net.provider = prov;
  p.net.node = node;
  p.self.pdid = 9;
  // Enabled as fi_enable enables an endpoint whose CQs have no wait object: this ping-pong
  // polls, so its lower CQ has no fd either (dev/net's start).
  core::status s = d.open(p);
  if (core::ok(s)) s = d.enable(false);
  if (!core::ok(s)) std::fprintf(stderr, "net_probe: open over %s failed: %d\n", prov.c_str(),
                                 core::to_int(s));
  return core::ok(s);
}

void send(dev::net::device& d, dev::peer_id p, const dev::packet& pk) {
  while (d.mailbox_send(p, pk) == core::status::again)
    d.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});
}

dev::peer_id receive(dev::net::device& d) {
  dev::peer_id from = dev::no_peer;
  while (d.poll_mailbox(1, [&](dev::peer_id f, const dev::packet&) { from = f; }) == 0) {
  }
  return from;
}

// The end that answers: every packet goes back to its sender.
int echo(dev::net::device& d, long total) {
  const dev::packet pk{};
  for (long i = 0; i < total; ++i) send(d, receive(d), pk);
  // Let the last answer leave before the endpoint closes.
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < end)
    d.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});
  return 0;
}

int ping(dev::net::device& d, const dev::address& to, long rts) {
  dev::peer_id p;
  if (!core::ok(d.connect(to, p))) return 2;
  const dev::packet pk{};
  for (long i = 0; i < rts; ++i) {  // warm-up block
    send(d, p, pk);
    receive(d);
  }
  std::vector<double> one_way;
  for (int b = 0; b < blocks; ++b) {
    const double t0 = now_us();
    for (long i = 0; i < rts; ++i) {
      send(d, p, pk);
      receive(d);
    }
    one_way.push_back((now_us() - t0) / double(rts) / 2);
  }
  std::sort(one_way.begin(), one_way.end());
  std::printf("net_mailbox_one_way_us %.2f (best %.2f, worst %.2f; %ld round trips x %d blocks)\n",
              one_way[blocks / 2], one_way.front(), one_way.back(), rts, blocks);
  return 0;
}

dev::address read_address(const std::string& file) {
  dev::address a{};
  for (int i = 0; i < 1500; ++i) {
    std::ifstream in(file, std::ios::binary);
    if (in.read(reinterpret_cast<char*>(&a), sizeof a)) return a;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::fprintf(stderr, "net_probe: no address in %s\n", file.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  alarm(300);
  const std::string mode = argc > 1 ? argv[1] : "pair";
  if (mode == "pair") {
    const long rts = argc > 2 ? std::atol(argv[2]) : 2000;
    const std::string prov = argc > 3 ? argv[3] : "tcp";
    int fds[2];
    if (pipe(fds) != 0) return 2;
    const pid_t child = fork();
    if (child == 0) {
      dev::net::device d;
      if (!open_dev(d, "127.0.0.1", prov)) _exit(2);
      const dev::address self = d.local_address();
      if (write(fds[1], &self, sizeof self) != sizeof self) _exit(2);
      _exit(echo(d, rts * (blocks + 1)));
    }
    dev::address to{};
    if (read(fds[0], &to, sizeof to) != sizeof to) return 2;
    dev::net::device d;
    if (!open_dev(d, "127.0.0.1", prov)) return 2;
    const int rc = ping(d, to, rts);
    waitpid(child, nullptr, 0);
    return rc;
  }
  if ((mode == "serve" || mode == "client") && argc >= 4) {
    const long rts = argc > 4 ? std::atol(argv[4]) : 2000;
    const std::string prov = argc > 5 ? argv[5] : "tcp";
    dev::net::device d;
    if (!open_dev(d, argv[3], prov)) return 2;
    if (mode == "serve") {
      const dev::address self = d.local_address();
      const std::string tmp = std::string(argv[2]) + ".tmp";
      std::ofstream(tmp, std::ios::binary).write(reinterpret_cast<const char*>(&self), sizeof self);
      std::rename(tmp.c_str(), argv[2]);
      return echo(d, rts * (blocks + 1));
    }
    return ping(d, read_address(argv[2]), rts);
  }
  std::fprintf(stderr, "usage: %s pair [rts] [provider] | serve|client FILE NODE [rts] [provider]\n",
               argv[0]);
  return 2;
}
