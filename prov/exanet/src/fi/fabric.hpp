// SPDX-License-Identifier: BSD-2-Clause
// fi_fabric: the root object; counts the domains opened from it so it cannot close under them.
#pragma once
#include <rdma/fabric.h>

namespace exanet::fi {

int fabric_open(fi_fabric_attr* attr, fid_fabric** out, void* context) noexcept;
void fabric_ref(fid_fabric* f) noexcept;
void fabric_unref(fid_fabric* f) noexcept;

}  // namespace exanet::fi
