// SPDX-License-Identifier: BSD-2-Clause
// fi_cntr: success and error counts of the events bound to it. Reading or waiting progresses the
// endpoints bound to it (manual progress).
#pragma once
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include "fi/common.hpp"
#include "proto/completion.hpp"

namespace exanet::fi {

class cntr;
class arrival_sleep;
class progress_list;

int cntr_open(fid_domain* domain, fi_cntr_attr* attr, fid_cntr** out, void* context) noexcept;
cntr* cntr_from(fid* f) noexcept;
proto::counter_sink cntr_sink(cntr& c) noexcept;
void cntr_attach(cntr& c, progress_source src);
void cntr_detach(cntr& c, progress_source src) noexcept;
int cntr_trywait(cntr& c) noexcept;
/// An endpoint bound to it closes: what an fi_trywait announced there is withdrawn first.
void cntr_end_watch(cntr& c) noexcept;
/// The endpoints bound to it (a wait set's fi_trywait watches them).
progress_list& cntr_sources(cntr& c) noexcept;
/// For poll and wait sets: progresses the counter's endpoints; true if its success or error
/// count changed since the checkpoint (fi_poll, fi_wait, fi_cntr_set, fi_cntr_add), which
/// `take` moves to the current counts.
bool cntr_progress_changed(cntr& c, bool take) noexcept;
/// A wait set's sleep, as cq_sleep_prepare/_end; cntr_changed is the last look (no progress).
bool cntr_sleep_prepare(cntr& c, arrival_sleep& s) noexcept;
void cntr_sleep_end(cntr& c) noexcept;
bool cntr_changed(cntr& c) noexcept;
fid_domain* cntr_domain(const cntr& c) noexcept;
void cntr_set_ref(cntr& c, int delta) noexcept;

}  // namespace exanet::fi
