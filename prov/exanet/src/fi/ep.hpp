// SPDX-License-Identifier: BSD-2-Clause
// fi_endpoint (FI_EP_RDM): binds the libfabric objects to one proto::endpoint and translates the
// data-path calls. No protocol logic here.
#pragma once
#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "core/idle_yield.hpp"
#include "core/lock.hpp"
#include "fi/common.hpp"
#include "fi/live_stats.hpp"
#include "proto/endpoint.hpp"

namespace exanet::fi {

class av;
class cq;
class cntr;
class endpoint;

int endpoint_open(fid_domain* domain, fi_info* info, fid_ep** out, void* context) noexcept;
/// fid ops_open: FI_EXANET_COUNTERS_OPS (ep_counters.cpp).
int endpoint_ops_open(fid* f, const char* name, uint64_t flags, void** ops, void* context) noexcept;
/// Prints the counters where FI_EXANET_STATS says, if it says anything (ep_counters.cpp).
void endpoint_report_counters(endpoint& ep) noexcept;
/// Live counters for exanet-stats (fi/live_stats.hpp, ep_counters.cpp): create the file after
/// the endpoint has its port; copy the counters into it when due; remove it at close.
void endpoint_live_open(endpoint& ep) noexcept;
void endpoint_live_tick(endpoint& ep) noexcept;
void endpoint_live_close(endpoint& ep) noexcept;
/// What a CQ or counter calls to progress ep (manual progress).
progress_source endpoint_progress_source(endpoint& ep) noexcept;

class endpoint {
 public:
  fid_ep ep_fid{};  // first member: from_fid casts rely on it

  fid_domain* domain = nullptr;
  std::uint64_t caps = 0;
  std::uint64_t tx_op_flags = 0, rx_op_flags = 0;
  std::size_t inject_size = 0;
  std::size_t tx_iov_limit = 0, rx_iov_limit = 0, rma_iov_limit = 0;  // as fi_getinfo granted
  core::level_lock lock;
  proto::endpoint proto;
  av* av_ = nullptr;
  cq* tx_cq = nullptr;
  cq* rx_cq = nullptr;
  bool tx_selective = false, rx_selective = false;
  cntr* send_cntr = nullptr;
  cntr* recv_cntr = nullptr;
  cntr* read_cntr = nullptr;         // FI_READ: completed fi_read*
  cntr* write_cntr = nullptr;        // FI_WRITE: completed fi_write*
  cntr* remote_read_cntr = nullptr;  // FI_REMOTE_READ (FI_RMA_EVENT)
  cntr* remote_write_cntr = nullptr; // FI_REMOTE_WRITE (FI_RMA_EVENT)
  bool enabled = false;
  // FI_PROGRESS_AUTO: the domain's progress thread progresses this endpoint too (set at enable,
  // before the thread may see it). Atomic: a CQ read in another thread may progress the
  // endpoint while it is being enabled.
  std::atomic<bool> thread_progresses{false};
  std::uint64_t av_epoch = 0;
  const std::atomic<std::uint64_t>* av_epoch_now = nullptr;  // the bound AV's; set with av_
  std::vector<dev::peer_id> peers;  // fi_addr -> device peer; no_peer: not resolved yet
  // The live counters' file (null: none) and the progress calls left before the next look at
  // the clock: the copy costs a decrement per progress call, never a clock read.
  live_stats::file_layout* live = nullptr;
  int live_fd = -1;
  std::uint32_t live_countdown = 1;
  std::uint64_t live_due_ms = 0;
  // Manual progress on a shared core (core/idle_yield.hpp, FI_EXANET_IDLE_YIELD): polls that
  // keep finding nothing give the core away. Under lock, as progress is.
  core::idle_yield idle;

  /// The device peer for fi_addr, connecting on first use. Negative -FI_E* on failure. Inline:
  /// a cached peer costs a few loads per data-path call.
  int peer_of(fi_addr_t addr, dev::peer_id& out) noexcept {
    if (av_epoch_now && addr < peers.size() && peers[addr] != dev::no_peer &&
        av_epoch_now->load(std::memory_order_acquire) == av_epoch) [[likely]] {
      out = peers[addr];
      return 0;
    }
    return resolve_peer(addr, out);
  }
  /// peer_of's slow path: an address not cached yet, or an AV that removed entries since.
  int resolve_peer(fi_addr_t addr, dev::peer_id& out) noexcept;
  /// The application's poll (a CQ or counter read): one progress round; after a streak of
  /// rounds that found nothing, a yield of the core (core/idle_yield.hpp). Under
  /// FI_PROGRESS_AUTO none if another thread holds the endpoint: it is being progressed.
  void progress() noexcept;
  /// The progress thread's call (FI_PROGRESS_AUTO): progress unless a thread of the application
  /// holds the endpoint (then `held` at once: the thread never waits for a call to end).
  /// Otherwise how much was done.
  static constexpr std::size_t held = ~std::size_t{0};
  std::size_t try_progress() noexcept;
  /// Sleeping while idle (fi/wait.hpp, arrival_sleep): true if the endpoint has nothing to do
  /// and its device announced a sleeper (target: the word, and the network side's fd if on);
  /// the endpoint then stays open until sleep_end(). False once it is closing.
  bool sleep_prepare(sleep_target& target) noexcept;
  void sleep_end() noexcept;
  void timers() noexcept;
  std::atomic<int> sleep_refs{0};  // sleepers between sleep_prepare and sleep_end
  bool closing = false;             // under lock: no new sleeper
};

}  // namespace exanet::fi
