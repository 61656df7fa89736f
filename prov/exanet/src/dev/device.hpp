// SPDX-License-Identifier: BSD-2-Clause
// The Exanet device interface (DESIGN.md §3): everything a protocol may ask of a device, and
// nothing else. Two ExaNeST primitives underlie it: a packetizer that delivers 64-byte packets FIFO
// per (sender, receiver) pair into the receiver's mailbox, tagged with the sender's PDID; and a DMA
// engine that writes local data to a remote virtual address, then a 16-byte notification. The rest
// is what the engine and the target keep around those two: notification slots and their windows,
// bounce rings, the RMA protection table and access events, lost peers as events, drop counts.
//
// `device` below is the contract, grouped by primitive. A backend is chosen at compile time
// (dev/backend.hpp: dev/emu today), so the data path makes no virtual call; proto/ holds it as
// `interface_of<backend>`, which exposes the concept's operations and no others, so a protocol
// that calls anything a backend happens to have besides fails to compile (and ci/check_layers.sh
// keeps the two lists equal).
#pragma once
#include <sys/uio.h>

#include <array>
#include <atomic>
#include <concepts>
#include <string>
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/status.hpp"
#include "dev/address.hpp"

namespace exanet::dev {

inline constexpr std::size_t packet_bytes = 64;  // ExaNeST packetizer unit
inline constexpr std::size_t notification_bytes = 16;

/// Byte 0 of every packet is its type. Types at or above this value belong to the device itself
/// (emulation of engine internals) and never reach the protocols.
inline constexpr std::uint8_t first_device_packet_type = 0xF0;

using packet = std::array<std::byte, packet_bytes>;
using notification = std::array<std::byte, notification_bytes>;

/// A connected peer endpoint, dense from 0 in the order peers become known.
using peer_id = std::uint32_t;
inline constexpr peer_id no_peer = ~peer_id{0};

/// What a backend can do, for protocol selection at setup.
struct caps {
  bool dma_read = false;        // the engine can read remote memory (ExaNeST cannot)
  bool direct_user_write = false;  // DMA lands in user memory without staging (CMA available)
  // The longest message the bounce ring carries to every peer, beyond the ring's own half
  // (dev/net: what one lower message takes whole; SIZE_MAX: no other bound). The protocols
  // send longer ones by rendezvous, so that a receive posted first answers with its RTR.
  std::size_t bounce_max = SIZE_MAX;
};

/// Names no registration: a write that carries it must land in a window its target armed.
inline constexpr std::uint32_t no_key_slot = ~std::uint32_t{0};

/// One DMA write: local iovecs (from byte `src_offset`) to a remote address, optionally followed
/// by a notification into one of the target's notification slots.
///
/// The target is the authority on where bytes may land (as the ExaNeST engine checks at the
/// target): a write goes either through a registration (`key_slot`, RMA) and must fall inside it
/// with remote-write rights, or names a notification slot and generation (`notify_slot`,
/// `notify_gen`, used for that even without `notify`) whose window the target armed for this
/// transfer (a receive buffer, a read's landing piece). Anything else is refused and counted.
struct dma_write {
  peer_id peer = no_peer;
  std::span<const iovec> src;
  std::size_t src_offset = 0;
  std::uint64_t dst_addr = 0;     // virtual address in the target process
  std::uint64_t dst_base = 0;     // where the window or registration it lands in starts, as the
                                  // target announced it; backends whose transport addresses by
                                  // offset (dev/net over tcp) write at dst_addr - dst_base
  std::size_t len = 0;
  bool notify = false;
  std::uint32_t notify_slot = 0;
  std::uint32_t notify_gen = 0;   // names this use of the slot, so a late write cannot satisfy a
                                  // later reuse of it
  notification notify_data{};
  std::uint32_t key_slot = no_key_slot;  // RMA: the target's protection-table slot
  // The notification may reach the target before dma_post has returned ok here (a backend
  // whose write completes only on the target's acknowledgement, dev/net, sends it right behind
  // the data): the caller's protocol has nothing the target sends back on it that needs this
  // write finished first. Without it, the notification follows the write's completion.
  bool notify_ahead = false;
  // An answer to a request of the target's (a read by request, an atomic's result), which the
  // target is progressing to take: a backend with more than one engine may move it with the one
  // that is fast at its placement whatever engine it was told to use (the emulation stages such
  // a write to just ahead of its source rather than have the kernel copy it, 4K aliasing).
  bool awaited = false;
  // A packet of the caller's protocol that the target should take right behind the data, and
  // only if the write landed where the target's answer said (an RMA write's report, with its
  // remote CQ data): a backend that checks such writes at the target (dev/net's write_check)
  // sends it with the check of the last piece, and the target's device delivers or withdraws
  // it as it answers the check. Then dma_state::delivered is set when dma_post returns ok; a
  // backend that does not (the emulation) leaves it clear, and the caller sends it after.
  const packet* deliver_if_landed = nullptr;
};

/// Rights a memory registration grants to remote peers (bits of key_grant::access).
namespace rma_access {
inline constexpr std::uint32_t remote_read = 1u << 0;
inline constexpr std::uint32_t remote_write = 1u << 1;
}  // namespace rma_access

/// One registration an endpoint exposes to RMA: an entry of its protection table, which the
/// engine checks at the target before any byte moves.
struct key_grant {
  std::uint64_t key = 0;
  std::uint64_t va = 0;         // first registered byte, in the owner's address space
  std::uint64_t len = 0;
  std::uint64_t addr_base = 0;  // the remote address that names va (va itself with virtual
                                // addressing; otherwise the base offsets count from)
  std::uint32_t access = 0;     // rma_access bits
  bool events = false;          // the owner counts accesses: initiators post an event each time
  bool may_fault = false;       // not known to be backed (fi_mr(3), FI_MR_ALLOCATED unset): the
                                // owner touches it only by checked copies (core/checked_memory),
                                // and initiators only by paths that report a fault to them
};

/// The part of grant g that [addr, addr + len) names, checked for range and rights: the check
/// every backend makes for the target (written so that nothing overflows).
inline bool grant_admits(const key_grant& g, std::uint64_t addr, std::uint64_t len,
                         std::uint32_t need, std::uint64_t& va) noexcept {
  if ((g.access & need) != need) return false;
  if (addr < g.addr_base) return false;
  const std::uint64_t off = addr - g.addr_base;
  if (off > g.len || len > g.len - off) return false;
  va = g.va + off;
  return true;
}

/// Where a checked RMA access lands at the target.
struct rma_target {
  std::uint64_t va = 0;
  std::uint32_t key_slot = 0;  // names the grant in events sent back to the owner
  bool events = false;
  bool may_fault = false;      // key_grant::may_fault
};

/// grant_admits for g, held in slot, and where it admits, the rest of what the access needs.
inline bool grant_target(const key_grant& g, std::uint32_t slot, std::uint64_t addr,
                         std::uint64_t len, std::uint32_t need, rma_target& out) noexcept {
  if (!grant_admits(g, addr, len, need, out.va)) return false;
  out.key_slot = slot;
  out.events = g.events;
  out.may_fault = g.may_fault;
  return true;
}

/// Packets and writes a device refused, by reason (the target's checks).
struct drop_counts {
  std::uint64_t foreign_pdid = 0;    // a packet of another protection domain
  std::uint64_t bad_field = 0;       // a device packet naming a chunk, length or type that is not
  std::uint64_t dma_refused = 0;     // a write outside every window and registration armed for it
  std::uint64_t notify_refused = 0;  // a notification for a slot not armed with that generation
};

/// Which way a device reaches its peers (dev/hybrid chooses per peer at connect), for the
/// counters that show it: how many peers each path serves, and the bytes the network carried.
struct route_counts {
  std::uint64_t peers_shared_memory = 0;  // peers connected through this host's shared memory
  std::uint64_t peers_network = 0;        // peers connected over the network backend
  std::uint64_t network_bytes_sent = 0;   // handed to the lower provider: packets, ring data,
                                          // DMA writes (after its acceptance)
  std::uint64_t network_messages_sent = 0;  // lower messages it accepted (DMA writes apart)
  std::uint64_t network_sleepable = 0;  // 1: the network side can wake a sleeper (enable)
  // The emulated engine: DMA writes by cross-memory attach and through the staging area.
  std::uint64_t dma_writes_direct = 0;
  std::uint64_t dma_writes_staged = 0;
};

/// Progress of one DMA write; a backend that stages data may need several calls.
struct dma_state {
  std::size_t done = 0;  // bytes of the payload handed to the engine
  bool notified = false;
  // Set by the engine when the whole write was in the target's memory as dma_post returned
  // (cross-memory attach): RMA events may then overtake the mailbox (proto/rma.cpp). A staged
  // write lands when the target copies it out, behind the packets that announce it.
  bool landed_at_post = false;
  std::uint8_t engine = 0;    // the backend's: which of its engines took this write (0: not yet)
  std::uint64_t started_ns = 0;  // the backend's: when the write started (timing its engine)
  void* in_flight = nullptr;  // the backend's: a lower operation this write waits for (dev/net)
  bool delivered = false;     // dma_write::deliver_if_landed reached the target's protocol
  // Set by the engine when every byte of the write is with a transport that delivers it ahead of
  // any packet sent to the peer afterwards, before the write completes here (dev/net: its last
  // piece is posted on the peer's connection, which keeps sends after writes in order): a
  // message after it need not wait for its completion (FI_ORDER_SAW, proto/rma.cpp).
  bool ahead_of_later_packets = false;
};

/// How many of each resource an endpoint's device is opened with. Every backend sizes its
/// mailbox, notification slots, rings and protection table from these; one that has no use for a
/// field (staging, where writes land directly) ignores it. The emulated backend stores this struct
/// in its segment header as is (dev/emu/layout.hpp checks its layout).
struct geometry {
  std::uint32_t mailbox_slots = 1024;  // power of two
  std::uint32_t notify_slots = 1024;
  std::uint32_t bounce_peers = 64;
  std::uint32_t bounce_ring_bytes = 262144;  // power of two
  std::uint32_t staging_chunks = 32;         // at most 64: one free-mask word
  std::uint32_t staging_chunk_bytes = 65536;
  std::uint32_t key_slots = 2048;        // power of two: registrations one endpoint can expose
  std::uint32_t event_rings = 64;        // at most 64: one doorbell word
  std::uint32_t event_ring_entries = 256;  // power of two
};

/// FI_EXANET_DMA_ENGINE: the emulated engine's way of moving a write. automatic: each write the
/// way measured cheaper now, per size class (dev/emu/dma_engine_choice.hpp).
enum class dma_engine_mode : std::uint8_t { automatic, staged, cross_memory_attach };
/// The parameter's words for each mode.
constexpr const char* dma_engine_name(dma_engine_mode m) noexcept {
  return m == dma_engine_mode::automatic ? "auto"
         : m == dma_engine_mode::staged  ? "staged"
                                         : "cma";
}

/// What device::open needs.
struct open_params {
  address self{};       // port 0: choose a free automatic port
  geometry geo{};
  // How the emulated engine moves each DMA write (FI_EXANET_DMA_ENGINE); other backends have
  // one engine and ignore it. staged: never write user memory directly (also for hosts where
  // the kernel refuses cross-memory attach).
  dma_engine_mode dma_engine = dma_engine_mode::cross_memory_attach;
  // A backend that learns of lost peers only by asking about each (the emulation: the process
  // and the endpoint's closed flag) asks at most this often, however often take_lost_peers is
  // called; one whose transport reports lost peers (a connection error) ignores it.
  std::uint32_t liveness_period_ms = 200;
  /// For a backend that carries the primitives to other hosts over one of libfabric's own
  /// network providers (dev/net); the others ignore it.
  struct network {
    static constexpr std::uint32_t default_receive_bytes = 1 << 18;
    // Which peers a device that has both backends (dev/hybrid) reaches over the network: none
    // (the network side is not opened), those of other hosts, or every peer (to test or
    // measure the network path on one host; every process of a job must choose the same).
    enum class use : std::uint8_t { off, other_hosts, every_peer } reach = use::off;
    std::string provider = "tcp";  // the lower provider (fi_info's prov_name, first of its stack)
    std::string node;              // local address to bind (empty: the lower provider's first)
    std::uint32_t credits = 128;   // packets a sender may have unconsumed at a receiver
    std::uint32_t receive_bytes = default_receive_bytes;  // each of the two multi-receive buffers
    // A peer silent for lost_after_ms / 4 is pinged, one silent for lost_after_ms is lost. The
    // lower provider hides a dead peer (tcp;ofi_rxm retries the connection for ever and fails
    // nothing), so silence is the signal; a peer that closes says bye and is lost at once. A live
    // peer answers only when it drives its device, so lost_after_ms must exceed the longest time
    // a process computes without calling libfabric.
    std::uint32_t lost_after_ms = 30000;
    // Each per-peer bounce ring (power of two): the medium bytes a sender may have unconsumed
    // at one receiver. Larger than the shared-memory one: a window of messages must cover the
    // round trip its credit takes back over the network.
    std::uint32_t ring_bytes = 1 << 19;
  } net{};
};

/// What a sleeper watches besides sleep_prepare's futex word (sleep_fd): a descriptor that
/// turns readable (poll(2)) when an arrival comes that does not change the word, such as a
/// message through a lower network provider, which rings no word of ours.
struct sleep_descriptor {
  int fd = -1;               // -1: none; the word alone covers every arrival
  bool word_in_use = true;   // peers may still change the word: a sleeper that polls fd must
                             // look at the word too (a futex cannot be polled)
  int word_fd = -1;          // readable once a peer changed the word since sleep_prepare (the
                             // emulation's wake socket): polled beside fd, the word need not
                             // be looked at
  std::uint32_t look_again_ms = 0;  // not 0: some arrival readies nothing here (a lower
                                    // provider whose fd cannot be trusted): the sleeper comes
                                    // back within this many milliseconds to progress
};

/// A claimed, not yet published packet slot in a peer's mailbox: the protocol writes the packet
/// in place (no copy through a temporary), then publishes it. Between the two the slot is the
/// sender's alone; a reservation is published exactly once.
struct mailbox_reservation {
  // packet_bytes writable bytes: the packet as the peer will read it. The sender may write only
  // the bytes its receiver reads (wire::write_prefix); the others keep what the backend gave:
  // whatever the slot last held in the emulation (its receiver's own memory), zeros where
  // packets leave the host (dev/net), so nothing of an earlier packet to another peer travels.
  std::byte* bytes = nullptr;
  void* handle = nullptr;      // the backend's: which slot was claimed
  std::uint64_t position = 0;  // the backend's: the slot's place in the peer's arrival order
  void* owner = nullptr;       // the backend's: whose mailbox (to wake it if it sleeps)
  // The sender's, set before publish: another packet of the same message to the same peer is
  // published next, in the same call (an eager train). A backend that sends each packet as a
  // message of a lower transport may then send them together (dev/net: one lower message); the
  // emulation ignores it. A send abandoned after such a packet leaves nothing stuck: the
  // backend sends what it held at its next poll or send.
  bool more = false;
  // The sender's, set before publish: the application learns that this packet's message went
  // only through a later read of a CQ or counter (a completion or a count), never from the call
  // itself (FI_INJECT without completion, say). A backend whose lower transport pays per message
  // may then keep it for its next lower message to the same peer, as long as it sends what it
  // keeps at its next poll (dev/net's bursts); such a backend counts itself in held_for_poll
  // meanwhile. The emulation ignores it.
  bool reported = false;
  std::byte* data() const noexcept { return bytes; }
};

/// Devices holding published packets (mailbox_reservation::reported) that leave at their next
/// poll. A read that would hand out completions already written without polling (fi/cq.cpp)
/// polls while this is nonzero: a held packet's message may be the one it reports, and the
/// application may then stop calling us. Relaxed: read and written by the thread that owns the
/// device's endpoint at the threading level without locks, which alone takes that shortcut.
inline std::atomic<std::uint32_t> held_for_poll{0};

/// Room claimed in a peer's bounce ring (bounce_reserve), to be filled by bounce_write: where the
/// bytes will be, as the packet naming them says it to the receiver. The protocol never writes
/// into the ring itself (a backend on a network cannot hand out the receiver's memory): the
/// handle is the backend's alone (the emulation's place in the mapped ring, found once at reserve
/// time; an A/B at 1 KiB showed recomputing it in bounce_write cost a few ns).
struct ring_space {
  std::uint32_t ring = 0;    // the ring this sender holds at the receiver
  std::uint64_t offset = 0;  // the first byte's position in the ring's byte sequence
  void* handle = nullptr;    // the backend's: where bounce_write puts the bytes
};

/// The reporting half of take_lost_peers, for backends whose peers carry dead, forgotten and
/// lost_reported flags: hands each dead peer that is not forgotten to on_lost, once. The flag is
/// set before on_lost, so a nested call does not report it again; on_lost may grow `peers`.
template <class Peers, class F>
bool report_lost_peers(Peers& peers, F&& on_lost) noexcept {
  bool any = false;
  for (peer_id p = 0; p < peers.size(); ++p) {
    auto& pr = peers[p];
    if (!pr.dead || pr.forgotten || pr.lost_reported) continue;
    pr.lost_reported = true;
    any = true;
    on_lost(p);
  }
  return any;
}

// Archetypes: a concept can require a template operation (poll_mailbox(budget, F&&)) only by
// calling it with some argument; these stand for every callable of the documented signature.
// Declared, never defined: they appear in unevaluated operands only.
struct packet_handler_archetype {
  void operator()(peer_id from, const packet& pkt) const noexcept;
};
struct event_handler_archetype {
  void operator()(peer_id from, const notification& n) const noexcept;
};
struct slot_handler_archetype {
  void operator()(std::uint32_t slot) const noexcept;
};
struct lost_peer_handler_archetype {
  void operator()(peer_id lost) const noexcept;
};

// The contract, grouped by primitive. Every operation is noexcept (the data path never throws);
// "again" always means back-pressure, never loss; a peer_id is one connect() or a poll gave.
// The emulated backend's declarations (dev/emu/device.hpp) add how it does each.
template <class D>
concept device =
    std::default_initializable<D> &&
    requires(D& d, const D& cd, const open_params& op, const address& a, peer_id p, peer_id& pout,
             const packet& pk, mailbox_reservation& r, const mailbox_reservation& cr,
             std::size_t n, bool flag, std::uint32_t u32, std::uint32_t& u32out,
             std::uint64_t u64, std::uint64_t& u64out, std::uintptr_t place, const dma_write& w,
             dma_state& st, std::span<const iovec> dst, std::span<const iovec> src,
             ring_space& rs, const ring_space& crs, notification& nout,
             const notification& nin, const key_grant& g, key_grant& gout, rma_target& tout,
             const std::atomic<std::uint32_t>*& watch_word,
             packet_handler_archetype on_packet, event_handler_archetype on_event,
             slot_handler_archetype on_slot, lost_peer_handler_archetype on_lost) {
      // ---- lifetime, addressing, capabilities -------------------------------------------------
      // open(params): this endpoint's mailbox, slots, rings and table; close(): gives them back.
      { d.open(op) } noexcept -> std::same_as<core::status>;
      { d.close() } noexcept -> std::same_as<void>;
      // enable(sleepers), once the endpoint above is complete (its completion objects bound),
      // before its first connect: sleepers says whether anything may ever sleep on this device
      // (sleep_prepare, arm_poll_wake). A backend whose sleep support costs it on every arrival
      // may leave it out when not (dev/net: a lower CQ without wait fd); sleep_prepare then
      // says false and sleepers poll. io: the backend could not start.
      { d.enable(flag) } noexcept -> std::same_as<core::status>;
      { cd.local_address() } noexcept -> std::same_as<const address&>;  // what fi_getname gives
      { cd.capabilities() } noexcept -> std::same_as<caps>;  // for protocol selection at setup
      // ---- peers ------------------------------------------------------------------------------
      // connect(address, out): the peer_id of an endpoint; unreachable if it does not exist,
      // access if it belongs to another PDID. Ids are dense from 0 (peer_count()).
      { d.connect(a, pout) } noexcept -> std::same_as<core::status>;
      { cd.peer_address(p) } noexcept -> std::same_as<const address&>;
      { cd.peer_count() } noexcept -> std::same_as<std::size_t>;
      // ---- packetizer -> mailbox: 64-byte packets, FIFO per (sender, receiver) ------------------
      // reserve(peer, r): a slot in the peer's mailbox (again when full; peer_dead); the packet is
      // written at r.data(), then publish(r) sends it stamped with our PDID. send(): both at once.
      { d.mailbox_reserve(p, r) } noexcept -> std::same_as<core::status>;
      { d.mailbox_publish(cr) } noexcept -> std::same_as<void>;
      { d.mailbox_send(p, pk) } noexcept -> std::same_as<core::status>;
      // poll(budget, on_packet(peer_id, const packet&)): up to budget packets in arrival order;
      // other PDIDs' packets are dropped (drops()); an unknown sender comes as no_peer.
      { d.poll_mailbox(n, on_packet) } noexcept -> std::same_as<std::size_t>;
      // has_arrivals(): true if poll_mailbox, poll_events, take_notify_bells or take_dead_found
      // may have something to hand over (false: none has; a few loads, no side effect). Lets an
      // idle progress call return without calling each.
      { cd.has_arrivals() } noexcept -> std::same_as<bool>;
      // credit_coming(peer), after mailbox_reserve said again: true when the packet credit will
      // come back as the receiver progresses and it is worth waiting for (the caller says
      // "again" to its own caller) rather than taking a protocol that needs no credit (the
      // emulation: false at once, as for the ring; dev/net: true for as long as the credit is
      // out, since its other protocols need the receiver's progress too).
      { d.mailbox_credit_coming(p) } noexcept -> std::same_as<bool>;
      // After a peer died: skips a slot it claimed and never published (false once unstuck).
      { d.mailbox_unstick() } noexcept -> std::same_as<bool>;
      // Whether what was published to a peer has left this process, for a send that completes
      // when posted (fi_cq(3), FI_TRANSMIT_COMPLETE: the operation no longer depends on local
      // resources; under manual progress the application may stop calling us once it has its
      // completion). sent_mark(peer): a mark behind every packet and ring byte published to the
      // peer so far. sent_out(peer, mark): ok once all of it left this process; again while
      // some waits in a transport's queue, which only our progress empties (the backend makes
      // sure a poll will tell it); peer_dead if the peer died with some of it never handed to
      // the transport. A backend whose writes land in the peer's memory at once (the
      // emulation) says ok always.
      { cd.sent_mark(p) } noexcept -> std::same_as<std::uint64_t>;
      { d.sent_out(p, u64) } noexcept -> std::same_as<core::status>;
      // The receiver's intake bound (proto/intake.cpp): held, senders send no message packets.
      { d.set_intake_held(flag) } noexcept -> std::same_as<void>;
      { cd.peer_intake_held(p) } noexcept -> std::same_as<bool>;
      // ---- bounce rings: receiver memory, one ring per sender, credits in bytes (medium) -------
      // reserve(peer, len, place_like, space): room for len bytes, placed at place_like's offset
      // within a cache line, or false (no ring or no credit: the caller takes another protocol);
      // nothing changes until write(peer, space, src, len) puts the bytes there and makes them
      // the receiver's (a remote ring write; the packet naming them follows).
      { d.bounce_reserve(p, n, place, rs) } noexcept -> std::same_as<bool>;
      // credit_coming(peer, len), after bounce_reserve said false: true when the room is short
      // only of credit the receiver will return as it progresses, and it is worth waiting for
      // (the caller says "again" to its own caller, who progresses and retries) rather than
      // taking another protocol; false once such a wait has lasted long enough that the
      // receiver may not be progressing (a backend where another protocol costs no more says
      // false at once: the emulation).
      { d.bounce_credit_coming(p, n) } noexcept -> std::same_as<bool>;
      { d.bounce_write(p, crs, src, n) } noexcept -> std::same_as<void>;
      // prepare(peer, len), after the packet naming a write was published: another write of
      // about len bytes is likely to follow; a backend may make its room cheaper to write now,
      // while the sender would otherwise wait for an answer (the emulation does, dev/emu), or
      // ignore it.
      { d.bounce_prepare(p, n) } noexcept -> std::same_as<void>;
      // Receiver: data(from, ring, offset, len) is nullptr unless `from` produced that range in
      // its ring here; consume(from, ring, end) gives the credit back (the sender names the ring,
      // a backend that keeps one ring per known sender finds it by `from`).
      { cd.bounce_data(p, u32, u64, n) } noexcept -> std::same_as<const std::byte*>;
      { d.bounce_consume(p, u32, u64) } noexcept -> std::same_as<void>;
      // ---- notification slots: where a DMA write's 16 bytes land ------------------------------
      // alloc(slot, gen): a free slot and a fresh generation (false: none free); window_open(slot,
      // va, len): the only range a write naming (slot, gen) may land in (false: the backend could
  // not open it, e.g. a lower provider refused to register the range; the slot stays armed for
  // its notification alone, and the caller must not tell a peer about the range); test(slot, gen, out):
      // true once that notification landed; free(slot) disarms it.
      { d.notify_alloc(u32out, u32out) } noexcept -> std::same_as<bool>;
      { d.window_open(u32, u64, u64) } noexcept -> std::same_as<bool>;
      { cd.notify_test(u32, u32, nout) } noexcept -> std::same_as<bool>;
      { d.notify_free(u32) } noexcept -> std::same_as<void>;
      // take_notify_bells(on_slot(slot)): the slots that landed since the last call; false (one
      // load) when none did.
      { d.take_notify_bells(on_slot) } noexcept -> std::same_as<bool>;
      // A 16-byte landing record the sender puts beside a peer's slot before the write
      // (record_put), read by the owner once the notification landed (record).
      { cd.notify_record(u32) } noexcept -> std::same_as<notification>;
      { d.notify_record_put(p, u32, nin) } noexcept -> std::same_as<core::status>;
      // ---- DMA engine: write local data to a remote address, then notify ---------------------
      // post(write, state): again = partly done (state says how far), call again; access: the
      // target refused the range; peer_dead. state.landed_at_post says whether the write had
      // landed when post returned ok (else only when the peer polls).
      { d.dma_post(w, st) } noexcept -> std::same_as<core::status>;
      // take_write_fault(peer): whether a write of that peer that landed since the last call
      // found its range (in a may_fault grant) unmapped and was dropped; asked when the peer's
      // acknowledgement request arrives behind it, so the fault reaches the writer (proto/rma.cpp).
      { d.take_write_fault(p) } noexcept -> std::same_as<bool>;
      // Reads, where the backend can (ExaNeST cannot): can_read(peer), read(peer, va, dst iovecs,
      // dst offset, len); permission: refused, and the peer counts as unreadable from then on.
      { cd.can_read(p) } noexcept -> std::same_as<bool>;
      { d.dma_read(p, u64, dst, n, n) } noexcept -> std::same_as<core::status>;
      // ---- RMA: the protection table, access checks, access events -----------------------------
      // Owner: publish(grant, slot) exposes a registration (exists, no_memory); revoke(slot);
      // key_at(slot, out): the grant a slot holds (false once revoked).
      { d.key_publish(g, u32out) } noexcept -> std::same_as<core::status>;
      { d.key_revoke(u32) } noexcept -> std::same_as<void>;
      { cd.key_at(u32, gout) } noexcept -> std::same_as<bool>;
      // rma_check(peer, key, addr, len, rights, out): the check of an access at the peer's table;
      // grant_check: the same at our own table, for an access a peer asked us to carry out.
      // access: unknown or revoked key, range outside the registration, or a right missing.
      // again (rma_check): the backend asked the peer about this key and its answer has not
      // come yet; nothing was done, call again after polling. A backend that cannot read the
      // peer's table asks once per key, keeps the answer, and still has the target's transport
      // refuse what the table no longer grants (then the write fails with access).
      { d.rma_check(p, u64, u64, u64, u32, tout) } noexcept -> std::same_as<core::status>;
      { cd.grant_check(u64, u64, u64, u32, tout) } noexcept -> std::same_as<core::status>;
      // event_post(peer, 16 bytes): one access event to the owner (again: its ring is full;
      // not_supported: none for us); poll_events(budget, on_event(peer_id, const notification&)).
      { d.event_post(p, nin) } noexcept -> std::same_as<core::status>;
      { d.poll_events(n, on_event) } noexcept -> std::same_as<std::size_t>;
      // events_ahead(): true when poll_events has something. Asked before a mailbox packet is
      // handled: an event a peer posted before that packet is then handled first, as the peer
      // ordered them (a backend whose events travel in line with its packets says false).
      { cd.events_ahead() } noexcept -> std::same_as<bool>;
      // ---- lost peers, as events: a dead peer becomes error completions, never a hang -------
      // take_lost_peers(now_ms, on_lost(peer_id)): each peer the device has learned is gone (its
      // process died, its endpoint closed, its host is unreachable) and that is not forgotten
      // yet, once; false when it reported none. Where it learns is the backend's business: the
      // emulation asks the kernel and the peer's segment here, at most once per open_params'
      // liveness_period_ms by the caller's monotonic clock now_ms; a network backend reports the
      // connection errors and lost keepalives its transport gave it, and needs no clock.
      // Protocols ask only while something waits on a peer, so an idle endpoint costs nothing.
      // take_dead_found(): true once after an operation found a peer gone (peer_dead) that is
      // not forgotten yet; one load, for the data path, which then calls take_lost_peers at once.
      // forget(peer) frees what we hold there (forgotten(peer) says so from then on).
      { d.take_lost_peers(u64, on_lost) } noexcept -> std::same_as<bool>;
      { d.take_dead_found() } noexcept -> std::same_as<bool>;
      { cd.peer_forgotten(p) } noexcept -> std::same_as<bool>;
      { d.forget_dead_peer(p) } noexcept -> std::same_as<void>;
      // ---- what the target's checks refused, by reason -----------------------------------------
      { cd.drops() } noexcept -> std::same_as<const drop_counts&>;
      { cd.routes() } noexcept -> std::same_as<route_counts>;
      // ---- sleeping while idle (FI_PROGRESS_AUTO's thread, blocking waits) ---------------------
      // sleep_prepare(word, expected): announces a sleeper and gives the futex word (in memory
      // peers write) to sleep on and its value now; false, announcing nothing, if an arrival is
      // pending or on its way, or if the backend cannot wake sleepers (its owner then polls).
      // It is the device's last look, made after the announcement: the caller need not ask
      // has_arrivals() first (a network backend can only answer "maybe" there).
      // Peers that make an arrival visible to an announced sleeper change the word and wake it.
      // sleep_end() withdraws the announcement after the sleep. sleep_fd(), after a
      // sleep_prepare that said true: a descriptor to poll beside the word for the arrivals
      // that change no word (a network backend's, readied by its transport: sleep_prepare
      // asked the transport whether it may block on it), or none; with look_again_ms when
      // some arrival readies nothing (a transport's fd found untrustworthy): the sleeper
      // comes back that soon.
      { d.sleep_prepare(watch_word, u32out) } noexcept -> std::same_as<bool>;
      { d.sleep_end() } noexcept -> std::same_as<void>;
      { cd.sleep_fd() } noexcept -> std::same_as<sleep_descriptor>;
      // A sleeper that cannot wait on the word at all: an application blocked in its own
      // poll(2) on a wait fd after fi_trywait. arm_poll_wake(), before sleep_prepare: makes
      // every arrival for an announced sleeper also ready a descriptor (the emulation binds its
      // wake socket on first use); false if the backend cannot, and the application must then
      // not block. poll_fd(), after a sleep_prepare that said true once armed: the descriptors
      // that cover every arrival (word_in_use false: the word need not be looked at).
      { d.arm_poll_wake() } noexcept -> std::same_as<bool>;
      { cd.poll_fd() } noexcept -> std::same_as<sleep_descriptor>;
    };

/// A backend as protocols hold it: the operations of `device` and nothing else. Private
/// inheritance with using-declarations: the calls are the backend's own (inline where the
/// backend's are, no forwarding, no indirection), but a name not listed here is inaccessible,
/// so proto/ cannot come to depend on what only one backend has. Keep this list equal to the
/// concept's (ci/check_layers.sh compares them).
template <device D>
class interface_of : private D {
 public:
  // lifetime, addressing, capabilities
  using D::open;
  using D::close;
  using D::enable;
  using D::local_address;
  using D::capabilities;
  // peers
  using D::connect;
  using D::peer_address;
  using D::peer_count;
  // packetizer -> mailbox
  using D::mailbox_reserve;
  using D::mailbox_publish;
  using D::mailbox_send;
  using D::poll_mailbox;
  using D::has_arrivals;
  using D::mailbox_unstick;
  using D::sent_mark;
  using D::sent_out;
  using D::set_intake_held;
  using D::peer_intake_held;
  using D::mailbox_credit_coming;
  // bounce rings
  using D::bounce_reserve;
  using D::bounce_credit_coming;
  using D::bounce_write;
  using D::bounce_prepare;
  using D::bounce_data;
  using D::bounce_consume;
  // notification slots
  using D::notify_alloc;
  using D::window_open;
  using D::notify_test;
  using D::notify_free;
  using D::take_notify_bells;
  using D::notify_record;
  using D::notify_record_put;
  // DMA engine
  using D::dma_post;
  using D::take_write_fault;
  using D::can_read;
  using D::dma_read;
  // RMA
  using D::key_publish;
  using D::key_revoke;
  using D::key_at;
  using D::rma_check;
  using D::grant_check;
  using D::event_post;
  using D::poll_events;
  using D::events_ahead;
  // lost peers
  using D::take_lost_peers;
  using D::take_dead_found;
  using D::peer_forgotten;
  using D::forget_dead_peer;
  // drops
  using D::drops;
  using D::routes;
  // sleeping while idle
  using D::sleep_prepare;
  using D::sleep_end;
  using D::sleep_fd;
  using D::arm_poll_wake;
  using D::poll_fd;
};

}  // namespace exanet::dev
