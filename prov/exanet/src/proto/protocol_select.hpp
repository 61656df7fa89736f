// SPDX-License-Identifier: BSD-2-Clause
// The protocol choice as a value (issue 17 part 5; STYLE.md rule 3): which protocol each
// operation takes, by size and situation, stated once. protocol_table::build is the only place
// that knows the size rules (eager, medium, rendezvous, optimistic, inline RMA, inject); the
// endpoint builds its table at open from proto::config and its device, and every call site in
// proto/ asks the table. FI_EXANET_PROTO_INFO=1 prints it (protocol_table::format).
//
// A row is one (operation, situation) pair: a short sorted list of size classes, each an
// inclusive upper bound and the protocol taken up to it; the last class ends at SIZE_MAX. A
// lookup walks at most max_classes entries of one row: no allocation, no call, no branch on the
// family. Runtime events that are not sizes stay where they happen and are named in the table:
// a medium message, an inline RMA write or an atomic's operands whose ring has no credit take
// their class's fallback,
// a rendezvous send takes a stored RTR when one is waiting, an RTR'd receive may be suspended.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "proto/config.hpp"

namespace exanet::proto {

/// Every way exanet moves an operation's data, or refuses it.
enum class protocol : std::uint8_t {
  eager,             // "eager": payload inside the env_data packet (eager.cpp)
  eager_train,       // "eager/train": eager_data packets, then the env_data (eager_train.cpp)
  medium,            // "medium": bounce ring at the receiver + one medium packet (medium.cpp)
  rndv,              // "rndv/rtr|rts": write family; one DMA write into the receive buffer if
                     // its RTR is already here (rndv_rtr.cpp), else RTS -> CTS -> DMA write
                     // (rndv_rts.cpp)
  rndv_read,         // "rndv/rts+ack": read family (thesis baseline); RTS -> CTS -> DMA write,
                     // the receiver's acknowledgement completes the send (rndv_rts.cpp)
  rndv_rts,          // "rndv/rts": RTS -> CTS -> DMA write, no RTR looked for (optimistic family,
                     // messages at or below medium_max)
  rndv_optimistic,   // "rndv/opt": waits at the sender for the receive's RTR
                     // (rndv_optimistic.cpp)
  recv_matched,      // "recv/match": posted, matched at the receiver (eager, medium, RTS)
  recv_rtr,          // "recv/match+rtr": posted, and sends its RTR when posted (or suspended
                     // until no earlier receive could take its message; rndv_rtr.cpp)
  recv_rtr_only,     // "recv/rtr-only": optimistic; an RTR and no posted-queue entry
  rma_inline,        // "rma/inline": bounce ring + rma_write_inline packet (rma_inline.cpp)
  rma_dma,           // "rma/dma": DMA write; the device stages or uses CMA (rma.cpp)
  rma_read_direct,   // "rma/read-direct": the engine reads the peer's memory (CMA)
  rma_read_request,  // "rma/read-request": the target answers with a DMA write (rma.cpp)
  atomic_packet,     // "atomic/packet": operands inside the atomic_req packet (atomic.cpp)
  atomic_ring,       // "atomic/ring": operands in the bounce ring + one atomic_req (atomic.cpp)
  atomic_train,      // "atomic/train": operands in atomic_operands packets + one atomic_req
  refused,           // "refused": -FI_EOPNOTSUPP (optimistic any-source receive) or
                     // -FI_EMSGSIZE (inject above inject_size)
  count
};

/// The printed name ("rndv/rtr|rts"); "?" for a value out of range.
std::string_view protocol_name(protocol p) noexcept;

enum class op_kind : std::uint8_t {
  send,         // fi_send, fi_sendv, fi_sendmsg, fi_senddata
  tagged_send,  // fi_tsend and its variants
  inject,       // fi_inject, fi_tinject, and sends with FI_INJECT (tagged or not)
  recv,         // fi_recv, fi_trecv and their variants; the size is the buffer's capacity
  rma_write,    // fi_write and its variants, fi_inject_write
  rma_read,     // fi_read and its variants
  atomic,       // fi_atomic, fi_fetch_atomic, fi_compare_atomic and their variants, per remote
                // range; the size is the range's operand bytes (operand and compare elements)
  count
};

enum class situation : std::uint8_t {
  transmit_complete,  // send, inject, RMA write to one remote range: the default completion
  delivery_complete,  // send, inject, RMA write: FI_DELIVERY_COMPLETE or FI_MATCH_COMPLETE
  directed,           // recv: names its source, one buffer, not FI_MULTI_RECV
  directed_iov,       // recv: names its source, several buffers
  any_source,         // recv: FI_ADDR_UNSPEC
  multi_recv,         // recv: FI_MULTI_RECV, from a named source
  several_ranges,     // RMA write: more than one remote range (transmit-complete)
  peer_readable,      // RMA read: the engine can read the peer (FI_EXANET_USE_CMA=1, allowed)
  peer_readable_aliased,  // RMA read: it can, but the local buffer's first byte lies 1-63 bytes
                          // ahead of the remote one's modulo a page (core::page_aliased), where
                          // the kernel's copy runs several times slower (4K aliasing)
  peer_unreadable,    // RMA read: it cannot (the default, or the kernel refused CMA)
  cq_data,            // atomic: the range carries remote CQ data (the operation's last range)
  count
};

/// What the choice depends on, read once at endpoint setup.
struct selection_inputs {
  std::size_t eager_max = 0;       // payload bytes that fit the env_data packet
  std::size_t train_max = 0;       // largest eager train (FI_EXANET_EAGER_MAX); build clamps it
                                   // to wire::eager_train_limit and to medium_max; at or below
                                   // eager_max: no trains
  std::size_t medium_max = 0;      // as configured (build clamps it to half a ring and
                                   // raises it to eager_max)
  std::size_t ring_bytes = 0;      // this endpoint's bounce ring, as the device rounded it
  std::size_t inject_size = 0;     // fi_inject limit
  std::size_t rma_inline_max = 0;  // largest RMA write through the ring
  protocol_family family = protocol_family::write;
  dev::dma_engine_mode dma_engine = dev::dma_engine_mode::automatic;  // FI_EXANET_DMA_ENGINE
  /// From a config, and the bounce ring size the device uses.
  static selection_inputs from(const config& c, std::size_t ring_bytes) noexcept;
};

struct size_class {
  std::size_t max_len = std::numeric_limits<std::size_t>::max();  // inclusive
  protocol proto = protocol::refused;
  protocol fallback = protocol::refused;  // when proto finds no ring credit (medium,
                                          // rma/inline); otherwise equal to proto
};

inline constexpr std::size_t max_classes = 4;

/// The smallest read taken by request rather than by the kernel's copy when the engine could read
/// the peer but the placement is aliased: below it memcpy, and the kernel's copy, are fast
/// whatever the placement (core/copy.hpp), and a direct read needs no progress at the target.
inline constexpr std::size_t aliased_read_request_min = 2048;

struct size_row {
  std::array<size_class, max_classes> classes{};
  std::uint8_t count = 0;
};

class protocol_table {
 public:
  /// The rules, all of them. Pure: the same inputs give the same table.
  static protocol_table build(const selection_inputs& in) noexcept;

  /// The class a len-byte operation falls in. (op, s) must be one of the table's pairs.
  const size_class& select(op_kind op, situation s, std::size_t len) const noexcept {
    const size_class* c = rows_[row_index(op, s)].classes.data();
    while (len > c->max_len) ++c;  // the last class of a row ends at SIZE_MAX
    return *c;
  }
  protocol choose(op_kind op, situation s, std::size_t len) const noexcept {
    return select(op, s, len).proto;
  }
  const size_row& row(op_kind op, situation s) const noexcept { return rows_[row_index(op, s)]; }

  /// Effective limits after build's clamps.
  std::size_t medium_max() const noexcept { return medium_max_; }
  /// The largest eager message (single packet or train).
  std::size_t train_max() const noexcept { return train_max_; }
  std::size_t inject_max() const noexcept { return in_.inject_size; }
  const selection_inputs& inputs() const noexcept { return in_; }

  /// The table as text, one line per size class, for FI_EXANET_PROTO_INFO and tests.
  /// header: the first line (who prints it). Cold; allocates; an empty string on bad_alloc.
  std::string format(std::string_view header) const noexcept;

  /// The (operation, situation) pairs a table holds, in printing order.
  struct pair {
    op_kind op;
    situation s;
  };
  static constexpr std::array<pair, 18> pairs{{
      {op_kind::send, situation::transmit_complete},
      {op_kind::send, situation::delivery_complete},
      {op_kind::tagged_send, situation::transmit_complete},
      {op_kind::tagged_send, situation::delivery_complete},
      {op_kind::inject, situation::transmit_complete},
      {op_kind::inject, situation::delivery_complete},
      {op_kind::recv, situation::directed},
      {op_kind::recv, situation::directed_iov},
      {op_kind::recv, situation::any_source},
      {op_kind::recv, situation::multi_recv},
      {op_kind::rma_write, situation::transmit_complete},
      {op_kind::rma_write, situation::several_ranges},
      {op_kind::rma_write, situation::delivery_complete},
      {op_kind::rma_read, situation::peer_readable},
      {op_kind::rma_read, situation::peer_readable_aliased},
      {op_kind::rma_read, situation::peer_unreadable},
      {op_kind::atomic, situation::transmit_complete},
      {op_kind::atomic, situation::cq_data},
  }};

 private:
  static constexpr std::uint8_t no_row = 0xff;
  static constexpr auto g_row_of = [] {
    std::array<std::array<std::uint8_t, static_cast<std::size_t>(situation::count)>,
               static_cast<std::size_t>(op_kind::count)>
        t{};
    for (auto& r : t) r.fill(no_row);
    for (std::size_t i = 0; i < pairs.size(); ++i)
      t[static_cast<std::size_t>(pairs[i].op)][static_cast<std::size_t>(pairs[i].s)] =
          static_cast<std::uint8_t>(i);
    return t;
  }();
  static std::size_t row_index(op_kind op, situation s) noexcept {
    return g_row_of[static_cast<std::size_t>(op)][static_cast<std::size_t>(s)];
  }

  std::array<size_row, pairs.size()> rows_{};
  selection_inputs in_{};
  std::size_t medium_max_ = 0;
  std::size_t train_max_ = 0;
};

}  // namespace exanet::proto
