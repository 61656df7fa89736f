// SPDX-License-Identifier: BSD-2-Clause
// What a segment must be before the emulated device believes it (issue 12 part 2), and what
// creating one reserves (part 8): geometry_error's bounds field by field; segments with a bad
// mode, a lying geometry or an owner pid that does not map them are refused at connect without
// a crash; reclaim never unlinks a file it refuses; the umask cannot weaken a segment's mode;
// the pages used from the start are allocated at open, and each bounce ring's when a sender
// claims it; a ring that cannot be reserved is given back untouched (in a small private tmpfs,
// as root). The tests that need another user, or a small /dev/shm under the whole provider,
// are real-process programs (fabtests/conformance/segment_users.c, small_shm.c).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "dev/emu/device.hpp"

namespace exanet::dev::emu {
namespace {

const pid_t g_test_pid = getpid();
std::uint32_t test_pdid(std::uint32_t salt) { return 7000 + (g_test_pid % 10000) * 16 + salt; }
std::uint32_t test_port(std::uint32_t salt) { return 1000 + (g_test_pid % 1000) * 16 + salt; }

params make_params(std::uint32_t pdid) {
  params p;
  p.self.pdid = pdid;
  p.geo.mailbox_slots = 64;
  p.geo.notify_slots = 64;
  p.geo.bounce_peers = 4;
  p.geo.bounce_ring_bytes = 1 << 16;
  p.geo.staging_chunks = 4;
  p.geo.staging_chunk_bytes = 4096;
  p.geo.key_slots = 16;
  p.geo.event_rings = 2;
  p.geo.event_ring_entries = 16;
  return p;
}

std::string shm_path(const std::string& name) { return "/dev/shm" + name; }

bool file_exists(const std::string& name) {
  struct stat st {};
  return stat(shm_path(name).c_str(), &st) == 0;
}

// A segment made by hand under a's name space at `port`: the header a real endpoint would
// write (copied from `like`), then changed by `edit`; created with `mode`. The test keeps it
// mapped, so owner_pid = getpid() is a process that maps it, and holds the creator's lock on
// it, so its owner is alive until unlock().
struct handmade {
  std::string name;
  void* base = nullptr;
  std::size_t bytes = 0;
  int fd = -1;
  ~handmade() {
    if (base) munmap(base, bytes);
    if (fd >= 0) close(fd);
    if (!name.empty()) shm_unlink(name.c_str());
  }
  void unlock() { flock(fd, LOCK_UN); }
  segment_header& header() { return *static_cast<segment_header*>(base); }
};

template <class Edit>
void make_segment(handmade& h, const device& like, std::uint32_t port, mode_t mode, Edit edit) {
  const address a = like.local_address();
  h.name = segment_name(getuid(), a.pdid, port);
  shm_unlink(h.name.c_str());
  const int fd = shm_open(h.name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0) << h.name;
  h.fd = fd;
  ASSERT_EQ(flock(fd, LOCK_EX), 0);
  ASSERT_EQ(fchmod(fd, mode), 0);
  shm_segment own;  // the real endpoint's header, as a template
  ASSERT_EQ(shm_segment::open(segment_name(getuid(), a.pdid, a.port), own), core::status::ok);
  h.bytes = own.size();
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(h.bytes)), 0);
  h.base = mmap(nullptr, h.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(h.base, MAP_FAILED);
  std::memcpy(h.base, own.data(), h.bytes);
  h.header().port = port;
  h.header().owner_pid = getpid();
  edit(h.header());
}

address at_port(const device& d, std::uint32_t port) {
  address a = d.local_address();
  a.port = port;
  return a;
}

TEST(geometry_error, accepts_the_defaults_and_the_bounds) {
  const geometry g{};
  EXPECT_EQ(geometry_error(g, offsets_of(g).total), nullptr);
  geometry small{2, 1, 0, 4096, 1, 1, 1, 0, 1};
  EXPECT_EQ(geometry_error(small, offsets_of(small).total), nullptr);
  geometry big{1u << 22, 4096, 1u << 16, 1u << 30, 64, 1u << 30, 1u << 16, 64, 1u << 20};
  EXPECT_EQ(geometry_error(big, offsets_of(big).total), nullptr);
  EXPECT_NE(geometry_error(g, offsets_of(g).total - 1), nullptr) << "larger than the mapping";
  EXPECT_NE(geometry_error(g, 0), nullptr);
}

TEST(geometry_error, refuses_each_field_out_of_its_bounds) {
  struct bad_case {
    const char* what;
    void (*edit)(geometry&);
  };
  const bad_case cases[] = {
      {"mailbox_slots 0 (mask 2^32-1)", [](geometry& g) { g.mailbox_slots = 0; }},
      {"mailbox_slots 1", [](geometry& g) { g.mailbox_slots = 1; }},
      {"mailbox_slots 3", [](geometry& g) { g.mailbox_slots = 3; }},
      {"mailbox_slots 2^23", [](geometry& g) { g.mailbox_slots = 1u << 23; }},
      {"mailbox_slots 2^31", [](geometry& g) { g.mailbox_slots = 1u << 31; }},
      {"notify_slots 0", [](geometry& g) { g.notify_slots = 0; }},
      {"notify_slots 4097", [](geometry& g) { g.notify_slots = 4097; }},
      {"notify_slots 2^32-1", [](geometry& g) { g.notify_slots = ~0u; }},
      {"bounce_peers 2^16+1", [](geometry& g) { g.bounce_peers = (1u << 16) + 1; }},
      {"bounce_peers 2^32-1", [](geometry& g) { g.bounce_peers = ~0u; }},
      {"bounce_ring_bytes 0", [](geometry& g) { g.bounce_ring_bytes = 0; }},
      {"bounce_ring_bytes 2048", [](geometry& g) { g.bounce_ring_bytes = 2048; }},
      {"bounce_ring_bytes 3*4096", [](geometry& g) { g.bounce_ring_bytes = 3 * 4096; }},
      {"bounce_ring_bytes 2^31", [](geometry& g) { g.bounce_ring_bytes = 1u << 31; }},
      {"staging_chunks 0", [](geometry& g) { g.staging_chunks = 0; }},
      {"staging_chunks 65", [](geometry& g) { g.staging_chunks = 65; }},
      {"staging_chunk_bytes 0 (a staged write that never advances)",
       [](geometry& g) { g.staging_chunk_bytes = 0; }},
      {"staging_chunk_bytes 2^31", [](geometry& g) { g.staging_chunk_bytes = 1u << 31; }},
      {"key_slots 0", [](geometry& g) { g.key_slots = 0; }},
      {"key_slots 3", [](geometry& g) { g.key_slots = 3; }},
      {"key_slots 2^17", [](geometry& g) { g.key_slots = 1u << 17; }},
      {"event_rings 65", [](geometry& g) { g.event_rings = 65; }},
      {"event_ring_entries 0", [](geometry& g) { g.event_ring_entries = 0; }},
      {"event_ring_entries 5", [](geometry& g) { g.event_ring_entries = 5; }},
      {"event_ring_entries 2^21", [](geometry& g) { g.event_ring_entries = 1u << 21; }},
  };
  for (const bad_case& c : cases) {
    geometry g{};
    c.edit(g);
    // Mapped as large as anything could be: only the field's own bound can refuse it.
    EXPECT_NE(geometry_error(g, ~std::size_t{0}), nullptr) << c.what;
  }
}

TEST(emu_segment, a_new_segment_is_mode_0600_whatever_the_umask_and_reserved_at_open) {
  const mode_t old = umask(0277);  // would leave 0400: a segment its own peers cannot map
  device d;
  const core::status s = d.open(make_params(test_pdid(1)));
  umask(old);
  ASSERT_EQ(s, core::status::ok);
  const address a = d.local_address();
  struct stat st {};
  ASSERT_EQ(stat(shm_path(segment_name(getuid(), a.pdid, a.port)).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, geteuid());
  // Every page used from the start allocated now (posix_fallocate): none can raise SIGBUS when
  // first touched. The bounce rings are left to their claimants.
  const geometry g = make_params(0).geo;
  EXPECT_EQ(static_cast<std::size_t>(st.st_size), offsets_of(g).total);
  EXPECT_EQ(static_cast<std::size_t>(st.st_blocks) * 512, reserved_at_open(g));
  device peer;
  ASSERT_EQ(peer.open(make_params(test_pdid(1))), core::status::ok);
  peer_id p;
  EXPECT_EQ(peer.connect(a, p), core::status::ok);
}

TEST(emu_segment, a_well_formed_segment_of_ours_is_served) {
  // The positive control for the refusals below: the same hand-made segment, unchanged.
  device d;
  ASSERT_EQ(d.open(make_params(test_pdid(2))), core::status::ok);
  handmade h;
  make_segment(h, d, test_port(2), 0600, [](segment_header&) {});
  peer_id p;
  ASSERT_EQ(d.connect(at_port(d, test_port(2)), p), core::status::ok);
  packet pk{};
  pk[0] = std::byte{1};
  EXPECT_EQ(d.mailbox_send(p, pk), core::status::ok);
  const segment_view v = segment_view::of(h.base, h.header().geo);
  EXPECT_EQ(v.mailbox[0].seq.load(), 1u) << "the packet landed in the hand-made mailbox";
}

TEST(emu_segment, a_segment_with_another_mode_is_refused) {
  device d;
  ASSERT_EQ(d.open(make_params(test_pdid(3))), core::status::ok);
  for (mode_t mode : {mode_t{0666}, mode_t{0644}, mode_t{0400}, mode_t{0700}}) {
    handmade h;
    make_segment(h, d, test_port(3), mode, [](segment_header&) {});
    peer_id p;
    EXPECT_EQ(d.connect(at_port(d, test_port(3)), p), core::status::access) << std::oct << mode;
    const segment_view v = segment_view::of(h.base, h.header().geo);
    EXPECT_EQ(v.mailbox[0].seq.load(), 0u);
  }
}

TEST(emu_segment, a_lying_geometry_is_refused_not_a_crash) {
  device d;
  ASSERT_EQ(d.open(make_params(test_pdid(4))), core::status::ok);
  struct lie {
    const char* what;
    void (*edit)(segment_header&);
  };
  const lie lies[] = {
      {"mailbox_slots 0", [](segment_header& h) { h.geo.mailbox_slots = 0; }},
      {"mailbox_slots 3", [](segment_header& h) { h.geo.mailbox_slots = 3; }},
      {"staging_chunk_bytes 0", [](segment_header& h) { h.geo.staging_chunk_bytes = 0; }},
      {"bounce rings past the end", [](segment_header& h) { h.geo.bounce_peers = 1u << 16; }},
      {"notify_slots 2^32-1", [](segment_header& h) { h.geo.notify_slots = ~0u; }},
  };
  for (const lie& l : lies) {
    handmade h;
    make_segment(h, d, test_port(4), 0600, l.edit);
    peer_id p = no_peer;
    EXPECT_EQ(d.connect(at_port(d, test_port(4)), p), core::status::unreachable) << l.what;
  }
}

// Liveness is the creator's lock on the file: with it held, any pid in the header leaves the
// peer reachable, and a pid that is not a process of ours mapping the file here only turns CMA
// off for it; with it released, the peer is dead and its file reclaimed, whatever the pid says.
TEST(emu_segment, an_owner_is_alive_while_it_holds_its_lock_and_an_untrusted_pid_only_loses_cma) {
  device d;
  ASSERT_EQ(d.open(make_params(test_pdid(5))), core::status::ok);
  const pid_t other = fork();  // ours, alive, but it never maps the hand-made file
  ASSERT_GE(other, 0);
  if (other == 0) {
    pause();
    _exit(0);
  }
  struct reaper {  // also when an assertion below returns early
    pid_t pid;
    ~reaper() {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } reap_other{other};
  for (pid_t pid : {getpid(), other, pid_t{1}, pid_t{0}, pid_t{-5}, pid_t{0x7ffffff0}}) {
    for (bool locked : {true, false}) {
      handmade h;
      make_segment(h, d, test_port(5), 0600, [](segment_header&) {});
      h.header().owner_pid = pid;
      device c;  // a fresh one each time: connect remembers peers
      params pc = make_params(test_pdid(5));
      pc.liveness_period_ms = 0;  // looks at every call
      ASSERT_EQ(c.open(pc), core::status::ok);
      EXPECT_TRUE(file_exists(h.name)) << "open() reclaimed a live owner's file; pid " << pid;
      if (!locked) h.unlock();  // after open(), which would reclaim it at once
      peer_id p = no_peer;
      if (!locked) {
        EXPECT_EQ(c.connect(at_port(d, test_port(5)), p), core::status::peer_dead) << pid;
        EXPECT_FALSE(file_exists(h.name)) << "a dead owner's file is reclaimed; pid " << pid;
        continue;
      }
      ASSERT_EQ(c.connect(at_port(d, test_port(5)), p), core::status::ok) << pid;
      EXPECT_EQ(c.can_read(p), pid == getpid()) << "CMA only to a pid that maps the file: " << pid;
      EXPECT_EQ(c.mailbox_send(p, packet{}), core::status::ok) << pid;
      EXPECT_FALSE(c.take_lost_peers(0, [](peer_id) {})) << pid;
      EXPECT_TRUE(file_exists(h.name));
    }
  }
}

// The smallest pid from `from` on that names no process in this PID namespace.
pid_t free_pid_here(pid_t from) {
  for (pid_t p = from; p < 30000; ++p)
    if (kill(p, 0) != 0 && errno == ESRCH) return p;
  return -1;
}

// An endpoint in another PID namespace (a container sharing /dev/shm, `unshare --pid`) records
// a pid that here names nobody. CI found this: upstream fabtests ran in such a namespace, and an
// exanet process outside it took their live segments for stale ones and unlinked them. Here
// the inner endpoint gets exactly such a pid; outside, a new endpoint must leave its segment
// alone, connect and exchange packets with it (without CMA), and learn of its death only when
// it dies. Needs CAP_SYS_ADMIN for the namespace (skipped otherwise).
TEST(emu_segment, an_endpoint_in_another_pid_namespace_is_alive_reachable_and_never_reclaimed) {
  alarm(60);
  const pid_t inner_pid = free_pid_here(2);
  ASSERT_GT(inner_pid, 1) << "no free pid here";
  int to_parent[2], init_pipe[2];
  ASSERT_EQ(pipe(to_parent), 0);
  ASSERT_EQ(pipe(init_pipe), 0);
  const pid_t outer = fork();  // enters the namespace; its first child is the namespace's init
  ASSERT_GE(outer, 0);
  if (outer == 0) {
    close(to_parent[0]);
    close(init_pipe[0]);
    if (unshare(CLONE_NEWPID) != 0) _exit(77);
    const pid_t init = fork();
    if (init != 0) {
      // init's pid as we number it. It is reparented when we exit; killing it empties the
      // namespace (the kernel kills every process in it).
      if (init < 0 || write(init_pipe[1], &init, sizeof init) != sizeof init) _exit(3);
      _exit(0);
    }
    close(init_pipe[1]);
    // pid 1 now. Spend pids until the next child gets inner_pid, which names nobody outside.
    for (;;) {
      const pid_t c = fork();
      if (c < 0) _exit(4);
      if (c == 0) {
        if (getpid() != inner_pid) _exit(0);
        device d;
        if (d.open(make_params(test_pdid(9))) != core::status::ok) _exit(5);
        const address a = d.local_address();
        if (write(to_parent[1], &a, sizeof a) != sizeof a) _exit(6);
        // Echo each packet back to the address its payload names, for ever.
        for (;;) {
          address back{};
          bool got = false;
          d.poll_mailbox(1, [&](peer_id, const packet& pk) {
            std::memcpy(static_cast<void*>(&back), pk.data() + 8, address::v1_bytes);
            got = true;
          });
          peer_id to = no_peer;
          if (got && d.connect(back, to) == core::status::ok) {
            packet reply{};
            reply[0] = std::byte{0x5a};
            (void)d.mailbox_send(to, reply);
          }
          usleep(1000);
        }
      }
      waitpid(c, nullptr, 0);
      if (c >= inner_pid) {
        pause();  // the endpoint runs; this init lives until killed, and takes it along
        _exit(0);
      }
    }
  }
  close(to_parent[1]);
  close(init_pipe[1]);
  int st = 0;
  waitpid(outer, &st, 0);
  pid_t init = -1;
  const bool forked = read(init_pipe[0], &init, sizeof init) == sizeof init;
  close(init_pipe[0]);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 77) GTEST_SKIP() << "unshare(CLONE_NEWPID) not permitted";
  ASSERT_TRUE(forked && init > 0) << "no init in the new PID namespace";
  struct namespace_killer {  // whatever fails below, nothing is left running
    pid_t init;
    ~namespace_killer() { kill(init, SIGKILL); }
  } killer{init};
  address inner{};
  const bool started = read(to_parent[0], &inner, sizeof inner) == sizeof inner;
  close(to_parent[0]);
  ASSERT_TRUE(started) << "the endpoint in the new PID namespace did not start";
  const std::string name = segment_name(getuid(), inner.pdid, inner.port);
  {
    shm_segment seg;
    ASSERT_EQ(shm_segment::open(name, seg), core::status::ok);
    ASSERT_EQ(static_cast<segment_header*>(seg.data())->owner_pid, inner_pid)
        << "the header should hold the namespace's pid, which names nobody here";
  }

  params pp = make_params(test_pdid(9));
  pp.liveness_period_ms = 0;
  device d;  // open() reclaims stale segments: the live one must stay
  ASSERT_EQ(d.open(pp), core::status::ok);
  ASSERT_TRUE(file_exists(name)) << "a live endpoint's segment was reclaimed";
  peer_id p = no_peer;
  ASSERT_EQ(d.connect(inner, p), core::status::ok);
  EXPECT_FALSE(d.can_read(p)) << "its pid here is nobody's: no CMA";
  packet ask{};
  const address self = d.local_address();
  std::memcpy(ask.data() + 8, &self, address::v1_bytes);  // a version 1 name: 16 bytes
  ASSERT_EQ(d.mailbox_send(p, ask), core::status::ok);
  bool echoed = false;
  for (int i = 0; i < 5000 && !echoed; ++i) {
    d.poll_mailbox(1, [&](peer_id from, const packet& pk) {
      echoed = from == p && pk[0] == std::byte{0x5a};
    });
    if (!echoed) usleep(1000);
  }
  EXPECT_TRUE(echoed) << "no answer from the endpoint in the other PID namespace";
  EXPECT_FALSE(d.take_lost_peers(0, [](peer_id) {})) << "alive";

  // Its death is seen (its lock went with it), once, and its segment reclaimed.
  ASSERT_EQ(kill(init, SIGKILL), 0);
  std::vector<peer_id> lost;
  for (int i = 0; i < 5000 && lost.empty(); ++i) {
    d.take_lost_peers(0, [&](peer_id q) { lost.push_back(q); });
    if (lost.empty()) usleep(1000);
  }
  EXPECT_EQ(lost, std::vector<peer_id>{p}) << "the death in the other namespace was not seen";
  d.forget_dead_peer(p);
  EXPECT_FALSE(file_exists(name));
  alarm(0);
}

TEST(emu_segment, a_chosen_port_taken_by_a_file_not_ours_is_a_clear_error_and_untouched) {
  device d;
  ASSERT_EQ(d.open(make_params(test_pdid(6))), core::status::ok);
  handmade h;
  make_segment(h, d, test_port(6), 0666, [](segment_header&) {});
  h.header().owner_pid = 0x7ffffff0;  // "dead": the old code reclaimed the port by unlinking
  params p = make_params(test_pdid(6));
  p.self.port = test_port(6);
  device chosen;
  EXPECT_EQ(chosen.open(p), core::status::access);
  EXPECT_TRUE(file_exists(h.name));
}

TEST(emu_segment, reclaim_never_unlinks_a_file_it_refuses) {
  device d;
  ASSERT_EQ(d.open(make_params(test_pdid(7))), core::status::ok);
  handmade h;
  make_segment(h, d, test_port(7), 0644, [](segment_header&) {});
  h.header().owner_pid = 0x7ffffff0;  // looks stale
  device another;  // open() reclaims stale segments of our uid
  ASSERT_EQ(another.open(make_params(test_pdid(7))), core::status::ok);
  EXPECT_TRUE(file_exists(h.name)) << "reclaim unlinked a file that open() refuses to map";
}

// Bytes of d's segment allocated in /dev/shm now.
std::size_t allocated(const address& a) {
  struct stat st {};
  if (stat(shm_path(segment_name(getuid(), a.pdid, a.port)).c_str(), &st) != 0) return 0;
  return static_cast<std::size_t>(st.st_blocks) * 512;
}

// Claim, reserve, release (issue 12 part 8): a bounce ring's pages are allocated when a sender
// claims it, once; a ring given back keeps them for the next claimant.
TEST(emu_segment, each_claimed_bounce_ring_is_reserved_once_by_its_claimant) {
  const params p = make_params(test_pdid(8));
  const std::size_t at_open = reserved_at_open(p.geo), ring = p.geo.bounce_ring_bytes;
  device receiver;
  ASSERT_EQ(receiver.open(p), core::status::ok);
  const address r = receiver.local_address();
  ASSERT_EQ(allocated(r), at_open);
  std::uint32_t ring_index = 0;
  std::uint64_t offset = 0;
  {
    device first;
    ASSERT_EQ(first.open(p), core::status::ok);
    peer_id to;
    ASSERT_EQ(first.connect(r, to), core::status::ok);
    EXPECT_EQ(allocated(r), at_open) << "connecting reserves nothing";
    std::byte* dst = first.bounce_acquire(to, 100, 0, ring_index, offset);
    ASSERT_NE(dst, nullptr);
    EXPECT_EQ(allocated(r), at_open + ring) << "the claimed ring, and only it";
    std::memset(dst, 0x5a, 100);
    first.bounce_commit(to, offset + 100);
    peer_id from;
    ASSERT_EQ(receiver.connect(first.local_address(), from), core::status::ok);
    const std::byte* seen = receiver.bounce_data(from, ring_index, offset, 100);
    ASSERT_NE(seen, nullptr);
    EXPECT_EQ(seen[99], std::byte{0x5a});
    receiver.bounce_consume(ring_index, offset + 100);
    device second;
    ASSERT_EQ(second.open(p), core::status::ok);
    ASSERT_EQ(second.connect(r, to), core::status::ok);
    std::uint32_t other = 0;
    ASSERT_NE(second.bounce_acquire(to, 100, 0, other, offset), nullptr);
    EXPECT_NE(other, ring_index);
    EXPECT_EQ(allocated(r), at_open + 2 * ring);
    EXPECT_EQ(first.ring_reserve_failures() + second.ring_reserve_failures(), 0u);
  }  // both senders close and give their rings back
  device third;
  ASSERT_EQ(third.open(p), core::status::ok);
  peer_id to;
  ASSERT_EQ(third.connect(r, to), core::status::ok);
  std::uint32_t again = ~0u;
  ASSERT_NE(third.bounce_acquire(to, 100, 0, again, offset), nullptr);
  EXPECT_EQ(again, ring_index) << "the first free ring, already reserved";
  EXPECT_EQ(allocated(r), at_open + 2 * ring) << "a reused ring is not reserved twice";
}

// In a /dev/shm with room for two endpoints' reserved parts and one ring: the second ring
// claimed fails to reserve, is given back untouched, and its sender does not try again (the
// medium protocol then takes the rendezvous). Nobody touches an unreserved page: that would
// be SIGBUS here. Needs a private mount namespace (root); skipped otherwise.
TEST(emu_segment, a_ring_that_cannot_be_reserved_is_released_untouched) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for a private /dev/shm";
  const params p = make_params(test_pdid(9));
  const std::size_t at_open = reserved_at_open(p.geo), ring = p.geo.bounce_ring_bytes;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    alarm(20);
    if (unshare(CLONE_NEWNS) != 0) _exit(77);
    char opts[64];
    std::snprintf(opts, sizeof opts, "size=%zu,mode=1777", 2 * at_open + ring);
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0)
      _exit(77);
    int failed = 0;
    const auto check = [&](bool ok, const char* what) {
      if (!ok) {
        std::fprintf(stderr, "child: %s\n", what);
        ++failed;
      }
    };
    device a, b;
    check(a.open(p) == core::status::ok && b.open(p) == core::status::ok, "both endpoints open");
    peer_id ab = 0, ba = 0;
    check(a.connect(b.local_address(), ab) == core::status::ok, "connect a to b");
    check(b.connect(a.local_address(), ba) == core::status::ok, "connect b to a");
    std::uint32_t r = 0;
    std::uint64_t off = 0;
    std::byte* dst = a.bounce_acquire(ab, 4096, 0, r, off);
    check(dst != nullptr, "a's ring at b fits");
    if (dst) std::memset(dst, 1, 4096);  // every page of it is there
    check(allocated(b.local_address()) == at_open + ring, "b holds its part and one ring");
    check(b.bounce_acquire(ba, 4096, 0, r, off) == nullptr, "b's ring at a does not fit");
    check(b.ring_reserve_failures() == 1, "the failure is counted");
    check(allocated(a.local_address()) == at_open, "a failed reservation leaves nothing");
    shm_segment seen;
    check(shm_segment::open(segment_name(getuid(), p.self.pdid, a.local_address().port), seen) ==
              core::status::ok, "map a's segment");
    if (seen) {
      const segment_view v = segment_view::of(seen.data(), p.geo);
      for (std::uint32_t i = 0; i < p.geo.bounce_peers; ++i)
        check(v.bounce[i].owner.load() == 0, "the claim was given back");
    }
    check(b.bounce_acquire(ba, 4096, 0, r, off) == nullptr && b.ring_reserve_failures() == 1,
          "no second attempt");
    _exit(failed ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_FALSE(WIFSIGNALED(status)) << "killed by signal " << WTERMSIG(status);
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "no private mount namespace here";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace exanet::dev::emu
