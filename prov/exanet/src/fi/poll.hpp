// SPDX-License-Identifier: BSD-2-Clause
// Poll sets and wait sets (fi_poll(3)): one call that progresses, or waits on, several CQs and
// counters. Under manual progress both are loops over their members: each member is progressed
// (which drives the endpoints bound to it), then looked at. A CQ has events while it holds
// entries; a counter while its success or error count differs from the checkpoint that fi_poll,
// fi_wait, fi_cntr_set and fi_cntr_add leave behind.
#pragma once
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

namespace exanet::fi {

class waitset;

/// fi_poll_open (domain ops).
int poll_open(fid_domain* domain, fi_poll_attr* attr, fid_poll** out) noexcept;
/// fi_wait_open (fabric ops): FI_WAIT_UNSPEC, FI_WAIT_FD and FI_WAIT_YIELD; others -FI_ENOSYS.
int wait_open(fid_fabric* fabric, fi_wait_attr* attr, fid_wait** out) noexcept;

/// nullptr unless w is an exanet wait set.
waitset* waitset_from(fid* w) noexcept;
/// A CQ or counter opened with FI_WAIT_SET joins its set (and leaves it when it closes); the set
/// cannot close while it has members. join may fail with -FI_ENOMEM.
int waitset_join(waitset& s, fid* member) noexcept;
void waitset_leave(waitset& s, fid* member) noexcept;
/// A member got an event: wakes a waiter blocked on the set's fd after fi_trywait.
void waitset_signal(waitset& s) noexcept;
/// fi_trywait on a wait set: 0 if the caller may block on its fd, -FI_EAGAIN if a member has
/// events already.
int waitset_trywait(waitset& s) noexcept;
/// A member's endpoint closes: what fi_trywait announced is withdrawn, and a waiter woken.
void waitset_end_watch(waitset& s) noexcept;

}  // namespace exanet::fi
