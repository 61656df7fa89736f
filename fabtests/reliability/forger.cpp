// SPDX-License-Identifier: BSD-2-Clause
// A forger attacks a live endpoint (issue 12). Three processes:
//  - the victim opens an exanet endpoint with RMA, registers a region, posts directed receives
//    for a legitimate peer (eager, medium and rendezvous sizes, so receiver-initiated windows are
//    armed while the attack runs), and progresses; every buffer sits between canaries in an
//    arena fenced by PROT_NONE guard pages, and a global canary nobody posted sits elsewhere;
//  - the forger (this parent) opens an endpoint of its own in the same job (a mapped, known
//    sender) and publishes packets into the victim's mailbox through the ring's own protocol:
//    foreign PDIDs, unknown types and versions, every packet type with fields out of range,
//    staged DMA writes aimed at the canaries, the guard pages, the global, address 0x10, past
//    each posted buffer and outside the registration, far-future psns, RMA events with lengths
//    up to 2^40 and keys that do not exist, and random packets;
//  - then the legitimate peer sends every message the victim posted for and RMA-writes the region
//    with remote CQ data.
// The victim must: survive (no signal, no hang: alarm), report no completion during the attack,
// receive every legitimate message and write intact afterwards (nothing lost), leave every
// canary untouched, and count the drops by reason (fi_exanet_counters). What a same-user process
// that reads the victim's segment can still forge (a valid-looking packet for a window it has
// read) is the emulation's documented limit (fi_exanet(7), PROTECTION).
//
// FORGER_PACKETS=N sets the number of random packets (default 3000), FORGER_SEED=N replays a run,
// FORGER_STEPS=mask runs only some of the attack steps (bit i-1: step i).
extern "C" {
#include "xt.h"
}
#include <fcntl.h>
#include <poll.h>
#include <rdma/fi_ext_exanet.h>
#include <rdma/fi_rma.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <span>

#include "dev/emu/key_table.hpp"
#include "dev/emu/layout.hpp"
#include "proto/wire.hpp"

namespace {

using namespace exanet;
namespace emu = exanet::dev::emu;
namespace wire = exanet::proto::wire;

constexpr std::size_t kSizes[] = {48, 6000, 200000, 1u << 20};  // eager, medium, RTR, RTR
constexpr int kRecvs = 4;
constexpr std::size_t kRegion = 64 * 1024;
constexpr std::uint64_t kKey = 0xF0F0;
constexpr std::uint64_t kCqData = 0xC0DA;
constexpr unsigned char kCanary = 0xA5;

alignas(64) unsigned char g_global[4096];  // never posted nor registered

// What the victim tells the forger: its name and where its memory is.
struct victim_map {
  char name[64];
  std::uint64_t arena, arena_len, guard_lo, guard_hi, global;
  std::uint64_t recv[kRecvs];
  std::uint64_t region;
};

// What the victim reports at the end.
struct victim_report {
  int attack_completions;  // completions or counter events seen while only the forger talked
  int legit_ok;            // every legitimate message and the write arrived intact
  int canaries_ok;
  fi_exanet_counters counters;
};

// ---- victim -------------------------------------------------------------------------------------

struct arena {
  unsigned char* base = nullptr;  // first usable byte (after the low guard page)
  std::size_t len = 0;
  unsigned char* guard_lo = nullptr;
  unsigned char* guard_hi = nullptr;
};

arena make_arena(std::size_t len) {
  const std::size_t page = 4096;
  len = (len + page - 1) / page * page;
  auto* m = static_cast<unsigned char*>(
      mmap(nullptr, len + 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  XT_CHECK(m != MAP_FAILED, "mmap");
  XT_CHECK(mprotect(m, page, PROT_NONE) == 0 && mprotect(m + page + len, page, PROT_NONE) == 0,
           "guard pages");
  std::memset(m + page, kCanary, len);
  return {m + page, len, m, m + page + len};
}

bool canaries_intact(const unsigned char* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (p[i] != kCanary) return false;
  return true;
}

int victim(int, int sock) {
  struct fi_info* h = xt_hints();
  h->caps |= FI_RMA | FI_RMA_EVENT;
  xt_ep x;
  xt_open_disabled(&x, h, 0);
  fi_freeinfo(h);
  fi_cntr_attr ca{};
  ca.events = FI_CNTR_EVENTS_COMP;
  fid_cntr* remote_writes;
  XT_RC(fi_cntr_open(x.domain, &ca, &remote_writes, nullptr));
  XT_RC(fi_ep_bind(x.ep, &remote_writes->fid, FI_REMOTE_WRITE));
  xt_enable(&x);

  // Layout: [guard][4 KiB canary][recv 0][4 KiB canary]...[region][4 KiB canary][guard]
  std::size_t total = 4096;
  for (std::size_t s : kSizes) total += s + 4096;
  total += kRegion + 4096;
  arena a = make_arena(total);
  victim_map m{};
  std::memcpy(m.name, x.name, sizeof m.name);
  m.arena = reinterpret_cast<std::uint64_t>(a.base);
  m.arena_len = a.len;
  m.guard_lo = reinterpret_cast<std::uint64_t>(a.guard_lo);
  m.guard_hi = reinterpret_cast<std::uint64_t>(a.guard_hi);
  m.global = reinterpret_cast<std::uint64_t>(g_global);
  std::memset(g_global, kCanary, sizeof g_global);
  unsigned char* at = a.base + 4096;
  unsigned char* recv[kRecvs];
  for (int i = 0; i < kRecvs; ++i) {
    recv[i] = at;
    m.recv[i] = reinterpret_cast<std::uint64_t>(at);
    at += kSizes[i] + 4096;
  }
  unsigned char* region = at;
  m.region = reinterpret_cast<std::uint64_t>(region);
  fid_mr* mr;
  XT_RC(fi_mr_reg(x.domain, region, kRegion, FI_REMOTE_WRITE | FI_REMOTE_READ, 0, kKey, 0, &mr,
                  nullptr));

  // The legitimate peer's name comes first, then the receives are posted (directed).
  char peer_name[64];
  xt_recv_name(sock, peer_name);
  const fi_addr_t peer = xt_insert(&x, peer_name);
  for (int i = 0; i < kRecvs; ++i)
    XT_RC(fi_trecv(x.ep, recv[i], kSizes[i], nullptr, peer, 100 + i, 0, nullptr));
  xt_send_all(sock, &m, sizeof m);

  // The attack: progress until the forger says it is over; nothing may complete.
  victim_report rep{};
  for (;;) {
    pollfd p{sock, POLLIN, 0};
    if (poll(&p, 1, 0) == 1) break;
    fi_cq_tagged_entry e[4];
    for (fid_cq* cq : {x.rxcq, x.txcq}) {
      const ssize_t n = fi_cq_read(cq, e, 4);
      if (n > 0) rep.attack_completions += static_cast<int>(n);
      if (n == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        fi_cq_readerr(cq, &err, 0);
        ++rep.attack_completions;
      }
    }
  }
  char c;
  xt_recv_all(sock, &c, 1);
  rep.attack_completions += static_cast<int>(fi_cntr_read(remote_writes));
  xt_send_all(sock, &c, 1);  // only now may the legitimate peer start

  // The legitimate traffic: four messages, then one RMA write with CQ data.
  rep.legit_ok = 1;
  int got[kRecvs] = {};
  for (int n = 0; n < kRecvs + 1; ++n) {
    fi_cq_tagged_entry e;
    fi_cq_err_entry err;
    if (!xt_wait(x.rxcq, &e, &err, 30)) {
      fprintf(stderr, "victim: error completion %d (%s) after the attack, tag %llu\n", err.err,
              fi_strerror(err.err), static_cast<unsigned long long>(err.tag));
      rep.legit_ok = 0;
      continue;
    }
    if (e.flags & FI_REMOTE_CQ_DATA) {
      if (e.data != kCqData) rep.legit_ok = 0;
      continue;
    }
    const int i = static_cast<int>(e.tag) - 100;
    if (i < 0 || i >= kRecvs || e.len != kSizes[i] || got[i]++ ||
        !xt_verify(recv[i], kSizes[i], 1000 + i)) {
      fprintf(stderr, "victim: message tag %llu len %zu wrong\n",
              static_cast<unsigned long long>(e.tag), e.len);
      rep.legit_ok = 0;
    }
  }
  if (fi_cntr_read(remote_writes) != 1 || !xt_verify(region, kRegion, 77)) {
    fprintf(stderr, "victim: the legitimate RMA write is missing or wrong\n");
    rep.legit_ok = 0;
  }

  // Every byte around the buffers, the global, and the region's surroundings.
  rep.canaries_ok = canaries_intact(a.base, 4096) && canaries_intact(g_global, sizeof g_global);
  for (int i = 0; i < kRecvs; ++i)
    rep.canaries_ok = rep.canaries_ok && canaries_intact(recv[i] + kSizes[i], 4096);
  rep.canaries_ok = rep.canaries_ok && canaries_intact(region + kRegion, 4096);

  fi_exanet_counters_ops* ops;
  XT_RC(fi_open_ops(&x.ep->fid, FI_EXANET_COUNTERS_OPS, 0, reinterpret_cast<void**>(&ops), nullptr));
  XT_RC(ops->read(x.ep, &rep.counters, sizeof rep.counters));
  xt_send_all(sock, &rep, sizeof rep);
  xt_recv_all(sock, &c, 1);  // the peer is done too
  XT_RC(fi_close(&mr->fid));
  xt_close_ep(&x);
  XT_RC(fi_close(&remote_writes->fid));
  xt_close(&x);
  return 0;
}

// ---- legitimate peer ------------------------------------------------------------------------------

int legit_peer(int, int sock) {
  struct fi_info* h = xt_hints();
  h->caps |= FI_RMA;
  xt_ep x;
  xt_open(&x, h, 0);
  fi_freeinfo(h);
  xt_send_name(sock, &x);  // to the parent, which passes it to the victim
  victim_map m;
  xt_recv_all(sock, &m, sizeof m);
  const fi_addr_t v = xt_insert(&x, m.name);
  char c;
  xt_recv_all(sock, &c, 1);  // the attack is over
  static unsigned char buf[1u << 20];
  for (int i = 0; i < kRecvs; ++i) {
    xt_fill(buf, kSizes[i], 1000 + i);
    XT_RC(fi_tsend(x.ep, buf, kSizes[i], nullptr, v, 100 + i, nullptr));
    fi_cq_tagged_entry e;
    fi_cq_err_entry err;
    XT_CHECK(xt_wait(x.txcq, &e, &err, 30), "legitimate send %d failed: %d", i, err.err);
  }
  static unsigned char rbuf[kRegion];
  xt_fill(rbuf, kRegion, 77);
  // mr_mode 0: remote addresses are offsets into the registration.
  XT_RC(fi_writedata(x.ep, rbuf, kRegion, nullptr, kCqData, v, 0, kKey, nullptr));
  fi_cq_tagged_entry e;
  fi_cq_err_entry err;
  XT_CHECK(xt_wait(x.txcq, &e, &err, 30), "legitimate write failed: %d", err.err);
  xt_sync_progress(sock, x.rxcq);
  xt_close(&x);
  return 0;
}

// ---- forger -------------------------------------------------------------------------------------

struct target {
  void* base = nullptr;
  std::size_t len = 0;
  emu::segment_view v{};
  const emu::geometry* geo = nullptr;
};

target map_victim(const char* name) {
  fi_exanet_addr a;
  std::memcpy(&a, name, sizeof a);
  char path[128];
  snprintf(path, sizeof path, "/exanet.%u.%u.%u", static_cast<unsigned>(getuid()), a.pdid, a.port);
  const int fd = shm_open(path, O_RDWR, 0);
  XT_CHECK(fd >= 0, "forger cannot open %s", path);
  struct stat st;
  XT_CHECK(fstat(fd, &st) == 0, "fstat");
  target t;
  t.len = static_cast<std::size_t>(st.st_size);
  t.base = mmap(nullptr, t.len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  XT_CHECK(t.base != MAP_FAILED, "mmap victim");
  auto* h = static_cast<emu::segment_header*>(t.base);
  t.v = emu::segment_view::of(t.base, h->geo);
  t.geo = &h->geo;
  return t;
}

struct identity {
  std::uint32_t pdid, port;
  std::uint16_t node;
};

std::uint64_t g_published = 0;

// The ring's protocol, as a sender: claim the slot at the tail, write, publish. Waits for a free
// slot while the victim drains (the victim never stops progressing).
void publish(target& t, const identity& from, const void* pkt) {
  auto& tail = t.v.mbox_ctl->tail;
  const std::uint64_t mask = t.geo->mailbox_slots - 1;
  for (;;) {
    std::uint64_t pos = tail.load(std::memory_order_relaxed);
    emu::mailbox_slot& s = t.v.mailbox[pos & mask];
    const std::uint64_t seq = s.seq.load(std::memory_order_acquire);
    if (seq != pos) {
      usleep(10);
      continue;
    }
    if (!tail.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) continue;
    std::memcpy(s.data.data(), pkt, dev::packet_bytes);
    s.pdid = from.pdid;
    s.src_port = from.port;
    s.src_node = from.node;
    s.seq.store(pos + 1, std::memory_order_release);
    ++g_published;
    return;
  }
}

template <class P>
void publish_as(target& t, const identity& from, const P& p) {
  static_assert(sizeof(P) == dev::packet_bytes);
  publish(t, from, &p);
}

// A staged write of `len` bytes of 0xEE for dst, through a chunk of the victim's staging area.
void staged_write(target& t, const identity& from, std::uint64_t dst, std::size_t len,
                  std::uint32_t slot, std::uint32_t gen, std::uint32_t key_slot, bool notify) {
  std::uint32_t chunk = ~0u;
  if (len) {
    auto& mask = t.v.staging_ctl->free_mask;
    for (;;) {
      std::uint64_t m = mask.load();
      if (!m) {
        usleep(10);
        continue;
      }
      chunk = static_cast<std::uint32_t>(__builtin_ctzll(m));
      if (mask.compare_exchange_weak(m, m & ~(1ull << chunk))) break;
    }
    std::memset(t.v.staging_data + emu::staging_payload_offset(*t.geo, chunk, dst), 0xEE, len);
  }
  emu::staging_packet sp{};
  sp.type = static_cast<std::uint8_t>(emu::device_packet::staged_write);
  sp.notify = notify;
  sp.chunk = chunk;
  sp.dst_addr = dst;
  sp.len = len;
  sp.notify_slot = slot;
  sp.notify_gen = gen;
  sp.key_slot = key_slot;
  std::memset(sp.notify_data.data(), 0x77, sp.notify_data.size());
  publish_as(t, from, sp);
}

// Mostly small or boundary values, sometimes anything.
std::uint64_t wild(std::mt19937_64& rng) {
  switch (rng() % 6) {
    case 0: return 0;
    case 1: return ~0ull;
    case 2: return rng() % 4096;
    case 3: return (1ull << (rng() % 64)) + (rng() % 3) - 1;
    default: return rng();
  }
}

void attack(target& t, const identity& me, const victim_map& m, std::uint64_t seed, int randoms) {
  std::mt19937_64 rng(seed);
  const char* steps_env = getenv("FORGER_STEPS");  // bit i-1: run step i (default: all)
  const unsigned steps = steps_env ? static_cast<unsigned>(strtoul(steps_env, nullptr, 0)) : ~0u;
  auto step = [&](int i) { return (steps >> (i - 1)) & 1; };
  identity foreign = me;
  foreign.pdid ^= 0x5a5a;
  identity nobody = me;
  nobody.port = 1;  // no such endpoint: delivered "from no peer"
  const identity ids[] = {me, nobody};

  // 1. Foreign protection domains: the packetizer's check.
  if (step(1)) {
  for (int i = 0; i < 50; ++i) {
    wire::env_data p{};
    p.hdr = wire::make_header(wire::pkt_type::env_data, wire::flag_tagged, 8);
    p.tag = 100;  // a posted tag: must not matter
    publish_as(t, foreign, p);
  }
  }
  // 2. Unknown types and versions.
  if (step(2)) {
  for (unsigned type = static_cast<unsigned>(wire::pkt_type::count); type < dev::first_device_packet_type; type += 7) {
    dev::packet p{};
    p[0] = std::byte(type);
    p[1] = std::byte{wire::version};
    publish(t, me, p.data());
  }
  for (unsigned type = 1; type < static_cast<unsigned>(wire::pkt_type::count); ++type) {
    dev::packet p{};
    p[0] = std::byte(type);
    p[1] = std::byte{wire::version + 1};
    publish(t, me, p.data());
  }
  }
  // 3. Every packet type with fields out of range.
  if (step(3)) {
  for (const identity& id : ids) {
    wire::medium md{};
    md.hdr = wire::make_header(wire::pkt_type::medium, wire::flag_tagged, 256 * 1024);
    md.tag = 7;
    for (std::uint32_t ring : {0u, 1u, 63u, 64u, ~0u}) {
      md.ring = ring;
      md.ring_offset = wild(rng);
      publish_as(t, id, md);
    }
    wire::cts c{};
    c.hdr = wire::make_header(wire::pkt_type::cts, wire::flag_last);
    c.send_id = wild(rng);
    c.buf_addr = m.global;
    c.buf_len = ~0ull;
    publish_as(t, id, c);
    wire::rndv_ack ack{};
    ack.hdr = wire::make_header(wire::pkt_type::rndv_ack, 0);
    ack.send_id = wild(rng);
    publish_as(t, id, ack);
    wire::rtr r{};
    r.hdr = wire::make_header(wire::pkt_type::rtr, wire::flag_tagged);
    r.tag = 100;
    r.buf_addr = m.global;
    r.capacity = ~0ull;
    r.nth = 0;  // malformed
    publish_as(t, id, r);
    for (std::uint16_t f : {std::uint16_t{0}, std::uint16_t{wire::flag_withdrawn}}) {
      wire::rtr_answer a{};
      a.recv_id = wild(rng);
      a.hdr = wire::make_header(wire::pkt_type::rtr_nack, f);
      publish_as(t, id, a);
      a.hdr = wire::make_header(wire::pkt_type::rtr_cancel, f);
      publish_as(t, id, a);
      a.hdr = wire::make_header(wire::pkt_type::rtr_cancel_reply, f);
      publish_as(t, id, a);
    }
    wire::rma_read_req q{};
    q.hdr = wire::make_header(wire::pkt_type::rma_read_req, wire::flag_last);
    q.key = kKey + 1;
    q.remote_addr = m.region;
    q.len = ~0ull;
    q.reply_addr = m.global;
    q.notify_slot = static_cast<std::uint32_t>(wild(rng));
    publish_as(t, id, q);
    wire::rma_done d{};
    d.hdr = wire::make_header(wire::pkt_type::rma_done, wire::flag_cq_data | wire::flag_last);
    d.len = ~0ull;
    for (std::uint32_t slot : {0u, 1u, 2047u, 2048u, ~0u}) {
      d.key_slot = slot;
      publish_as(t, id, d);
    }
    // A read that claims CQ data, of a size the registration holds, at the region's key slot
    // (its key's home in the table, and the next ones a collision would probe): reads bring no
    // CQ data, so no completion may come. Before the target refused it, it produced an
    // FI_REMOTE_CQ_DATA completion (found by the random packets of seed 1796245461).
    d.hdr = wire::make_header(wire::pkt_type::rma_done,
                              wire::flag_remote_read | wire::flag_cq_data | wire::flag_last);
    d.len = 64;
    d.key = kKey;  // the region's, at its start (offset 0): resolved, then refused as a read
    d.remote_addr = 0;
    const std::uint32_t home = emu::key_table::home_of(kKey, t.geo->key_slots);
    for (std::uint32_t k = 0; k < 4; ++k) {
      d.key_slot = (home + k) & (t.geo->key_slots - 1);
      publish_as(t, id, d);
    }
    wire::rma_write_inline wi{};
    wi.hdr = wire::make_header(wire::pkt_type::rma_write_inline, wire::flag_cq_data, 64);
    wi.ring = 0;
    wi.ring_offset = 0;
    wi.key_slot = static_cast<std::uint32_t>(rng() % 2048);
    // An unknown key, then the region's key with an address outside its registration.
    wi.key = kKey + 1;
    wi.remote_addr = m.region;
    publish_as(t, id, wi);
    wi.key = kKey;
    wi.remote_addr = m.global;
    publish_as(t, id, wi);
  }
  }
  // 4. Staged DMA writes aimed outside everything the victim armed.
  if (step(4)) {
  const std::uint64_t aims[] = {
      m.global, m.global + 64, 0x10, m.arena, m.guard_lo, m.guard_hi - 64,
      m.recv[0] + kSizes[0], m.recv[1] - 64, m.recv[2] + kSizes[2], m.recv[3] + kSizes[3] - 1,
      m.region + kRegion, m.region - 64};
  for (std::uint64_t dst : aims)
    for (int k = 0; k < 3; ++k) {
      const std::uint32_t slot = static_cast<std::uint32_t>(rng() % 1024);
      const std::uint32_t gen = static_cast<std::uint32_t>(rng());
      const std::uint32_t key_slot = k == 2 ? static_cast<std::uint32_t>(rng() % 2048) : dev::no_key_slot;
      staged_write(t, me, dst, 64, slot, gen, key_slot, k == 1);
    }
  // Into the posted buffers and the region, with generations and keys never armed.
  for (std::uint64_t dst : {m.recv[2], m.recv[3], m.region})
    for (int k = 0; k < 8; ++k)
      staged_write(t, me, dst, 4096, static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(rng()),
                   k & 1 ? static_cast<std::uint32_t>(rng() % 2048) : dev::no_key_slot, true);
  // A chunk that does not exist.
  {
    emu::staging_packet sp{};
    sp.type = static_cast<std::uint8_t>(emu::device_packet::staged_write);
    sp.chunk = 1000;
    sp.dst_addr = m.global;
    sp.len = 64;
    publish_as(t, me, sp);
    sp.type = 0xF7;  // a device packet type the device does not have
    sp.chunk = ~0u;
    publish_as(t, me, sp);
  }
  }
  // 5. RMA events in a ring of our own at the victim (claimed like a sender would).
  if (step(5)) {
  std::uint64_t head = 0;
  const std::uint32_t ring =
      emu::claim_ring(t.v.events, t.geo->event_rings, emu::ring_owner(me.node, me.port), head);
  if (ring != ~0u) {
    const std::uint64_t q = t.geo->event_ring_entries;
    for (int i = 0; i < 64; ++i) {
      wire::rma_event e{};
      e.cq_data = kCqData;
      e.len_low = ~0u;
      e.len_high = 0xff;
      e.key_slot = static_cast<std::uint16_t>(rng());
      e.flags = wire::event_cq_data | wire::event_last | wire::event_region_end;
      while (head - t.v.events[ring].tail.load() >= q) usleep(10);
      std::memcpy(&t.v.event_data[ring * q + (head & (q - 1))], &e, sizeof e);
      t.v.events[ring].head.store(++head, std::memory_order_release);
      t.v.doorbell->rings.fetch_or(1ull << ring, std::memory_order_release);
    }
  }
  }
  // 6. Far-future psns: the order of everything after them from this sender is at stake.
  if (step(6)) {
  for (int i = 0; i < 64; ++i) {
    wire::env_data p{};
    p.hdr = wire::make_header(wire::pkt_type::env_data, wire::flag_tagged, 8);
    p.tag = 5;
    p.psn = static_cast<wire::psn_t>(1000 + rng() % 0x7fffffff);
    publish_as(t, me, p);
  }
  }
  // 8. Atomics the victim must refuse (or drop) without touching its memory: operands outside the
  // packet or the ring, operands announced by a train that never came, unknown keys, ranges
  // outside the registration, a misaligned element, op and datatype values that do not exist,
  // counts of 0 and beyond the limit, a compare op without results; trains beyond a request.
  if (step(8)) {
  for (const identity& id : ids) {
    auto atomic = [&](std::uint16_t flags, std::uint32_t len, std::uint64_t key, std::uint64_t addr,
                      std::uint8_t op, std::uint8_t dt, std::uint16_t count) {
      wire::atomic_req q{};
      q.hdr = wire::make_header(wire::pkt_type::atomic_req, flags, len);
      q.key = key;
      q.remote_addr = addr;
      q.reply_addr = m.global;
      q.ring = static_cast<std::uint32_t>(rng() % 70);
      // In-packet operands that would change whatever they were added to.
      q.ring_offset = (flags & wire::flag_inline) ? 0x0101010101010101ull : wild(rng);
      q.cq_data = 0x0101010101010101ull;
      q.notify_slot = static_cast<std::uint32_t>(rng() % 1024);
      q.notify_gen = static_cast<std::uint32_t>(rng());
      q.count = count;
      q.op = op;
      q.datatype = dt;
      publish_as(t, id, q);
    };
    constexpr std::uint8_t sum = 2, cswap = 12;  // FI_SUM, FI_CSWAP
    constexpr std::uint8_t i64 = 6;                // FI_INT64
    atomic(wire::flag_inline, 200, kKey, m.region, sum, i64, 25);
    atomic(0, 64, kKey, m.region, sum, i64, 8);                       // ring bytes not ours
    atomic(wire::flag_assembled, 64, kKey, m.region, sum, i64, 8);    // no train came
    atomic(wire::flag_inline, 8, kKey + 1, m.region, sum, i64, 1);    // unknown key
    atomic(wire::flag_inline, 8, kKey, m.global, sum, i64, 1);        // outside the region
    atomic(wire::flag_inline, 8, kKey, m.region + kRegion - 4, sum, i64, 1);  // straddles its end
    atomic(wire::flag_inline, 8, kKey, m.region + 1, sum, i64, 1);    // misaligned
    atomic(wire::flag_inline, 8, kKey, m.region, 200, i64, 1);        // no such op
    atomic(wire::flag_inline, 8, kKey, m.region, sum, 200, 1);        // no such datatype
    atomic(wire::flag_inline, 0, kKey, m.region, sum, i64, 0);        // count 0
    atomic(0, 64, kKey, m.region, sum, i64, 65535);                   // count beyond the limit
    atomic(wire::flag_inline, 16, kKey, m.region, cswap, i64, 1);     // compare, no results
    atomic(wire::flag_inline, 16, kKey, m.region, sum, i64, 1);       // operand bytes disagree
    wire::atomic_operands o{};
    o.hdr = wire::make_header(wire::pkt_type::atomic_operands, 0, 52);
    for (std::uint32_t off : {8192u - 51u, ~0u, 0x7fffffffu}) {
      o.offset = off;
      publish_as(t, id, o);
    }
    o.hdr = wire::make_header(wire::pkt_type::atomic_operands, 0, 200);
    o.offset = 0;
    publish_as(t, id, o);
  }
  }
  // 7. Random packets: any type of ours with any fields, from us or from nobody.
  if (step(7)) {
  for (int i = 0; i < randoms; ++i) {
    dev::packet p;
    for (std::size_t b = 0; b < p.size(); b += 8) {
      const std::uint64_t w = wild(rng);
      std::memcpy(p.data() + b, &w, 8);
    }
    p[0] = std::byte(rng() % static_cast<unsigned>(wire::pkt_type::count));
    if (rng() % 4) p[1] = std::byte{wire::version};
    publish(t, ids[rng() % 2], p.data());
  }
  }
}

}  // namespace

int main() {
  xt_init(170);
  const char* env = getenv("FORGER_PACKETS");
  const int randoms = env ? atoi(env) : 3000;
  const char* seed_env = getenv("FORGER_SEED");
  const std::uint64_t seed = seed_env ? strtoull(seed_env, nullptr, 0) : static_cast<std::uint64_t>(time(nullptr));
  printf("forger: seed %llu (FORGER_SEED replays), %d random packets\n",
         static_cast<unsigned long long>(seed), randoms);
  int socks[2];
  pid_t pids[2];
  // Children, forked before any libfabric object: the victim (0) and the legitimate peer (1).
  xt_spawn(2, [](int i, int sock) { return i == 0 ? victim(i, sock) : legit_peer(i, sock); },
           socks, pids);
  char peer_name[64];
  xt_recv_name(socks[1], peer_name);
  {
    xt_ep relay{};  // passes the peer's name on, framed as xt_send_name frames it
    std::memcpy(relay.name, peer_name, sizeof relay.name);
    relay.namelen = sizeof(fi_exanet_addr);
    xt_send_name(socks[0], &relay);
  }
  victim_map m;
  xt_recv_all(socks[0], &m, sizeof m);
  xt_send_all(socks[1], &m, sizeof m);

  xt_ep x;
  xt_open_default(&x, 0);  // the forger is a known sender of the same job
  fi_exanet_addr self;
  std::memcpy(&self, x.name, sizeof self);
  target t = map_victim(m.name);
  const identity me{self.pdid, self.port, self.node};
  attack(t, me, m, seed, randoms);
  // Let the victim take everything, progressing our own endpoint for its answers.
  for (int i = 0; i < 2000; ++i) {
    fi_cq_read(x.rxcq, nullptr, 0);
    usleep(100);
  }
  printf("forger: %llu packets published\n", static_cast<unsigned long long>(g_published));
  char c = 'o';
  xt_send_all(socks[0], &c, 1);
  xt_recv_all(socks[0], &c, 1);  // the victim has stopped counting
  xt_send_all(socks[1], &c, 1);
  victim_report rep;
  xt_recv_all(socks[0], &rep, sizeof rep);
  c = 'd';
  xt_sync(socks[1]);
  xt_send_all(socks[0], &c, 1);
  xt_reap(2, pids);

  const fi_exanet_counters& k = rep.counters;
  printf("victim drops: foreign_pdid %llu unknown %llu bad_field %llu dma_refused %llu "
         "notify_refused %llu rma_event %llu\n",
         (unsigned long long)k.drop_foreign_pdid, (unsigned long long)k.drop_unknown,
         (unsigned long long)k.drop_bad_field, (unsigned long long)k.drop_dma_refused,
         (unsigned long long)k.drop_notify_refused, (unsigned long long)k.drop_rma_event);
  XT_CHECK(rep.attack_completions == 0, "%d phantom completions during the attack",
           rep.attack_completions);
  XT_CHECK(rep.legit_ok, "legitimate traffic after the attack was lost or damaged");
  XT_CHECK(rep.canaries_ok, "the victim wrote outside its posted and registered buffers");
  XT_CHECK(k.drop_foreign_pdid >= 50, "foreign-PDID packets not counted");
  XT_CHECK(k.drop_unknown >= 12, "unknown packets not counted");
  XT_CHECK(k.drop_bad_field > 0 && k.drop_dma_refused >= 36 && k.drop_notify_refused > 0 &&
               k.drop_rma_event > 0,
           "a class of forged packets was not counted");
  xt_close(&x);
  xt_pass("forger");
  return 0;
}
