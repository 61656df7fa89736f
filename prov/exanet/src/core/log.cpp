// SPDX-License-Identifier: BSD-2-Clause
#include "core/log.hpp"

#include <time.h>

#include <cstdio>

namespace exanet::core {
namespace {
// Written once by fi_prov_ini before any other thread can log; read-only afterwards.
log_sink g_log_sink;
}  // namespace

void set_log_sink(const log_sink& sink) noexcept { g_log_sink = sink; }

bool log_enabled(log_level level, log_subsys subsys) noexcept {
  return g_log_sink.enabled && g_log_sink.enabled(level, subsys);
}

void log_write(log_level level, log_subsys subsys, const char* func, int line, const char* fmt,
               ...) noexcept {
  if (!g_log_sink.write) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  g_log_sink.write(level, subsys, func, line, msg);
}

bool log_limit_pass(std::atomic<std::int64_t>& last_second) noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  const std::int64_t now = ts.tv_sec;
  std::int64_t last = last_second.load(std::memory_order_relaxed);
  return now - last >= log_limit_seconds &&
         last_second.compare_exchange_strong(last, now, std::memory_order_relaxed);
}

}  // namespace exanet::core
