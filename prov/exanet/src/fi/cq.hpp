// SPDX-License-Identifier: BSD-2-Clause
// fi_cq: completions of the endpoints bound to it, in order, successes and errors alike. Reading
// it is what drives those endpoints under manual progress.
#pragma once
#include <rdma/fabric.h>
#include <rdma/fi_eq.h>

#include "fi/common.hpp"
#include "proto/completion.hpp"

namespace exanet::fi {

class cq;
class arrival_sleep;
class progress_list;

int cq_open(fid_domain* domain, fi_cq_attr* attr, fid_cq** out, void* context) noexcept;
/// nullptr unless f is an exanet CQ.
cq* cq_from(fid* f) noexcept;
/// Where an endpoint writes its completions.
proto::completion_sink cq_sink(cq& q) noexcept;
/// An endpoint bound to the CQ; reads progress it. May throw std::bad_alloc (control path).
void cq_attach(cq& q, progress_source src);
void cq_detach(cq& q, progress_source src) noexcept;
/// fi_trywait: progress, then 0 if empty (the wait fd is armed) or -FI_EAGAIN.
int cq_trywait(cq& q) noexcept;
/// An endpoint bound to it closes: what an fi_trywait announced there (on the CQ's fd or its
/// wait set's) is withdrawn first.
void cq_end_watch(cq& q) noexcept;
/// The endpoints bound to it (a wait set's fi_trywait watches them).
progress_list& cq_sources(cq& q) noexcept;
/// For poll and wait sets: progresses the CQ's endpoints; true if it holds entries (or was
/// signalled, fi_cq_signal, which this takes).
bool cq_progress_ready(cq& q) noexcept;
/// The domain a CQ was opened in, and the references poll sets hold on it (a CQ in a poll set
/// cannot close: -FI_EBUSY).
fid_domain* cq_domain(const cq& q) noexcept;
/// Whether anything may ever sleep on the CQ: it has a wait object (fi_cq_sread, fi_trywait and
/// a wait set need one; fi_cq(3) allows none of them on FI_WAIT_NONE).
bool cq_may_sleep(const cq& q) noexcept;
void cq_set_ref(cq& q, int delta) noexcept;
/// A wait set's sleep (fi_wait): announces a sleeper on the CQ's wake word and at its endpoints;
/// false if one of them has work (then no sleep). cq_sleep_end withdraws the announcement (call
/// it whatever prepare said); cq_has_entries is the last look, without progress.
bool cq_sleep_prepare(cq& q, arrival_sleep& s) noexcept;
void cq_sleep_end(cq& q) noexcept;
bool cq_has_entries(cq& q) noexcept;

}  // namespace exanet::fi
