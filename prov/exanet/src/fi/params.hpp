// SPDX-License-Identifier: BSD-2-Clause
// Provider parameters: defined once at load (they show in `fi_info -e` as FI_EXANET_*), read
// once per domain into a proto::config that is passed down by value.
#pragma once
#include <rdma/providers/fi_prov.h>

#include "dev/link_model.hpp"
#include "proto/config.hpp"

namespace exanet::fi {

void params_define(fi_provider* prov) noexcept;
proto::config params_read() noexcept;
/// FI_EXANET_PROTOCOL; false (after a warning) for a name exanet does not know.
bool params_protocol(proto::protocol_family& out) noexcept;
/// FI_EXANET_STATS: where endpoints print their counters when they close ("stderr" or "1" for
/// standard error, anything else a file appended to); nullptr when unset, empty or "0".
const char* params_stats_destination() noexcept;
/// FI_EXANET_PROFILE: where endpoints print their phase stamps when they close (as
/// params_stats_destination); nullptr when unset, empty or "0".
const char* params_profile_destination() noexcept;
/// FI_EXANET_PROGRESS: true for "auto" (fi_getinfo answers FI_PROGRESS_AUTO where the hints
/// leave progress unset); false for "manual", unset, or (after a warning) anything else.
bool params_auto_progress() noexcept;
/// FI_EXANET_LIVE_STATS: whether endpoints keep their live counter file (default true).
bool params_live_stats() noexcept;
/// The link model of the emulated device (FI_EXANET_LINK_*), and where this process sits in it;
/// false (after a warning) when the placement file cannot be used (the rank order is then).
bool params_link(dev::link_params& p, dev::link_placement& where) noexcept;
/// At load (fi_prov_ini), with FI_EXANET_NETWORK on: lets the network backend prepare the
/// process for its lower provider (FI_EXANET_NETWORK_PROVIDER) before libfabric initialises it
/// (dev::prepare_network_process).
void params_prepare_network() noexcept;

}  // namespace exanet::fi
