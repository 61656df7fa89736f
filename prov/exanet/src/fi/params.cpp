#include "fi/params.hpp"

#include <rdma/fi_errno.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "core/log.hpp"
#include "fi/attr.hpp"
#include "fi/provider.hpp"
#include "proto/endpoint.hpp"

namespace exanet::fi {
namespace {

struct size_param {
  const char* name;
  const char* help;
  std::size_t proto::config::*field;
};

constexpr size_param g_size_params[] = {
    {"medium_max", "Largest message sent through the per-sender bounce ring (bytes); larger ones "
                   "use the rendezvous (default 8192)", &proto::config::medium_max},
    {"inject_size", "Largest fi_inject payload, copied at post time (default 4096)",
     &proto::config::inject_size},
    {"mailbox_slots", "64-byte packets per endpoint mailbox, rounded up to a power of two "
                      "(default 1024)", &proto::config::mailbox_slots},
    {"bounce_ring_bytes", "Bytes of each per-sender bounce ring at a receiver, rounded up to a "
                          "power of two (default 262144)", &proto::config::bounce_ring_bytes},
    {"bounce_peers", "Senders that can hold a bounce ring at one receiver; others use the "
                     "rendezvous for medium messages (default 64)", &proto::config::bounce_peers},
    {"notify_slots", "DMA notification slots per endpoint: rendezvous receives in progress at "
                     "once (default 1024)", &proto::config::notify_slots},
    {"rma_inline_max", "Largest RMA write copied through the per-sender bounce ring and landed by "
                       "the target's progress; larger ones, and FI_DELIVERY_COMPLETE writes, are "
                       "DMA writes (default 65536, at most half a bounce ring; 0 disables)",
     &proto::config::rma_inline_max},
    {"mr_keys", "Memory registrations one endpoint can expose to RMA, rounded up to a power of "
                "two (default 2048, at most 65536)",
     &proto::config::mr_keys},
    {"event_rings", "Initiators that can hold an RMA event ring at one target (default 64, at "
                    "most 64); the others, and 0, send RMA events as mailbox packets",
     &proto::config::event_rings},
    {"tx_size", "Transmit queue size reported to applications (default 1024)",
     &proto::config::tx_size},
    {"rx_size", "Receive queue size reported to applications (default 1024)",
     &proto::config::rx_size},
    {"unexpected_max", "Unexpected messages one endpoint holds at once; at the bound it takes no "
                       "more message packets until the application receives (default 16 x "
                       "rx_attr->size)", &proto::config::unexpected_max},
    {"unexpected_bytes", "Bytes of unexpected medium payload one endpoint holds at once; at the "
                         "bound, as unexpected_max (default rx_attr->size x medium_max, at most "
                         "64 MiB)", &proto::config::unexpected_bytes},
    {"stored_rtr_max", "RTRs one endpoint holds for sends not posted yet; beyond it an RTR is "
                       "refused and its receive goes sender-initiated (default 4 x "
                       "tx_attr->size)", &proto::config::stored_rtr_max},
    {"iov_limit", "Iovecs per operation and remote ranges per RMA operation (iov_limit and "
                  "rma_iov_limit; default 8, at most 8)",
     &proto::config::iov_limit},
};

// FNV-1a: a stable PDID from a launcher's job name, identical in every rank of the job.
std::uint32_t hash_pdid(std::string_view s) noexcept {
  std::uint32_t h = 2166136261u;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  h &= 0x7fffffff;
  return h < 2 ? h + 2 : h;  // 0 is never a PDID, 1 is the default of hand-started processes
}

// The ranks of one job share these variables; separate jobs differ.
std::uint32_t pdid_from_launcher() noexcept {
  static constexpr const char* job_vars[] = {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid",
                                             "SLURM_JOB_ID", "PMI_KVSNAME", "I_MPI_JOB_ID"};
  for (const char* var : job_vars) {
    if (const char* v = std::getenv(var); v && *v) {
      std::string_view job(v);
      if (std::strcmp(var, "SLURM_JOB_ID") == 0) {
        // Steps of one allocation are separate jobs.
        if (const char* step = std::getenv("SLURM_STEP_ID")) return hash_pdid(std::string(job) + "." + step);
      }
      return hash_pdid(job);
    }
  }
  return 1;
}

}  // namespace

void params_define(fi_provider* prov) noexcept {
  for (const size_param& p : g_size_params) fi_param_define(prov, p.name, FI_PARAM_SIZE_T, p.help);
  fi_param_define(prov, "pdid", FI_PARAM_INT,
                  "Protection domain id; only endpoints of equal PDID can talk. Default: derived "
                  "from the job launcher (PMIx, Slurm, Hydra), else 1");
  fi_param_define(prov, "node", FI_PARAM_INT, "Node id of this host (default 0)");
  fi_param_define(prov, "use_cma", FI_PARAM_BOOL,
                  "1: write into peer memory with process_vm_writev (lands without the target's "
                  "progress; falls back by itself when the kernel refuses). Default 0: DMA writes "
                  "are pipelined through the target's shared staging area, several times faster");
  fi_param_define(prov, "copy", FI_PARAM_STRING,
                  "How copies between buffers that disagree in their position within a cache "
                  "line are made: auto (default: measured once per process, about a millisecond), "
                  "libc (always memcpy) or loop (always exanet's aligned-store loop)");
  fi_param_define(prov, "dead_peer_check_ms", FI_PARAM_INT,
                  "Period of the liveness check of peers that transfers or posted receives "
                  "wait on (default 200)");
  fi_param_define(prov, "rndv_timeout_ms", FI_PARAM_INT,
                  "A receive matched to a rendezvous whose data has not come for this long asks "
                  "its sender whether the send exists, and fails with FI_EIO if it does not "
                  "(default 30000; 0: never ask)");
  fi_param_define(prov, "rndv_deadline_ms", FI_PARAM_INT,
                  "Opt-in hard limit: a receive matched to a rendezvous fails with FI_ETIMEDOUT "
                  "when no data came for this long, even if its sender has the send (default 0: "
                  "none)");
  fi_param_define(prov, "stats", FI_PARAM_STRING,
                  "Print each endpoint's protocol counters when it closes: stderr (or 1), or a "
                  "file name to append one line per endpoint to (default: off)");
  fi_param_define(prov, "proto_info", FI_PARAM_BOOL,
                  "1: every endpoint prints, when it opens, which protocol each operation takes "
                  "by size and situation (eager, medium, rendezvous, inline RMA...), to stderr "
                  "whatever FI_LOG_LEVEL says (default 0)");
  fi_param_define(prov, "protocol", FI_PARAM_STRING,
                  "Rendezvous family: write (default) or read (the thesis baseline: "
                  "sender-initiated, acknowledged) or optimistic (the thesis's speculative variant: "
                  "every message above medium_max waits for the receiver's RTR; any-source "
                  "receives and FI_PEEK are refused; see fi_exanet(7) for what it assumes)");
}

bool params_protocol(proto::protocol_family& out) noexcept {
  char* name = nullptr;
  out = proto::protocol_family::write;
  if (fi_param_get_str(&provider(), "protocol", &name) != 0 || !name || !*name) return true;
  if (std::strcmp(name, "write") == 0) return true;
  if (std::strcmp(name, "read") == 0) {
    out = proto::protocol_family::read;
    return true;
  }
  if (std::strcmp(name, "optimistic") == 0) {
    out = proto::protocol_family::optimistic;
    return true;
  }
  EXANET_LOG(warn, core, "FI_EXANET_PROTOCOL=%s is not one of write, read, optimistic", name);
  return false;
}

const char* params_stats_destination() noexcept {
  char* v = nullptr;
  if (fi_param_get_str(&provider(), "stats", &v) != 0 || !v || !*v || std::strcmp(v, "0") == 0)
    return nullptr;
  return v;
}

proto::config params_read() noexcept {
  proto::config c;
  fi_provider* prov = &provider();
  for (const size_param& p : g_size_params) {
    std::size_t v = 0;
    if (fi_param_get_size_t(prov, p.name, &v) == 0) c.*p.field = v;
  }
  int v = 0;
  c.pdid = pdid_from_launcher();
  if (fi_param_get_int(prov, "pdid", &v) == 0) {
    if (v > 0)
      c.pdid = static_cast<std::uint32_t>(v);
    else
      EXANET_LOG(warn, core, "FI_EXANET_PDID must be positive; using %u", c.pdid);
  }
  if (fi_param_get_int(prov, "node", &v) == 0 && v >= 0 && v < 65536)
    c.node = static_cast<std::uint16_t>(v);
  if (fi_param_get_bool(prov, "use_cma", &v) == 0) c.use_cma = v != 0;
  if (fi_param_get_bool(prov, "proto_info", &v) == 0) c.proto_info = v != 0;
  if (fi_param_get_int(prov, "dead_peer_check_ms", &v) == 0 && v > 0)
    c.dead_peer_check_ms = static_cast<unsigned>(v);
  if (fi_param_get_int(prov, "rndv_timeout_ms", &v) == 0 && v >= 0)
    c.rndv_timeout_ms = static_cast<unsigned>(v);
  if (fi_param_get_int(prov, "rndv_deadline_ms", &v) == 0 && v >= 0)
    c.rndv_deadline_ms = static_cast<unsigned>(v);
  (void)params_protocol(c.protocol);  // an unknown name was refused by fi_getinfo already
  if (char* copy = nullptr; fi_param_get_str(prov, "copy", &copy) == 0 && copy && *copy) {
    if (std::strcmp(copy, "libc") == 0)
      c.copy = core::copy_policy::libc;
    else if (std::strcmp(copy, "loop") == 0)
      c.copy = core::copy_policy::vector;
    else if (std::strcmp(copy, "auto") != 0)
      EXANET_LOG(warn, core, "FI_EXANET_COPY=%s is not one of auto, libc, loop; using auto", copy);
  }
  // Keep the sizes consistent: a medium message fits half a ring, an inject fits the buffered
  // paths (so it never needs the rendezvous), and nothing is zero.
  if (c.bounce_ring_bytes < 4096) c.bounce_ring_bytes = 4096;
  if (c.medium_max > c.bounce_ring_bytes / 2) {
    EXANET_LOG(warn, core, "FI_EXANET_MEDIUM_MAX %zu exceeds half a bounce ring; using %zu",
               c.medium_max, c.bounce_ring_bytes / 2);
    c.medium_max = c.bounce_ring_bytes / 2;
  }
  if (c.inject_size > c.medium_max) c.inject_size = c.medium_max;
  if (c.rma_inline_max > c.bounce_ring_bytes / 2) c.rma_inline_max = c.bounce_ring_bytes / 2;
  if (c.mailbox_slots < 16) c.mailbox_slots = 16;
  if (c.notify_slots < 16) c.notify_slots = 16;
  if (c.notify_slots > 4096) c.notify_slots = 4096;  // the device's bells: one summary word
  if (c.bounce_peers == 0) c.bounce_peers = 1;
  if (c.mr_keys < 16) c.mr_keys = 16;
  if (c.mr_keys > 65536) c.mr_keys = 65536;  // an RMA event names its key slot in 16 bits
  if (c.event_rings > 64) c.event_rings = 64;  // one doorbell word
  if (c.tx_size == 0) c.tx_size = 1;
  if (c.rx_size == 0) c.rx_size = 1;
  if (c.tx_size > max_queue_size) c.tx_size = max_queue_size;
  if (c.rx_size > max_queue_size) c.rx_size = max_queue_size;
  if (c.iov_limit == 0) c.iov_limit = 1;
  if (c.iov_limit > proto::max_iov) c.iov_limit = proto::max_iov;
  return c;
}

}  // namespace exanet::fi
