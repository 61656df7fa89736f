// SPDX-License-Identifier: BSD-2-Clause
// The provider object libfabric loads (fi_prov_ini) and the names it answers to.
#pragma once
#include <rdma/fi_ext_exanet.h>
#include <rdma/providers/fi_prov.h>

namespace exanet::fi {

inline constexpr const char* provider_name = "exanet";
inline constexpr const char* fabric_name = "exanet";
inline constexpr const char* domain_name = "exanet0";
/// fi_info -l's "version": MAJOR.MINOR of project(VERSION) (the generated version header).
inline constexpr unsigned provider_version =
    FI_VERSION(FI_EXANET_VERSION_MAJOR, FI_EXANET_VERSION_MINOR);

fi_provider& provider() noexcept;

}  // namespace exanet::fi
