// SPDX-License-Identifier: BSD-2-Clause
// FI_EXANET_PROFILE (issue 16, research seeds-002-004 §C.7): where a message's latency goes.
// Each endpoint stamps the phase boundaries of the messages it sends and receives:
//   post     the send call entered the protocol          (sender)
//   issued   the packet was published                    (sender; a rendezvous: the send call
//                                                         returns, its RTS or write issued)
//   arrival  the packet that starts the receive was taken (receiver: its handler runs)
//   match    the receive was found                        (receiver)
//   copy     the payload is in the receive buffer         (receiver)
//   done     the completion was written                   (receiver)
// and adds each stamp (CLOCK_MONOTONIC, one clock for every process of the host) to a sum per
// protocol, size class and phase, with a count. Sums of absolute times are what make the link
// part measurable without carrying anything on the wire: over the messages of one class,
// sum(arrival at the receivers) - sum(issued at the senders) is the time they spent between the
// processes, exactly when every message sent was received. fabtests/bench/thesis/model.py adds
// the endpoints' lines of one run and derives the means:
//   post = issued - post, link = arrival - issued, match = match - arrival,
//   copy = copy - match, completion = done - copy,
// which add up to the mean time from the send call to the receive's completion.
//
// What each part holds, per protocol: eager and medium copy out of the mailbox packet or the
// bounce ring; a rendezvous announced by an RTS matches at the RTS and its "copy" runs from
// there to the notification that the DMA write landed (the CTS trip and the write included); one
// written straight into a receive by its RTR (receiver-initiated) has its arrival, match and
// copy at that notification (the write itself is in the sender's post). An eager train arrives
// with its last packet. Unexpected messages match when their receive is posted.
//
// Cost: off, each hook is one test of a null pointer (the endpoint's profile). On, a hook reads
// the clock (vDSO, about 20 ns, measured at open and printed as clock_ns), adds to a fixed array
// and appends the stamp to a fixed log (its first log_capacity stamps) made at open: nothing is
// allocated on the data path.
#pragma once
#include <time.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace exanet::proto {

enum class profile_proto : std::uint8_t { eager, medium, rndv };
enum class profile_phase : std::uint8_t { post, issued, arrival, match, copy, done };

inline constexpr std::size_t profile_protos = 3;
inline constexpr std::size_t profile_phases = 6;
/// Size classes: four per power of two (sizes m x 2^e with m in 4..7 have a class of their own,
/// so a sweep of powers of two and their halves is measured size by size); sizes from 2^31 share
/// the last class.
inline constexpr std::size_t profile_octaves = 32;
inline constexpr std::size_t profile_classes = 8 + (profile_octaves - 3) * 4;

/// Class of a message length: 0..7 exact, then four per octave.
constexpr std::size_t profile_class_of(std::size_t len) noexcept {
  if (len < 8) return len;
  const unsigned e = 63u - static_cast<unsigned>(__builtin_clzll(len));  // 3 .. 63
  if (e >= profile_octaves) return profile_classes - 1;
  const std::size_t m = (len >> (e - 2)) & 3;  // the two bits below the leading one
  return 8 + (e - 3) * 4 + m;
}
/// Smallest length of class c.
constexpr std::size_t profile_class_low(std::size_t c) noexcept {
  if (c < 8) return c;
  const std::size_t e = 3 + (c - 8) / 4, m = 4 + (c - 8) % 4;
  return m << (e - 2);
}
static_assert(profile_class_of(8) == 8 && profile_class_low(8) == 8);
static_assert(profile_class_of(12288) != profile_class_of(16384));
static_assert(profile_class_low(profile_class_of(12288)) == 12288);
static_assert(profile_class_low(profile_class_of(65536)) == 65536);
static_assert(profile_class_of(std::size_t{1} << 40) == profile_classes - 1);

class profile {
 public:
  /// CLOCK_MONOTONIC in ns: the link model's clock too, the same in every process of the host.
  static std::uint64_t now_ns() noexcept {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
           static_cast<std::uint64_t>(ts.tv_nsec);
  }

  profile() noexcept;

  void mark(profile_phase ph, profile_proto p, std::size_t len, std::uint64_t t) noexcept {
    const std::size_t k = profile_class_of(len);
    cell& c = cells_[static_cast<std::size_t>(p)][k];
    const auto i = static_cast<std::size_t>(ph);
    c.sum_ns[i] += t;
    ++c.count[i];
    if (log_n_ < log_capacity && log_)
      log_[log_n_++] = {t, static_cast<std::uint16_t>(static_cast<std::size_t>(p) * profile_classes + k),
                        static_cast<std::uint8_t>(ph)};
  }
  void mark(profile_phase ph, profile_proto p, std::size_t len) noexcept {
    mark(ph, p, len, now_ns());
  }
  /// The sender's issued stamp, taken where the packet is published when that is not the end of
  /// the send call (eager and medium complete the send, medium readies the next ring room
  /// after it); 0: the call's return is the stamp.
  void note_issued() noexcept { issued_ns_ = now_ns(); }
  std::uint64_t take_issued() noexcept {
    const std::uint64_t t = issued_ns_;
    issued_ns_ = 0;
    return t;
  }
  /// The receive being worked on: arrival and match set it, copy and done stamp it (they follow
  /// in the same call, or at the rendezvous's last notification, which sets it again).
  void mark_recv(profile_phase ph, profile_proto p, std::size_t len) noexcept {
    cur_proto_ = p;
    cur_len_ = len;
    mark(ph, p, len);
  }
  void mark_recv(profile_phase ph) noexcept { mark(ph, cur_proto_, cur_len_); }

  /// One line per protocol and size class that saw a message:
  ///   exanet-profile pid=P port=N proto=eager|medium|rndv size=LOW clock_ns=C
  ///     n_post=.. sum_post=.. (the same for issued, arrival, match, copy, done)
  ///     post_ns=.. match_ns=.. copy_ns=.. completion_ns=..   (this endpoint's means; "-" when
  ///     the counts of the two stamps differ)
  /// Sums are ns of CLOCK_MONOTONIC, in decimal (they pass 2^64).
  /// With with_stamps, then the stamps themselves (the first log_capacity of the endpoint), one
  /// line per protocol, size class and phase, in the order they were taken:
  ///   exanet-profile-stamps pid=P port=N proto=.. size=.. phase=.. first=T d1 d2 ...
  /// (T in ns, each d the ns since the stamp before it). The k-th issued stamp of a class at a
  /// sender and the k-th arrival at its receiver are one message when one message of the class
  /// is in flight at a time (a ping-pong): model.py takes per-message parts and their medians
  /// from them, which preemptions (a shared machine's) do not drag as they drag the means.
  std::string format(int pid, unsigned port, bool with_stamps) const;

  static constexpr std::size_t log_capacity = std::size_t{1} << 16;  // 16 B each: 1 MiB

 private:
  struct cell {
    std::array<unsigned __int128, profile_phases> sum_ns{};
    std::array<std::uint64_t, profile_phases> count{};
  };
  std::array<std::array<cell, profile_classes>, profile_protos> cells_{};
  struct stamp {
    std::uint64_t t;
    std::uint16_t cell;  // proto x profile_classes + size class
    std::uint8_t phase;
  };
  std::unique_ptr<stamp[]> log_;  // null if it could not be had: the sums only
  std::size_t log_n_ = 0;
  profile_proto cur_proto_ = profile_proto::eager;
  std::size_t cur_len_ = 0;
  std::uint64_t issued_ns_ = 0;
  std::uint64_t clock_ns_ = 0;  // one clock read, measured at construction
};

}  // namespace exanet::proto
