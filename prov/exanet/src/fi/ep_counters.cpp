// SPDX-License-Identifier: BSD-2-Clause
// The endpoint's protocol counters for applications and tools: the FI_EXANET_COUNTERS_OPS
// extension of <rdma/fi_ext_exanet.h>, the one-line report FI_EXANET_STATS asks for at close,
// and the live copy exanet-stats reads while the job runs (fi/live_stats.hpp).
#include <fcntl.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext_exanet.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "core/log.hpp"
#include "core/unlink_at_exit.hpp"
#include "fi/ep.hpp"
#include "fi/params.hpp"
#include "proto/clock.hpp"

namespace exanet::fi {
namespace {

struct named_counter {
  const char* name;
  std::uint64_t fi_exanet_counters::*field;
};

// The report's keys are the struct's field names, made from them (one spelling: the header's):
// the exanet-stats tool and readers of the header see the same words.
#define EXANET_COUNTER(field) named_counter{#field, &fi_exanet_counters::field}
constexpr named_counter g_counters[] = {
    EXANET_COUNTER(eager_sent),
    EXANET_COUNTER(eager_recv),
    EXANET_COUNTER(medium_sent),
    EXANET_COUNTER(medium_recv),
    EXANET_COUNTER(rndv_sent),
    EXANET_COUNTER(rndv_recv),
    EXANET_COUNTER(fast_recv),
    EXANET_COUNTER(unexpected_max),
    EXANET_COUNTER(mailbox_full),
    EXANET_COUNTER(dead_peers),
    EXANET_COUNTER(rma_writes),
    EXANET_COUNTER(rma_inline_writes),
    EXANET_COUNTER(rma_reads),
    EXANET_COUNTER(rma_read_requests_served),
    EXANET_COUNTER(rndv_acked),
    EXANET_COUNTER(ri_sent),
    EXANET_COUNTER(ri_recv),
    EXANET_COUNTER(concurrent),
    EXANET_COUNTER(rtr_sent),
    EXANET_COUNTER(rtr_late),
    EXANET_COUNTER(rtr_stored),
    EXANET_COUNTER(rtr_dropped),
    EXANET_COUNTER(rtr_stale),
    EXANET_COUNTER(suspensions),
    EXANET_COUNTER(parked),
    EXANET_COUNTER(served_drops),
    EXANET_COUNTER(rtr_cancels),
    EXANET_COUNTER(drop_foreign_pdid),
    EXANET_COUNTER(drop_unknown),
    EXANET_COUNTER(drop_bad_field),
    EXANET_COUNTER(drop_dma_refused),
    EXANET_COUNTER(drop_notify_refused),
    EXANET_COUNTER(drop_rma_event),
    EXANET_COUNTER(psn_window_drops),
    EXANET_COUNTER(rndv_timeouts),
    EXANET_COUNTER(intake_held),
    EXANET_COUNTER(drop_backlog),
    EXANET_COUNTER(rndv_deadlines),
    EXANET_COUNTER(train_sent),
    EXANET_COUNTER(train_recv),
    EXANET_COUNTER(bytes_sent),
    EXANET_COUNTER(bytes_recv),
    EXANET_COUNTER(peers_shared_memory),
    EXANET_COUNTER(peers_network),
    EXANET_COUNTER(network_bytes_sent),
    EXANET_COUNTER(network_messages_sent),
    EXANET_COUNTER(dma_writes_direct),
    EXANET_COUNTER(dma_writes_staged),
    EXANET_COUNTER(network_sleepable),
    EXANET_COUNTER(rma_target_faults),
    EXANET_COUNTER(idle_yields),
    EXANET_COUNTER(idle_yields_shared),
};
#undef EXANET_COUNTER
static_assert(std::size(g_counters) * sizeof(std::uint64_t) == sizeof(fi_exanet_counters),
              "every counter has a name in the report");

// The protocol's counters and the fi layer's own (idle yields). Under the endpoint's lock.
fi_exanet_counters counters_of(const endpoint& ep) noexcept {
  fi_exanet_counters c = ep.proto.stats();
  c.idle_yields = ep.idle.yields();
  c.idle_yields_shared = ep.idle.shared_yields();
  return c;
}

int read_counters(fid_ep* f, fi_exanet_counters* out, size_t size) noexcept {
  if (!f || !out) return -FI_EINVAL;
  endpoint& ep = from_fid<endpoint>(&f->fid);
  fi_exanet_counters now;
  {
    core::level_guard g(ep.lock);
    now = counters_of(ep);
  }
  std::memcpy(out, &now, std::min(size, sizeof now));
  return 0;
}

constinit fi_exanet_counters_ops g_counters_ops = {
    .size = sizeof(fi_exanet_counters_ops),
    .read = &read_counters,
};

int hold_mailbox(fid_ep* f, int hold) noexcept {
  if (!f) return -FI_EINVAL;
  endpoint& ep = from_fid<endpoint>(&f->fid);
  core::level_guard g(ep.lock);
  ep.proto.hold_mailbox(hold != 0);
  return 0;
}

constinit fi_exanet_testing_ops g_testing_ops = {
    .size = sizeof(fi_exanet_testing_ops),
    .hold_mailbox = &hold_mailbox,
};

// The levels the live file shows beside the counters: what peers' packets make the endpoint
// hold at the moment of the copy.
struct named_gauge {
  const char* name;
  std::size_t (*read)(const proto::endpoint&) noexcept;
};
constexpr named_gauge g_gauges[] = {
    {"unexpected_now", [](const proto::endpoint& p) noexcept { return p.unexpected_in_use(); }},
    {"unexpected_bytes_now",
     [](const proto::endpoint& p) noexcept { return p.unexpected_bytes(); }},
    {"stored_rtrs_now", [](const proto::endpoint& p) noexcept { return p.stored_rtrs(); }},
    {"held_packets_now", [](const proto::endpoint& p) noexcept { return p.held_packets(); }},
};
static_assert(std::size(g_counters) + std::size(g_gauges) <= live_stats::max_values);

// Progress calls between looks at the clock: a busy poller looks every few microseconds, one
// that polls rarely still copies on its 64th call.
constexpr std::uint32_t live_polls_per_look = 64;

std::uint64_t clock_ns(clockid_t id) noexcept {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

std::string live_name(std::int32_t pid, std::uint32_t port) {
  return "/" + std::string(live_stats::name_prefix) + std::to_string(geteuid()) + "." +
         std::to_string(pid) + "." + std::to_string(port);
}

// One whole copy (seqlock writer: the only writer is the endpoint's progress, serialised by
// the threading level as every other use of its counters).
void live_publish(endpoint& ep) noexcept {
  live_stats::file_layout& f = *ep.live;
  const fi_exanet_counters c = counters_of(ep);
  const std::uint64_t s = f.seq.load(std::memory_order_relaxed);
  f.seq.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  std::size_t i = 0;
  for (const named_counter& k : g_counters)
    f.values[i++].store(c.*k.field, std::memory_order_relaxed);
  for (const named_gauge& g : g_gauges)
    f.values[i++].store(g.read(ep.proto), std::memory_order_relaxed);
  f.updated_ns.store(clock_ns(CLOCK_REALTIME), std::memory_order_relaxed);
  f.seq.store(s + 2, std::memory_order_release);
}

}  // namespace

void endpoint_live_open(endpoint& ep) noexcept {
  if (!params_live_stats()) return;
  const auto pid = static_cast<std::int32_t>(getpid());
  const std::uint32_t port = ep.proto.address().port;
  std::string name;
  try {
    name = live_name(pid, port);
  } catch (...) { return; }
  // A file of this name is a dead process's (the pid was ours, the port is ours now): replace it.
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0 && errno == EEXIST) {
    shm_unlink(name.c_str());
    fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  }
  if (fd < 0) {
    EXANET_LOG_ONCE(info, ep_ctrl, "no live counters for exanet-stats: shm_open(%s): %s",
                    name.c_str(), std::strerror(errno));
    return;
  }
  void* p = MAP_FAILED;
  // Reserved, not just sized: on a full /dev/shm the first write to a sparse page would raise
  // SIGBUS in the application; a failed reservation only means no live file.
  if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fchmod(fd, 0600) == 0) {
    const int e = posix_fallocate(fd, 0, static_cast<off_t>(live_stats::file_bytes));
    if (e == 0)
      p = mmap(nullptr, live_stats::file_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    else
      errno = e;
  }
  if (p == MAP_FAILED || !core::unlink_at_exit(name)) {
    EXANET_LOG_ONCE(info, ep_ctrl, "no live counters for exanet-stats: %s: %s", name.c_str(),
                    std::strerror(errno));
    if (p != MAP_FAILED) munmap(p, live_stats::file_bytes);
    shm_unlink(name.c_str());
    ::close(fd);
    return;
  }
  auto* f = new (p) live_stats::file_layout{};
  f->pid = pid;
  f->port = port;
  f->counters = static_cast<std::uint32_t>(std::size(g_counters));
  f->gauges = static_cast<std::uint32_t>(std::size(g_gauges));
  f->started_ns = clock_ns(CLOCK_REALTIME);
  std::size_t i = 0;
  for (const named_counter& k : g_counters)
    std::snprintf(f->names[i++], live_stats::name_bytes, "%s", k.name);
  for (const named_gauge& g : g_gauges)
    std::snprintf(f->names[i++], live_stats::name_bytes, "%s", g.name);
  f->version = live_stats::version;
  ep.live = f;
  ep.live_fd = fd;
  live_publish(ep);
  // Written last: a reader that sees the magic sees a named, whole file.
  std::atomic_ref<std::uint32_t>(f->magic).store(live_stats::magic, std::memory_order_release);
  ep.live_countdown = live_polls_per_look;
  ep.live_due_ms = proto::coarse_now_ms() + live_stats::publish_interval_ms;
}

void endpoint_live_tick(endpoint& ep) noexcept {
  if (!ep.live) {
    ep.live_countdown = UINT32_MAX;
    return;
  }
  ep.live_countdown = live_polls_per_look;
  const std::uint64_t now_ms = proto::coarse_now_ms();
  if (now_ms < ep.live_due_ms) return;
  ep.live_due_ms = now_ms + live_stats::publish_interval_ms;
  live_publish(ep);
}

void endpoint_live_close(endpoint& ep) noexcept {
  if (!ep.live) return;
  std::string name;
  try {
    name = live_name(ep.live->pid, ep.live->port);
  } catch (...) {}
  munmap(ep.live, live_stats::file_bytes);
  ep.live = nullptr;
  if (!name.empty()) {
    shm_unlink(name.c_str());
    core::forget_at_exit(name);
  }
  close(ep.live_fd);  // last: the lock says "alive" until the name is gone
  ep.live_fd = -1;
}

int endpoint_ops_open(fid* f, const char* name, uint64_t flags, void** ops, void*) noexcept {
  if (!f || !name || !ops) return -FI_EINVAL;
  if (flags) return -FI_EBADFLAGS;
  if (std::strcmp(name, FI_EXANET_COUNTERS_OPS) == 0) {
    *ops = &g_counters_ops;
    return 0;
  }
  if (std::strcmp(name, FI_EXANET_TESTING_OPS) == 0) {
    *ops = &g_testing_ops;
    return 0;
  }
  return -FI_ENOSYS;
}

namespace {

/// Appends text to FI_EXANET_STATS's or FI_EXANET_PROFILE's destination: "stderr" or "1", or a
/// file. One write per call, appended: the lines of many ranks sharing a file stay whole.
void write_report(const char* dest, const char* text, std::size_t n) noexcept {
  if (std::strcmp(dest, "stderr") == 0 || std::strcmp(dest, "1") == 0) {
    (void)!write(STDERR_FILENO, text, n);
  } else if (const int fd = ::open(dest, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644); fd >= 0) {
    (void)!write(fd, text, n);
    ::close(fd);
  }
}

}  // namespace

void endpoint_report_profile(endpoint& ep) noexcept {
  const char* dest = params_profile_destination();
  if (!dest) return;
  try {
    // The stamps go to a file only: standard error gets the sums (a line per size class).
    const bool to_stderr = std::strcmp(dest, "stderr") == 0 || std::strcmp(dest, "1") == 0;
    const std::string text = ep.proto.profile_report(!to_stderr);
    if (!text.empty()) write_report(dest, text.data(), text.size());
  } catch (...) {  // out of memory at close: the profile is lost, nothing else
  }
}

void endpoint_report_counters(endpoint& ep) noexcept {
  endpoint_report_profile(ep);
  const char* dest = params_stats_destination();
  if (!dest) return;
  const fi_exanet_counters c = counters_of(ep);
  char line[2048];  // 52 counters of up to 20 digits and their names fit
  int n = std::snprintf(line, sizeof line, "exanet-stats pid=%d port=%u", static_cast<int>(getpid()),
                        ep.proto.address().port);
  for (const named_counter& k : g_counters) {
    if (n < 0 || static_cast<size_t>(n) >= sizeof line) break;
    n += std::snprintf(line + n, sizeof line - n, " %s=%llu", k.name,
                       static_cast<unsigned long long>(c.*k.field));
  }
  if (n < 0 || static_cast<size_t>(n) >= sizeof line - 1) return;
  line[n++] = '\n';
  const bool to_stderr = std::strcmp(dest, "stderr") == 0 || std::strcmp(dest, "1") == 0;
  // One write of the whole line, appended: the lines of many ranks sharing a file stay whole.
  if (to_stderr) {
    (void)!write(STDERR_FILENO, line, n);
  } else if (std::FILE* fp = std::fopen(dest, "a")) {
    std::setvbuf(fp, nullptr, _IOFBF, sizeof line);
    std::fwrite(line, 1, n, fp);
    std::fclose(fp);
  }
}

}  // namespace exanet::fi
