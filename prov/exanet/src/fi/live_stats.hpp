// SPDX-License-Identifier: BSD-2-Clause
// Live counters: each endpoint keeps a copy of its counters in a small file,
// /dev/shm/exanet-stats.<uid>.<pid>.<port>, that `exanet-stats top` (util/) reads while the job
// runs. The file names its own values (the tool needs no list of counters, and one built before
// a counter was added still shows it), and its creator holds an exclusive flock(2) on it for
// the endpoint's life, as on a segment: a probe that gets a shared lock knows the creator is gone.
// Closing the endpoint or exiting removes the file; a killed process leaves it, readable, until
// `exanet-stats clean` removes it.
//
// The copy is made from the endpoint's progress at most every publish_interval_ms, never per
// message: the data path keeps its plain counters and gains no atomic or lock. Readers use the
// sequence number: odd while a copy is being written, bumped again when it is whole.
//
// No libfabric here: the tool includes the layout alone.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace exanet::fi::live_stats {

inline constexpr char name_prefix[] = "exanet-stats.";  // then <uid>.<pid>.<port>
inline constexpr std::uint32_t magic = 0x45585354;      // "EXST"
inline constexpr std::uint32_t version = 1;
inline constexpr std::size_t name_bytes = 32;  // NUL-terminated value names
inline constexpr std::size_t max_values = 96;
inline constexpr unsigned publish_interval_ms = 100;

struct file_layout {
  std::uint32_t magic;
  std::uint32_t version;
  std::int32_t pid;
  std::uint32_t port;
  std::uint32_t counters;          // values[0, counters): counters, only ever growing
  std::uint32_t gauges;            // values[counters, counters + gauges): levels at the last copy
  std::uint64_t started_ns;        // CLOCK_REALTIME at endpoint open
  std::atomic<std::uint64_t> seq;  // odd while a copy is written; 0: none yet
  std::atomic<std::uint64_t> updated_ns;  // CLOCK_REALTIME of the last whole copy
  char names[max_values][name_bytes];
  std::atomic<std::uint64_t> values[max_values];
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "the values are shared between processes");
inline constexpr std::size_t file_bytes = 4096;
static_assert(sizeof(file_layout) <= file_bytes);

}  // namespace exanet::fi::live_stats
