// SPDX-License-Identifier: BSD-2-Clause
// The module's only exported symbol, fi_prov_ini, and the provider object libfabric keeps.
#include "fi/provider.hpp"

#include <rdma/fabric.h>
#include <rdma/providers/fi_log.h>

#include "core/log.hpp"
#include "fi/attr.hpp"
#include "fi/fabric.hpp"
#include "fi/params.hpp"

namespace exanet::fi {
namespace {

fi_log_subsys to_fi(core::log_subsys s) noexcept {
  switch (s) {
    case core::log_subsys::fabric: return FI_LOG_FABRIC;
    case core::log_subsys::domain: return FI_LOG_DOMAIN;
    case core::log_subsys::ep_ctrl: return FI_LOG_EP_CTRL;
    case core::log_subsys::ep_data: return FI_LOG_EP_DATA;
    case core::log_subsys::av: return FI_LOG_AV;
    case core::log_subsys::cq: return FI_LOG_CQ;
    case core::log_subsys::eq: return FI_LOG_EQ;
    case core::log_subsys::mr: return FI_LOG_MR;
    case core::log_subsys::cntr: return FI_LOG_CNTR;
    case core::log_subsys::core: break;
  }
  return FI_LOG_CORE;
}

fi_log_level to_fi(core::log_level l) noexcept {
  switch (l) {
    case core::log_level::warn: return FI_LOG_WARN;
    case core::log_level::trace: return FI_LOG_TRACE;
    case core::log_level::info: return FI_LOG_INFO;
    case core::log_level::debug: break;
  }
  return FI_LOG_DEBUG;
}

bool log_enabled(core::log_level l, core::log_subsys s) noexcept {
  return fi_log_enabled(&provider(), to_fi(l), to_fi(s)) != 0;
}

void log_write(core::log_level l, core::log_subsys s, const char* func, int line,
               const char* msg) noexcept {
  fi_log(&provider(), to_fi(l), to_fi(s), func, line, "%s\n", msg);
}

void cleanup() noexcept {}

// libfabric writes into `context` and keys parameters by this object's address: it must be a
// writable object with a stable address.
fi_provider g_provider = {
    .version = provider_version,
    .fi_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
    .context = {},
    .name = provider_name,
    .getinfo = &getinfo,
    .fabric = &fabric_open,
    .cleanup = &cleanup,
};

}  // namespace

fi_provider& provider() noexcept { return g_provider; }

}  // namespace exanet::fi

extern "C" {
FI_EXT_INI {
  exanet::core::set_log_sink({&exanet::fi::log_enabled, &exanet::fi::log_write});
  exanet::fi::params_define(&exanet::fi::g_provider);
  // Before libfabric initialises its own providers (it loads external ones first): the network
  // backend's lower provider reads some settings only then.
  exanet::fi::params_prepare_network();
  return &exanet::fi::g_provider;
}
}
