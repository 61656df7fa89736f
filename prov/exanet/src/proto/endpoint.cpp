// SPDX-License-Identifier: BSD-2-Clause
// Endpoint lifetime, posting entry points and the helpers every protocol file shares:
// matching glue, completion writing, control-packet backlog and unexpected buffers.
#include "proto/endpoint.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/iov.hpp"
#include "core/log.hpp"

namespace exanet::proto {
namespace {

std::uint32_t next_pow2(std::size_t v) noexcept {
  std::uint32_t p = 1;
  while (p < v && p < (1u << 30)) p <<= 1;
  return p;
}

constexpr std::uint64_t unresolved = unknown_source - 1;

// FI_EXANET_PROTO_INFO: like UCX_PROTO_INFO, printed because the user asked, whatever
// FI_LOG_LEVEL says; to stderr, where libfabric's log goes, so it never mixes with a program's
// own output; in one write, so the tables of the ranks of a job do not interleave.
[[gnu::cold, gnu::noinline]] void print_protocols(const protocol_table& t,
                                                  std::uint32_t port) noexcept {
  char header[96];
  std::snprintf(header, sizeof header,
                "exanet-proto pid=%d port=%u: protocol by operation and size",
                static_cast<int>(getpid()), port);
  const std::string text = t.format(header);
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

core::status endpoint::open(const config& cfg, const dev::address& src) noexcept {
  cfg_ = cfg;
  dev::open_params p;
  p.self = src;
  p.self.pdid = cfg.pdid;
  p.self.node = cfg.node;
  p.geo.mailbox_slots = next_pow2(cfg.mailbox_slots);
  p.geo.notify_slots = static_cast<std::uint32_t>(cfg.notify_slots);
  p.geo.bounce_peers = static_cast<std::uint32_t>(cfg.bounce_peers);
  p.geo.bounce_ring_bytes = next_pow2(cfg.bounce_ring_bytes);
  p.geo.key_slots = next_pow2(cfg.mr_keys);
  p.geo.event_rings = static_cast<std::uint32_t>(cfg.event_rings);
  p.dma_engine = cfg.dma_engine;
  p.liveness_period_ms = cfg.dead_peer_check_ms;
  p.net.reach = cfg.network;
  try {
    p.net.provider = cfg.network_provider.data();
    p.net.node = cfg.network_node.data();
  } catch (...) {
    return core::status::no_memory;
  }
  p.net.lost_after_ms = cfg.network_lost_after_ms;
  p.net.ring_bytes = next_pow2(cfg.network_ring_bytes);
  use_protocols(protocol_table::build(selection_inputs::from(cfg, p.geo.bounce_ring_bytes)));
  if (core::status s = open_intake(); !core::ok(s)) return s;
  if (core::status s = dev_.open(p); !core::ok(s)) return s;
  // A device whose bounce path stops short of the table's medium_max (the network backend:
  // what one lower message takes whole) has the longer messages go by rendezvous, where a
  // receive posted first answers with its RTR; left medium, they found no room at send time and
  // took the sender-initiated one (RTS, CTS, write: a round trip more).
  if (const std::size_t most = dev_.capabilities().bounce_max; most < cfg_.medium_max) {
    selection_inputs in = selection_inputs::from(cfg, p.geo.bounce_ring_bytes);
    in.medium_max = most;
    use_protocols(protocol_table::build(in));
  }
  try {
    ri_by_slot_.assign(p.geo.notify_slots, nullptr);
  } catch (...) {
    dev_.close();
    return core::status::no_memory;
  }
  if (cfg_.profile && !prof_) {
    prof_.reset(new (std::nothrow) profile);  // about 50 KiB, once per endpoint
    if (!prof_) EXANET_LOG(warn, core, "FI_EXANET_PROFILE: out of memory; this endpoint is not profiled");
  }
  open_ = true;
  if (cfg_.proto_info) print_protocols(protocols_, dev_.local_address().port);
  return core::status::ok;
}

void endpoint::use_protocols(const protocol_table& t) noexcept {
  protocols_ = t;
  cfg_.medium_max = protocols_.medium_max();  // as the table clamped it
  for (const queue_kind k : {queue_kind::msg, queue_kind::tagged}) {
    const size_row& row = protocols_.row(k == queue_kind::tagged ? op_kind::tagged_send : op_kind::send,
                                         situation::transmit_complete);
    const size_class& first = row.classes[0];
    eager_below_[static_cast<int>(k)] =
        row.count > 0 && first.proto == protocol::eager
            ? std::min(first.max_len, wire::eager_payload_max) + 1
            : 0;
    train_below_[static_cast<int>(k)] =
        eager_below_[static_cast<int>(k)] > 0 && row.count > 1 &&
                row.classes[1].proto == protocol::eager_train
            ? std::min(row.classes[1].max_len, wire::eager_train_limit) + 1
            : 0;
    // The medium class only where it starts at the size the two paths above stop at, so the
    // three together take exactly the sizes the table gives them.
    const std::size_t eager = eager_below_[static_cast<int>(k)];
    const std::size_t train = train_below_[static_cast<int>(k)];
    const std::size_t next = train > 0 ? 2 : 1;
    direct_below_[static_cast<int>(k)] = train;
    if (eager > 0 && row.count > next && row.classes[next].proto == protocol::medium &&
        row.classes[next - 1].max_len + 1 == std::max(eager, train)) {
      direct_below_[static_cast<int>(k)] = row.classes[next].max_len + 1;
      medium_fallback_[static_cast<int>(k)] = row.classes[next].fallback;
    }
  }
}

void endpoint::close() noexcept {
  if (!open_) return;
  open_ = false;
  dev_.close();
  for (match::matcher& m : matchers_)
    m.for_each_unexpected([&](match::unexpected_entry& e) {
      m.remove_unexpected(e);
      free_unexpected(unexpected_of(e));
    });
  payload_cache_.trim();
  held_count_ = 0;
  intake_signalled_ = false;
  auto free_owned = [](send_request& s) { std::free(s.owned); s.owned = nullptr; };
  wait_cts_.for_each(free_owned);
  dma_backlog_.for_each(free_owned);
  rma_active_.for_each([](rma_request& r) { std::free(r.owned); r.owned = nullptr; });
}

core::status endpoint::connect(const dev::address& a, dev::peer_id& out) noexcept {
  core::status s = dev_.connect(a, out);
  if (s == core::status::unreachable) [[unlikely]] {
    // A peer that sent to us and then closed its endpoint cannot be mapped any more, but its
    // messages may still wait in our mailbox: taking them makes the device remember it as a
    // departed sender, and a receive naming it then matches them. Whatever it sent was
    // published before its name went, so one full drain after the failed look finds it.
    settle_arrivals();
    s = dev_.connect(a, out);
  }
  if (!core::ok(s)) return s;
  if (!matchers_[0].ensure_source(out) || !matchers_[1].ensure_source(out) || !sequence_of(out))
    return core::status::no_memory;
  return core::status::ok;
}

void endpoint::invalidate_sources() noexcept {
  for (auto& v : source_cache_) v = unresolved;
}

std::uint64_t endpoint::resolve_source(dev::peer_id p) noexcept {
  if (p == dev::no_peer) return unknown_source;
  if (p >= source_cache_.size()) {
    try {
      source_cache_.resize(std::size_t{p} + 1, unresolved);
    } catch (...) {
      return unknown_source;
    }
  }
  if (source_cache_[p] == unresolved || source_cache_[p] == unknown_source) {
    // Not cached while unknown: the application may insert the sender into its AV later.
    source_cache_[p] = sinks_.resolver.resolve
                           ? sinks_.resolver.resolve(sinks_.resolver.self, dev_.peer_address(p))
                           : unknown_source;
  }
  return source_cache_[p];
}

// ---- posting ------------------------------------------------------------------------------

core::status endpoint::send_settled(const send_args& a) noexcept {
  const core::status s = send_now(a);
  // The peer was found dead by this send: fail the rest of its operations and reclaim its
  // segment before the caller sees the error (as progress() does for what it finds).
  if (s == core::status::peer_dead) [[unlikely]] settle_found_dead();
  return s;
}

core::status endpoint::send_now(const send_args& a) noexcept {
  if (sends_held_by_writes(a.peer)) [[unlikely]] return core::status::again;
  // The psn window's sender side (psn_order.cpp): back-pressure, not a drop at the receiver.
  if (!dma_backlog_.empty() && !psn_window_open(a.peer)) [[unlikely]] return core::status::again;
  // The receiver holds message packets at its unexpected bound (intake.cpp): wait until it
  // receives, so its mailbox keeps carrying what needs no room, staged DMA data among it.
  if (dev_.peer_intake_held(a.peer)) [[unlikely]] return core::status::again;
  const std::size_t len = core::iov_length(a.iov);
  // An inject takes the send row of its size: the inject limit was checked by fi/ already.
  const size_class& c = protocols_.select(
      a.kind == queue_kind::tagged ? op_kind::tagged_send : op_kind::send,
      a.delivery_complete ? situation::delivery_complete : situation::transmit_complete, len);
  switch (c.proto) {
    case protocol::eager:
      return eager_send(a, len);
    case protocol::eager_train:
      return train_send(a, len);
    case protocol::medium:
      return medium_or_rendezvous(a, len, c.fallback);
    default:
      return rendezvous_send(a, len, c.proto);
  }
}

core::status endpoint::rendezvous_send(const send_args& a, std::size_t len, protocol p) noexcept {
  switch (p) {
    case protocol::rndv_optimistic:
      return optimistic_send(a, len);
    case protocol::rndv_rts:
      // Optimistic family at or below medium_max: its receive is an ordinary posted one and the
      // RTS finds it there.
      return rts_send(a, len, false);
    case protocol::rndv:
    case protocol::rndv_read:
      // A receive posted ahead of this send is written directly: its RTR is stored already, or
      // it waits in our mailbox, which is read only if none is stored. A stored match is the
      // oldest (RTRs come in order per peer); reading the mailbox before every send would cost
      // a streaming sender over the network a lower progress, with its system calls, per
      // message (poll, receive, signal), and kept writes from leaving back to back.
      if (stored_rtr* st = ri_target(a.peer, a.kind, a.tag)) return ri_send(a, len, *st);
      progress_mailbox();
      if (stored_rtr* st = ri_target(a.peer, a.kind, a.tag)) return ri_send(a, len, *st);
      return rts_send(a, len, p == protocol::rndv_read);
    default:
      return core::status::invalid;  // not a send protocol: a table bug
  }
}

// ---- FI_EXANET_PROFILE (profile.hpp): the sender's stamps -----------------------------------

void endpoint::profile_send(std::uint64_t t_post, std::size_t len, std::uint64_t eager_before,
                            std::uint64_t medium_before) noexcept {
  const std::uint64_t published = prof_->take_issued();
  const std::uint64_t t_issued = published ? published : profile::now_ns();
  const profile_proto p = stats_.eager_sent + stats_.train_sent != eager_before ? profile_proto::eager
                          : stats_.medium_sent != medium_before                ? profile_proto::medium
                                                                                : profile_proto::rndv;
  prof_->mark(profile_phase::post, p, len, t_post);
  prof_->mark(profile_phase::issued, p, len, t_issued);
}

core::status endpoint::send_profiled(const send_args& a) noexcept {
  const std::uint64_t eager = stats_.eager_sent + stats_.train_sent, medium = stats_.medium_sent;
  (void)prof_->take_issued();  // one a failed send left
  const std::uint64_t t = profile::now_ns();
  const core::status s = send_settled(a);
  if (core::ok(s)) profile_send(t, core::iov_length(a.iov), eager, medium);
  return s;
}

core::status endpoint::send_one_profiled(dev::peer_id to, const void* buf, std::size_t len,
                                         std::uint64_t tag, std::uint64_t cq_data,
                                         bool has_cq_data, queue_kind kind,
                                         const one_send& how) noexcept {
  const std::uint64_t eager = stats_.eager_sent + stats_.train_sent, medium = stats_.medium_sent;
  (void)prof_->take_issued();
  const std::uint64_t t = profile::now_ns();
  const core::status s = send_one_now(to, buf, len, tag, cq_data, has_cq_data, kind, how);
  if (core::ok(s)) profile_send(t, len, eager, medium);
  return s;
}

std::string endpoint::profile_report(bool with_stamps) const {
  return prof_ ? prof_->format(static_cast<int>(getpid()), dev_.local_address().port, with_stamps)
               : std::string();
}

namespace {
profile_proto profile_proto_of(const unexpected_msg& u) noexcept {
  return u.type == wire::pkt_type::rts      ? profile_proto::rndv
         : u.type == wire::pkt_type::medium ? profile_proto::medium
                                            : profile_proto::eager;
}
}  // namespace

void endpoint::take_unexpected_at_post(const recv_args& a, std::size_t capacity,
                                       unexpected_msg& u) noexcept {
  prof_recv(profile_phase::match, profile_proto_of(u), u.len);
  const std::size_t n =
      copy_payload(a.iov, capacity, u.payload ? u.payload : u.inline_payload, u.len);
  stats_.bytes_recv += n;
  emit_recv(a.completion,
            received(a.context, a.kind, false, u.peer, u.tag, u.cq_data, u.has_cq_data, u.len, n));
  prof_recv(profile_phase::done);
  free_unexpected(u);
}

void endpoint::take_unexpected(recv_request& r, unexpected_msg& u) noexcept {
  prof_recv(profile_phase::match, profile_proto_of(u), u.len);
  if (u.type == wire::pkt_type::rts) {
    wire::rts m{};
    m.tag = u.tag;
    m.cq_data = u.cq_data;
    m.msg_len = u.len;
    m.send_id = u.send_id;
    m.hdr.flags = static_cast<std::uint16_t>((u.has_cq_data ? wire::flag_cq_data : 0) |
                                             (u.ack_wanted ? wire::flag_ack_wanted : 0));
    rndv_recv_start(r, u.peer, m);
  } else {
    const std::byte* data = u.payload ? u.payload : u.inline_payload;
    deliver_recv(r, u.peer, u.tag, u.cq_data, u.has_cq_data, data, u.len);
  }
  free_unexpected(u);  // room for a held packet: the next progress takes it (intake.cpp)
}

core::status endpoint::cancel(void* context) noexcept {
  recv_request* found = nullptr;
  for (match::matcher& m : matchers_) {
    m.for_each_posted([&](match::posted_entry& e) {
      recv_request* r = &recv_of(e);
      if (!found && r->context == context) found = r;
    });
    if (found) break;
  }
  if (!found && optimistic()) found = optimistic_find(context);
  if (!found) return core::status::no_entry;
  // With an RTR out the sender may be writing into the buffer: it must withdraw the RTR first.
  // The receive stays posted meanwhile, and the answer decides (rndv_rtr.cpp).
  if (found->rtr == rtr_state::sent) return rtr_cancel(*found);
  if (found->rtr == rtr_state::cancelling) return core::status::ok;  // asked already
  unpost(*found);
  if (found->multi) {
    found->in_matcher = false;
    // Messages already landing in it complete normally; the last one carries FI_MULTI_RECV.
    if (found->outstanding > 0) return core::status::ok;
  }
  fail_recv(*found, FI_ECANCELED);
  return core::status::ok;
}

// ---- matching glue --------------------------------------------------------------------------

recv_request* endpoint::take_posted_multi(recv_request& r, std::size_t msg_len) noexcept {
  recv_request* c = carve(r, msg_len);  // stays posted while it has room
  if (c && !r.in_matcher) posted_left(r);
  return c;
}

// ---- FI_MULTI_RECV ------------------------------------------------------------------------

recv_request* endpoint::carve(recv_request& parent, std::size_t msg_len) noexcept {
  recv_request* c = recvs_.acquire();
  if (!c) return nullptr;  // out of memory: the message waits as unexpected
  const std::size_t room = parent.capacity - parent.used;
  auto* base = static_cast<std::byte*>(parent.iov[0].iov_base) + parent.used;
  c->context = parent.context;
  c->iov[0] = {base, room};  // a longer message is truncated to what is left
  c->iov_count = 1;
  c->capacity = room;
  c->kind = parent.kind;
  c->completion = parent.completion;
  c->parent = &parent;
  multi_order_.push_back(*c);
  parent.used += std::min(msg_len, room);
  ++parent.outstanding;
  if (parent.capacity - parent.used < min_multi_recv_ && parent.in_matcher) {
    if (parent.entry.hook.linked()) matcher_for(parent.kind).remove_posted(parent.entry);
    parent.in_matcher = false;
  }
  return c;
}

completion endpoint::recv_failure(const recv_request& r, int err) noexcept {
  completion c;
  c.context = r.context;
  c.flags = recv_flags(r.kind, false);
  c.tag = r.entry.tag;
  c.src = source_of(r.peer);
  c.err = err;
  return c;
}

void endpoint::child_finished(recv_request& child) noexcept {
  child.finished = true;
  if (child.rtr != rtr_state::none || child.landing) rtr_release(child);
  while (recv_request* head = multi_order_.front()) {
    if (!head->finished) return;  // an earlier message is still landing
    multi_order_.pop_front();
    emit_child(*head);
  }
}

void endpoint::emit_child(recv_request& r) noexcept {
  completion c =
      r.err ? recv_failure(r, r.err)
            : recv_success(r, r.peer, r.tag, r.cq_data, r.has_cq_data, r.msg_len, r.delivered);
  c.buf = r.iov[0].iov_base;  // where in the multi-receive buffer this message starts
  c.flags |= child_done(r);
  finish_recv(r, c);
}

std::uint64_t endpoint::child_done(recv_request& child) noexcept {
  recv_request& parent = *child.parent;
  if (--parent.outstanding > 0 || parent.in_matcher) return 0;
  recvs_.release(&parent);  // released and nothing in flight: this completion says so
  return FI_MULTI_RECV;
}

core::status endpoint::post_multi_recv(recv_request& parent) noexcept {
  match::matcher& m = matcher_for(parent.kind);
  // Messages that arrived first fill the buffer, in arrival order. They are carved first and
  // delivered after the buffer's fate (posted or already full) is settled, so the completion
  // that releases the buffer is the one that carries FI_MULTI_RECV.
  using unexpected_list = core::intrusive_list<match::unexpected_entry, &match::unexpected_entry::all_hook>;
  using child_list = core::intrusive_list<recv_request, &recv_request::hook>;
  unexpected_list taken;
  child_list children;
  parent.in_matcher = true;  // open: carve() closes it when less than the minimum is left
  while (parent.in_matcher) {
    match::unexpected_entry* e = m.find_unexpected(parent.entry.source, 0, 0);
    if (!e) break;
    unexpected_msg& u = unexpected_of(*e);
    recv_request* c = carve(parent, u.len);
    if (!c) break;
    m.remove_unexpected(*e);
    taken.push_back(*e);
    children.push_back(*c);
  }
  const bool open = parent.in_matcher;
  parent.in_matcher = false;
  if (open) {
    try {
      m.post(parent.entry);
      parent.in_matcher = true;
    } catch (...) {
      // Not posted: it takes what already arrived and is released with the last of it.
    }
  }
  const bool posted = parent.in_matcher;
  while (recv_request* c = children.pop_front()) {
    auto* e = taken.pop_front();
    take_unexpected(*c, unexpected_of(*e));
  }
  if (!posted && parent.outstanding == 0 && parent.used == 0) {
    recvs_.release(&parent);
    return core::status::no_memory;
  }
  return core::status::ok;
}

bool endpoint::add_unexpected(queue_kind k, unexpected_msg& u) noexcept {
  u.entry.source = u.peer == dev::no_peer ? match::any_source : u.peer;
  u.entry.tag = k == queue_kind::tagged ? u.tag : 0;
  if (!matcher_for(k).add_unexpected(u.entry)) {
    EXANET_LOG(warn, ep_data, "out of memory: unexpected message dropped");
    free_unexpected(u);
    return false;
  }
  const std::size_t depth = matchers_[0].unexpected_count() + matchers_[1].unexpected_count();
  if (depth > stats_.unexpected_max) stats_.unexpected_max = depth;
  return true;
}

// ---- completions ----------------------------------------------------------------------------

void endpoint::complete_child(recv_request& r, dev::peer_id from, std::uint64_t tag,
                              std::uint64_t cq_data, bool has_cq_data, std::size_t msg_len,
                              std::size_t delivered) noexcept {
  r.peer = from;
  r.tag = tag;
  r.cq_data = cq_data;
  r.has_cq_data = has_cq_data;
  r.msg_len = msg_len;
  r.delivered = delivered;
  child_finished(r);
}

void endpoint::fail_recv(recv_request& r, int err) noexcept {
  if (r.parent) {
    r.err = err;
    child_finished(r);
    return;
  }
  completion c = recv_failure(r, err);
  if (r.multi) c.flags |= FI_MULTI_RECV;  // a cancelled multi-receive buffer is released
  finish_recv(r, c);
}

void endpoint::complete_send(send_request& s) noexcept {
  stats_.bytes_sent += s.len;  // rendezvous (eager and medium count at the post)
  if (reported(s.completion)) report_send_done(s.peer, s.context, s.kind, s.len, s.completion);
  release_send(s);
}

void endpoint::report_send_done(dev::peer_id to, void* context, queue_kind kind, std::size_t len,
                                bool to_cq) noexcept {
  completion c;
  c.context = context;
  c.flags = FI_SEND | (kind == queue_kind::tagged ? FI_TAGGED : FI_MSG);
  c.len = len;
  report_sent(to, c, to_cq, report_counter::send);
}

void endpoint::complete_buffered_send(const send_args& a, std::size_t len) noexcept {
  if (reported(a.completion)) report_send_done(a.peer, a.context, a.kind, len, a.completion);
}

void endpoint::wait_report(dev::peer_id to, std::uint64_t mark, const completion& c, bool to_cq,
                           report_counter counter, core::status s) noexcept {
  waiting_report w;
  w.c = c;
  w.to_cq = to_cq;
  w.counter = counter;
  w.peer = to;
  w.mark = mark;
  if (s == core::status::peer_dead) {  // some of it was never handed over: it is lost
    w.c.err = FI_ECONNRESET;
    w.c.len = 0;
    return write_report(w.c, true, counter);
  }
  try {
    waiting_reports_.push_back(w);
  } catch (...) {  // no memory for the wait: reported now, as before there was one
    write_report(c, to_cq, counter);
  }
}

std::size_t endpoint::release_reports() noexcept {
  // In order per peer (marks grow); a peer whose packets are still queued below holds only its
  // own reports back.
  std::size_t n = 0;
  for (auto it = waiting_reports_.begin(); it != waiting_reports_.end();) {
    const core::status s = dev_.sent_out(it->peer, it->mark);
    if (s == core::status::again) {
      ++it;
      continue;
    }
    waiting_report w = *it;
    it = waiting_reports_.erase(it);
    if (s != core::status::ok) {
      w.c.err = FI_ECONNRESET;
      w.c.len = 0;
      w.to_cq = true;
    }
    write_report(w.c, w.to_cq, w.counter);
    ++n;
  }
  return n;
}

void endpoint::fail_send(send_request& s, int err) noexcept {
  completion c;
  c.context = s.context;
  c.flags = FI_SEND | (s.kind == queue_kind::tagged ? FI_TAGGED : FI_MSG);
  c.len = 0;
  c.tag = s.tag;
  c.err = err;
  if (sinks_.tx) sinks_.tx.write(c);
  if (sinks_.send_cntr) sinks_.send_cntr.add(sinks_.send_cntr.self, true);
  release_send(s);
}

void endpoint::release_send(send_request& s) noexcept {
  std::free(s.owned);
  sends_.release(&s);
}

// ---- control packets ------------------------------------------------------------------------

endpoint::control_queue* endpoint::control_queue_of(dev::peer_id p) noexcept {
  if (p >= control_queues_.size()) {
    try {
      control_queues_.resize(std::size_t{p} + 1);  // cold: the first control packet to a peer
    } catch (...) {
      return nullptr;
    }
  }
  return &control_queues_[p];
}

void endpoint::send_control(dev::peer_id to, const dev::packet& pkt, bool reported) noexcept {
  control_queue* cq = control_queue_of(to);
  if (!cq) {
    EXANET_LOG(warn, ep_data, "out of memory queueing a control packet; peer %u", to);
    return;
  }
  control_queue& q = *cq;
  if (q.queued == 0) {
    core::status s = core::status::ok;
    if (reported) {
      // Through a reservation, which can say so: a backend paying per lower message may send
      // it with the packets that follow it to the same peer (dev/net's bursts).
      dev::mailbox_reservation slot;
      s = dev_.mailbox_reserve(to, slot);
      if (core::ok(s)) {
        std::memcpy(slot.data(), pkt.data(), pkt.size());
        slot.reported = true;
        dev_.mailbox_publish(slot);
      }
    } else {
      s = dev_.mailbox_send(to, pkt);
    }
    if (core::ok(s)) return;
    if (s != core::status::again) return;  // dead peer: its waiters fail by the liveness check
    ++stats_.mailbox_full;
  }
  // A correct peer cannot have more control packets owed to it than this: each answers one of
  // its notification slots (RTR, read, cancel) or one of ours, or one of our sends (issue 12:
  // a peer that sends requests and never drains its mailbox must not grow this endpoint).
  if (q.queued >= control_queue_cap()) {
    ++stats_.drop_backlog;
    EXANET_LOG_ONCE(warn, ep_data, "peer %u does not drain its mailbox: %u control packets wait "
                    "for it; this one is dropped", to, q.queued);
    return;
  }
  backlog_packet* b = backlog_pool_.acquire();
  if (!b) {
    EXANET_LOG(warn, ep_data, "out of memory queueing a control packet; peer %u", to);
    return;
  }
  b->peer = to;
  b->pkt = pkt;
  backlog_.push_back(*b);
  ++q.queued;
}

}  // namespace exanet::proto
