// SPDX-License-Identifier: BSD-2-Clause
#include "fi/params.hpp"

#include <rdma/fi_errno.h>

#include <array>
#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/log.hpp"
#include "dev/backend.hpp"
#include "fi/attr.hpp"
#include "fi/param_table.hpp"
#include "fi/provider.hpp"
#include "proto/endpoint.hpp"

namespace exanet::fi {
namespace {

// ---- the table bound to proto::config -------------------------------------------------------

// Every numeric and boolean row has a field; -Wswitch names a row added without one.
constexpr std::int64_t field(const proto::config& c, param_id id) noexcept {
  switch (id) {
    case param_id::eager_max: return static_cast<std::int64_t>(c.eager_max);
    case param_id::medium_max: return static_cast<std::int64_t>(c.medium_max);
    case param_id::inject_size: return static_cast<std::int64_t>(c.inject_size);
    case param_id::mailbox_slots: return static_cast<std::int64_t>(c.mailbox_slots);
    case param_id::bounce_ring_bytes: return static_cast<std::int64_t>(c.bounce_ring_bytes);
    case param_id::bounce_peers: return static_cast<std::int64_t>(c.bounce_peers);
    case param_id::notify_slots: return static_cast<std::int64_t>(c.notify_slots);
    case param_id::rma_inline_max: return static_cast<std::int64_t>(c.rma_inline_max);
    case param_id::mr_keys: return static_cast<std::int64_t>(c.mr_keys);
    case param_id::event_rings: return static_cast<std::int64_t>(c.event_rings);
    case param_id::tx_size: return static_cast<std::int64_t>(c.tx_size);
    case param_id::rx_size: return static_cast<std::int64_t>(c.rx_size);
    case param_id::unexpected_max: return static_cast<std::int64_t>(c.unexpected_max);
    case param_id::unexpected_bytes: return static_cast<std::int64_t>(c.unexpected_bytes);
    case param_id::stored_rtr_max: return static_cast<std::int64_t>(c.stored_rtr_max);
    case param_id::iov_limit: return static_cast<std::int64_t>(c.iov_limit);
    case param_id::pdid: return c.pdid;
    case param_id::node: return c.node;
    // Its default (0) is what the automatic mode reports: the older switch is read only when set.
    case param_id::use_cma: return c.dma_engine == dev::dma_engine_mode::cross_memory_attach ? 1 : 0;
    case param_id::dead_peer_check_ms: return c.dead_peer_check_ms;
    case param_id::rndv_timeout_ms: return c.rndv_timeout_ms;
    case param_id::rndv_deadline_ms: return c.rndv_deadline_ms;
    case param_id::proto_info: return c.proto_info ? 1 : 0;
    case param_id::idle_yield: return c.idle_yield;
    case param_id::live_stats: return 1;  // the fi layer's own (params_live_stats), on by default
    // The link model's: read by params_link into the device's settings, not proto::config.
    case param_id::link_model:
    case param_id::link_hop_ns:
    case param_id::link_intra_mbps:
    case param_id::link_inter_mbps:
    case param_id::link_inject_ns:
    case param_id::link_yield: return param(id).default_value;
    case param_id::link_torus:
    case param_id::link_placement:
    case param_id::link_position:
    case param_id::copy:
    case param_id::dma_engine:
    case param_id::stats:
    case param_id::profile:
    case param_id::progress:
    case param_id::protocol:
    case param_id::network:
    case param_id::network_provider:
    case param_id::network_node: break;  // strings: read by their own functions below
    case param_id::network_lost_after_ms: return c.network_lost_after_ms;
    case param_id::network_ring_bytes: return static_cast<std::int64_t>(c.network_ring_bytes);
  }
  return 0;
}

// v lies within the row's bounds (params_read clamps first), so every cast below is exact.
void store(proto::config& c, param_id id, std::int64_t v) noexcept {
  const auto z = static_cast<std::size_t>(v);
  switch (id) {
    case param_id::eager_max: c.eager_max = z; break;
    case param_id::medium_max: c.medium_max = z; break;
    case param_id::inject_size: c.inject_size = z; break;
    case param_id::mailbox_slots: c.mailbox_slots = z; break;
    case param_id::bounce_ring_bytes: c.bounce_ring_bytes = z; break;
    case param_id::bounce_peers: c.bounce_peers = z; break;
    case param_id::notify_slots: c.notify_slots = z; break;
    case param_id::rma_inline_max: c.rma_inline_max = z; break;
    case param_id::mr_keys: c.mr_keys = z; break;
    case param_id::event_rings: c.event_rings = z; break;
    case param_id::tx_size: c.tx_size = z; break;
    case param_id::rx_size: c.rx_size = z; break;
    case param_id::unexpected_max: c.unexpected_max = z; break;
    case param_id::unexpected_bytes: c.unexpected_bytes = z; break;
    case param_id::stored_rtr_max: c.stored_rtr_max = z; break;
    case param_id::iov_limit: c.iov_limit = z; break;
    case param_id::pdid: c.pdid = static_cast<std::uint32_t>(v); break;
    case param_id::node: c.node = static_cast<std::uint16_t>(v); break;
    case param_id::use_cma:
      c.dma_engine = v != 0 ? dev::dma_engine_mode::cross_memory_attach : dev::dma_engine_mode::staged;
      break;
    case param_id::dead_peer_check_ms: c.dead_peer_check_ms = static_cast<unsigned>(v); break;
    case param_id::rndv_timeout_ms: c.rndv_timeout_ms = static_cast<unsigned>(v); break;
    case param_id::rndv_deadline_ms: c.rndv_deadline_ms = static_cast<unsigned>(v); break;
    case param_id::proto_info: c.proto_info = v != 0; break;
    case param_id::idle_yield: c.idle_yield = static_cast<std::uint32_t>(v); break;
    case param_id::live_stats: break;  // read by params_live_stats
    case param_id::link_model:
    case param_id::link_hop_ns:
    case param_id::link_intra_mbps:
    case param_id::link_inter_mbps:
    case param_id::link_inject_ns:
    case param_id::link_yield:
    case param_id::link_torus:
    case param_id::link_placement:
    case param_id::link_position: break;  // read by params_link
    case param_id::copy:
    case param_id::dma_engine:
    case param_id::stats:
    case param_id::profile:
    case param_id::progress:
    case param_id::protocol:
    case param_id::network:
    case param_id::network_provider:
    case param_id::network_node: break;
    case param_id::network_lost_after_ms:
      c.network_lost_after_ms = static_cast<unsigned>(v);
      break;
    case param_id::network_ring_bytes: c.network_ring_bytes = z; break;
  }
}

// The table's defaults are proto::config's (the unit tests build configs without the table).
constexpr bool defaults_agree() noexcept {
  const proto::config c{};
  for (const param_spec& p : g_params)
    if (p.type != param_type::string && field(c, p.id) != p.default_value) return false;
  return c.copy == core::copy_policy::automatic && c.protocol == proto::protocol_family::write &&
         c.dma_engine == dev::dma_engine_mode::automatic;
}
static_assert(defaults_agree(), "fi/param_table.hpp and proto::config disagree on a default");
static_assert(param(param_id::tx_size).max == max_queue_size &&
                  param(param_id::rx_size).max == max_queue_size,
              "tx_size and rx_size are bounded by attr.hpp's max_queue_size");
static_assert(param(param_id::iov_limit).max == proto::max_iov, "iov_limit is bounded by max_iov");
static_assert(param(param_id::node).max == 65535, "a node id is 16 bits");
static_assert(param(param_id::eager_max).max == proto::wire::eager_train_limit,
              "eager_max is bounded by the receiver's train buffer");

// ---- warnings -------------------------------------------------------------------------------

// Parameters are read at every fi_getinfo and domain open, and a process may change its
// environment in between: a warning is logged once per parameter and offending text, so a bad
// value says so once however often it is read, and a new bad value says so again.
std::mutex g_warned_lock;
enum class warning : std::uint8_t { value, relation };  // a bad value; a rule between two
std::array<std::array<std::string, 2>, param_count> g_warned;

[[gnu::format(printf, 4, 5)]] void warn_param(param_id id, warning kind, std::string_view key,
                                              const char* fmt, ...) noexcept {
  if (!core::log_enabled(core::log_level::warn, core::log_subsys::core)) return;
  try {
    std::lock_guard lock(g_warned_lock);
    std::string& last = g_warned[static_cast<std::size_t>(id)][static_cast<std::size_t>(kind)];
    if (last == key) return;
    last = key;
  } catch (...) {
    return;  // no memory for the key: stay quiet rather than fail the read
  }
  char text[384];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  core::log_write(core::log_level::warn, core::log_subsys::core, "params", __LINE__, "%s", text);
}

// ---- reading one parameter ------------------------------------------------------------------

/// FI_EXANET_<NAME>, without allocating (the table's names are short: checked at compile time).
struct variable {
  char text[48];
  explicit variable(const param_spec& p) noexcept {
    std::memcpy(text, "FI_EXANET_", 10);
    std::size_t n = 10;
    for (char c : p.name) text[n++] = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    text[n] = '\0';
  }
  const char* c_str() const noexcept { return text; }
};
constexpr bool names_fit() noexcept {
  for (const param_spec& p : g_params)
    if (p.name.size() + 11 > sizeof variable::text || p.name.data()[p.name.size()] != '\0')
      return false;
  return true;
}
static_assert(names_fit(), "parameter names are NUL-terminated literals that fit variable");

/// The value of a size or integer parameter, within its bounds; nullopt when it is unset.
/// libfabric 1.17 parses numbers with atoi/strtol and reports neither trailing text nor
/// overflow (FI_EXANET_MAILBOX_SLOTS=100000000000 wraps in an int), so the variable's text is
/// parsed here, strictly; a value out of bounds is clamped and a text that is no number
/// leaves the default, each with a warning.
std::optional<std::int64_t> read_number(const param_spec& p) noexcept {
  fi_provider* prov = &provider();
  std::int64_t parsed = 0;
  if (p.type == param_type::size) {
    std::size_t v = 0;
    if (fi_param_get_size_t(prov, p.name.data(), &v) != 0) return std::nullopt;
    parsed = v > static_cast<std::size_t>(INT64_MAX) ? INT64_MAX : static_cast<std::int64_t>(v);
  } else {
    int v = 0;
    if (fi_param_get_int(prov, p.name.data(), &v) != 0) return std::nullopt;
    parsed = v;
  }
  const variable var(p);
  if (const char* text = std::getenv(var.c_str())) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(text, &end, 0);
    while (end && *end == ' ') ++end;
    if (end == text || !end || *end != '\0') {
      warn_param(p.id, warning::value, text, "%s=%s is not a number; using the default",
                 var.c_str(), text);
      return std::nullopt;
    }
    parsed = errno == ERANGE ? (v < 0 ? INT64_MIN : INT64_MAX) : v;
  }
  if (parsed < p.min || parsed > p.max) {
    const std::int64_t used = parsed < p.min ? p.min : p.max;
    char key[24];
    std::snprintf(key, sizeof key, "%lld", static_cast<long long>(parsed));
    const char* text = std::getenv(var.c_str());
    warn_param(p.id, warning::value, key, "%s=%s is out of bounds [%lld, %lld]; using %lld",
               var.c_str(), text ? text : key, static_cast<long long>(p.min),
               static_cast<long long>(p.max), static_cast<long long>(used));
    return used;
  }
  return parsed;
}

// libfabric logs a text that is no boolean itself, and reports it as unset.
std::optional<bool> read_bool(const param_spec& p) noexcept {
  int v = 0;
  if (fi_param_get_bool(&provider(), p.name.data(), &v) != 0) return std::nullopt;
  return v != 0;
}

/// A string parameter's text, or nullptr when unset or empty.
const char* read_string(param_id id) noexcept {
  char* v = nullptr;
  if (fi_param_get_str(&provider(), param(id).name.data(), &v) != 0 || !v || !*v) return nullptr;
  return v;
}

/// After the bounds of each parameter, the rules between them; a value changed is logged.
void clamp_to(param_id id, std::size_t& value, std::size_t limit, const char* why) noexcept {
  if (value <= limit) return;
  char key[48];
  std::snprintf(key, sizeof key, "%zu>%zu", value, limit);
  warn_param(id, warning::relation, key, "%s %zu exceeds %s; using %zu",
             variable(param(id)).c_str(), value, why, limit);
  value = limit;
}

// ---- the configuration in force ------------------------------------------------------------

std::size_t round_pow2(std::size_t v) noexcept {
  std::size_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

const char* family_name(proto::protocol_family f) noexcept {
  switch (f) {
    case proto::protocol_family::write: return "write";
    case proto::protocol_family::read: return "read";
    case proto::protocol_family::optimistic: return "optimistic";
  }
  return "?";
}

/// At FI_LOG_INFO, the configuration every later fi_getinfo and domain of this process uses,
/// after the bounds and the rules between parameters: once, and again only when it changes.
/// The sizes are the endpoint's as it opens (rounded to powers of two); the segment's large
/// parts are the mailbox and the bounce rings, each ring reserved only when a sender claims it.
void log_config(const proto::config& c) noexcept {
  if (!core::log_enabled(core::log_level::info, core::log_subsys::core)) return;
  const std::size_t slots = round_pow2(c.mailbox_slots);
  const std::size_t ring = round_pow2(c.bounce_ring_bytes);
  // Two lines: the log's sink formats at most 512 bytes a message.
  char protocols[400], resources[400];
  std::snprintf(protocols, sizeof protocols,
                "exanet %s: configuration in force (1/2): protocol family %s; eager up to %zu B, "
                "medium up to %zu B, inject up to %zu B, inline RMA writes up to %zu B; "
                "DMA engine %s; pdid %u node %u; peer check every %u ms, rendezvous timeout %u "
                "ms, deadline %u ms (0: none)",
                FI_EXANET_VERSION_STRING, family_name(c.protocol), c.eager_max, c.medium_max,
                c.inject_size,
                c.rma_inline_max, dev::dma_engine_name(c.dma_engine), c.pdid, c.node,
                c.dead_peer_check_ms, c.rndv_timeout_ms, c.rndv_deadline_ms);
  std::snprintf(resources, sizeof resources,
                "configuration in force (2/2): segment: mailbox %zu slots (%zu KiB), %zu "
                "notification slots, bounce rings %zu x %zu KiB (%zu MiB, each reserved when a "
                "sender claims it), %zu RMA keys, %zu event rings; queues tx %zu rx %zu, "
                "iov_limit %zu; unexpected bounds %zu messages, %zu B, stored RTRs %zu (0: from "
                "the queue sizes)",
                slots, slots * 64 / 1024, c.notify_slots, c.bounce_peers, ring / 1024,
                c.bounce_peers * ring >> 20, round_pow2(c.mr_keys), c.event_rings, c.tx_size,
                c.rx_size, c.iov_limit, c.unexpected_max, c.unexpected_bytes, c.stored_rtr_max);
  static std::mutex lock;
  static char last[sizeof protocols + sizeof resources];
  {
    std::lock_guard guard(lock);
    char both[sizeof last];
    std::snprintf(both, sizeof both, "%s\n%s", protocols, resources);
    if (std::strcmp(last, both) == 0) return;
    std::memcpy(last, both, sizeof both);
  }
  core::log_write(core::log_level::info, core::log_subsys::core, "params", __LINE__, "%s",
                  protocols);
  core::log_write(core::log_level::info, core::log_subsys::core, "params", __LINE__, "%s",
                  resources);
}

// FNV-1a: a stable PDID from a launcher's job name, identical in every rank of the job.
std::uint32_t hash_pdid(std::string_view s) noexcept {
  std::uint32_t h = 2166136261u;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  h &= 0x7fffffff;
  return h < 2 ? h + 2 : h;  // 0 is never a PDID, 1 is the default of hand-started processes
}

// One launch shares these variables; separate launches differ. A launch is what MPI lets talk:
// a job and every job it starts with MPI_Comm_spawn, which gets a namespace of its own but must
// reach its parents (psm2 draws its job key from the same place for the same reason).
//   - Open MPI 4's mpirun: OMPI_MCA_orte_precondition_transports, one random key per mpirun,
//     inherited by spawned jobs (a direct launch computes it from the job id). Its
//     PMIX_NAMESPACE is the job's own number, different in a spawned job.
//   - PRRTE (Open MPI 5): namespaces "<launcher>@<job>"; the part before '@' names the launch.
//   - Slurm: each step is a launch. MPICH 4.0's Hydra exports no job id at all (every job gets
//     the default, 1).
std::uint32_t pdid_from_launcher() noexcept {
  static constexpr const char* launch_vars[] = {"OMPI_MCA_orte_precondition_transports",
                                                "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid",
                                                "SLURM_JOB_ID", "PMI_KVSNAME", "I_MPI_JOB_ID"};
  for (const char* var : launch_vars) {
    const char* v = std::getenv(var);
    if (!v || !*v) continue;
    std::string_view launch(v);
    if (std::strcmp(var, "PMIX_NAMESPACE") == 0) {
      if (const auto at = launch.rfind('@'); at != std::string_view::npos && at > 0)
        launch = launch.substr(0, at);
    } else if (std::strcmp(var, "SLURM_JOB_ID") == 0) {
      if (const char* step = std::getenv("SLURM_STEP_ID"))
        return hash_pdid(std::string(launch) + "." + step);
    }
    return hash_pdid(launch);
  }
  return 1;
}

// The rank of this process in its job, from the launcher; -1 without one.
std::int64_t rank_from_launcher() noexcept {
  static constexpr const char* rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                              "SLURM_PROCID"};
  for (const char* var : rank_vars) {
    if (const char* v = std::getenv(var); v && *v) {
      char* end = nullptr;
      const long long r = std::strtoll(v, &end, 10);
      if (end && *end == '\0' && r >= 0) return r;
    }
  }
  return -1;
}

/// "4x4x2" into torus; false (torus untouched) unless three sides of 1 to 255.
bool parse_torus(const char* text, std::uint16_t (&torus)[3]) noexcept {
  unsigned x = 0, y = 0, z = 0;
  int used = 0;
  if (std::sscanf(text, "%ux%ux%u%n", &x, &y, &z, &used) != 3 || text[used] != '\0') return false;
  for (unsigned v : {x, y, z})
    if (v < 1 || v > dev::max_torus_side) return false;
  torus[0] = static_cast<std::uint16_t>(x);
  torus[1] = static_cast<std::uint16_t>(y);
  torus[2] = static_cast<std::uint16_t>(z);
  return true;
}

/// A position "X Y Z F" (separators given by fmt) inside the torus, or false.
bool parse_position(const char* text, const char* fmt, const std::uint16_t (&torus)[3],
                    dev::torus_position& out, int* consumed = nullptr) noexcept {
  unsigned x = 0, y = 0, z = 0, f = 0;
  int used = 0;
  if (std::sscanf(text, fmt, &x, &y, &z, &f, &used) != 4) return false;
  if (x >= torus[0] || y >= torus[1] || z >= torus[2] || f >= dev::fpgas_per_qfdb) return false;
  out = {static_cast<std::uint16_t>(x), static_cast<std::uint16_t>(y),
         static_cast<std::uint16_t>(z), static_cast<std::uint8_t>(f)};
  if (consumed) *consumed = used;
  return true;
}

/// The entries "KEY X Y Z FPGA" of a placement file ('#' starts a comment); false, with the
/// line, when the file cannot be read or a line is not such an entry.
bool read_placement(const char* path, const std::uint16_t (&torus)[3],
                    std::vector<std::pair<std::uint64_t, dev::torus_position>>& out,
                    std::string& why) noexcept {
  std::FILE* f = std::fopen(path, "r");
  if (!f) {
    why = std::string("cannot open it: ") + std::strerror(errno);
    return false;
  }
  char line[256];
  unsigned number = 0;
  bool ok = true;
  while (ok && std::fgets(line, sizeof line, f)) {
    ++number;
    if (char* hash = std::strchr(line, '#')) *hash = '\0';
    unsigned long long key = 0;
    int used = 0;
    if (std::sscanf(line, " %llu%n", &key, &used) != 1) {
      if (std::strspn(line, " \t\r\n") == std::strlen(line)) continue;  // blank
      ok = false;
      break;
    }
    dev::torus_position pos;
    int rest = 0;
    if (!parse_position(line + used, " %u %u %u %u%n", torus, pos, &rest) ||
        std::strspn(line + used + rest, " \t\r\n") != std::strlen(line + used + rest)) {
      ok = false;
      break;
    }
    out.emplace_back(key, pos);
  }
  std::fclose(f);
  if (!ok) why = "line " + std::to_string(number) + " is not \"KEY X Y Z FPGA\" inside the torus";
  return ok;
}

}  // namespace

bool params_link(dev::link_params& p, dev::link_placement& where) noexcept {
  p = {};
  where = {};
  p.enabled = read_bool(param(param_id::link_model)).value_or(false);
  if (!p.enabled) return true;
  const auto number = [](param_id id) {
    return static_cast<std::uint32_t>(read_number(param(id)).value_or(param(id).default_value));
  };
  p.hop_ns = number(param_id::link_hop_ns);
  p.intra_mbps = number(param_id::link_intra_mbps);
  p.inter_mbps = number(param_id::link_inter_mbps);
  p.inject_ns = number(param_id::link_inject_ns);
  p.yield_when_idle = read_bool(param(param_id::link_yield)).value_or(false);
  if (const char* t = read_string(param_id::link_torus); t && !parse_torus(t, p.torus))
    warn_param(param_id::link_torus, warning::value, t,
               "FI_EXANET_LINK_TORUS=%s is not XxYxZ with sides 1 to 255; using 4x4x2", t);
  where.rank = rank_from_launcher();
  if (const char* pos = read_string(param_id::link_position)) {
    int used = 0;
    where.has_position =
        parse_position(pos, "%u,%u,%u,%u%n", p.torus, where.position, &used) && pos[used] == '\0';
    if (!where.has_position)
      warn_param(param_id::link_position, warning::value, pos,
                 "FI_EXANET_LINK_POSITION=%s is not X,Y,Z,FPGA inside the %ux%ux%u torus; "
                 "placing by FI_EXANET_LINK_PLACEMENT",
                 pos, p.torus[0], p.torus[1], p.torus[2]);
  }
  const char* placement = read_string(param_id::link_placement);
  if (!placement || std::strcmp(placement, "rank") == 0) return true;
  if (std::strcmp(placement, "port") == 0) {
    where.by_port = true;
    return true;
  }
  std::string why;
  try {
    if (read_placement(placement, p.torus, where.entries, why)) return true;
  } catch (...) { why = "out of memory"; }
  where.entries.clear();
  warn_param(param_id::link_placement, warning::value, placement,
             "FI_EXANET_LINK_PLACEMENT=%s: %s; placing by rank", placement, why.c_str());
  return false;
}

void params_define(fi_provider* prov) noexcept {
  // libfabric keeps the pointers it is given: the texts live as long as the module.
  static std::array<std::string, param_count> help;
  for (const param_spec& p : g_params) {
    static constexpr fi_param_type fi_types[] = {FI_PARAM_SIZE_T, FI_PARAM_INT, FI_PARAM_BOOL,
                                                 FI_PARAM_STRING};
    std::string& h = help[static_cast<std::size_t>(p.id)];
    try {
      h = std::string(p.help) + " (" + param_bounds_text(p) + ")";
    } catch (...) {
      h.clear();
    }
    fi_param_define(prov, p.name.data(), fi_types[static_cast<std::size_t>(p.type)],
                    h.empty() ? "" : h.c_str());
  }
}

bool params_protocol(proto::protocol_family& out) noexcept {
  out = proto::protocol_family::write;
  const char* name = read_string(param_id::protocol);
  if (!name) return true;
  if (std::strcmp(name, "write") == 0) return true;
  if (std::strcmp(name, "read") == 0) {
    out = proto::protocol_family::read;
    return true;
  }
  if (std::strcmp(name, "optimistic") == 0) {
    out = proto::protocol_family::optimistic;
    return true;
  }
  warn_param(param_id::protocol, warning::value, name,
             "FI_EXANET_PROTOCOL=%s is not one of write, read, optimistic", name);
  return false;
}

bool params_auto_progress() noexcept {
  const char* v = read_string(param_id::progress);
  if (!v || std::strcmp(v, "manual") == 0) return false;
  if (std::strcmp(v, "auto") == 0) return true;
  warn_param(param_id::progress, warning::value, v,
             "FI_EXANET_PROGRESS=%s is not one of manual, auto; using manual", v);
  return false;
}

const char* params_profile_destination() noexcept {
  const char* v = read_string(param_id::profile);
  return v && *v && std::strcmp(v, "0") != 0 ? v : nullptr;
}

const char* params_stats_destination() noexcept {
  const char* v = read_string(param_id::stats);
  return v && std::strcmp(v, "0") != 0 ? v : nullptr;
}

bool params_live_stats() noexcept { return read_bool(param(param_id::live_stats)).value_or(true); }

/// FI_EXANET_DMA_ENGINE, unless the older FI_EXANET_USE_CMA was set (params_read stored it).
void read_dma_engine(proto::config& c) noexcept {
  if (read_bool(param(param_id::use_cma)).has_value()) return;
  const char* v = read_string(param_id::dma_engine);
  if (!v || std::strcmp(v, "auto") == 0) return;
  if (std::strcmp(v, "staged") == 0)
    c.dma_engine = dev::dma_engine_mode::staged;
  else if (std::strcmp(v, "cma") == 0)
    c.dma_engine = dev::dma_engine_mode::cross_memory_attach;
  else
    warn_param(param_id::dma_engine, warning::value, v,
               "FI_EXANET_DMA_ENGINE=%s is not one of auto, staged, cma; using auto", v);
}

/// FI_EXANET_NETWORK, _PROVIDER and _NODE into the configuration; a name too long for the
/// configuration's room is refused with a warning (the default stays).
void read_network(proto::config& c) noexcept {
  using use = dev::open_params::network::use;
  if (const char* v = read_string(param_id::network)) {
    if (std::strcmp(v, "off") == 0)
      c.network = use::off;
    else if (std::strcmp(v, "other_hosts") == 0)
      c.network = use::other_hosts;
    else if (std::strcmp(v, "every_peer") == 0)
      c.network = use::every_peer;
    else
      warn_param(param_id::network, warning::value, v,
                 "FI_EXANET_NETWORK=%s is not one of off, other_hosts, every_peer; using off", v);
  }
  auto text = [](param_id id, auto& room) {
    if (const char* v = read_string(id)) {
      if (std::strlen(v) >= room.size())
        warn_param(id, warning::value, v, "FI_EXANET_%s is longer than %zu characters; ignored",
                   id == param_id::network_node ? "NETWORK_NODE" : "NETWORK_PROVIDER",
                   room.size() - 1);
      else
        std::snprintf(room.data(), room.size(), "%s", v);
    }
  };
  text(param_id::network_provider, c.network_provider);
  text(param_id::network_node, c.network_node);
}

void params_prepare_network() noexcept {
  proto::config c;
  read_network(c);
  if (c.network == dev::open_params::network::use::off) return;
  dev::prepare_network_process(c.network_provider.data());
}

proto::config params_read() noexcept {
  proto::config c;
  c.pdid = pdid_from_launcher();
  for (const param_spec& p : g_params) {
    switch (p.type) {
      case param_type::size:
      case param_type::integer:
        if (const auto v = read_number(p)) store(c, p.id, *v);
        break;
      case param_type::boolean:
        if (const auto v = read_bool(p)) store(c, p.id, *v ? 1 : 0);
        break;
      case param_type::string: break;
    }
  }
  (void)params_protocol(c.protocol);  // an unknown name was refused by fi_getinfo already
  if (const char* copy = read_string(param_id::copy)) {
    if (std::strcmp(copy, "libc") == 0)
      c.copy = core::copy_policy::libc;
    else if (std::strcmp(copy, "loop") == 0)
      c.copy = core::copy_policy::vector;
    else if (std::strcmp(copy, "auto") != 0)
      warn_param(param_id::copy, warning::value, copy,
                 "FI_EXANET_COPY=%s is not one of auto, libc, loop; using auto", copy);
  }
  read_dma_engine(c);
  read_network(c);
  c.profile = params_profile_destination() != nullptr;
  // Keep the sizes consistent: a medium message and an inline RMA write fit half a ring, and an
  // inject fits the buffered paths (so it never needs the rendezvous).
  clamp_to(param_id::medium_max, c.medium_max, c.bounce_ring_bytes / 2, "half a bounce ring");
  clamp_to(param_id::inject_size, c.inject_size, c.medium_max, "FI_EXANET_MEDIUM_MAX");
  clamp_to(param_id::rma_inline_max, c.rma_inline_max, c.bounce_ring_bytes / 2,
           "half a bounce ring");
  log_config(c);
  return c;
}

}  // namespace exanet::fi
