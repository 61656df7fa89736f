// SPDX-License-Identifier: BSD-2-Clause
// The network backend (dev/net) between two real processes over a real lower provider (tcp by
// default): mailbox packets in order under back-pressure, a DMA write with a random iovec layout
// into a window followed by its notification, writes the target must refuse (stale generation,
// outside the window) leaving its memory unchanged, and a sender of another PDID whose packets
// the target drops. RMA through registrations checked at the target: the initiator learns a
// key by asking (again until answered), is refused an unknown key, a missing right or a range
// outside the grant, writes through the key, and a write through a key revoked since is refused
// by the target's lower provider with the region unchanged. Landing records, notification bells,
// access events and the receiver's intake hold travel as device packets.
//
//   net_device_test pair [provider]            both processes here (fork), over 127.0.0.1
//   net_device_test serve FILE NODE [provider] the target: binds NODE, writes its address to FILE
//   net_device_test client FILE NODE [provider] the initiator: reads FILE (another host's target)
//   net_device_test lost [provider]            lost peers: a killed one, one that closed, a live one
//   net_device_test bounce [provider]          bounce rings: random sizes and iovecs, many rings'
//                                              worth, the last with the sender idle
//   net_device_test idle_write [provider]      a window write with its notification, posted once:
//                                              the target has both before the initiator calls again
// Exit 0 when every check held; each failed check is printed.
#include <arpa/inet.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dev/net/device.hpp"

namespace {
using namespace exanet;
using dev::net::device;

int failures = 0;
#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      ++failures;                                          \
      std::fprintf(stderr, "[%d] FAILED %s: ", getpid(), #cond); \
      std::fprintf(stderr, __VA_ARGS__);                   \
      std::fprintf(stderr, "\n");                          \
    }                                                      \
  } while (0)

// Protocol packets of this test (types below the device's own).
enum : std::uint8_t {
  seq_pkt = 1, seq_done, window_offer, write_done, refusal_offer, refusal_done, keys_offer,
  rma_written
};

// RMA registrations the target exposes (step 2b): one writable, one read-only, over the same
// region at an odd offset.
constexpr std::uint64_t writable_key = 0x1234, read_only_key = 0x5678, unknown_key = 0x9999;
constexpr std::size_t region_bytes = 65536 + 11;
constexpr std::uint64_t rma_at = 100, rma_len = 1000;

constexpr std::uint32_t packets = 20000;
constexpr std::size_t window_bytes = (1u << 20) + 4093;  // not a multiple of anything
// What the initiator's name says besides its lower name; the target learns it from the hello.
constexpr std::uint32_t initiator_port = 4242;
constexpr std::uint64_t initiator_host = 0x5eed0000feedull;


struct offer {
  std::uint8_t type;
  std::uint8_t pad[3];
  std::uint32_t slot;
  std::uint32_t gen;
  std::uint32_t pad2;
  std::uint64_t va;
  std::uint64_t len;
};

template <class T>
dev::packet pack(const T& v) {
  dev::packet p{};
  std::memcpy(p.data(), &v, sizeof v);
  return p;
}
template <class T>
T unpack(const dev::packet& p) {
  T v;
  std::memcpy(&v, p.data(), sizeof v);
  return v;
}

std::byte pattern(std::size_t i, std::uint32_t seed) {
  return static_cast<std::byte>((i * 131 + seed * 7 + (i >> 11)) & 0xff);
}

// Polls until one protocol packet arrives (60 s at most).
bool next_packet(device& d, dev::peer_id& from, dev::packet& out) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool got = false;
  while (!got && std::chrono::steady_clock::now() < end)
    d.poll_mailbox(1, [&](dev::peer_id f, const dev::packet& p) {
      from = f;
      out = p;
      got = true;
    });
  return got;
}

core::status send_blocking(device& d, dev::peer_id p, const dev::packet& pk) {
  for (;;) {
    const core::status s = d.mailbox_send(p, pk);
    if (s != core::status::again) return s;
    d.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});
  }
}

core::status write_blocking(device& d, const dev::dma_write& w) {
  dev::dma_state st;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    const core::status s = d.dma_post(w, st);
    if (s != core::status::again) return s;
    if (std::chrono::steady_clock::now() > end) return core::status::io;
    d.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});
  }
}

dev::open_params params_for(const std::string& node, const std::string& provider,
                            std::uint32_t pdid = 7) {
  dev::open_params p;
  p.net.provider = provider;
  p.net.node = node;
  p.self.pdid = pdid;
  p.net.credits = 64;  // small, so back-pressure happens
  return p;
}

// Opens and enables a device, as fi_endpoint then fi_enable do (with sleepers, as an endpoint
// with a wait object: the lower CQ keeps its fd). lost_peers opens without enable: a device
// connected and polled before enable starts itself.
core::status open_enabled(device& d, const dev::open_params& p) {
  const core::status s = d.open(p);
  return core::ok(s) ? d.enable(true) : s;
}

// ---- the target --------------------------------------------------------------------------------

int serve(int out_fd, const std::string& file, const std::string& node, const std::string& prov) {
  device d;
  if (core::status s = open_enabled(d, params_for(node, prov)); !core::ok(s)) {
    std::fprintf(stderr, "target: open over %s failed: %d\n", prov.c_str(), core::to_int(s));
    return 2;
  }
  const dev::address self = d.local_address();
  if (out_fd >= 0) {
    if (write(out_fd, &self, sizeof self) != sizeof self) return 2;
    ::close(out_fd);
  } else {
    const std::string tmp = file + ".tmp";
    std::ofstream(tmp, std::ios::binary).write(reinterpret_cast<const char*>(&self), sizeof self);
    std::rename(tmp.c_str(), file.c_str());
  }

  // 1. Packets in order, whatever the back-pressure.
  dev::peer_id from = dev::no_peer;
  dev::packet pk;
  std::uint32_t expect = 0;
  while (expect < packets) {
    if (!next_packet(d, from, pk)) { CHECK(false, "packet %u never came", expect); return 1; }
    if (static_cast<std::uint8_t>(pk[0]) != seq_pkt) { CHECK(false, "type %u", unsigned(pk[0])); break; }
    std::uint32_t seq;
    std::memcpy(&seq, pk.data() + 4, 4);
    CHECK(seq == expect, "packet %u arrived as number %u", seq, expect);
    if (seq % 6 == 4)  // written as a prefix (the initiator says why)
      CHECK(std::all_of(pk.begin() + 8, pk.end(), [](std::byte b) { return b == std::byte{0}; }),
            "packet %u: bytes its sender did not write are not zero", seq);
    else
      CHECK(pk[63] == pattern(seq, 1), "packet %u corrupted", seq);
    expect = seq + 1;
  }
  const dev::peer_id initiator = from;
  {  // its whole name came with its hello: what an address vector would hold for it
    const dev::address& a = d.peer_address(initiator);
    CHECK(a.valid() && a.version == 2 && a.port == initiator_port && a.host == initiator_host &&
              a.pdid == self.pdid && a.incarnation != 0 && a.lower_len > 0 &&
              a.lower_len <= dev::lower_name_bytes,
          "the initiator's name as learned from its hello (version %u port %u lower_len %u)",
          a.version, a.port, a.lower_len);
  }
  CHECK(send_blocking(d, initiator, pack(std::uint8_t{seq_done})) == core::status::ok, "seq_done");

  // 2. A window for a DMA write, at an odd offset.
  std::vector<std::byte> buf(window_bytes + 64, std::byte{0xAB});
  std::byte* window = buf.data() + 13;
  offer o{};
  o.type = window_offer;
  CHECK(d.notify_alloc(o.slot, o.gen), "notify_alloc");
  o.va = reinterpret_cast<std::uint64_t>(window);
  o.len = window_bytes;
  CHECK(d.window_open(o.slot, o.va, o.len), "window_open");
  CHECK(send_blocking(d, initiator, pack(o)) == core::status::ok, "offer");
  dev::notification n{};
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!d.notify_test(o.slot, o.gen, n) && std::chrono::steady_clock::now() < end)
    d.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});  // progress; packets wait
  CHECK(d.notify_test(o.slot, o.gen, n), "the notification never landed");
  dev::notification rec = d.notify_record(o.slot);
  CHECK(std::memcmp(rec.data(), "landing-record!", 16) == 0, "the landing record is not in place");
  std::vector<std::uint32_t> rung;
  d.take_notify_bells([&](std::uint32_t sl) { rung.push_back(sl); });
  CHECK(rung == std::vector<std::uint32_t>{o.slot}, "the slot's bell rang %zu times", rung.size());
  CHECK(!d.take_notify_bells([](std::uint32_t) {}), "a bell rang twice");
  std::uint32_t seed;
  std::memcpy(&seed, n.data(), 4);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < window_bytes; ++i) bad += window[i] != pattern(i, seed);
  CHECK(bad == 0, "%zu of %zu bytes differ after the notification", bad, window_bytes);
  CHECK(buf[12] == std::byte{0xAB} && window[window_bytes] == std::byte{0xAB},
        "bytes outside the window changed");
  d.notify_free(o.slot);
  (void)next_packet(d, from, pk);
  CHECK(static_cast<std::uint8_t>(pk[0]) == write_done, "write_done, got %u", unsigned(pk[0]));

  // 2b. RMA registrations: the initiator asks about the keys while we poll for its report.
  std::vector<std::byte> reg(region_bytes + 64, std::byte{0xC3});
  std::byte* region = reg.data() + 7;
  const auto region_va = reinterpret_cast<std::uint64_t>(region);
  dev::key_grant g1{writable_key, region_va, region_bytes, region_va,
                    dev::rma_access::remote_write, false};
  dev::key_grant g2 = g1;
  g2.key = read_only_key;
  g2.access = dev::rma_access::remote_read;
  std::uint32_t s1 = 0, s2 = 0;
  CHECK(d.key_publish(g1, s1) == core::status::ok, "key_publish");
  CHECK(d.key_publish(g2, s2) == core::status::ok, "key_publish read-only");
  CHECK(d.key_publish(g1, s2) == core::status::exists, "a key exposed twice");
  offer ko{};
  ko.type = keys_offer;
  ko.va = region_va;
  ko.len = region_bytes;
  d.set_intake_held(true);  // told before the offer: the initiator sees it with the offer
  CHECK(send_blocking(d, initiator, pack(ko)) == core::status::ok, "keys offer");
  (void)next_packet(d, from, pk);
  CHECK(static_cast<std::uint8_t>(pk[0]) == rma_written, "rma_written, got %u", unsigned(pk[0]));
  std::uint32_t rma_seed = 0;
  std::memcpy(&rma_seed, pk.data() + 4, 4);
  std::size_t rma_bad = 0;
  for (std::size_t i = 0; i < region_bytes; ++i) {
    const bool written = i >= rma_at && i < rma_at + rma_len;
    rma_bad += region[i] != (written ? pattern(i - rma_at, rma_seed) : std::byte{0xC3});
  }
  CHECK(rma_bad == 0, "%zu bytes of the registered region wrong after the RMA write", rma_bad);
  CHECK(reg[6] == std::byte{0xC3} && region[region_bytes] == std::byte{0xC3},
        "bytes outside the registration changed");
  const std::vector<std::byte> region_after(region, region + region_bytes);
  d.set_intake_held(false);

  // 3. The sender of another PDID: its hello is refused, nothing of it is delivered. It opens
  // a device of its own first, which under load can take a while: the target waits for the
  // refusal itself (the foreign device stays up until our next offer), then a little longer
  // for anything that would wrongly follow it.
  const auto seen = [&] {
    return d.drops().foreign_pdid >= 1 && d.net_drop_counts().unknown_sender >= 1;
  };
  std::size_t stray = 0;
  const auto foreign_end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!seen() && std::chrono::steady_clock::now() < foreign_end)
    stray += d.poll_mailbox(16, [](dev::peer_id, const dev::packet&) {});
  const auto quiet = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (std::chrono::steady_clock::now() < quiet)
    stray += d.poll_mailbox(16, [](dev::peer_id, const dev::packet&) {});
  CHECK(stray == 0, "%zu packets delivered from another PDID", stray);
  CHECK(d.drops().foreign_pdid >= 1, "no hello of another PDID was refused");
  CHECK(d.net_drop_counts().unknown_sender >= 1, "the foreign sender's packet was not dropped");
  // 4. Writes the target must refuse, last: tcp answers a refused write by closing the
  // connection between the pair, so nothing follows them on it. The target's memory stays as it
  // is and the initiator sees an error (its own exit status); a lone notification for a wrong
  // generation, sent before them, is dropped and counted.
  std::vector<std::byte> guarded(8192, std::byte{0x5A});
  offer r{};
  r.type = refusal_offer;
  CHECK(d.notify_alloc(r.slot, r.gen), "notify_alloc 2");
  r.va = reinterpret_cast<std::uint64_t>(guarded.data() + 4096);
  r.len = 1024;
  CHECK(d.window_open(r.slot, r.va, r.len), "window_open 2");
  CHECK(send_blocking(d, initiator, pack(r)) == core::status::ok, "refusal offer");
  // Revoked once the offer has left, and then we stay away for a while: the initiator still
  // holds our answer about the key when it reads the offer (key_gone goes at our next poll),
  // and the write it sends at once reaches our lower provider after the close, which must
  // refuse it.
  for (int i = 0; i < 4; ++i) d.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});
  d.key_revoke(s1);
  std::this_thread::sleep_for(std::chrono::seconds(1));  // ample for a peer polling for the offer
  const auto refusals = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  bool told = false;
  while (!told && std::chrono::steady_clock::now() < refusals)
    d.poll_mailbox(16, [&](dev::peer_id, const dev::packet& p) {
      told = static_cast<std::uint8_t>(p[0]) == refusal_done;
    });
  std::size_t changed = 0;
  for (std::byte b : guarded) changed += b != std::byte{0x5A};
  CHECK(changed == 0, "%zu guarded bytes changed by refused writes", changed);
  CHECK(std::equal(region, region + region_bytes, region_after.begin()),
        "a write through a revoked registration landed");
  CHECK(!d.notify_test(r.slot, r.gen, n), "a refused write's notification landed");
  CHECK(d.drops().notify_refused >= 1, "the forged notification was not counted");
  return failures == 0 ? 0 : 1;
}

// ---- the initiator -----------------------------------------------------------------------------

int initiate(const dev::address& target, const std::string& node, const std::string& prov) {
  device d;
  dev::open_params op = params_for(node, prov);
  op.self.port = initiator_port;
  op.self.host = initiator_host;
  if (core::status s = open_enabled(d, op); !core::ok(s)) {
    std::fprintf(stderr, "initiator: open failed: %d\n", core::to_int(s));
    return 2;
  }
  dev::peer_id t = dev::no_peer;
  CHECK(d.connect(target, t) == core::status::ok, "connect");
  dev::address other_pdid = target;
  other_pdid.pdid += 1;
  CHECK(d.connect(other_pdid, t) == core::status::access, "connect across PDIDs must fail");

  std::size_t agains = 0;
  for (std::uint32_t seq = 0; seq < packets; ++seq) {
    dev::packet pk{};
    pk[0] = std::byte{seq_pkt};
    std::memcpy(pk.data() + 4, &seq, 4);
    pk[63] = pattern(seq, 1);
    for (;;) {
      // Both ways of sending, interleaved: send, and reserve + write in place + publish; and
      // now and then a packet of which the sender writes only the first 8 bytes (a prefix, as
      // wire::write_prefix does): the rest must arrive as zeros, not as the packet before it.
      core::status s;
      if (seq % 6 == 4) {
        dev::mailbox_reservation slot;
        s = d.mailbox_reserve(t, slot);
        if (core::ok(s)) {
          std::memcpy(slot.data(), pk.data(), 8);
          d.mailbox_publish(slot);
        }
      } else if (seq % 3 == 1) {
        dev::mailbox_reservation slot;
        s = d.mailbox_reserve(t, slot);
        if (core::ok(s)) {
          std::memcpy(slot.data(), pk.data(), pk.size());
          d.mailbox_publish(slot);
        }
      } else {
        s = d.mailbox_send(t, pk);
      }
      if (s == core::status::ok) break;
      CHECK(s == core::status::again, "send %u: %d", seq, core::to_int(s));
      if (s != core::status::again) return 1;
      ++agains;
      d.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});
    }
  }
  dev::peer_id from;
  dev::packet pk;
  CHECK(next_packet(d, from, pk) && static_cast<std::uint8_t>(pk[0]) == seq_done, "seq_done");
  CHECK(agains > 0, "credits never ran out in %u packets (the bound is not exercised)", packets);

  // The DMA write: random iovec layout, two posts (the second notifies).
  CHECK(next_packet(d, from, pk) && static_cast<std::uint8_t>(pk[0]) == window_offer, "offer");
  const offer o = unpack<offer>(pk);
  std::mt19937 rng(getpid());
  const std::uint32_t seed = rng();
  std::vector<std::byte> src(o.len + 256);
  std::byte* data = src.data() + (rng() % 64);
  for (std::size_t i = 0; i < o.len; ++i) data[i] = pattern(i, seed);
  std::vector<iovec> iov;
  for (std::size_t at = 0; at < o.len;) {
    const std::size_t take = std::min<std::size_t>(o.len - at, 1 + rng() % 300000);
    iov.push_back({data + at, take});
    at += take;
  }
  const std::size_t first = o.len / 3 + 5;
  dev::dma_write w;
  w.peer = t;
  w.src = iov;
  w.src_offset = 0;
  w.dst_addr = o.va;
  w.dst_base = o.va;
  w.len = first;
  w.notify_slot = o.slot;
  w.notify_gen = o.gen;
  { const core::status ws = write_blocking(d, w); CHECK(ws == core::status::ok, "first write: %d", core::to_int(ws)); }
  w.src_offset = first;
  w.dst_addr = o.va + first;
  w.len = o.len - first;
  dev::notification rec{};
  std::memcpy(rec.data(), "landing-record!", 16);
  CHECK(d.notify_record_put(t, o.slot, rec) == core::status::ok, "notify_record_put");
  w.notify = true;
  std::memcpy(w.notify_data.data(), &seed, 4);
  CHECK(write_blocking(d, w) == core::status::ok, "second write with its notification");
  CHECK(send_blocking(d, t, pack(std::uint8_t{write_done})) == core::status::ok, "write_done");

  // RMA: keys are learned from the target, checked here against its answer, and written through.
  CHECK(next_packet(d, from, pk) && static_cast<std::uint8_t>(pk[0]) == keys_offer, "keys offer");
  const offer ko = unpack<offer>(pk);
  CHECK(d.peer_intake_held(t), "the target's intake hold was not seen");
  const auto settle = [&](std::uint64_t key, std::uint64_t addr, std::uint64_t len,
                          std::uint32_t need, dev::rma_target& out) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    core::status s = core::status::again;
    while ((s = d.rma_check(t, key, addr, len, need, out)) == core::status::again &&
           std::chrono::steady_clock::now() < end)
      d.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});
    return s;
  };
  dev::rma_target rt{};
  const std::uint32_t wr = dev::rma_access::remote_write, rd = dev::rma_access::remote_read;
  CHECK(d.rma_check(t, writable_key, ko.va + rma_at, rma_len, wr, rt) == core::status::again,
        "the first use of a key must ask the target");
  CHECK(settle(writable_key, ko.va + rma_at, rma_len, wr, rt) == core::status::ok, "writable key");
  CHECK(rt.va == ko.va + rma_at, "translated address");
  // A kept answer that refuses asks again (the key may be registered anew since); the fresh
  // answer refuses.
  CHECK(settle(writable_key, ko.va + ko.len - 10, 11, wr, rt) == core::status::access,
        "a range past the registration");
  CHECK(settle(writable_key, ko.va, 8, rd, rt) == core::status::access, "no read right");
  CHECK(settle(read_only_key, ko.va, 8, wr, rt) == core::status::access, "write to a read-only key");
  CHECK(settle(unknown_key, ko.va, 8, wr, rt) == core::status::access, "an unknown key");
  CHECK(d.rma_check(t, unknown_key, ko.va, 8, wr, rt) == core::status::again,
        "an unknown key is asked about again (it may be registered later)");
  CHECK(settle(writable_key, ko.va + rma_at, rma_len, wr, rt) == core::status::ok, "again ok");
  const std::uint32_t rma_seed = rng();
  std::vector<std::byte> rma_src(rma_len + 64);
  for (std::size_t i = 0; i < rma_len; ++i) rma_src[3 + i] = pattern(i, rma_seed);
  const iovec rma_iov[2] = {{rma_src.data() + 3, 333}, {rma_src.data() + 336, rma_len - 333}};
  dev::dma_write rw;
  rw.peer = t;
  rw.src = rma_iov;
  rw.dst_addr = rt.va;
  rw.len = rma_len;
  rw.key_slot = rt.key_slot;
  { const core::status ws = write_blocking(d, rw); CHECK(ws == core::status::ok, "RMA write: %d", core::to_int(ws)); }
  dev::packet done{};
  done[0] = std::byte{rma_written};
  std::memcpy(done.data() + 4, &rma_seed, 4);
  CHECK(send_blocking(d, t, done) == core::status::ok, "rma_written");
  // No access events over the network: they name the owner's slot only, and an answer can be
  // stale (proto's rma_done names key and address instead).
  dev::notification ev{};
  std::memcpy(ev.data(), "an access event", 16);
  CHECK(d.event_post(t, ev) == core::status::not_supported, "event_post");

  // Another PDID: a second device that claims the target's PDID locally to get its packets out.
  {
    device foreign;
    if (core::ok(open_enabled(foreign, params_for(node, prov, 8)))) {
      dev::address as_if = target;
      as_if.pdid = 8;
      dev::peer_id ft;
      CHECK(foreign.connect(as_if, ft) == core::status::ok, "foreign connect");
      dev::packet fp{};
      fp[0] = std::byte{seq_pkt};
      CHECK(send_blocking(foreign, ft, fp) == core::status::ok, "foreign send");
      // Kept up (and progressed: tcp;ofi_rxm connects only while polled) until the target has
      // seen its refusal and moves on with the next offer.
      bool offered = false;
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!offered && std::chrono::steady_clock::now() < end) {
        foreign.poll_mailbox(16, [](dev::peer_id, const dev::packet&) {});
        d.poll_mailbox(1, [&](dev::peer_id f, const dev::packet& p) {
          from = f;
          pk = p;
          offered = true;
        });
      }
      CHECK(offered, "the target never made its second offer");
    } else {
      CHECK(false, "second device");
      (void)next_packet(d, from, pk);
    }
  }
  // Refused writes: a stale generation, then a range past the window.
  CHECK(static_cast<std::uint8_t>(pk[0]) == refusal_offer, "offer 2");
  const offer r = unpack<offer>(pk);
  CHECK(!d.peer_intake_held(t), "the target's intake release was not seen");
  std::vector<std::byte> junk(4096, std::byte{0xEE});
  const iovec jv{junk.data(), junk.size()};
  dev::dma_write bad;
  bad.peer = t;
  bad.src = {&jv, 1};
  bad.dst_addr = r.va;
  bad.dst_base = r.va;
  bad.len = 512;
  bad.notify_slot = r.slot;
  bad.notify_gen = r.gen + 1;  // not the generation the target armed
  bad.notify = true;
  // First a lone notification for a wrong generation: the target's device drops it.
  bad.len = 0;
  bad.notify = true;
  bad.notify_gen = r.gen + 7;
  CHECK(write_blocking(d, bad) == core::status::ok, "a lone notification is sent");
  // The target revokes the writable key right after its offer; our answer about it is stale,
  // not yet withdrawn (its key_gone follows the offer), and its lower provider must refuse the
  // write, which leaves before we poll again.
  CHECK(d.rma_check(t, writable_key, rw.dst_addr, rma_len, wr, rt) == core::status::ok,
        "the kept answer still passes here");
  std::fill(rma_src.begin(), rma_src.end(), std::byte{0x11});  // would show if it landed
  core::status s = write_blocking(d, rw);
  CHECK(s != core::status::ok, "a write through a revoked registration succeeded");
  // tcp has closed this pair's connection now: each further refusal goes through a fresh
  // endpoint.
  {
    device fresh;
    dev::peer_id ft = dev::no_peer;
    CHECK(core::ok(open_enabled(fresh, params_for(node, prov))) && fresh.connect(target, ft) == core::status::ok,
          "a second initiator");
    bad.peer = ft;
    bad.len = 512;
    bad.notify_gen = r.gen + 1;
    s = write_blocking(fresh, bad);
    CHECK(s != core::status::ok, "a write with a stale generation succeeded");
  }
  {
    device fresh;
    dev::peer_id ft = dev::no_peer;
    CHECK(core::ok(open_enabled(fresh, params_for(node, prov))) && fresh.connect(target, ft) == core::status::ok,
          "a third initiator");
    bad.peer = ft;
    bad.notify_gen = r.gen;
    bad.dst_addr = r.va + r.len - 100;  // runs 412 bytes past the window
    // With the armed generation's notification, which leaves right behind the write: the
    // target must not see it (its lower provider stops the connection at the refused write).
    bad.notify = true;
    bad.notify_ahead = true;
    bad.len = 512;
    s = write_blocking(fresh, bad);
    CHECK(s != core::status::ok, "a write past the window succeeded");
    (void)fresh.mailbox_send(ft, pack(std::uint8_t{refusal_done}));  // its connection may be gone
    const auto flush = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    while (std::chrono::steady_clock::now() < flush)
      fresh.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});
  }

  return failures == 0 ? 0 : 1;
}

// ---- lost peers ---------------------------------------------------------------------------------

std::uint64_t now_ms() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now().time_since_epoch()).count());
}

constexpr std::uint32_t lost_after = 3000;
enum : std::uint8_t { please_close = 40 };

// A peer in a child process: answers whatever comes (its device answers pings) until told to
// close its endpoint, which it then does while the process lives on.
pid_t start_peer(const std::string& prov, dev::address& out) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t child = fork();
  if (child == 0) {
    ::close(fds[0]);
    device d;
    if (!core::ok(open_enabled(d, params_for("127.0.0.1", prov)))) _exit(2);
    const dev::address a = d.local_address();
    if (write(fds[1], &a, sizeof a) != sizeof a) _exit(2);
    bool closing = false;
    while (!closing)
      d.poll_mailbox(16, [&](dev::peer_id, const dev::packet& p) {
        closing = static_cast<std::uint8_t>(p[0]) == please_close;
      });
    d.close();
    pause();  // alive, endpoint closed: the initiator must learn it from the bye
    _exit(0);
  }
  ::close(fds[1]);
  if (child > 0 && read(fds[0], &out, sizeof out) != sizeof out) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    ::close(fds[0]);
    return -1;
  }
  ::close(fds[0]);
  return child;
}

int lost_peers(const std::string& prov) {
  dev::address aa{}, ab{}, ac{};
  const pid_t killed = start_peer(prov, aa), closing = start_peer(prov, ab), live = start_peer(prov, ac);
  struct reaper {
    pid_t pids[3];
    ~reaper() {
      for (pid_t p : pids)
        if (p > 0) { kill(p, SIGKILL); waitpid(p, nullptr, 0); }
    }
  } reap{{killed, closing, live}};
  if (killed < 0 || closing < 0 || live < 0) { CHECK(false, "peers did not start"); return 1; }
  dev::open_params op = params_for("127.0.0.1", prov);
  op.liveness_period_ms = 50;
  op.net.lost_after_ms = lost_after;
  device d;
  CHECK(core::ok(d.open(op)), "open");
  dev::peer_id pa, pb, pc;
  CHECK(d.connect(aa, pa) == core::status::ok && d.connect(ab, pb) == core::status::ok &&
        d.connect(ac, pc) == core::status::ok, "connect");
  for (dev::peer_id p : {pa, pb, pc})
    CHECK(send_blocking(d, p, pack(std::uint8_t{seq_pkt})) == core::status::ok, "hello");
  std::vector<dev::peer_id> lost;
  const auto look = [&](std::uint64_t for_ms) {
    const std::uint64_t end = now_ms() + for_ms;
    while (now_ms() < end) {
      d.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});
      d.take_lost_peers(now_ms(), [&](dev::peer_id p) { lost.push_back(p); });
    }
  };
  look(lost_after + 500);  // longer than lost_after: everybody answers, nobody is lost
  CHECK(lost.empty(), "%zu live peers counted lost", lost.size());

  // One closes its endpoint (its process lives on): its bye makes it lost long before silence
  // could. Then one is killed: silence and unanswered pings, within about lost_after.
  CHECK(send_blocking(d, pb, pack(std::uint8_t{please_close})) == core::status::ok, "close request");
  const std::uint64_t asked = now_ms();
  // Silence alone takes at least 3/4 lost_after from the first unanswered ping, which goes after
  // the close: within lost_after / 2 only the bye can have told.
  while (lost.empty() && now_ms() - asked < lost_after / 2) look(10);
  CHECK(lost == std::vector<dev::peer_id>{pb}, "the closed endpoint was not lost within %u ms "
        "(lost: %zu)", lost_after / 2, lost.size());
  kill(killed, SIGKILL);
  waitpid(killed, nullptr, 0);
  reap.pids[0] = -1;
  const std::uint64_t killed_at = now_ms();
  while (lost.size() < 2 && now_ms() - killed_at < 4 * lost_after) look(10);
  CHECK(lost.size() == 2 && lost[1] == pa, "the killed peer was not counted lost in %u ms",
        4 * lost_after);
  // Silence counts from the last packet heard, at most a ping period (lost_after / 4) before the
  // kill: earlier than that would not be silence.
  CHECK(now_ms() - killed_at >= lost_after / 2, "the killed peer was counted lost too early");
  look(300);
  CHECK(lost.size() == 2, "reported again, or the live peer counted lost");
  CHECK(d.mailbox_send(pa, pack(std::uint8_t{seq_pkt})) == core::status::peer_dead, "send to lost");
  CHECK(d.mailbox_send(pc, pack(std::uint8_t{seq_pkt})) == core::status::ok, "send to the live one");
  dev::rma_target rt;
  CHECK(d.rma_check(pa, 1, 0, 1, dev::rma_access::remote_write, rt) == core::status::peer_dead,
        "rma_check on a lost peer");
  d.forget_dead_peer(pa);
  d.forget_dead_peer(pb);
  CHECK(d.peer_forgotten(pa) && !d.peer_forgotten(pc), "forgotten");
  return failures == 0 ? 0 : 1;
}

// ---- bounce rings ---------------------------------------------------------------------------

enum : std::uint8_t { bounce_msg = 50 };
struct bounce_note {
  std::uint8_t type;
  std::uint8_t pad[3];
  std::uint32_t seed;
  std::uint64_t offset;
  std::uint64_t len;
};
constexpr std::uint32_t bounce_messages = 3000;

// The receiver: checks every message's bytes where its packet says they are, and that its
// ring refuses what the sender did not produce or what was consumed. Reports its failures
// through `report` once it has every message.
int bounce_receive(int addr_fd, int report_fd, const std::string& prov) {
  device d;
  if (!core::ok(open_enabled(d, params_for("127.0.0.1", prov)))) return 2;
  const dev::address self = d.local_address();
  if (write(addr_fd, &self, sizeof self) != sizeof self) return 2;
  // A network peer's ring (FI_EXANET_NETWORK_RING_BYTES), not the shared-memory one: with the
  // smaller size, "more than a ring" could lie within the ring's valid bytes.
  const std::size_t ring = params_for("127.0.0.1", prov).net.ring_bytes;
  std::uint32_t got = 0;
  while (got < bounce_messages) {
    dev::peer_id from = dev::no_peer;
    dev::packet pk;
    if (!next_packet(d, from, pk)) {
      CHECK(false, "message %u of %u did not come", got, bounce_messages);
      break;
    }
    if (static_cast<std::uint8_t>(pk[0]) != bounce_msg) continue;
    const bounce_note n = unpack<bounce_note>(pk);
    const std::byte* at = d.bounce_data(from, 0, n.offset, n.len);
    CHECK(at != nullptr, "message %u: %llu bytes at %llu are not in the ring", got,
          static_cast<unsigned long long>(n.len), static_cast<unsigned long long>(n.offset));
    if (at) {
      std::size_t bad = n.len;
      for (std::size_t i = 0; i < n.len && bad == n.len; ++i)
        if (at[i] != pattern(i, n.seed)) bad = i;
      CHECK(bad == n.len, "message %u (%llu bytes): byte %zu differs", got,
            static_cast<unsigned long long>(n.len), bad);
    }
    CHECK(d.bounce_data(from, 1, n.offset, n.len) == nullptr, "another ring than the sender's");
    CHECK(d.bounce_data(from, 0, n.offset, ring + 1) == nullptr, "more than a ring");
    d.bounce_consume(from, 0, n.offset + n.len);
    if (n.len > 0)
      CHECK(d.bounce_data(from, 0, n.offset, n.len) == nullptr, "consumed bytes still readable");
    ++got;
  }
  const int result = failures;
  if (write(report_fd, &result, sizeof result) != sizeof result) return 2;
  // Stay for a moment: the sender reads our verdict, then both close.
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (std::chrono::steady_clock::now() < end)
    d.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});
  return failures == 0 ? 0 : 1;
}

// Messages of random sizes (edges included) from random iovecs through the ring, many times its
// size; the last one is sent and the sender then never calls its device again: its bytes must
// reach the receiver all the same (an inject's completion promises that much).
int bounce_rings(const std::string& prov) {
  int addr_pipe[2], report_pipe[2];
  if (pipe(addr_pipe) != 0 || pipe(report_pipe) != 0) return 2;
  const pid_t child = fork();
  if (child == 0) {
    ::close(addr_pipe[0]);
    ::close(report_pipe[0]);
    _exit(bounce_receive(addr_pipe[1], report_pipe[1], prov));
  }
  ::close(addr_pipe[1]);
  ::close(report_pipe[1]);
  dev::address target{};
  if (read(addr_pipe[0], &target, sizeof target) != sizeof target) {
    waitpid(child, nullptr, 0);
    return 2;
  }
  device d;
  dev::peer_id t = dev::no_peer;
  CHECK(core::ok(open_enabled(d, params_for("127.0.0.1", prov))) && d.connect(target, t) == core::status::ok,
        "open and connect");
  const std::size_t max = d.bounce_max();
  CHECK(max >= 8192, "bounce messages of %zu bytes at most: less than a medium message", max);
  dev::ring_space none;
  CHECK(!d.bounce_reserve(t, max + 1, 0, none), "room for more than bounce_max()");
  std::mt19937_64 rng(0xb0b0 + static_cast<unsigned>(getpid()));
  std::vector<std::byte> src(max + 64);
  const std::size_t edges[] = {0, 1, 63, 64, 65, 4096, 8192, max - 1, max};
  std::uint64_t bytes = 0;
  for (std::uint32_t m = 0; m < bounce_messages && failures == 0; ++m) {
    const std::size_t len = rng() % 3 == 0 ? edges[rng() % std::size(edges)] : rng() % (max + 1);
    const std::uint32_t seed = static_cast<std::uint32_t>(rng());
    const std::size_t skew = rng() % 64;
    for (std::size_t i = 0; i < len; ++i) src[skew + i] = pattern(i, seed);
    // Up to four pieces at random cuts.
    iovec v[4];
    std::size_t pieces = 1 + rng() % 4, at = 0;
    for (std::size_t k = 0; k < pieces; ++k) {
      const std::size_t left = len - at;
      const std::size_t n = k + 1 == pieces ? left : (left ? rng() % (left + 1) : 0);
      v[k] = {src.data() + skew + at, n};
      at += n;
    }
    dev::ring_space space;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!d.bounce_reserve(t, len, reinterpret_cast<std::uintptr_t>(src.data() + skew), space)) {
      // No credit until the receiver consumes: its ring_credit comes with our polls.
      if (std::chrono::steady_clock::now() > end) break;
      d.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});
    }
    if (std::chrono::steady_clock::now() > end) {
      CHECK(false, "no ring credit for message %u (%zu bytes) in 60 s", m, len);
      break;
    }
    dev::mailbox_reservation r;
    core::status s;
    while ((s = d.mailbox_reserve(t, r)) == core::status::again)
      d.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});
    CHECK(s == core::status::ok, "mailbox_reserve");
    if (s != core::status::ok) break;
    d.bounce_write(t, space, {v, pieces}, len);
    const bounce_note n{bounce_msg, {}, seed, space.offset, len};
    std::memcpy(r.data(), &n, sizeof n);
    d.mailbox_publish(r);
    bytes += len;
  }
  CHECK(bytes > 4 * dev::open_params{}.geo.bounce_ring_bytes, "only %llu bytes went",
        static_cast<unsigned long long>(bytes));
  // Not another call into the device: the receiver must have everything without us.
  int verdict = -1;
  if (read(report_pipe[0], &verdict, sizeof verdict) != sizeof verdict) verdict = -1;
  CHECK(verdict == 0, "the receiver found %d failures (or none came)", verdict);
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "receiver exit");
  std::printf("net_device_test bounce: %u messages, %llu bytes, at most %zu each: %s\n",
              bounce_messages, static_cast<unsigned long long>(bytes), max,
              failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}

// ---- a window write whose sender stops calling its device once it is posted ---------------------

constexpr std::size_t idle_write_bytes = 4096;  // the lower provider sends it whole when posted

// The target: arms a window, hands it to the initiator (through the pipe: the initiator is not
// polling), and waits for the notification with the data. Reports through `report`.
int idle_write_receive(int addr_fd, int report_fd, const std::string& prov) {
  device d;
  if (!core::ok(open_enabled(d, params_for("127.0.0.1", prov)))) return 2;
  std::vector<std::byte> window(idle_write_bytes, std::byte{0});
  offer o{};
  o.type = window_offer;
  if (!d.notify_alloc(o.slot, o.gen) ||
      !d.window_open(o.slot, reinterpret_cast<std::uint64_t>(window.data()), window.size()))
    return 2;
  o.va = reinterpret_cast<std::uint64_t>(window.data());
  o.len = window.size();
  const dev::address self = d.local_address();
  if (write(addr_fd, &self, sizeof self) != sizeof self || write(addr_fd, &o, sizeof o) != sizeof o)
    return 2;
  // The initiator's first packet (its hello goes with it) sets up the lower connection.
  dev::peer_id from = dev::no_peer;
  dev::packet pk;
  CHECK(next_packet(d, from, pk) && static_cast<std::uint8_t>(pk[0]) == seq_pkt, "first packet");
  // Bounded, not timed: the initiator makes no call into its device until we report.
  dev::notification n;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool landed = false;
  while (!landed && std::chrono::steady_clock::now() < end) {
    d.poll_mailbox(16, [](dev::peer_id, const dev::packet&) {});
    landed = d.notify_test(o.slot, o.gen, n);
  }
  CHECK(landed, "no notification while the initiator made no call into its device (10 s)");
  if (landed) {
    std::size_t bad = window.size();
    for (std::size_t i = 0; i < window.size() && bad == window.size(); ++i)
      if (window[i] != pattern(i, 27)) bad = i;
    CHECK(bad == window.size(), "byte %zu of the window is not the write's", bad);
    CHECK(static_cast<std::uint8_t>(n[0]) == 0x27, "the notification's data");
  }
  const int result = failures;
  if (write(report_fd, &result, sizeof result) != sizeof result) return 2;
  const auto linger = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (std::chrono::steady_clock::now() < linger)
    d.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});
  return failures == 0 ? 0 : 1;
}

// A write into a window with its notification, posted once: from then on the initiator makes no
// call into its device until the target reported. The target must have the data and the
// notification all the same: over a lower provider that orders a send after a write
// (FI_ORDER_SAW) the notification need not wait for the write's completion, which only the
// initiator's progress would read. The write completes afterwards, when the initiator calls
// again.
int idle_write(const std::string& prov) {
  int addr_pipe[2], report_pipe[2];
  if (pipe(addr_pipe) != 0 || pipe(report_pipe) != 0) return 2;
  const pid_t child = fork();
  if (child == 0) {
    ::close(addr_pipe[0]);
    ::close(report_pipe[0]);
    _exit(idle_write_receive(addr_pipe[1], report_pipe[1], prov));
  }
  ::close(addr_pipe[1]);
  ::close(report_pipe[1]);
  dev::address target{};
  offer o{};
  if (read(addr_pipe[0], &target, sizeof target) != sizeof target ||
      read(addr_pipe[0], &o, sizeof o) != sizeof o) {
    waitpid(child, nullptr, 0);
    return 2;
  }
  device d;
  dev::peer_id t = dev::no_peer;
  CHECK(core::ok(open_enabled(d, params_for("127.0.0.1", prov))) && d.connect(target, t) == core::status::ok,
        "open and connect");
  CHECK(send_blocking(d, t, pack(std::uint8_t{seq_pkt})) == core::status::ok, "first packet");
  std::vector<std::byte> src(idle_write_bytes);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = pattern(i, 27);
  const iovec v{src.data(), src.size()};
  dev::dma_write w;
  w.peer = t;
  w.src = {&v, 1};
  w.dst_addr = o.va;
  w.dst_base = o.va;
  w.len = o.len;
  w.notify = true;
  w.notify_slot = o.slot;
  w.notify_gen = o.gen;
  w.notify_data[0] = std::byte{0x27};
  w.notify_ahead = true;
  dev::dma_state st;
  core::status s = d.dma_post(w, st);
  CHECK(s == core::status::again || s == core::status::ok, "dma_post: %d", core::to_int(s));
  int verdict = -1;
  if (read(report_pipe[0], &verdict, sizeof verdict) != sizeof verdict) verdict = -1;
  CHECK(verdict == 0, "the target found %d failures (or none came)", verdict);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (s == core::status::again && std::chrono::steady_clock::now() < end) {
    d.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});
    s = d.dma_post(w, st);
  }
  CHECK(s == core::status::ok, "the write did not complete: %d", core::to_int(s));
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "target exit");
  std::printf("net_device_test idle_write over %s: %s\n", prov.c_str(),
              failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}

dev::address read_address(const std::string& file) {
  dev::address a{};
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < end) {
    std::ifstream in(file, std::ios::binary);
    if (in.read(reinterpret_cast<char*>(&a), sizeof a)) return a;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::fprintf(stderr, "no address in %s\n", file.c_str());
  std::exit(2);
}

}  // namespace

// ---- credit ------------------------------------------------------------------------------

// How many packets a can send b before "again", b not polling (a drives its lower provider).
std::uint32_t sends_until_again(device& a, dev::peer_id to_b) {
  std::uint32_t sent = 0;
  const std::uint64_t end = now_ms() + 2000;
  std::uint64_t again_since = 0;
  while (now_ms() < end) {
    const core::status s = a.mailbox_send(to_b, pack(std::uint8_t{seq_pkt}));
    if (s == core::status::ok) {
      ++sent;
      again_since = 0;
      continue;
    }
    if (s != core::status::again) break;
    // "again" also while the lower endpoint is busy: only a lasting one is the credit's.
    if (again_since == 0) again_since = now_ms();
    if (now_ms() - again_since > 300) break;
    a.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});
  }
  return sent;
}

// A receiver that consumed part of a sender's window, answered and went quiet gives that credit
// back with its answer: the sender's next window is whole although the receiver polls no more
// (MPICH's sendrecv3 over the network stalled for its partner's whole sleep without it).
int credit_return(const std::string& prov) {
  device a, b;
  dev::open_params pa = params_for("127.0.0.1", prov), pb = params_for("127.0.0.1", prov);
  const std::uint32_t window = pa.net.credits;
  dev::peer_id a_to_b = dev::no_peer;
  CHECK(core::ok(open_enabled(a, pa)) && core::ok(open_enabled(b, pb)) &&
            a.connect(b.local_address(), a_to_b) == core::status::ok,
        "open and connect");
  if (failures) return 1;
  // First window: b consumes more than half of it (half goes back on its own) and a few more,
  // fewer than half again: those stay with b until something carries them.
  // (One process drives both: each packet is sent, then read.)
  const std::uint32_t first = window / 2 + window / 4;
  dev::peer_id b_to_a = dev::no_peer;
  dev::packet pk;
  // The lower connection needs both sides' progress: a sender waiting for it drives b too.
  const auto send_driving = [](device& from, dev::peer_id to, device& other, std::uint8_t type) {
    const std::uint64_t end = now_ms() + 30000;
    for (;;) {
      const core::status s = from.mailbox_send(to, pack(type));
      if (s != core::status::again || now_ms() > end) return s;
      from.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});
      other.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});
    }
  };
  for (std::uint32_t i = 0; i < first && failures == 0; ++i) {
    CHECK(send_driving(a, a_to_b, b, seq_pkt) == core::status::ok, "send %u", i);
    CHECK(next_packet(b, b_to_a, pk), "packet %u of the first window never came", i);
  }
  if (failures) return 1;
  // b answers once, and polls no more.
  CHECK(send_driving(b, b_to_a, a, seq_done) == core::status::ok, "answer");
  dev::peer_id from = dev::no_peer;
  CHECK(next_packet(a, from, pk) && static_cast<std::uint8_t>(pk[0]) == seq_done, "the answer");
  // Our hello took one credit b returns like any packet's.
  const std::uint32_t second = sends_until_again(a, a_to_b);
  CHECK(second >= window - 1, "with the receiver quiet, %u packets of a %u-packet window went "
        "(%u credits stayed at the receiver after it answered)", second, window, window - second);
  CHECK(second <= window, "%u packets went into a %u-packet window", second, window);
  std::printf("credit: %u of %u packets sent with the receiver quiet\n", second, window);
  return failures == 0 ? 0 : 1;
}

// ---- a key registered anew -----------------------------------------------------------------

// An owner closes a registration and registers other memory under the same key (MPICH does so
// with the keys of its large-message reads). The initiator's kept answer about the key is then
// stale: an access to the new memory must ask again and pass, and one that the fresh answer
// does not cover must still be refused. Memory registered anew at the same place is announced
// by the owner (key_gone), so the initiator asks again there too.
// Two devices of this process on 127.0.0.1, init connected to owner (to_owner); false on failure.
bool open_owner_and_initiator(device& owner, device& init, dev::peer_id& to_owner,
                              const std::string& prov) {
  CHECK(core::ok(open_enabled(owner, params_for("127.0.0.1", prov))) &&
            core::ok(open_enabled(init, params_for("127.0.0.1", prov))),
        "open");
  CHECK(failures == 0 && init.connect(owner.local_address(), to_owner) == core::status::ok,
        "connect");
  return failures == 0;
}

int key_reused(const std::string& prov) {
  device owner, init;
  dev::peer_id to_owner = dev::no_peer;
  if (!open_owner_and_initiator(owner, init, to_owner, prov)) return 1;
  std::vector<std::byte> first(4096), second(4096);
  const auto grant = [](std::vector<std::byte>& m) {
    dev::key_grant g;
    g.key = 0x4B1D;
    g.va = reinterpret_cast<std::uintptr_t>(m.data());
    g.len = m.size();
    g.addr_base = g.va;
    g.access = dev::rma_access::remote_read;
    return g;
  };
  // rma_check until the owner's answer is in (both devices driven).
  const auto check = [&](std::uint64_t addr) {
    dev::rma_target t;
    const std::uint64_t end = now_ms() + 30000;
    for (;;) {
      const core::status s =
          init.rma_check(to_owner, 0x4B1D, addr, 8, dev::rma_access::remote_read, t);
      if (s != core::status::again || now_ms() > end) return s;
      init.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});
      owner.poll_mailbox(16, [](dev::peer_id, const dev::packet&) {});
    }
  };
  std::uint32_t slot = 0;
  CHECK(owner.key_publish(grant(first), slot) == core::status::ok, "publish the first");
  const std::uint64_t in_first = reinterpret_cast<std::uintptr_t>(first.data()) + 64;
  const std::uint64_t in_second = reinterpret_cast<std::uintptr_t>(second.data()) + 64;
  CHECK(check(in_first) == core::status::ok, "read of the first registration");
  owner.key_revoke(slot);
  CHECK(owner.key_publish(grant(second), slot) == core::status::ok, "publish the second");
  CHECK(check(in_second) == core::status::ok,
        "read of memory registered anew under the same key refused (a stale answer)");
  CHECK(check(in_first) == core::status::access, "read of the closed registration admitted");
  CHECK(check(in_second) == core::status::ok, "read of the second after a refusal");
  // The same memory registered anew: the kept answer would still admit every access, but
  // names the closed registration (its slot and generation, the lower key of a write). The
  // owner's next poll tells the initiator (key_gone), which then asks again.
  owner.key_revoke(slot);
  CHECK(owner.key_publish(grant(second), slot) == core::status::ok, "publish the second again");
  for (int i = 0; i < 20; ++i) {
    owner.poll_mailbox(16, [](dev::peer_id, const dev::packet&) {});
    init.poll_mailbox(16, [](dev::peer_id, const dev::packet&) {});
  }
  dev::rma_target t;
  CHECK(init.rma_check(to_owner, 0x4B1D, in_second, 8, dev::rma_access::remote_read, t) ==
            core::status::again,
        "an answer about a closed registration was still used (no key_gone)");
  CHECK(check(in_second) == core::status::ok, "read of the registration made anew");
  std::printf("key_reused: %s\n", failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}

// A write of v's bytes through the owner's answer t (its key's registration), from offset 0.
dev::dma_write write_through(dev::peer_id to, const iovec& v, const dev::rma_target& t) {
  dev::dma_write w;
  w.peer = to;
  w.src = std::span<const iovec>(&v, 1);
  w.dst_addr = t.va;
  w.len = v.iov_len;
  w.key_slot = t.key_slot;
  return w;
}

// ---- a write through an answer that went stale -----------------------------------------------

// The owner closes a writable registration that an initiator holds an answer about, and
// registers other memory under the key, before the initiator hears of the close. A write
// through the old answer must not be refused by the owner's lower provider (tcp would close
// the pair's connection, and the packets on it): the closed registration's lower key leads to a
// sink until the initiator has answered the key_gone, or to the new registration where that
// covers every offset the old one did. Either way the write's check says it missed (stale),
// the initiator's answer is dropped, nothing outside the new registration changes, and the
// sink goes once the initiator answered.
int stale_write(const std::string& prov) {
  device owner, init;
  dev::peer_id to_owner = dev::no_peer;
  if (!open_owner_and_initiator(owner, init, to_owner, prov)) return 1;
  constexpr std::uint64_t key = 0x5A11;
  constexpr std::size_t len = 16384;
  std::vector<std::byte> a(len, std::byte{0xA1}), b(len, std::byte{0xB2}), c(len / 2, std::byte{0xC3});
  const auto grant = [&](std::vector<std::byte>& m) {
    dev::key_grant g;
    g.key = key;
    g.va = reinterpret_cast<std::uintptr_t>(m.data());
    g.len = m.size();
    g.addr_base = 0;  // offsets, as exanet's own registrations
    g.access = dev::rma_access::remote_write;
    return g;
  };
  // Each write carries a report (dma_write::deliver_if_landed): a protocol packet marked with
  // the write's number. The owner takes it only if the write landed, and then after its data:
  // what the registration's first byte held when the report arrived is kept beside it.
  std::vector<std::pair<std::uint8_t, std::byte>> reports;
  const std::vector<std::byte>* landing = &a;
  const auto both = [&] {
    init.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});
    owner.poll_mailbox(16, [&](dev::peer_id, const dev::packet& pk) {
      if (pk[0] == std::byte{1}) reports.emplace_back(static_cast<std::uint8_t>(pk[1]), (*landing)[0]);
    });
  };
  const auto check = [&](dev::rma_target& t) {
    const std::uint64_t end = now_ms() + 30000;
    for (;;) {
      const core::status s =
          init.rma_check(to_owner, key, 0, len / 2, dev::rma_access::remote_write, t);
      if (s != core::status::again || now_ms() > end) return s;
      both();
    }
  };
  std::vector<std::byte> src(len / 2, std::byte{0x5E});
  iovec v{src.data(), src.size()};
  std::uint8_t writes = 0;
  bool delivered = false;
  const auto write = [&](const dev::rma_target& t) {
    dev::dma_write w = write_through(to_owner, v, t);
    dev::packet report{};
    report[0] = std::byte{1};  // a protocol packet's type
    report[1] = std::byte{++writes};
    w.deliver_if_landed = &report;
    dev::dma_state st;
    const std::uint64_t end = now_ms() + 30000;
    for (;;) {
      const core::status s = init.dma_post(w, st);
      delivered = st.delivered;
      if (s != core::status::again || now_ms() > end) return s;
      both();
    }
  };
  // The reports the owner took since the last call, after polling it a little more.
  const auto reports_taken = [&] {
    for (int i = 0; i < 50; ++i) both();
    return std::exchange(reports, {});
  };
  const auto all_of = [](const std::vector<std::byte>& m, std::byte v) {
    return std::all_of(m.begin(), m.end(), [v](std::byte x) { return x == v; });
  };
  for (const bool covering : {false, true}) {
    std::uint32_t slot = 0;
    std::fill(a.begin(), a.end(), std::byte{0xA1});
    std::fill(b.begin(), b.end(), std::byte{0xB2});
    CHECK(owner.key_publish(grant(a), slot) == core::status::ok, "publish");
    dev::rma_target t;
    CHECK(check(t) == core::status::ok, "the first check");
    landing = &a;
    CHECK(write(t) == core::status::ok, "the first write");
    CHECK(a[0] == std::byte{0x5E} && a[len / 2] == std::byte{0xA1}, "the first write landed");
    CHECK(delivered, "the first write's report did not go with it");
    auto got = reports_taken();
    CHECK(got.size() == 1 && got[0].first == writes && got[0].second == std::byte{0x5E},
          "the first write's report: %zu taken, or before its data", got.size());
    std::fill(a.begin(), a.end(), std::byte{0xA1});
    // Closed and registered anew, no poll in between: the initiator has not heard of it.
    owner.key_revoke(slot);
    std::vector<std::byte>& next = covering ? b : c;
    CHECK(owner.key_publish(grant(next), slot) == core::status::ok, "publish anew");
    CHECK(owner.sinks() == (covering ? 0u : 1u), "%s re-registration: %zu sinks",
          covering ? "a covering" : "a smaller", owner.sinks());
    const std::uint64_t stale_before = init.stale_writes();
    const std::uint64_t withdrawn_before = owner.net_drop_counts().withdrawn;
    CHECK(write(t) == core::status::stale, "a write through the stale answer (%s) not stale",
          covering ? "covering" : "smaller");
    CHECK(init.stale_writes() == stale_before + 1, "stale writes not counted");
    CHECK(reports_taken().empty(), "a stale write's report was delivered");
    CHECK(owner.net_drop_counts().withdrawn == withdrawn_before + 1,
          "a stale write's report was not withdrawn");
    CHECK(all_of(a, std::byte{0xA1}), "the closed registration's memory changed");
    if (!covering) CHECK(all_of(c, std::byte{0xC3}), "the smaller registration changed");
    // Written again after a fresh check, as proto does: it lands in the new registration.
    CHECK(check(t) == core::status::ok, "the check after the stale write");
    landing = &next;
    CHECK(write(t) == core::status::ok, "the write after a fresh check");
    CHECK(next[0] == std::byte{0x5E}, "the write after a fresh check did not land");
    got = reports_taken();
    CHECK(delivered && got.size() == 1 && got[0].first == writes && got[0].second == std::byte{0x5E},
          "the report of the write after a fresh check: %zu taken, or before its data", got.size());
    // The initiator answers the key_gone: the sink goes.
    for (int i = 0; i < 200 && owner.sinks() != 0; ++i) both();
    CHECK(owner.sinks() == 0, "a sink outlived its peer's answer");
    owner.key_revoke(slot);
    for (int i = 0; i < 200 && owner.sinks() != 0; ++i) both();
  }
  std::printf("stale_write: %s\n", failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}

// ---- a target that leaves right after a write ------------------------------------------------

// The owner answers a write's check and closes at once (a process that exits right after its
// event: fabtests' fi_rdm_rma_event). Its close sends what it owes before its bye, and the
// initiator, reading the write's completion, its verdict and the bye in one poll, completes the
// write (it landed) instead of failing it for the peer's death; a later write fails at once.
int bye_after_verdict(const std::string& prov) {
  device owner, init;
  dev::peer_id to_owner = dev::no_peer;
  if (!open_owner_and_initiator(owner, init, to_owner, prov)) return 1;
  constexpr std::uint64_t key = 0xB1E;
  std::vector<std::byte> target(4096, std::byte{0}), src(4096, std::byte{0x7B});
  dev::key_grant g;
  g.key = key;
  g.va = reinterpret_cast<std::uintptr_t>(target.data());
  g.len = target.size();
  g.addr_base = 0;
  g.access = dev::rma_access::remote_write;
  std::uint32_t slot = 0;
  CHECK(owner.key_publish(g, slot) == core::status::ok, "publish");
  dev::rma_target t;
  const std::uint64_t end = now_ms() + 30000;
  core::status s;
  while ((s = init.rma_check(to_owner, key, 0, src.size(), dev::rma_access::remote_write, t)) ==
             core::status::again && now_ms() < end) {
    init.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});
    owner.poll_mailbox(16, [](dev::peer_id, const dev::packet&) {});
  }
  CHECK(s == core::status::ok, "the check");
  iovec v{src.data(), src.size()};
  const dev::dma_write w = write_through(to_owner, v, t);
  dev::dma_state st;
  CHECK(init.dma_post(w, st) == core::status::again, "the write did not wait for its verdict");
  // Only the owner progresses: the data lands, the check is answered; then it leaves.
  for (int i = 0; i < 2000 && target[0] != std::byte{0x7B}; ++i) {
    owner.poll_mailbox(16, [](dev::peer_id, const dev::packet&) {});
    usleep(100);
  }
  CHECK(target[0] == std::byte{0x7B} && target.back() == std::byte{0x7B}, "the write did not land");
  for (int i = 0; i < 20; ++i) owner.poll_mailbox(16, [](dev::peer_id, const dev::packet&) {});
  owner.close();
  usleep(200 * 1000);  // everything the owner sent is at the initiator, for one poll to read
  while ((s = init.dma_post(w, st)) == core::status::again && now_ms() < end)
    init.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});
  CHECK(s == core::status::ok, "a write that landed and was confirmed before the owner's bye: "
        "status %d", static_cast<int>(s));
  dev::dma_state next;
  s = init.dma_post(w, next);
  CHECK(s == core::status::peer_dead, "a write after the owner's bye: status %d (not lost)",
        static_cast<int>(s));
  std::printf("bye_after_verdict: %s\n", failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}

// A peer named by address and port alone (dev::by_network_address, what fi_getinfo(node,
// service) gives for another host): the owner, opened with a port of its choosing, listens on
// that port; the initiator's packets reach it, and the owner's answer, which comes with its
// hello, arrives as the same peer (adopted), whose whole name then finds it too. A second
// endpoint wanting a port already taken listens on another and still opens.
int by_address(const std::string& prov) {
  constexpr std::uint32_t chosen = 23000 + 17;
  device owner, init, second;
  dev::open_params op = params_for("127.0.0.1", prov);
  op.self.port = chosen;
  CHECK(core::ok(open_enabled(owner, op)) && core::ok(open_enabled(init, params_for("127.0.0.1", prov))),
        "open");
  if (failures) return 1;
  const dev::address real = owner.local_address();
  sockaddr_in sin{};
  std::memcpy(&sin, real.lower_name.data(), sizeof sin);
  CHECK(real.lower_len == sizeof sin && sin.sin_family == AF_INET && ntohs(sin.sin_port) == chosen,
        "the owner's network side listens on port %u, not its chosen %u", ntohs(sin.sin_port), chosen);
  sockaddr_storage at{};
  auto* at4 = reinterpret_cast<sockaddr_in*>(&at);
  at4->sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &at4->sin_addr);
  const dev::address by_addr = dev::by_network_address(at, chosen, 0, 7);
  dev::peer_id to_owner = dev::no_peer, again = dev::no_peer;
  CHECK(init.connect(by_addr, to_owner) == core::status::ok, "connect by address");
  CHECK(init.connect(by_addr, again) == core::status::ok && again == to_owner,
        "the same address twice: peer %u then %u", to_owner, again);
  CHECK(init.adopted_peers() == 0, "adopted before any hello");
  // Both devices are in this process: each send drives the other side too (its connection).
  const auto send_driving = [](device& d, dev::peer_id to, const dev::packet& pk, device& other) {
    const std::uint64_t end = now_ms() + 30000;
    core::status s;
    while ((s = d.mailbox_send(to, pk)) == core::status::again && now_ms() < end)
      other.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});
    return s;
  };
  // One packet into d, the other side driven meanwhile (30 s at most).
  const auto receive_driving = [](device& d, dev::peer_id& from, dev::packet& out, device& other) {
    bool got = false;
    const std::uint64_t end = now_ms() + 30000;
    while (!got && now_ms() < end) {
      other.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});
      d.poll_mailbox(1, [&](dev::peer_id f, const dev::packet& p) {
        from = f;
        out = p;
        got = true;
      });
    }
    return got;
  };
  for (std::uint32_t i = 0; i < 3 && failures == 0; ++i) {
    CHECK(send_driving(init, to_owner, pack(offer{seq_pkt, {}, i, 0, 0, 0, 0}), owner) ==
              core::status::ok,
          "send %u", i);
    dev::peer_id from = dev::no_peer, back_from = dev::no_peer;
    dev::packet pk{}, back{};
    bool got = receive_driving(owner, from, pk, init);
    CHECK(got && unpack<offer>(pk).slot == i, "packet %u did not reach the owner", i);
    if (!got) break;
    CHECK(send_driving(owner, from, pack(offer{seq_done, {}, i, 0, 0, 0, 0}), init) ==
              core::status::ok,
          "answer %u", i);
    got = receive_driving(init, back_from, back, owner);
    CHECK(got && back_from == to_owner && unpack<offer>(back).slot == i,
          "answer %u came from peer %u, not the peer named by address (%u)", i, back_from, to_owner);
  }
  CHECK(init.adopted_peers() == 1 && init.peers_awaiting_hello() == 0,
        "adopted %llu peers (want 1), %zu still awaiting a hello (want 0)",
        static_cast<unsigned long long>(init.adopted_peers()), init.peers_awaiting_hello());
  dev::peer_id by_name = dev::no_peer;
  CHECK(init.connect(real, by_name) == core::status::ok && by_name == to_owner,
        "the owner's whole name found peer %u, not %u", by_name, to_owner);
  // The port is taken now: the next endpoint that wants it listens elsewhere, and opens.
  CHECK(core::ok(open_enabled(second, op)), "an endpoint whose port is taken did not open");
  sockaddr_in other{};
  std::memcpy(&other, second.local_address().lower_name.data(), sizeof other);
  CHECK(ntohs(other.sin_port) != chosen, "two network sides on port %u", chosen);
  // An address where nobody listens: the peer is lost (the connection is refused), and a peer
  // lost before its hello no longer counts as awaiting one.
  {
    dev::open_params lp = params_for("127.0.0.1", prov);
    lp.liveness_period_ms = 50;
    lp.net.lost_after_ms = 1000;
    device lonely;
    CHECK(core::ok(open_enabled(lonely, lp)), "open");
    const dev::address nobody = dev::by_network_address(at, chosen + 1, 0, 7);
    dev::peer_id p = dev::no_peer;
    CHECK(lonely.connect(nobody, p) == core::status::ok && lonely.peers_awaiting_hello() == 1,
          "connect to nobody: awaiting %zu (want 1)", lonely.peers_awaiting_hello());
    (void)lonely.mailbox_send(p, pack(offer{seq_pkt, {}, 0, 0, 0, 0, 0}));
    bool lost = false;
    const std::uint64_t end = now_ms() + 15000;
    while (!lost && now_ms() < end) {
      lonely.poll_mailbox(0, [](dev::peer_id, const dev::packet&) {});
      lonely.take_lost_peers(now_ms(), [&](dev::peer_id q) { lost = lost || q == p; });
    }
    CHECK(lost && lonely.peers_awaiting_hello() == 0,
          "nobody at the address: lost %d, awaiting %zu (want 0)", lost, lonely.peers_awaiting_hello());
  }
  std::printf("by_address: %s\n", failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  alarm(120);  // a hang is a failure
  const std::string mode = argc > 1 ? argv[1] : "pair";
  if (mode == "pair") {
    const std::string prov = argc > 2 ? argv[2] : "tcp";
    int fds[2];
    if (pipe(fds) != 0) return 2;
    const pid_t child = fork();
    if (child == 0) {
      ::close(fds[0]);
      _exit(serve(fds[1], "", "127.0.0.1", prov));
    }
    ::close(fds[1]);
    dev::address target{};
    if (read(fds[0], &target, sizeof target) != sizeof target) {
      std::fprintf(stderr, "the target did not start\n");
      waitpid(child, nullptr, 0);
      return 2;
    }
    const int rc = initiate(target, "127.0.0.1", prov);
    int status = 0;
    waitpid(child, &status, 0);
    const int target_rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::printf("net_device_test over %s: initiator %s, target %s\n", prov.c_str(),
                rc == 0 ? "ok" : "FAILED", target_rc == 0 ? "ok" : "FAILED");
    return rc == 0 && target_rc == 0 ? 0 : 1;
  }
  if (mode == "bounce") return bounce_rings(argc > 2 ? argv[2] : "tcp");
  if (mode == "idle_write") return idle_write(argc > 2 ? argv[2] : "tcp");
  if (mode == "credit") return credit_return(argc > 2 ? argv[2] : "tcp");
  if (mode == "key_reused") return key_reused(argc > 2 ? argv[2] : "tcp");
  if (mode == "stale_write") return stale_write(argc > 2 ? argv[2] : "tcp");
  if (mode == "bye_after_verdict") return bye_after_verdict(argc > 2 ? argv[2] : "tcp");
  if (mode == "by_address") return by_address(argc > 2 ? argv[2] : "tcp");
  if (mode == "lost") {
    const int rc = lost_peers(argc > 2 ? argv[2] : "tcp");
    std::printf("net_device_test lost: %s\n", rc == 0 ? "ok" : "FAILED");
    return rc;
  }
  if ((mode == "serve" || mode == "client") && argc >= 4) {
    const std::string prov = argc > 4 ? argv[4] : "tcp";
    if (mode == "serve") return serve(-1, argv[2], argv[3], prov);
    return initiate(read_address(argv[2]), argv[3], prov);
  }
  std::fprintf(stderr, "usage: %s pair [provider] | serve FILE NODE [provider] | client FILE "
               "NODE [provider]\n", argv[0]);
  return 2;
}
