// SPDX-License-Identifier: BSD-2-Clause
// The bridge between the device interface and the backend this build carries: the only file
// outside dev/emu that includes a dev/emu header or names emu:: (ci/check_layers.sh enforces it).
// The choice is made here, at compile time, so the data path calls the backend directly: no
// virtual call, no table, no extra indirection. A second backend adds its own library beside
// exanet_dev_emu (prov/exanet/CMakeLists.txt) and its choice here; nothing in proto/ changes.
#pragma once
#include <string_view>

#include "dev/device.hpp"
#include "dev/hybrid/device.hpp"

namespace exanet::dev {

/// The backend the provider is built with: the emulation of the ExaNeST primitives in shared
/// memory for the peers of this host, beside the network backend for the others when it is on
/// (dev/hybrid; off by default, and then every operation goes straight to the emulation).
using backend_device = hybrid::device;
static_assert(device<backend_device>, "the backend must offer every operation of dev::device");

/// Called once when the provider loads, if the network may be used: settings the backend's
/// transport must find in the process before libfabric initialises its own providers
/// (over ofi_rxm, its buffer size: dev/net/device.hpp, choose_lower_settings). True if it
/// set any.
inline bool prepare_network_process(std::string_view lower_provider) noexcept {
  return backend_device::prepare_process(lower_provider);
}

/// What an endpoint's protocols hold: the backend, seen through the concept's operations only.
using selected_device = interface_of<backend_device>;
static_assert(device<selected_device>);
static_assert(sizeof(selected_device) == sizeof(backend_device), "the interface adds nothing");

}  // namespace exanet::dev
