// SPDX-License-Identifier: BSD-2-Clause
// Logging without libfabric: the fi/ layer installs fi_log as the sink at provider load, so every
// layer logs through FI_LOG_LEVEL / FI_LOG_PROV like any provider while core/, dev/ and match/
// stay free of <rdma/...>. Messages are formatted only when the level is enabled.
#pragma once
#include <atomic>
#include <cstdarg>
#include <cstdint>

namespace exanet::core {

enum class log_level : int { warn = 0, trace = 1, info = 2, debug = 3 };
enum class log_subsys : int { core = 0, fabric, domain, ep_ctrl, ep_data, av, cq, eq, mr, cntr };

struct log_sink {
  bool (*enabled)(log_level, log_subsys) noexcept = nullptr;
  void (*write)(log_level, log_subsys, const char* func, int line, const char* msg) noexcept = nullptr;
};

/// Installed once from fi_prov_ini, before any object exists.
void set_log_sink(const log_sink& sink) noexcept;
bool log_enabled(log_level level, log_subsys subsys) noexcept;
[[gnu::format(printf, 5, 6)]] void log_write(log_level level, log_subsys subsys, const char* func,
                                             int line, const char* fmt, ...) noexcept;

/// Rate limit of one call site: true at most once per log_limit_seconds (peer input that is
/// dropped must not let a sender flood the log; the counters keep the exact count).
inline constexpr int log_limit_seconds = 10;
bool log_limit_pass(std::atomic<std::int64_t>& last_second) noexcept;

}  // namespace exanet::core

/// EXANET_LOG, at most once every log_limit_seconds from this call site.
#define EXANET_LOG_ONCE(level, subsys, ...)                                                   \
  do {                                                                                        \
    static std::atomic<std::int64_t> exanet_log_last_{-1000000};                              \
    if (::exanet::core::log_enabled(::exanet::core::log_level::level,                         \
                                    ::exanet::core::log_subsys::subsys) &&                    \
        ::exanet::core::log_limit_pass(exanet_log_last_))                                     \
      ::exanet::core::log_write(::exanet::core::log_level::level,                             \
                                ::exanet::core::log_subsys::subsys, __func__, __LINE__,       \
                                __VA_ARGS__);                                                 \
  } while (0)

#define EXANET_LOG(level, subsys, ...)                                                        \
  do {                                                                                        \
    if (::exanet::core::log_enabled(::exanet::core::log_level::level,                         \
                                    ::exanet::core::log_subsys::subsys))                      \
      ::exanet::core::log_write(::exanet::core::log_level::level,                             \
                                ::exanet::core::log_subsys::subsys, __func__, __LINE__,       \
                                __VA_ARGS__);                                                 \
  } while (0)
