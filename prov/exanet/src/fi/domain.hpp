// SPDX-License-Identifier: BSD-2-Clause
// fi_domain: owns the parameters of its endpoints and the memory-registration keys.
#pragma once
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_domain.h>

#include "proto/config.hpp"

namespace exanet::fi {

class mr_registry;
class progress_thread;
struct addr_codec;

int domain_open(fid_fabric* fabric, fi_info* info, fid_domain** out, void* context) noexcept;

/// Objects opened from a domain hold a reference, so the domain cannot close under them.
void domain_ref(fid_domain* domain) noexcept;
void domain_unref(fid_domain* domain) noexcept;

/// The threading level the objects opened from the domain must honour (enum fi_threading);
/// decides whether they take locks. The level the domain was opened with, or FI_THREAD_SAFE
/// under FI_PROGRESS_AUTO, where the progress thread touches every object beside the
/// application's threads.
fi_threading domain_threading(const fid_domain* domain) noexcept;

/// The domain's progress thread (data_progress FI_PROGRESS_AUTO), or nullptr under
/// FI_PROGRESS_MANUAL. Endpoints join it when enabled and leave it before they close.
progress_thread* domain_progress_thread(fid_domain* domain) noexcept;

/// Parameters read when the domain was opened.
const proto::config& domain_config(const fid_domain* domain) noexcept;

/// How endpoint names are written and read in this domain (its fi_info's addr_format).
const addr_codec& domain_names(const fid_domain* domain) noexcept;

/// fi_query_atomic (ep_atomic.cpp): -FI_EOPNOTSUPP for an op and datatype exanet does not
/// perform in the family the flags name, else the element size and the largest count.
int domain_query_atomic(fid_domain* domain, fi_datatype dt, fi_op op, fi_atomic_attr* attr,
                        uint64_t flags) noexcept;

/// Keys of the memory regions registered in this domain.
mr_registry& domain_mr_registry(fid_domain* domain) noexcept;

}  // namespace exanet::fi
