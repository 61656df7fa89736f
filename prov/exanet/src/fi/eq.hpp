// SPDX-License-Identifier: BSD-2-Clause
// fi_eq: control events (AV insert completions with FI_EVENT, application-written events).
#pragma once
#include <rdma/fabric.h>
#include <rdma/fi_eq.h>

#include <cstddef>
#include <cstdint>

namespace exanet::fi {

class eq;

int eq_open(fid_fabric* fabric, fi_eq_attr* attr, fid_eq** out, void* context) noexcept;
eq* eq_from(fid* f) noexcept;
/// Queues one event (what fi_eq_write does); -FI_EAGAIN when the EQ is full.
ssize_t eq_write_event(eq& q, std::uint32_t event, const void* buf, std::size_t len,
                       std::uint64_t flags) noexcept;
/// Queues an error entry (read by fi_eq_readerr; fi_eq_read answers -FI_EAVAIL while it is first).
ssize_t eq_write_error(eq& q, const fi_eq_err_entry& err) noexcept;
int eq_trywait(eq& q) noexcept;

}  // namespace exanet::fi
