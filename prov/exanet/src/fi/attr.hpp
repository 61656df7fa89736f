// SPDX-License-Identifier: BSD-2-Clause
// What exanet offers (capabilities and attribute limits) and fi_getinfo, which checks an
// application's hints against them and echoes what the application asked for
// (research/libfabric-anchors.md §1.6: the contract fabtests, Open MPI and MPICH rely on).
#pragma once
#include <rdma/fabric.h>

#include <cstdint>

namespace exanet::fi {

/// Primary capabilities: returned only when requested (or when no capabilities are requested).
inline constexpr std::uint64_t primary_caps = FI_MSG | FI_TAGGED | FI_SEND | FI_RECV |
                                              FI_DIRECTED_RECV | FI_RMA | FI_ATOMIC | FI_READ |
                                              FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
/// Secondary capabilities: always returned. FI_LOCAL_COMM and FI_REMOTE_COMM describe where
/// peers may live (both: the emulation reaches every local endpoint, and a hardware backend
/// every node); Open MPI 4.1 asks for them. FI_SHARED_AV: named AVs, shared by the processes of
/// a node (av.cpp).
inline constexpr std::uint64_t secondary_caps =
    FI_SOURCE | FI_MULTI_RECV | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_RMA_EVENT | FI_SHARED_AV;
/// The capabilities that belong in domain_attr->caps.
inline constexpr std::uint64_t domain_caps = FI_LOCAL_COMM | FI_REMOTE_COMM | FI_SHARED_AV;
/// FI_FENCE, triggered operations and the rest are not offered: fi_getinfo refuses them with
/// -FI_ENODATA.
inline constexpr std::uint64_t all_caps = primary_caps | secondary_caps;
/// Each side's attributes carry only its own capabilities (fi_getinfo(3), CAPABILITIES): the
/// transmit side initiates, the receive side is the target.
inline constexpr std::uint64_t tx_caps =
    FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SEND | FI_READ | FI_WRITE;
inline constexpr std::uint64_t rx_caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_RECV | FI_REMOTE_READ |
                                         FI_REMOTE_WRITE | FI_DIRECTED_RECV | FI_SOURCE |
                                         FI_MULTI_RECV | FI_RMA_EVENT;

inline constexpr std::uint64_t tx_op_flags_supported =
    FI_COMPLETION | FI_INJECT | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE |
    FI_MATCH_COMPLETE;
inline constexpr std::uint64_t rx_op_flags_supported = FI_COMPLETION | FI_MULTI_RECV;
/// Sends after sends; and atomics among themselves between one initiator and one target: they
/// leave in post order, the mailbox is FIFO and the target performs them on arrival
/// (proto/atomic.cpp). Sends after RMA and atomic writes: a send to a peer waits (says again)
/// while a write posted to it before has not handed its data and report to the device
/// (proto/rma.cpp, writes_unissued_to). RMA among itself is not ordered (its data goes by DMA,
/// not through the mailbox).
inline constexpr std::uint64_t msg_order_supported = FI_ORDER_SAS | FI_ORDER_SAW | FI_ORDER_ATOMIC_RAR |
                                                     FI_ORDER_ATOMIC_RAW | FI_ORDER_ATOMIC_WAR |
                                                     FI_ORDER_ATOMIC_WAW;
/// ep_attr max_order_{raw,war,waw}_size: the ordering above holds for whole atomic operations,
/// which carry at most this many bytes (proto/atomic_ops.hpp, atomics::max_bytes).
inline constexpr std::size_t max_order_atomic_size = 4096;
inline constexpr std::uint64_t mem_tag_format = 0xAAAAAAAAAAAAAAAAull;  // all 64 bits are the app's
inline constexpr std::size_t max_msg_size = std::size_t{1} << 62;
/// The largest tx/rx size (outstanding operations per queue) an application may ask for.
inline constexpr std::size_t max_queue_size = 65536;
inline constexpr std::size_t mr_iov_limit = 1;  // one protection-table entry per registration
inline constexpr std::size_t cq_data_size = 8;

int getinfo(std::uint32_t version, const char* node, const char* service, std::uint64_t flags,
            const fi_info* hints, fi_info** info) noexcept;

}  // namespace exanet::fi
