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

// The report's keys are the struct's field names: the exanet-stats tool and readers of the
// header see the same words.
constexpr named_counter g_counters[] = {
    {"eager_sent", &fi_exanet_counters::eager_sent},
    {"eager_recv", &fi_exanet_counters::eager_recv},
    {"medium_sent", &fi_exanet_counters::medium_sent},
    {"medium_recv", &fi_exanet_counters::medium_recv},
    {"rndv_sent", &fi_exanet_counters::rndv_sent},
    {"rndv_recv", &fi_exanet_counters::rndv_recv},
    {"fast_recv", &fi_exanet_counters::fast_recv},
    {"unexpected_max", &fi_exanet_counters::unexpected_max},
    {"mailbox_full", &fi_exanet_counters::mailbox_full},
    {"dead_peers", &fi_exanet_counters::dead_peers},
    {"rma_writes", &fi_exanet_counters::rma_writes},
    {"rma_inline_writes", &fi_exanet_counters::rma_inline_writes},
    {"rma_reads", &fi_exanet_counters::rma_reads},
    {"rma_read_requests_served", &fi_exanet_counters::rma_read_requests_served},
    {"rndv_acked", &fi_exanet_counters::rndv_acked},
    {"ri_sent", &fi_exanet_counters::ri_sent},
    {"ri_recv", &fi_exanet_counters::ri_recv},
    {"concurrent", &fi_exanet_counters::concurrent},
    {"rtr_sent", &fi_exanet_counters::rtr_sent},
    {"rtr_late", &fi_exanet_counters::rtr_late},
    {"rtr_stored", &fi_exanet_counters::rtr_stored},
    {"rtr_dropped", &fi_exanet_counters::rtr_dropped},
    {"rtr_stale", &fi_exanet_counters::rtr_stale},
    {"suspensions", &fi_exanet_counters::suspensions},
    {"parked", &fi_exanet_counters::parked},
    {"served_drops", &fi_exanet_counters::served_drops},
    {"rtr_cancels", &fi_exanet_counters::rtr_cancels},
    {"drop_foreign_pdid", &fi_exanet_counters::drop_foreign_pdid},
    {"drop_unknown", &fi_exanet_counters::drop_unknown},
    {"drop_bad_field", &fi_exanet_counters::drop_bad_field},
    {"drop_dma_refused", &fi_exanet_counters::drop_dma_refused},
    {"drop_notify_refused", &fi_exanet_counters::drop_notify_refused},
    {"drop_rma_event", &fi_exanet_counters::drop_rma_event},
    {"psn_window_drops", &fi_exanet_counters::psn_window_drops},
    {"rndv_timeouts", &fi_exanet_counters::rndv_timeouts},
    {"intake_held", &fi_exanet_counters::intake_held},
    {"drop_backlog", &fi_exanet_counters::drop_backlog},
    {"rndv_deadlines", &fi_exanet_counters::rndv_deadlines},
};
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
