// SPDX-License-Identifier: BSD-2-Clause
#include "dev/emu/device.hpp"

#include "core/futex.hpp"

#include <dirent.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>

#include "core/copy.hpp"
#include "core/checked_memory.hpp"
#include "core/iov.hpp"
#include "core/log.hpp"
#include "core/unlink_at_exit.hpp"
#include "dev/emu/key_table.hpp"

namespace exanet::dev::emu {
namespace {

std::atomic<std::uint32_t> g_next_auto_port{0};

// Whether the endpoint that made seg still lives. Segments of this layout hold their creator's
// lock (shm_segment::owner_alive); one of an older layout was made by a version that held none,
// and only its pid can tell (wrong across PID namespaces, as it always was for those).
bool owner_alive(const shm_segment& seg) noexcept {
  const auto* h = static_cast<const segment_header*>(seg.data());
  if (h->version == layout_version) return seg.owner_alive();
  return process_alive(h->owner_pid);
}

// Where the wake socket of that name (wake_socket_name) is bound: under shm_dir.
bool wake_socket_address(const std::string& name, sockaddr_un& a) noexcept {
  a = {};
  a.sun_family = AF_UNIX;
  if (name.empty() || sizeof shm_dir - 1 + name.size() >= sizeof a.sun_path) return false;
  std::memcpy(a.sun_path, shm_dir, sizeof shm_dir - 1);
  std::memcpy(a.sun_path + sizeof shm_dir - 1, name.c_str(), name.size() + 1);
  return true;
}

// One unbound datagram socket per process sends every wake (a cold path: the owner sleeps).
int wake_sender() noexcept {
  static const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  return fd;
}


}  // namespace

core::status device::open(const params& p) noexcept {
  if (const char* why = geometry_error(p.geo, offsets_of(p.geo).total)) {
    EXANET_LOG(warn, core, "endpoint geometry refused: %s", why);
    return core::status::invalid;
  }
  geo_ = p.geo;
  self_ = p.self;
  engine_mode_ = p.dma_engine;
  engine_choice_ = {};
  probe_ = {};
  liveness_period_ms_ = p.liveness_period_ms;
  liveness_checked_ms_ = 0;
  death_since_check_ = false;
  reclaim_stale_segments();

  const segment_offsets off = offsets_of(geo_);
  const bool auto_port = self_.port == 0;
  core::status s = core::status::exists;
  for (int attempt = 0; attempt < 256 && s == core::status::exists; ++attempt) {
    if (auto_port) {
      // Taken ports answer "exists" (O_EXCL) and the next one is tried; dead owners' segments
      // were reclaimed just above.
      const std::uint32_t span = port_limit - first_auto_port;
      const std::uint32_t start = static_cast<std::uint32_t>(getpid()) * 2654435761u;
      const std::uint32_t n = g_next_auto_port.fetch_add(1, std::memory_order_relaxed);
      self_.port = first_auto_port + (start + n) % span;
    }
    std::string name;
    try {
      name = segment_name(getuid(), self_.pdid, self_.port);
    } catch (...) {
      return core::status::no_memory;
    }
    // An automatic port whose name is taken, by us or by a squatter, is skipped: O_EXCL.
    s = shm_segment::create(name, off.total, reserved_at_open(geo_), seg_);
    if (s == core::status::exists && !auto_port) {
      // A user-chosen port held by a dead process of ours is reclaimed; a live owner keeps it,
      // and a file that is not ours (another user's) is never touched: a clear error instead.
      shm_segment old;
      const core::status o = shm_segment::open(name, old);
      if (o == core::status::access) {
        EXANET_LOG(warn, core, "port %u: its segment name is taken by a file exanet does not own",
                   self_.port);
        return core::status::access;
      }
      if (core::ok(o) && old.size() >= sizeof(segment_header)) {
        auto* h = static_cast<segment_header*>(old.data());
        if (h->ready.load(std::memory_order_acquire) && !owner_alive(old)) {
          old.unlink_name();
          s = shm_segment::create(name, off.total, reserved_at_open(geo_), seg_);
        }
      }
      if (s == core::status::exists) {
        EXANET_LOG(warn, core, "port %u is in use by a live endpoint", self_.port);
        return core::status::exists;
      }
    }
  }
  if (!core::ok(s)) return s;

  local_ = segment_view::of(seg_.data(), geo_);
  segment_header& h = *local_.header;
  h.magic = segment_magic;
  h.version = layout_version;
  h.pdid = self_.pdid;
  h.port = self_.port;
  h.owner_pid = getpid();
  h.node = self_.node;
  h.geo = geo_;
  h.closed.store(0, std::memory_order_relaxed);
  h.intake_held.store(0, std::memory_order_relaxed);
  // The link model of this process (dev/link_model.hpp), and where this endpoint sits in it.
  link_ = current_link_params(self_.port, link_pos_);
  link_on_ = link_.enabled;
  h.link_position = link_on_ ? encode_position(link_pos_) : no_position;
  if (link_on_) {
    const link_timing self_path = link_timing::between(link_, link_pos_, link_pos_);
    EXANET_LOG(info, core,
               "port %u: link model on, at QFDB (%u,%u,%u) FPGA %u of a %ux%ux%u "
               "torus; %u ns per hop, %u and %u MB/s, %u ns per packet injected (loopback "
               "%llu ns)",
               self_.port, link_pos_.x, link_pos_.y, link_pos_.z, link_pos_.fpga, link_.torus[0],
               link_.torus[1], link_.torus[2], link_.hop_ns, link_.intra_mbps, link_.inter_mbps,
               link_.inject_ns, static_cast<unsigned long long>(self_path.latency_ns));
  }
  h.sleepers.store(0, std::memory_order_relaxed);
  h.wake_seq.store(0, std::memory_order_relaxed);
  h.wake_socket.store(0, std::memory_order_relaxed);
  local_.mbox_ctl->tail.store(0, std::memory_order_relaxed);
  for (std::uint32_t i = 0; i < geo_.mailbox_slots; ++i)
    local_.mailbox[i].seq.store(i, std::memory_order_relaxed);
  for (std::uint32_t i = 0; i < geo_.notify_slots; ++i) {
    local_.notify[i].gen.store(0, std::memory_order_relaxed);
    local_.notify[i].window_gen.store(0, std::memory_order_relaxed);
    local_.notify[i].window_va.store(0, std::memory_order_relaxed);
    local_.notify[i].window_len.store(0, std::memory_order_relaxed);
  }
  for (std::uint32_t i = 0; i < geo_.key_slots; ++i) {
    local_.keys[i].seq.store(0, std::memory_order_relaxed);
    local_.keys[i].state.store(static_cast<std::uint32_t>(key_state::empty),
                               std::memory_order_relaxed);
  }
  local_.doorbell->rings.store(0, std::memory_order_relaxed);
  local_.bells->summary.store(0, std::memory_order_relaxed);
  for (auto& w : local_.bells->words) w.store(0, std::memory_order_relaxed);
  local_.staging_ctl->free_mask.store(
      geo_.staging_chunks == 64 ? ~0ull : ((1ull << geo_.staging_chunks) - 1),
      std::memory_order_relaxed);
  mb_head_ = 0;
  try {
    free_notify_.clear();
    free_notify_.reserve(geo_.notify_slots);
    for (std::uint32_t i = geo_.notify_slots; i-- > 0;) free_notify_.push_back(i);
    // Generations start at random: a packet forged without reading this segment cannot name a
    // slot's current use except by a 1 in 2^32 guess (the window check needs the generation).
    notify_gen_.assign(geo_.notify_slots, 0);
    if (getrandom(notify_gen_.data(), notify_gen_.size() * sizeof(std::uint32_t), 0) < 0)
      for (std::uint32_t i = 0; i < geo_.notify_slots; ++i)
        notify_gen_[i] = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(this) >> 4) *
                         2654435761u + i * 40503u + static_cast<std::uint32_t>(getpid());
    windows_.assign(geo_.notify_slots, window{});
    grants_.assign(geo_.key_slots, grant{});
    peers_.reserve(16);
  } catch (...) {
    seg_.reset();
    return core::status::no_memory;
  }
  h.ready.store(1, std::memory_order_release);
  return core::status::ok;
}

void device::close() noexcept {
  if (local_.header && engine_mode_ == dma_engine_mode::automatic) log_engine_choice();
  // Tell peers that still map this segment that nothing will be read from it any more.
  if (local_.header) local_.header->closed.store(1, std::memory_order_release);
  // Give back the bounce rings this endpoint holds at live peers so other senders can use them.
  for (peer& pr : peers_) {
    if (pr.dead || !pr.view.header) continue;
    if (pr.bounce_ring != ~0u) {
      // Messages still in the ring must be read as ours after we are gone: mark it closing; the
      // receiver frees it when drained (bounce_consume), or we do now if it already is.
      ring_desc& d = pr.view.bounce[pr.bounce_ring];
      const std::uint64_t mine = ring_owner(self_.node, self_.port);
      d.owner.store(mine | ring_closing, std::memory_order_release);
      std::uint64_t closing = mine | ring_closing;
      if (ring_drained(d.tail.load(std::memory_order_acquire),
                       d.head.load(std::memory_order_acquire)))
        d.owner.compare_exchange_strong(closing, 0, std::memory_order_acq_rel);
    }
    if (pr.event_ring != ~0u) pr.view.events[pr.event_ring].owner.store(0, std::memory_order_release);
  }
  peers_.clear();
  peer_index_.clear();
  departed_ = 0;
  last_sender_key_ = ~0ull;
  last_sender_ = no_peer;
  if (wake_fd_ >= 0) {
    local_.header->wake_socket.store(0, std::memory_order_release);
    ::close(wake_fd_);
    wake_fd_ = -1;
    try {
      core::forget_at_exit(wake_socket_name(seg_.name()));
    } catch (...) {
      // At exit it is then unlinked a second time: no harm, the name is gone.
    }
  }
  seg_.reset();  // removes the wake socket's name too
  local_ = {};
}

bool device::arm_wake_socket() noexcept {
  if (wake_fd_ >= 0) return true;
  if (!local_.header) return false;
  std::string name;
  try {
    name = wake_socket_name(seg_.name());
  } catch (...) {
    return false;
  }
  sockaddr_un a;
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0 || !wake_socket_address(name, a)) {
    if (fd >= 0) ::close(fd);
    EXANET_LOG(warn, core, "no wake socket (%s): a sleeper looks at same-host arrivals every "
               "millisecond", std::strerror(errno));
    return false;
  }
  // The name goes with our segment: one left by a killed owner of the segment's name is stale.
  int rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a);
  if (rc != 0 && errno == EADDRINUSE) {
    ::unlink(a.sun_path);
    rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a);
  }
  if (rc != 0) {
    EXANET_LOG(warn, core, "no wake socket at %s (%s): a sleeper looks at same-host arrivals "
               "every millisecond", a.sun_path, std::strerror(errno));
    ::close(fd);
    return false;
  }
  (void)::chmod(a.sun_path, 0600);  // as the segment: this user's processes alone send to it
  (void)core::unlink_at_exit(name);  // removed at exit like the segment
  wake_fd_ = fd;
  local_.header->wake_socket.store(1, std::memory_order_seq_cst);
  return true;
}

void device::reclaim_stale_segments() noexcept {
  DIR* d = opendir("/dev/shm");
  if (!d) return;
  char prefix[32];
  std::snprintf(prefix, sizeof prefix, "exanet.%u.", static_cast<unsigned>(getuid()));
  const std::size_t plen = std::strlen(prefix);
  while (dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, prefix, plen) != 0) continue;
    std::string name = std::string("/") + e->d_name;
    // open refuses (and logs) files that are not ours: another user's are never read or unlinked.
    shm_segment seg;
    const core::status opened = shm_segment::open(name, seg);
    if (opened == core::status::unreachable && shm_segment::remove_if_abandoned_empty(name)) {
      EXANET_LOG(info, core, "reclaimed segment %s left empty by a dead creator", name.c_str());
      continue;
    }
    if (!core::ok(opened) || seg.size() < sizeof(segment_header)) continue;
    auto* h = static_cast<segment_header*>(seg.data());
    const bool ready = h->ready.load(std::memory_order_acquire) != 0;
    if (h->magic == segment_magic && ready && !owner_alive(seg)) {
      EXANET_LOG(info, core, "reclaiming stale segment %s of dead pid %d", name.c_str(),
                 h->owner_pid);
      seg.unlink_name();
    } else if (!ready && seg.abandoned_unfinished()) {
      // Its creator was killed while it made it: the header never said ready, and nothing
      // else would ever remove it.
      EXANET_LOG(info, core, "reclaiming segment %s left unfinished by a dead creator",
                 name.c_str());
      seg.unlink_name();
    }
  }
  closedir(d);
}

core::status device::connect(const address& a, peer_id& out) noexcept {
  if (!a.valid()) return core::status::invalid;
  if (a.pdid != self_.pdid) return core::status::access;  // protection: other jobs are invisible
  if (a.node != self_.node) return core::status::unreachable;  // the emulation is one node
  if (a.host != 0 && a.host != host_identity()) return core::status::unreachable;  // another host
  const std::uint64_t key = peer_key(a.node, a.port);
  if (auto it = peer_index_.find(key); it != peer_index_.end()) {
    out = it->second;
    return core::status::ok;
  }
  peer pr;
  pr.addr = a;
  pr.cma = engine_mode_ != dma_engine_mode::staged;
  if (a.port == self_.port) {
    // Loopback: map our own segment a second time so peer code needs no special case.
    if (core::status s = shm_segment::open(seg_.name(), pr.seg); !core::ok(s)) return s;
  } else {
    std::string name;
    try {
      name = segment_name(getuid(), a.pdid, a.port);
    } catch (...) {
      return core::status::no_memory;
    }
    if (core::status s = shm_segment::open(name, pr.seg); !core::ok(s)) return s;
  }
  // Only a segment of our uid with mode 0600 was mapped (shm_segment::open). Its header is
  // still checked before use, and copied once: the copy is what every later access trusts.
  auto* h = static_cast<segment_header*>(pr.seg.data());
  if (pr.seg.size() < sizeof(segment_header) || h->magic != segment_magic ||
      h->version != layout_version || !h->ready.load(std::memory_order_acquire) ||
      h->closed.load(std::memory_order_acquire))
    return core::status::unreachable;
  if (h->pdid != self_.pdid) return core::status::access;
  pr.geo = h->geo;
  pr.pid = h->owner_pid;
  if (const char* why = geometry_error(pr.geo, pr.seg.size())) {
    EXANET_LOG(warn, core, "segment %s refused: %s", pr.seg.name().c_str(), why);
    return core::status::unreachable;
  }
  // A segment whose creator is gone (its lock released) is stale: nobody reads this mailbox,
  // and nobody else will unlink it (the name still names the file checked).
  if (!pr.seg.owner_alive()) {
    EXANET_LOG(info, core, "segment %s: its owner is gone; peer dead", pr.seg.name().c_str());
    pr.seg.unlink_name();
    return core::status::peer_dead;
  }
  // The pid serves only process_vm_writev(2)/readv(2), and is believed only if it names, in our
  // PID namespace, a process of ours that maps this very file. An owner in another PID
  // namespace (a container, `unshare --pid`) has another number here: it is served through
  // shared memory instead, as with FI_EXANET_USE_CMA=0.
  const char* why = nullptr;
  if (a.port == self_.port) {
    pr.pid = getpid();
  } else if (pr.cma && !pr.seg.mapped_by(pr.pid, why)) {
    EXANET_LOG(info, core, "segment %s names owner pid %d: %s; copies to it go through shared "
               "memory (no process_vm_writev)", pr.seg.name().c_str(), pr.pid, why);
    pr.cma = false;
    pr.pid = 0;
  }
  pr.view = segment_view::of(pr.seg.data(), pr.geo);
  if (link_on_) {
    // The peer's own position; one that runs without the model is placed by its port.
    const std::uint32_t at = a.port == self_.port ? encode_position(link_pos_) : h->link_position;
    const torus_position to = at != no_position
                                  ? decode_position(at)
                                  : place(link_, link_placement{.by_port = true}, a.port);
    pr.link = link_timing::between(link_, link_pos_, to);
    // RMA events go as mailbox packets, which the model times (an event ring entry has no
    // arrival time of its own).
    pr.event_none = true;
  }
  try {
    peers_.push_back(std::move(pr));
    peer_index_.emplace(key, static_cast<peer_id>(peers_.size() - 1));
  } catch (...) {
    if (peers_.size() > peer_index_.size()) peers_.pop_back();
    return core::status::no_memory;
  }
  out = static_cast<peer_id>(peers_.size() - 1);
  return core::status::ok;
}

peer_id device::sender_lookup(std::uint64_t key, const mailbox_slot& s) noexcept {
  if (auto it = peer_index_.find(key); it != peer_index_.end()) {
    last_sender_key_ = key;
    last_sender_ = it->second;
    return it->second;
  }
  address a{};
  a.node = s.src_node;
  a.pdid = s.pdid;
  a.port = s.src_port;
  peer_id p = no_peer;
  const core::status st = connect(a, p);
  if (core::ok(st)) return p;
  // The sender existed (its packet is here) but its segment cannot be mapped any more: it
  // closed its endpoint (the name is gone, or the header says closed) or it died since it
  // published. Its messages are complete in our memory (the payload in the packet or in our
  // bounce ring), so they are delivered as any dead peer's are (proto's settle_arrivals); an
  // RTS of it fails when proto hears of the death. Dropping them lost completed sends of a
  // peer that sent, then closed before we first looked (MPICH's bsend5 under ch4:ofi).
  if (st == core::status::unreachable || st == core::status::peer_dead) {
    p = add_departed(a);
    if (p != no_peer) return p;
  }
  EXANET_LOG_ONCE(warn, core, "cannot map the segment of sender port %u", s.src_port);
  return no_peer;
}

peer_id device::add_departed(const address& a) noexcept {
  // Bounded: each entry is one forged source port away for a process of our user, and the
  // table lives until close.
  if (departed_ >= max_departed) {
    EXANET_LOG_ONCE(warn, core, "more than %u departed senders: packets of further ones dropped",
                    max_departed);
    return no_peer;
  }
  peer pr;
  pr.addr = a;
  pr.cma = false;
  pr.bounce_none = true;
  pr.event_none = true;
  // No mapping (view.header stays null): every use of a peer's segment checks dead first.
  try {
    peers_.push_back(std::move(pr));
    peer_index_.emplace(peer_key(a.node, a.port), static_cast<peer_id>(peers_.size() - 1));
  } catch (...) {
    if (peers_.size() > peer_index_.size()) peers_.pop_back();
    return no_peer;
  }
  ++departed_;
  mark_dead(peers_.back());
  EXANET_LOG(info, core, "sender port %u is gone; its published messages are delivered", a.port);
  return static_cast<peer_id>(peers_.size() - 1);
}

core::status device::mailbox_reserve(peer_id p, mailbox_reservation& r) noexcept {
  peer& pr = peers_[p];
  if (pr.dead) return core::status::peer_dead;
  if (pr.view.header->closed.load(std::memory_order_relaxed)) [[unlikely]] {
    mark_dead(pr);  // the endpoint closed: a packet now would be lost without a word
    return core::status::peer_dead;
  }
  const std::uint64_t mask = pr.geo.mailbox_slots - 1;
  auto& tail = pr.view.mbox_ctl->tail;
  std::uint64_t pos = tail.load(std::memory_order_relaxed);
  unsigned ahead = 0;  // times the slot at an unchanged tail looked claimed already
  for (;;) {
    mailbox_slot& s = pr.view.mailbox[pos & mask];
    const std::uint64_t seq = s.seq.load(std::memory_order_acquire);
    const auto diff = static_cast<std::int64_t>(seq - pos);
    if (diff == 0) {
      // Sequentially consistent (the same instruction as relaxed on x86): the owner's
      // sleep_prepare sees this claim, or mailbox_publish's look sees its sleeper.
      if (tail.compare_exchange_weak(pos, pos + 1, std::memory_order_seq_cst,
                                     std::memory_order_relaxed)) {
        r.bytes = s.data.data();
        r.handle = &s;
        r.position = pos;
        r.owner = pr.view.header;
        // Link model: stamped now, published with the packet (seq's release in publish). A tail
        // call, out of line: nothing is live across it, so the model costs the path without it
        // this one untaken branch (no register saved for a call that is not made).
        if (link_on_) [[unlikely]]
          return link_stamp(pr, s);
        return core::status::ok;
      }
    } else if (diff < 0) {
      // Full: the consumer has not freed this slot yet. Now and then make sure it still can,
      // so a sender retrying on a dead peer gets an error instead of "again" forever.
      if ((++mailbox_full_ & 1023) == 0 && !pr.seg.owner_alive()) {
        mark_dead(pr);
        return core::status::peer_dead;
      }
      return core::status::again;
    } else {
      // The slot is ahead of the tail we read: another sender claimed it, so the tail has moved
      // (its CAS came before the sequence we acquired). A tail that has not moved means the
      // slot's sequence is corrupt (issue 12): an I/O error, not a spin for ever.
      const std::uint64_t now = tail.load(std::memory_order_relaxed);
      if (now == pos && ++ahead > 64) {
        EXANET_LOG(warn, core, "mailbox of port %u is corrupt (slot %llu ahead of its tail)",
                   pr.addr.port, static_cast<unsigned long long>(pos & mask));
        return core::status::io;
      }
      pos = now;
    }
  }
}

void device::link_idle_poll() noexcept {
  // Every link_yield_every empty polls, not each: a poller alone on its core loses one system
  // call per that many polls; among more processes than cores, the one whose packet is due
  // gets a core within a few of these rounds instead of at the scheduler's next tick.
  if (++link_idle_polls_ % link_yield_every == 0) sched_yield();
}

core::status device::link_stamp(peer& pr, mailbox_slot& s) noexcept {
  s.arrive_ns = pr.link.send(link_now_ns(), packet_bytes);
  return core::status::ok;
}

std::byte* device::bounce_acquire(peer_id p, std::size_t len, std::uintptr_t place_like,
                                  std::uint32_t& ring, std::uint64_t& offset) noexcept {
  peer& pr = peers_[p];
  if (pr.dead || len > pr.geo.bounce_ring_bytes / 2) return nullptr;
  if (pr.bounce_ring == ~0u && (pr.bounce_none || !claim_bounce_ring(pr))) return nullptr;
  ring_desc& d = pr.view.bounce[pr.bounce_ring];
  const std::uint64_t size = pr.geo.bounce_ring_bytes;
  std::byte* const ring_base = pr.view.bounce_data + std::size_t{pr.bounce_ring} * size;
  // The first position from `from` whose byte sits where place_like does within a line (the
  // ring base is page-aligned and the ring a multiple of a line).
  const auto placed = [&](std::uint64_t from) {
    return from + core::line_offset(place_like - reinterpret_cast<std::uintptr_t>(ring_base) - from);
  };
  std::uint64_t head = placed(pr.bounce_head);
  const std::uint64_t room_to_end = size - (head & (size - 1));
  if (room_to_end < len) head = placed(head + room_to_end);  // a message never wraps
  // The tail only grows, so credit seen once is still there: read the receiver's line (a
  // cross-core transfer per message otherwise) only when the known credit does not suffice.
  if (head + len - pr.bounce_tail_seen > size) {
    pr.bounce_tail_seen = d.tail.load(std::memory_order_acquire);
    if (head + len - pr.bounce_tail_seen > size) return nullptr;  // no credit until it consumes
  }
  ring = pr.bounce_ring;
  offset = head;
  return ring_base + (head & (size - 1));
}

void device::bounce_prepare(peer_id p, std::size_t len) noexcept {
  peer& pr = peers_[p];
  if (pr.bounce_ring == ~0u) return;
  const std::uint64_t size = pr.geo.bounce_ring_bytes;
  // The first whole line after the last write (the line it ends in holds bytes the receiver has
  // yet to read); the next lap's start if a write of len would not fit before the ring's end,
  // as bounce_acquire places it.
  std::uint64_t from = (pr.bounce_head + cache_line - 1) & ~std::uint64_t{cache_line - 1};
  if (size - (from & (size - 1)) < len) from = (from | (size - 1)) + 1;
  // Credit known without reading the receiver's line: everything below tail_seen + size is free.
  const std::uint64_t end = std::min(from + len, pr.bounce_tail_seen + size);
  std::byte* const ring_base = pr.view.bounce_data + std::size_t{pr.bounce_ring} * size;
  for (std::uint64_t at = from; at < end; at += cache_line)
    __atomic_store_n(reinterpret_cast<unsigned char*>(ring_base + (at & (size - 1))), 0,
                     __ATOMIC_RELAXED);
}

bool device::claim_bounce_ring(peer& pr) noexcept {
  const std::uint32_t ring = claim_ring(pr.view.bounce, pr.geo.bounce_peers,
                                        ring_owner(self_.node, self_.port), pr.bounce_head);
  if (ring == ~0u) {
    pr.bounce_none = true;
    EXANET_LOG(info, core, "no free bounce ring at port %u: medium messages use rendezvous",
               pr.addr.port);
    return false;
  }
  // The receiver reserved no ring at open (layout.hpp, reserved_at_open): the claimant reserves
  // its ring's pages, through its own descriptor of the receiver's file, before it writes a byte.
  // The claimant knows at once whether it may use the ring, with no packet to the receiver and
  // no wait for its progress, and a /dev/shm that is full shows up here, not as a SIGBUS.
  // The receiver reads a ring only in a range its owner committed (bounce_data), so only after.
  const core::status s =
      pr.seg.reserve(bounce_ring_offset(pr.geo, ring), std::size_t{pr.geo.bounce_ring_bytes});
  if (!core::ok(s)) {
    pr.view.bounce[ring].owner.store(0, std::memory_order_release);  // untouched: give it back
    pr.bounce_none = true;
    ++ring_reserve_failures_;
    EXANET_LOG_ONCE(warn, core, "cannot reserve a %u-byte bounce ring at port %u in /dev/shm "
                    "(%s): medium messages to it use the rendezvous (fi_exanet(7), FOOTPRINT)",
                    pr.geo.bounce_ring_bytes, pr.addr.port,
                    s == core::status::no_memory ? "no space" : "segment gone");
    return false;
  }
  pr.bounce_ring = ring;
  return true;
}

const std::byte* device::bounce_data(peer_id from, std::uint32_t ring, std::uint64_t offset,
                                     std::size_t len) const noexcept {
  const std::uint64_t size = geo_.bounce_ring_bytes;
  if (from >= peers_.size() || ring >= geo_.bounce_peers || len > size ||
      (offset & (size - 1)) + len > size)
    return nullptr;
  // Only the ring the sender holds here, and only bytes not consumed yet, within one ring of
  // credit past them: a packet cannot make this endpoint read another sender's messages or move
  // another's credit. The sender's head is not consulted. It is the sender's own word (it
  // stores it here), so a bound by it stops nothing a sender could not do by storing a larger
  // head; and reading it cost a cross-core transfer per message, on the line the sender has
  // just written, after the packet's own. The packet's release publishes the bytes it names.
  const ring_desc& d = local_.bounce[ring];
  const address& a = peers_[from].addr;
  if ((d.owner.load(std::memory_order_acquire) & ~ring_closing) != ring_owner(a.node, a.port))
    return nullptr;
  const std::uint64_t tail = d.tail.load(std::memory_order_relaxed);  // ours: only we move it
  if (offset < tail || offset - tail > size - len) return nullptr;
  return local_.bounce_data + std::size_t{ring} * size + (offset & (size - 1));
}

bool device::notify_alloc(std::uint32_t& slot, std::uint32_t& gen) noexcept {
  if (free_notify_.empty()) return false;
  slot = free_notify_.back();
  free_notify_.pop_back();
  // Generation 0 means "never written", so it is skipped on wrap-around.
  if (++notify_gen_[slot] == 0) ++notify_gen_[slot];
  gen = notify_gen_[slot];
  windows_[slot] = {gen, 0, 0};  // the notification, and no data yet
  publish_window(slot);
  return true;
}

bool device::window_open(std::uint32_t slot, std::uint64_t va, std::uint64_t len) noexcept {
  if (slot >= windows_.size() || windows_[slot].gen == 0) return false;  // a bug of ours: stays shut
  windows_[slot].va = va;
  windows_[slot].len = len;
  publish_window(slot);
  return true;
}

void device::notify_free(std::uint32_t slot) noexcept {
  if (slot >= windows_.size()) return;
  windows_[slot] = {};  // a late write for this use of the slot is refused from now on
  publish_window(slot);
  free_notify_.push_back(slot);  // capacity reserved at open: never allocates
}

void device::publish_window(std::uint32_t slot) noexcept {
  notify_slot& n = local_.notify[slot];
  const window& w = windows_[slot];
  // Readers check window_gen before and after reading the range: close first, then the range,
  // then the generation that opens it.
  n.window_gen.store(0, std::memory_order_release);
  n.window_va.store(w.va, std::memory_order_relaxed);
  n.window_len.store(w.len, std::memory_order_relaxed);
  n.window_gen.store(w.gen, std::memory_order_release);
}

namespace {
/// [addr, addr + len) inside [base, base + size), written so that nothing overflows.
constexpr bool range_within(std::uint64_t addr, std::uint64_t len, std::uint64_t base,
                            std::uint64_t size) noexcept {
  return addr >= base && addr - base <= size && len <= size - (addr - base);
}
}  // namespace

bool device::remote_write_admitted(const segment_view& v, const geometry& g,
                                   const dma_write& w) noexcept {
  if (w.len > 0) {
    if (w.key_slot != no_key_slot) {
      key_grant kg;
      if (w.key_slot >= g.key_slots || !key_table::read_entry(v.keys[w.key_slot], kg) ||
          !(kg.access & rma_access::remote_write) || !range_within(w.dst_addr, w.len, kg.va, kg.len))
        return false;
    } else {
      if (w.notify_slot >= g.notify_slots) return false;
      const notify_slot& n = v.notify[w.notify_slot];
      const std::uint32_t gen = n.window_gen.load(std::memory_order_acquire);
      const std::uint64_t va = n.window_va.load(std::memory_order_relaxed);
      const std::uint64_t len = n.window_len.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (gen == 0 || gen != w.notify_gen || n.window_gen.load(std::memory_order_relaxed) != gen ||
          !range_within(w.dst_addr, w.len, va, len))
        return false;
    }
  }
  if (w.notify) {
    if (w.notify_slot >= g.notify_slots) return false;
    const std::uint32_t gen = v.notify[w.notify_slot].window_gen.load(std::memory_order_acquire);
    if (gen == 0 || gen != w.notify_gen) return false;
  }
  return true;
}

bool device::local_write_admitted(const staging_packet& sp, bool& may_fault) const noexcept {
  if (sp.key_slot != no_key_slot) {
    if (sp.key_slot >= grants_.size()) return false;
    const grant& gr = grants_[sp.key_slot];
    // The flag first (an acquire): the grant's fields are read only once it says they are
    // published (under FI_PROGRESS_AUTO the registering thread wrote them; TSan saw
    // may_fault read before the flag).
    if (!grant_live(gr)) return false;
    may_fault = gr.g.may_fault;
    return (gr.g.access & rma_access::remote_write) &&
           range_within(sp.dst_addr, sp.len, gr.g.va, gr.g.len);
  }
  if (sp.notify_slot >= windows_.size()) return false;
  const window& w = windows_[sp.notify_slot];
  return w.gen != 0 && w.gen == sp.notify_gen && range_within(sp.dst_addr, sp.len, w.va, w.len);
}

core::status device::notify_record_put(peer_id p, std::uint32_t slot,
                                       const notification& rec) noexcept {
  peer& pr = peers_[p];
  if (pr.dead || pr.view.header->closed.load(std::memory_order_acquire)) {
    mark_dead(pr);
    return core::status::peer_dead;
  }
  if (slot >= pr.geo.notify_slots) return core::status::invalid;
  pr.view.notify[slot].record = rec;  // published by the release store of the notification
  return core::status::ok;
}

void device::notify_write(segment_view& v, std::uint32_t slot, std::uint32_t gen,
                          const notification& data, std::uint64_t arrive_ns) noexcept {
  notify_slot& n = v.notify[slot];
  n.data = data;
  n.arrive_ns = arrive_ns;
  n.gen.store(gen, std::memory_order_release);  // data first, then the flag (DESIGN.md §3)
  // Then the bells the owner watches: the slot's bit, then its word's bit in the summary.
  v.bells->words[slot / 64].fetch_or(1ull << (slot % 64), std::memory_order_release);
  v.bells->summary.fetch_or(1ull << (slot / 64), std::memory_order_seq_cst);
  wake_sleepers(*v.header);
}

void device::wake_owner(segment_header& h) noexcept {
  h.wake_seq.fetch_add(1, std::memory_order_seq_cst);
  core::futex_wake_all(h.wake_seq);
  if (h.wake_socket.load(std::memory_order_seq_cst) == 0) return;
  // The owner's sleepers poll its socket: a byte says "look". Refused (the owner closed), or
  // its queue full (it is readable already): nothing more to do. The name is the one of the
  // segment's own header; a forged one reaches only sockets of this user, with one byte.
  sockaddr_un a;
  try {
    if (!wake_socket_address(wake_socket_name(segment_name(getuid(), h.pdid, h.port)), a)) return;
  } catch (...) {
    return;  // no memory for the name: the sleeper's bound ends its sleep
  }
  const char byte = 1;
  (void)::sendto(wake_sender(), &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL,
                 reinterpret_cast<const sockaddr*>(&a), sizeof a);
}

bool device::sleep_prepare(const std::atomic<std::uint32_t>*& word,
                           std::uint32_t& expected) noexcept {
  segment_header& h = *local_.header;
  if (wake_fd_ >= 0) {
    // Before the announcement: a wake from now on leaves its byte for this sleep's poll.
    char drain[64];
    while (::recv(wake_fd_, drain, sizeof drain, MSG_DONTWAIT) > 0) {
    }
  }
  h.sleepers.fetch_add(1, std::memory_order_seq_cst);
  expected = h.wake_seq.load(std::memory_order_seq_cst);
  // The last look, after the announcement: a packet claimed (even not yet published), a bell or
  // a doorbell rung before it is seen here; one after it finds the sleeper and wakes it.
  if (has_arrivals() || local_.mbox_ctl->tail.load(std::memory_order_seq_cst) != mb_head_ ||
      local_.bells->summary.load(std::memory_order_seq_cst) != 0 ||
      local_.doorbell->rings.load(std::memory_order_seq_cst) != 0) {
    h.sleepers.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  word = &h.wake_seq;
  return true;
}

void device::sleep_end() noexcept {
  local_.header->sleepers.fetch_sub(1, std::memory_order_relaxed);
}

core::status device::dma_post(const dma_write& w, dma_state& st) noexcept {
  // A stream posts more often than it polls: each post also looks at the timed staged write.
  if (probe_.landing) [[unlikely]]
    staged_probe_check();
  peer& pr = peers_[w.peer];
  // A closed endpoint's buffers belong to its application again: nothing may land in them.
  if (pr.dead || pr.view.header->closed.load(std::memory_order_acquire)) {
    mark_dead(pr);
    return core::status::peer_dead;
  }
  if (st.done == 0 && !st.notified && !remote_write_admitted(pr.view, pr.geo, w)) {
    // The target's check, made here before anything moves: the target armed no such window or
    // registration (a stale or forged CTS, RTR or read request). The target checks again itself.
    ++drops_.dma_refused;
    EXANET_LOG_ONCE(warn, core, "DMA write of %zu bytes to 0x%llx at port %u refused: outside "
                    "every window and registration the target armed", w.len,
                    static_cast<unsigned long long>(w.dst_addr), pr.addr.port);
    return core::status::access;
  }
  // The engine is chosen when the write starts and kept for its pieces (dma_state::engine,
  // where 0 means not chosen yet).
  constexpr auto code = [](dma_engine e) { return static_cast<std::uint8_t>(1 + static_cast<int>(e)); };
  if (st.engine == 0) st.engine = code(engine_for(pr, w, st));
  if (st.engine == code(dma_engine::cross_memory_attach)) {
    core::status s = dma_cma(pr, w, st);
    if (s != core::status::permission) return s;
    pr.cma = false;  // refused by the kernel (ptrace policy, seccomp): stage from now on
    st.engine = code(dma_engine::staged);
    EXANET_LOG(warn, core, "process_vm_writev refused for pid %d; copying through shared memory",
               pr.pid);
  }
  return dma_staged(pr, w, st);
}

namespace {
// Whether the write's first byte goes to just ahead of where it comes from, modulo a page
// (dma_engine_choice::is_aliased): its class in the automatic mode.
bool write_aliased(const dma_write& w) noexcept {
  std::size_t skip = w.src_offset;
  for (const iovec& v : w.src) {
    if (skip < v.iov_len)
      return dma_engine_choice::is_aliased(reinterpret_cast<std::uintptr_t>(v.iov_base) + skip,
                                           w.dst_addr);
    skip -= v.iov_len;
  }
  return false;
}
}  // namespace

void device::staged_probe_start(const peer& pr, const dma_write& w, const dma_state& st,
                                std::uint64_t free_mask) noexcept {
  if (probe_.owner == &st) return;  // timed since its first try: the waits are its cost
  const std::uint64_t now = link_now_ns();
  // A write abandoned while timed (its request failed) would hold the probe for ever.
  constexpr std::uint64_t abandoned_ns = 100'000'000;
  if (probe_.owner && now - probe_.start_ns < abandoned_ns) return;
  probe_.owner = nullptr;
  // Alone in the target's staging area: a write behind others would count their copies too.
  const std::uint32_t chunks = pr.geo.staging_chunks;
  const std::uint64_t all = chunks >= 64 ? ~0ull : (1ull << chunks) - 1;
  if ((free_mask & all) != all) return;
  probe_.owner = &st;
  probe_.peer = static_cast<peer_id>(&pr - peers_.data());
  probe_.len = w.len;
  probe_.aliased = write_aliased(w);
  probe_.start_ns = now;
}

// What the automatic mode measured, at FI_LOG_LEVEL=info: one line per size class it wrote.
void device::log_engine_choice() const noexcept {
  if (!core::log_enabled(core::log_level::info, core::log_subsys::core)) return;
  for (const bool aliased : {false, true})
    for (std::size_t k = 0; k < dma_engine_choice::classes; ++k) {
      const std::size_t len = k == 0 ? 0 : dma_engine_choice::smallest_class_bytes << (k - 1);
      const auto& c = engine_choice_;
      const std::uint32_t ns = c.samples(dma_engine::staged, len, dma_use::alone, aliased);
      const std::uint32_t nc = c.samples(dma_engine::cross_memory_attach, len, dma_use::alone, aliased);
      const std::uint32_t nss = c.samples(dma_engine::staged, len, dma_use::stream, aliased);
      if (ns + nc + nss == 0) continue;
      auto name = [](dma_engine e) { return e == dma_engine::staged ? "staged" : "cma"; };
      EXANET_LOG(info, core,
                 "DMA engine, writes of %zu B and more%s: cross-memory attach %.1f ps/B (%u "
                 "samples); staged alone %.1f ps/B (%u samples), in a stream %.1f ps/B (%u): %s "
                 "alone, %s in a stream",
                 len, aliased ? " to just ahead of their source" : "",
                 c.estimate(dma_engine::cross_memory_attach, len, dma_use::alone, aliased), nc,
                 c.estimate(dma_engine::staged, len, dma_use::alone, aliased), ns,
                 c.estimate(dma_engine::staged, len, dma_use::stream, aliased), nss,
                 name(c.preferred_for(len, dma_use::alone, aliased)),
                 name(c.preferred_for(len, dma_use::stream, aliased)));
    }
}


dma_engine device::engine_for(const peer& pr, const dma_write& w, dma_state& st) noexcept {
  if (!pr.cma) return dma_engine::staged;
  if (engine_mode_ == dma_engine_mode::automatic) [[likely]] {
    // Timing needs a clock read per write and a look per poll while a staged write lands: the
    // link model's writes are timed by the model, not by their cost here, so it keeps staging.
    if (link_on_) [[unlikely]] return dma_engine::staged;
    // One of a stream: it starts sooner after the last write ended than half that write took
    // (a ping-pong's next write waits for the answer, which took at least as long).
    const std::uint64_t now = link_now_ns();
    st.started_ns = now;
    const bool stream = last_write_end_ns_ != 0 && now - last_write_end_ns_ < last_write_ns_ / 2;
    return engine_choice_.choose(w.len, stream ? dma_use::stream : dma_use::alone,
                                 write_aliased(w));
  }
  // Told to use cross-memory attach: an answer the target waits for lands through the staging
  // area when the kernel's copy would alias (a read the initiator sent by request for that
  // reason, proto/rma.cpp); the target progresses to take it anyway.
  if (w.awaited && write_aliased(w)) [[unlikely]] return dma_engine::staged;
  return dma_engine::cross_memory_attach;
}

void device::write_timed(dma_engine e, const dma_write& w, std::uint64_t start,
                         std::uint64_t end) noexcept {
  const bool aliased = write_aliased(w);
  engine_choice_.record(e, dma_use::stream, w.len, end - start, aliased);
  // A write by cross-memory attach has landed as it ends: its time is the same alone.
  if (e == dma_engine::cross_memory_attach)
    engine_choice_.record(e, dma_use::alone, w.len, end - start, aliased);
  last_write_end_ns_ = end;
  last_write_ns_ = end - start;
}

void device::staged_probe_check() noexcept {
  const std::uint64_t now = link_now_ns();
  peer& pr = peers_[probe_.peer];
  const std::uint64_t elapsed = now - probe_.start_ns;
  const bool freed = (pr.view.staging_ctl->free_mask.load(std::memory_order_acquire) >>
                      probe_.chunk) & 1;
  // Seen free: kept when this look came soon after the last one (an endpoint that did not poll
  // for a while cannot tell when the chunk came back). A target that leaves it for 100 ms does
  // not progress: staging is slow to this sender now, and the sample says so (it is clamped).
  constexpr std::uint64_t given_up_ns = 100'000'000;
  // A late look still counts while the class has too few samples: the warm-up waits for them.
  if (freed || elapsed > given_up_ns) {
    if (!freed || now - probe_.checked_ns <= std::max<std::uint64_t>(2000, elapsed / 8) ||
        engine_choice_.samples(dma_engine::staged, probe_.len, dma_use::alone, probe_.aliased) <
            dma_engine_choice::warmup_samples)
      engine_choice_.record(dma_engine::staged, dma_use::alone, probe_.len, elapsed,
                            probe_.aliased);
    probe_.landing = false;
  } else if (pr.dead) {
    probe_.landing = false;
  }
  probe_.checked_ns = now;
}

core::status device::dma_cma(peer& pr, const dma_write& w, dma_state& st) noexcept {
  constexpr std::size_t max_iov = 64;
  const bool timed = engine_mode_ == dma_engine_mode::automatic && st.done == 0 && w.len > 0;
  const std::uint64_t start = timed ? link_now_ns() : 0;  // the system calls alone
  while (st.done < w.len) {
    iovec local[max_iov];
    const std::size_t n = core::slice_iov(w.src, w.src_offset + st.done, w.len - st.done, local, max_iov);
    const iovec remote{reinterpret_cast<void*>(w.dst_addr + st.done), w.len - st.done};
    const ssize_t r = process_vm_writev(pr.pid, local, n, &remote, 1, 0);
    if (r < 0) {
      if (errno == EPERM || errno == ENOSYS) return core::status::permission;
      if (errno == ESRCH) {
        pr.exited = true;
        mark_dead(pr);
        return core::status::peer_dead;
      }
      if (errno == EINTR) continue;
      EXANET_LOG(warn, core, "process_vm_writev to pid %d failed: errno %d", pr.pid, errno);
      return errno == EFAULT ? core::status::access : core::status::io;
    }
    if (r == 0) return core::status::io;
    st.done += static_cast<std::size_t>(r);
  }
  if (timed) write_timed(dma_engine::cross_memory_attach, w, start, link_now_ns());
  ++dma_writes_direct_;  // once: the loop above ends only when every byte has landed
  st.landed_at_post = true;
  if (w.notify && !st.notified) {
    // Link model: the data crossed the link, then the 16-byte notification; the receiver sees
    // the write complete at the notification's arrival (the bytes land at once, but nothing
    // reads them before).
    std::uint64_t arrive = 0;
    if (link_on_) [[unlikely]] {
      const std::uint64_t now = link_now_ns();
      pr.link.occupy(now, w.len);
      arrive = pr.link.send(now, notification_bytes);
    }
    notify_write(pr.view, w.notify_slot, w.notify_gen, w.notify_data, arrive);
    st.notified = true;
  } else if (link_on_) [[unlikely]] {
    pr.link.occupy(link_now_ns(), w.len);
  }
  return core::status::ok;
}

namespace {
// How a staged write is cut into pieces. The target copies a piece out while the initiator copies
// the next one in, so a write costs about one piece's copy in plus the whole copy out. A write
// alone in the staging area (a ping-pong) is cut into quarters of at least 16 KiB: a tagged
// ping-pong here went from 1.69 to 1.44 us at 64 KiB and from 1.00 to 0.90 us at 32 KiB (near
// phase), 256 KiB and above unchanged; 8 KiB or 4 KiB pieces were slower (each piece costs a
// mailbox packet and a chunk claim). Writes that find chunks in flight (streaming) take whole
// chunks: quarters there cost 5-10% of the bandwidth at 32-128 KiB, since a piece holds a chunk.
constexpr std::size_t staged_pieces_per_write = 4;
constexpr std::size_t staged_min_piece = 16384;

std::size_t staged_piece_bytes(std::size_t len, std::size_t done, std::size_t chunk_bytes,
                               std::uint64_t free_mask, std::uint32_t chunks) noexcept {
  // Alone: every chunk free when the write starts (a stream's previous write is still being
  // copied out then), and later pieces find at most the write's own earlier pieces in flight.
  const auto free_chunks = static_cast<std::size_t>(std::popcount(free_mask));
  const std::size_t own = done == 0 ? 0 : staged_pieces_per_write;
  if (free_chunks + own < chunks) return chunk_bytes;
  const std::size_t quarter = (len / staged_pieces_per_write + 63) / 64 * 64;
  return std::min(chunk_bytes, std::max(staged_min_piece, quarter));
}
}  // namespace

core::status device::dma_staged(peer& pr, const dma_write& w, dma_state& st) noexcept {
  // Zero-length writes with a notification still need one packet to carry it in order.
  while (st.done < w.len || (w.notify && !st.notified)) {
    auto& mask = pr.view.staging_ctl->free_mask;
    std::uint64_t m = mask.load(std::memory_order_acquire);
    if (st.done == 0 && engine_mode_ == dma_engine_mode::automatic && w.len > 0 &&
        !probe_.landing)
      staged_probe_start(pr, w, st, m);
    const std::size_t n = std::min(
        staged_piece_bytes(w.len, st.done, pr.geo.staging_chunk_bytes, m, pr.geo.staging_chunks),
        w.len - st.done);
    const bool last = st.done + n == w.len;
    std::uint32_t chunk = 0;
    if (n > 0) {
      do {
        if (m == 0) return core::status::again;  // every chunk in flight: wait for the target
        chunk = static_cast<std::uint32_t>(__builtin_ctzll(m));
      } while (!mask.compare_exchange_weak(m, m & ~(1ull << chunk), std::memory_order_acq_rel));
    }
    // Link model: the piece crosses the link before the packet that announces it (which
    // mailbox_reserve stamps); undone if no packet can be sent now.
    const std::uint64_t link_free = pr.link.free_ns;
    if (link_on_) [[unlikely]]
      pr.link.occupy(link_now_ns(), n);
    mailbox_reservation r;
    if (core::status s = mailbox_reserve(static_cast<peer_id>(&pr - peers_.data()), r);
        !core::ok(s)) {
      if (n > 0) mask.fetch_or(1ull << chunk, std::memory_order_release);
      pr.link.free_ns = link_free;
      return s;
    }
    if (n > 0)
      core::copy_from_iov(
          pr.view.staging_data + staging_payload_offset(pr.geo, chunk, w.dst_addr + st.done),
          w.src, w.src_offset + st.done, n);
    staging_packet sp{};
    sp.type = static_cast<std::uint8_t>(device_packet::staged_write);
    sp.notify = (last && w.notify) ? 1 : 0;
    sp.chunk = n > 0 ? chunk : ~0u;
    sp.dst_addr = w.dst_addr + st.done;
    sp.len = n;
    sp.notify_slot = w.notify_slot;
    sp.notify_gen = w.notify_gen;
    sp.notify_data = w.notify_data;
    sp.key_slot = w.key_slot;
    std::memcpy(r.data(), &sp, sizeof sp);
    // Link model: only the piece that notifies waits for its arrival. The others are copied out
    // as soon as the target reaches them, which frees their chunks as the hardware engine, which
    // needs none, would not wait for them; nothing reads the data before the notification.
    if (link_on_ && !sp.notify) [[unlikely]]
      static_cast<mailbox_slot*>(r.handle)->arrive_ns = 0;
    mailbox_publish(r);
    if (st.done == 0) ++dma_writes_staged_;
    if (last && st.started_ns != 0 && n > 0) {
      const std::uint64_t now = link_now_ns();
      write_timed(dma_engine::staged, w, st.started_ns, now);
      if (probe_.owner == &st) {
        probe_.owner = nullptr;
        probe_.landing = true;
        probe_.chunk = chunk;
        probe_.checked_ns = now;
      }
    } else if (last && probe_.owner == &st) [[unlikely]] {
      probe_.owner = nullptr;
    }
    st.done += n;
    if (last && w.notify) st.notified = true;
    if (last && !w.notify) break;
  }
  return core::status::ok;
}

void device::on_device_packet(const mailbox_slot& s) noexcept {
  staging_packet sp;
  std::memcpy(&sp, s.data.data(), sizeof sp);
  if (sp.type != static_cast<std::uint8_t>(device_packet::staged_write) ||
      (sp.chunk != ~0u && (sp.chunk >= geo_.staging_chunks || sp.len > geo_.staging_chunk_bytes))) {
    ++drops_.bad_field;
    EXANET_LOG_ONCE(warn, core, "device packet of type %u, chunk %u, length %llu dropped",
                    static_cast<unsigned>(sp.type), sp.chunk,
                    static_cast<unsigned long long>(sp.len));
    return;
  }
  if (sp.chunk != ~0u) {
    // The emulated engine writes into this process's memory on the sender's behalf, so this
    // process decides where: only into what it armed for the transfer (issue 12).
    const std::byte* from = local_.staging_data + staging_payload_offset(geo_, sp.chunk, sp.dst_addr);
    bool may_fault = false;
    if (local_write_admitted(sp, may_fault)) [[likely]] {
      if (!may_fault) [[likely]] {
        // Mutually aligned by construction (staging_payload_offset): memcpy's fast case.
        std::memcpy(reinterpret_cast<void*>(sp.dst_addr), from, sp.len);
      } else if (!core::copy_or_fault(reinterpret_cast<void*>(sp.dst_addr), from, sp.len)) {
        // A registration not known to be backed, at an address nothing maps: the writer asked
        // for an acknowledgement behind this piece (proto/rma.cpp), which reports it.
        const peer_id p = sender_of(s);
        if (p != no_peer) peers_[p].write_faulted = true;
        EXANET_LOG_ONCE(info, core, "staged write of %llu bytes to 0x%llx found no memory there",
                        static_cast<unsigned long long>(sp.len),
                        static_cast<unsigned long long>(sp.dst_addr));
      }
    } else {
      ++drops_.dma_refused;
      EXANET_LOG_ONCE(warn, core, "staged write of %llu bytes to 0x%llx dropped: outside every "
                      "window and registration armed for it",
                      static_cast<unsigned long long>(sp.len),
                      static_cast<unsigned long long>(sp.dst_addr));
    }
    local_.staging_ctl->free_mask.fetch_or(1ull << sp.chunk, std::memory_order_release);
  }
  if (!sp.notify) return;
  if (sp.notify_slot < windows_.size() && windows_[sp.notify_slot].gen != 0 &&
      windows_[sp.notify_slot].gen == sp.notify_gen) {
    notify_write(local_, sp.notify_slot, sp.notify_gen, sp.notify_data);
  } else {
    ++drops_.notify_refused;
    EXANET_LOG_ONCE(warn, core, "notification for slot %u generation %u dropped: not armed",
                    sp.notify_slot, sp.notify_gen);
  }
}

bool device::mailbox_unstick() noexcept {
  const std::uint64_t tail = local_.mbox_ctl->tail.load(std::memory_order_acquire);
  mailbox_slot& s = local_.mailbox[mb_head_ & (geo_.mailbox_slots - 1)];
  if (tail == mb_head_) {
    stuck_head_ = ~0ull;  // empty: every claimed slot was published and taken
    return false;
  }
  if (s.seq.load(std::memory_order_acquire) == mb_head_ + 1) {
    stuck_head_ = ~0ull;  // the head packet is there; a stuck slot may still be behind it
    return true;
  }
  if (stuck_head_ != mb_head_) {
    stuck_head_ = mb_head_;  // claimed, not published: look again one period later
    return true;
  }
  // Still unpublished a whole period later: its producer is the one that died (a live one
  // publishes a few stores after its claim). Consume the slot unread.
  EXANET_LOG(warn, core, "mailbox slot %llu claimed by a dead producer skipped",
             static_cast<unsigned long long>(mb_head_ & (geo_.mailbox_slots - 1)));
  s.seq.store(mb_head_ + geo_.mailbox_slots, std::memory_order_release);
  ++mb_head_;
  ++stuck_skipped_;
  stuck_head_ = ~0ull;
  return true;
}

void device::link_wait_read(peer& pr, std::size_t len) noexcept {
  // The request crosses to p, the data comes back over the same path (a pair's link is timed
  // in one direction only: this process's; the way back is modelled alike).
  const std::uint64_t now = link_now_ns();
  const std::uint64_t request = pr.link.send(now, packet_bytes);
  const std::uint64_t done =
      request + pr.link.inject_ns + pr.link.serialize_ns(len) + pr.link.latency_ns;
  while (link_now_ns() < done) sched_yield();
}

void device::check_liveness(std::uint64_t now_ms) noexcept {
  // A look because a death was found leaves the periodic schedule alone: a caller that asks once
  // per the same period (proto) is never turned away by it.
  if (now_ms - liveness_checked_ms_ >= liveness_period_ms_) liveness_checked_ms_ = now_ms;
  for (peer& pr : peers_) {
    if (pr.dead) continue;
    if (pr.view.header->closed.load(std::memory_order_acquire) || !pr.seg.owner_alive())
      mark_dead(pr);
  }
  death_since_check_ = false;
}

void device::forget_dead_peer(peer_id p) noexcept {
  peer& pr = peers_[p];
  pr.dead = true;
  pr.forgotten = true;
  // Rings the dead sender held here can never be refilled by it: free them for other senders.
  const std::uint64_t key = ring_owner(pr.addr.node, pr.addr.port);
  for (std::uint32_t i = 0; local_.bounce && i < geo_.bounce_peers; ++i) {
    std::uint64_t expected = key;
    if (!local_.bounce[i].owner.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) {
      expected = key | ring_closing;
      local_.bounce[i].owner.compare_exchange_strong(expected, 0, std::memory_order_acq_rel);
    }
  }
  for (std::uint32_t i = 0; local_.events && i < geo_.event_rings; ++i) {
    std::uint64_t expected = key;
    local_.events[i].owner.compare_exchange_strong(expected, 0, std::memory_order_acq_rel);
  }
  // process_vm_writev/readv say ESRCH once the dying process has dropped its memory, a moment
  // before the kernel closes its files and so frees the segment's lock. Found that way, the
  // lock is waited for a little (a forked child sharing the file can keep it held: bounded).
  // Without the wait such a segment was left behind (peer_death_matrix, once in CI).
  for (int i = 0; pr.exited && i < exited_lock_wait_steps && pr.view.header && pr.seg.owner_alive();
       ++i) {
    const timespec step{0, exited_lock_wait_step_ns};
    nanosleep(&step, nullptr);
  }
  if (pr.view.header && !pr.seg.owner_alive()) {
    // The dead process cannot unlink its own segment; whoever notices first does (only while
    // the name still names the file we checked: never a successor's).
    pr.seg.unlink_name();
  }
}

}  // namespace exanet::dev::emu
