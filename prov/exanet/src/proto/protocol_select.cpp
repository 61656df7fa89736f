// SPDX-License-Identifier: BSD-2-Clause
// The size rules of every operation (protocol_select.hpp). build() is read as the specification:
// each row says, for one operation in one situation, which protocol each size takes. Nothing else
// in proto/ compares a length with a limit to pick a protocol.
#include "proto/protocol_select.hpp"

#include <algorithm>
#include <cstdio>
#include <new>

#include "proto/wire.hpp"

namespace exanet::proto {
namespace {

constexpr std::size_t unbounded = std::numeric_limits<std::size_t>::max();

struct protocol_text {
  std::string_view name, meaning;
};

constexpr std::array<protocol_text, static_cast<std::size_t>(protocol::count)> g_protocol_text{{
    {"eager", "the payload rides in the envelope packet; completes at post"},
    {"eager/train", "the first bytes in eager_data packets, the rest in the envelope packet "
                    "behind them; completes at post"},
    {"medium",
     "copied into the sender's bounce ring at the receiver, one packet; completes at post"},
    {"rndv/rtr|rts", "one DMA write into the receive buffer if its RTR is already here, "
                     "else RTS -> CTS -> DMA write"},
    {"rndv/rts+ack", "RTS -> CTS -> DMA write; the receiver's ack completes the send"},
    {"rndv/rts", "RTS -> CTS -> DMA write"},
    {"rndv/opt", "waits at the sender for the receive's RTR, then one DMA write"},
    {"recv/match", "posted; matched at the receiver when the message arrives"},
    {"recv/match+rtr", "posted, and sends its RTR at post (later if an earlier receive could "
                       "take its message)"},
    {"recv/rtr-only", "sends its RTR and takes no place in the posted queue"},
    {"rma/inline", "copied through the bounce ring, landed by the target's progress"},
    {"rma/dma", "DMA write (staged through the target, or CMA)"},
    {"rma/read-direct", "the engine reads the target's memory (CMA)"},
    {"rma/read-request", "the target checks the key and writes the data back (under the cma "
                         "engine, to an aliased placement through the staging area)"},
    {"atomic/packet", "operands in the request packet; the target performs it and answers"},
    {"atomic/ring", "operands through the bounce ring, one request packet; the target "
                    "performs it and answers"},
    {"atomic/train", "operands in packets ahead of the request; the target performs it and "
                     "answers"},
    {"refused", "the call fails: an any-source receive of the optimistic family with "
                "-FI_EOPNOTSUPP, an inject above inject_size (or the tx_attr's, if smaller) "
                "with -FI_EMSGSIZE"},
}};

constexpr std::string_view op_name(op_kind op) noexcept {
  switch (op) {
    case op_kind::send: return "send";
    case op_kind::tagged_send: return "tsend";
    case op_kind::inject: return "inject";
    case op_kind::recv: return "recv";
    case op_kind::rma_write: return "rma write";
    case op_kind::rma_read: return "rma read";
    case op_kind::atomic: return "atomic";
    case op_kind::count: break;
  }
  return "?";
}

constexpr std::string_view situation_name(op_kind op, situation s) noexcept {
  switch (s) {
    case situation::transmit_complete:
      return op == op_kind::rma_write ? "1 remote range"
             : op == op_kind::atomic  ? "no remote CQ data"
                                      : "transmit-complete";
    case situation::delivery_complete: return "delivery-complete";
    case situation::directed: return "named source, 1 buffer";
    case situation::directed_iov: return "named source, iovecs";
    case situation::any_source: return "any source";
    case situation::multi_recv: return "multi-recv";
    case situation::several_ranges: return "several remote ranges";
    case situation::peer_readable: return "peer readable (CMA)";
    case situation::peer_readable_aliased: return "readable (CMA), aliased";
    case situation::peer_unreadable: return "peer not readable";
    case situation::cq_data: return "remote CQ data";
    case situation::count: break;
  }
  return "?";
}

constexpr std::string_view family_name(protocol_family f) noexcept {
  switch (f) {
    case protocol_family::write: return "write";
    case protocol_family::read: return "read";
    case protocol_family::optimistic: return "optimistic";
  }
  return "?";
}

// Appends the class (previous end, max_len] -> p: a range already covered is skipped, and one
// that continues the previous class's protocol extends it, so a row lists each switch once.
void append(size_row& r, std::size_t max_len, protocol p, protocol fallback) noexcept {
  if (r.count > 0) {
    size_class& last = r.classes[r.count - 1];
    if (max_len <= last.max_len) return;
    if (last.proto == p && last.fallback == fallback) {
      last.max_len = max_len;
      return;
    }
  }
  if (r.count < max_classes) r.classes[r.count++] = {max_len, p, fallback};
}

void append(size_row& r, std::size_t max_len, protocol p) noexcept { append(r, max_len, p, p); }

// An inject is the send of the same size, up to the inject limit.
size_row clipped(const size_row& send, std::size_t limit) noexcept {
  size_row out;
  for (std::size_t i = 0; i < send.count; ++i) {
    const size_class& c = send.classes[i];
    append(out, std::min(c.max_len, limit), c.proto, c.fallback);
    if (c.max_len >= limit) break;
  }
  append(out, unbounded, protocol::refused);
  return out;
}

void put_range(char* out, std::size_t n, std::size_t lo, std::size_t hi) noexcept {
  if (hi == unbounded)
    std::snprintf(out, n, "%zu..inf", lo);
  else
    std::snprintf(out, n, "%zu..%zu", lo, hi);
}

}  // namespace

std::string_view protocol_name(protocol p) noexcept {
  const auto i = static_cast<std::size_t>(p);
  return i < g_protocol_text.size() ? g_protocol_text[i].name : std::string_view{"?"};
}

selection_inputs selection_inputs::from(const config& c, std::size_t ring_bytes) noexcept {
  selection_inputs in;
  in.eager_max = wire::eager_payload_max;
  in.train_max = c.eager_max;
  in.medium_max = c.medium_max;
  in.ring_bytes = ring_bytes;
  in.inject_size = c.inject_size;
  in.rma_inline_max = c.rma_inline_max;
  in.family = c.protocol;
  in.dma_engine = c.dma_engine;
  return in;
}

protocol_table protocol_table::build(const selection_inputs& in) noexcept {
  protocol_table t;
  t.in_ = in;
  // A medium message must fit half a ring, so two can always be in flight.
  // Nor is it below the eager payload: every message up to eager_max goes eager whatever
  // medium_max says, so a receive that small must not wait for an RTR (under the optimistic
  // family, no send would ever answer it: the eager message would sit unexpected).
  const std::size_t medium = std::max(std::min(in.medium_max, in.ring_bytes / 2), in.eager_max);
  t.medium_max_ = medium;
  // Eager trains: above the single packet, up to what the receiver's buffer takes, and no
  // further than medium_max (which bounds every buffered path, and where the optimistic family's
  // receives stop waiting for a send and send an RTR instead).
  const std::size_t train = std::max(
      std::min({in.train_max, wire::eager_train_limit, medium}), in.eager_max);
  t.train_max_ = train;

  // The rendezvous of each family, at or below medium_max (a delivery-complete send, or a
  // medium one that found no ring credit) and above it.
  protocol rndv_short = protocol::rndv, rndv_long = protocol::rndv;
  protocol long_recv = protocol::recv_rtr;           // a named-source receive above medium_max
  protocol long_recv_iov = protocol::recv_matched;   // the same in several buffers
  protocol any_source = protocol::recv_matched;
  switch (in.family) {
    case protocol_family::write:
      break;
    case protocol_family::read:  // sender-initiated only: no receive sends an RTR
      rndv_short = rndv_long = protocol::rndv_read;
      long_recv = protocol::recv_matched;
      break;
    case protocol_family::optimistic:  // above medium_max, only the receive's RTR starts a send
      rndv_short = protocol::rndv_rts;
      rndv_long = protocol::rndv_optimistic;
      long_recv = long_recv_iov = protocol::recv_rtr_only;
      any_source = protocol::refused;
      break;
  }

  // Sends. FI_DELIVERY_COMPLETE skips the buffered paths: only a rendezvous knows the data is
  // in the receive buffer when it completes.
  size_row buffered, delivered;
  append(buffered, in.eager_max, protocol::eager);
  append(buffered, train, protocol::eager_train);
  append(buffered, medium, protocol::medium, rndv_short);
  append(buffered, unbounded, rndv_long);
  append(delivered, medium, rndv_short);
  append(delivered, unbounded, rndv_long);
  for (op_kind op : {op_kind::send, op_kind::tagged_send}) {
    t.rows_[row_index(op, situation::transmit_complete)] = buffered;
    t.rows_[row_index(op, situation::delivery_complete)] = delivered;
  }
  t.rows_[row_index(op_kind::inject, situation::transmit_complete)] =
      clipped(buffered, in.inject_size);
  t.rows_[row_index(op_kind::inject, situation::delivery_complete)] =
      clipped(delivered, in.inject_size);

  // Receives, by their capacity. The RTR rule (rndv_rtr.cpp): a receive that names its source
  // and has one buffer sends its RTR if a message too large for the buffered paths can take it.
  size_row& directed = t.rows_[row_index(op_kind::recv, situation::directed)];
  append(directed, medium, protocol::recv_matched);
  append(directed, unbounded, long_recv);
  size_row& directed_iov = t.rows_[row_index(op_kind::recv, situation::directed_iov)];
  append(directed_iov, medium, protocol::recv_matched);
  append(directed_iov, unbounded, long_recv_iov);
  append(t.rows_[row_index(op_kind::recv, situation::any_source)], unbounded, any_source);
  append(t.rows_[row_index(op_kind::recv, situation::multi_recv)], unbounded,
         protocol::recv_matched);

  // RMA writes: small ones through the bounce ring (DMA when it has no credit); several remote
  // ranges and delivery-complete writes are DMA writes.
  size_row& write = t.rows_[row_index(op_kind::rma_write, situation::transmit_complete)];
  // FI_EXANET_RMA_INLINE_MAX=0 turns the inline path off, zero-byte writes included.
  if (in.rma_inline_max > 0) append(write, in.rma_inline_max, protocol::rma_inline, protocol::rma_dma);
  append(write, unbounded, protocol::rma_dma);
  append(t.rows_[row_index(op_kind::rma_write, situation::several_ranges)], unbounded,
         protocol::rma_dma);
  append(t.rows_[row_index(op_kind::rma_write, situation::delivery_complete)], unbounded,
         protocol::rma_dma);

  // RMA reads: whether the engine can read the peer, whatever the size; where it can but the
  // placement is aliased (the kernel's copy runs several times slower there: BENCHMARKS.md,
  // 2026-11-27), by request from the size where aliasing starts to cost (core/copy.hpp).
  append(t.rows_[row_index(op_kind::rma_read, situation::peer_readable)], unbounded,
         protocol::rma_read_direct);
  size_row& aliased_read = t.rows_[row_index(op_kind::rma_read, situation::peer_readable_aliased)];
  append(aliased_read, aliased_read_request_min - 1, protocol::rma_read_direct);
  append(aliased_read, unbounded, protocol::rma_read_request);
  append(t.rows_[row_index(op_kind::rma_read, situation::peer_unreadable)], unbounded,
         protocol::rma_read_request);

  // Atomics, by a range's operand bytes: in the packet while they fit its 16 spare bytes (which
  // remote CQ data takes for itself), else through the bounce ring, and in a train of packets
  // when the ring has no room for them (atomic.cpp).
  size_row& atomic = t.rows_[row_index(op_kind::atomic, situation::transmit_complete)];
  append(atomic, wire::atomic_inline_bytes, protocol::atomic_packet);
  append(atomic, unbounded, protocol::atomic_ring, protocol::atomic_train);
  size_row& atomic_data = t.rows_[row_index(op_kind::atomic, situation::cq_data)];
  append(atomic_data, 0, protocol::atomic_packet);
  append(atomic_data, unbounded, protocol::atomic_ring, protocol::atomic_train);
  return t;
}

std::string protocol_table::format(std::string_view header) const noexcept try {
  std::string s;
  char line[256];
  s.append(header);
  s += '\n';
  std::snprintf(line, sizeof line,
                "  family %.*s; eager packet %zu, eager_max %zu, medium_max %zu, inject_size %zu, "
                "rma_inline_max %zu, bounce ring %zu, DMA engine %s\n",
                static_cast<int>(family_name(in_.family).size()), family_name(in_.family).data(),
                in_.eager_max, train_max_, medium_max_, in_.inject_size, in_.rma_inline_max, in_.ring_bytes,
                dev::dma_engine_name(in_.dma_engine));
  s += line;
  s += "  (bytes: the message or RMA length; for recv, the buffer's capacity)\n";
  std::snprintf(line, sizeof line, "  %-10s %-24s %-22s %s\n", "operation", "situation", "bytes",
                "protocol");
  s += line;
  std::array<bool, static_cast<std::size_t>(protocol::count)> used{};
  for (const pair& p : pairs) {
    const size_row& r = row(p.op, p.s);
    std::size_t lo = 0;
    for (std::size_t i = 0; i < r.count; ++i) {
      const size_class& c = r.classes[i];
      char range[48];
      put_range(range, sizeof range, lo, c.max_len);
      const std::string_view op = op_name(p.op), sit = situation_name(p.op, p.s);
      const std::string_view name = protocol_name(c.proto);
      int n = std::snprintf(line, sizeof line, "  %-10.*s %-24.*s %-22s %.*s",
                            static_cast<int>(op.size()), op.data(), static_cast<int>(sit.size()),
                            sit.data(), range, static_cast<int>(name.size()), name.data());
      used[static_cast<std::size_t>(c.proto)] = true;
      if (c.fallback != c.proto && n > 0 && static_cast<std::size_t>(n) < sizeof line) {
        const std::string_view fb = protocol_name(c.fallback);
        std::snprintf(line + n, sizeof line - n, " (no ring credit: %.*s)",
                      static_cast<int>(fb.size()), fb.data());
        used[static_cast<std::size_t>(c.fallback)] = true;
      }
      s += line;
      s += '\n';
      if (c.max_len == unbounded) break;
      lo = c.max_len + 1;
    }
  }
  s += "  (aliased: the read's local first byte 1-63 bytes ahead of its remote one, modulo 4096)\n";
  s += "  where\n";
  for (std::size_t i = 0; i < used.size(); ++i) {
    if (!used[i]) continue;
    std::snprintf(line, sizeof line, "    %-17.*s %.*s\n",
                  static_cast<int>(g_protocol_text[i].name.size()), g_protocol_text[i].name.data(),
                  static_cast<int>(g_protocol_text[i].meaning.size()),
                  g_protocol_text[i].meaning.data());
    s += line;
  }
  return s;
} catch (const std::bad_alloc&) {
  return {};
}

}  // namespace exanet::proto
