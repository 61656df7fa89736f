// SPDX-License-Identifier: BSD-2-Clause
// FI_PEEK, FI_CLAIM and FI_DISCARD (fi_tagged(3)): the answer always comes through the CQ, so a
// peek posts nothing and leaves nothing queued. A claimed message leaves the matcher, and its
// handle lives in the caller's fi_context until the paired FI_CLAIM receive takes it.
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <cstdlib>

#include "core/iov.hpp"
#include "proto/endpoint.hpp"

namespace exanet::proto {

core::status endpoint::peek(const recv_args& a, bool claim_it, bool discard, void** handle) noexcept {
  // Optimistic long messages wait at their sender until a receive asks: there is nothing to see.
  if (optimistic()) [[unlikely]] return optimistic_refuse("FI_PEEK");
  // A scratch request: it carries the completion fields.
  recv_request* r = make_recv(a, core::iov_length(a.iov));
  if (!r) return core::status::again;
  match::matcher& m = matcher_for(a.kind);
  match::unexpected_entry* e = m.find_unexpected(r->entry.source, r->entry.tag, r->entry.ignore);
  if (!e) {
    fail_recv(*r, FI_ENOMSG);
    return core::status::ok;
  }
  unexpected_msg& u = unexpected_of(*e);
  if (claim_it) {
    m.remove_unexpected(*e);
    *handle = &u;
  } else if (discard) {
    recv_request* sink = make_recv({.kind = a.kind}, 0);
    if (!sink) {
      recvs_.release(r);
      return core::status::again;
    }
    m.remove_unexpected(*e);
    sink->completion = false;
    sink->discard = true;
    take_unexpected(*sink, u);  // a rendezvous sender still gets its (empty) CTS and completes
  }
  // The message's meta-data; no data is copied (buf stays NULL, as the man page allows).
  completion c;
  c.context = a.context;
  c.flags = FI_RECV | (a.kind == queue_kind::tagged ? FI_TAGGED : FI_MSG) |
            (u.has_cq_data ? FI_REMOTE_CQ_DATA : 0);
  c.len = u.len;
  c.tag = u.tag;
  c.data = u.has_cq_data ? u.cq_data : 0;
  c.src = source_of(u.peer);
  if (discard && !claim_it) c.len = 0;
  if (sinks_.rx) sinks_.rx.write(c);
  recvs_.release(r);
  return core::status::ok;
}

core::status endpoint::claim(const recv_args& a, void* handle, bool discard) noexcept {
  if (optimistic()) [[unlikely]] return optimistic_refuse("FI_CLAIM");  // no peek claimed one
  if (!handle) return core::status::invalid;
  recv_request* r = make_recv(a, core::iov_length(a.iov));
  if (!r) return core::status::again;
  auto& u = *static_cast<unexpected_msg*>(handle);
  if (discard) {
    r->completion = a.completion;
    r->discard = true;
    r->iov_count = 0;
    r->capacity = 0;
  }
  take_unexpected(*r, u);
  return core::status::ok;
}

}  // namespace exanet::proto
