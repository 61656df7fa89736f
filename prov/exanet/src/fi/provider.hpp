// The provider object libfabric loads (fi_prov_ini) and the names it answers to.
#pragma once
#include <rdma/providers/fi_prov.h>

namespace exanet::fi {

inline constexpr const char* provider_name = "exanet";
inline constexpr const char* fabric_name = "exanet";
inline constexpr const char* domain_name = "exanet0";
inline constexpr unsigned provider_version = FI_VERSION(0, 1);

fi_provider& provider() noexcept;

}  // namespace exanet::fi
