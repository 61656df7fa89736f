// The endpoint's protocol counters for applications and tools: the FI_EXANET_COUNTERS_OPS
// extension of <rdma/fi_ext_exanet.h>, and the one-line report FI_EXANET_STATS asks for at close.
#include <rdma/fi_errno.h>
#include <rdma/fi_ext_exanet.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "fi/ep.hpp"
#include "fi/params.hpp"

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
};
#undef EXANET_COUNTER
static_assert(std::size(g_counters) * sizeof(std::uint64_t) == sizeof(fi_exanet_counters),
              "every counter has a name in the report");

int read_counters(fid_ep* f, fi_exanet_counters* out, size_t size) noexcept {
  if (!f || !out) return -FI_EINVAL;
  endpoint& ep = from_fid<endpoint>(&f->fid);
  fi_exanet_counters now;
  {
    core::level_guard g(ep.lock);
    now = ep.proto.stats();
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

}  // namespace

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

void endpoint_report_counters(endpoint& ep) noexcept {
  const char* dest = params_stats_destination();
  if (!dest) return;
  const fi_exanet_counters& c = ep.proto.stats();
  char line[1024];
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
