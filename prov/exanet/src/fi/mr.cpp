// SPDX-License-Identifier: BSD-2-Clause
#include "fi/mr.hpp"

#include <rdma/fi_errno.h>

#include <algorithm>
#include <new>

#include "core/checked_memory.hpp"
#include "fi/cntr.hpp"
#include "fi/attr.hpp"
#include "fi/common.hpp"
#include "fi/domain.hpp"
#include "fi/enosys.hpp"
#include "fi/ep.hpp"

namespace exanet::fi {

// ---- registry -----------------------------------------------------------------------------------

int mr_registry::expose(registered_region& r, endpoint& ep) noexcept {
  dev::key_grant g;
  g.key = r.mr_fid.key;
  g.va = reinterpret_cast<std::uint64_t>(r.iov.iov_base);
  g.len = r.iov.iov_len;
  g.addr_base = (mr_mode_ & FI_MR_VIRT_ADDR) ? g.va : r.offset;
  g.access = ((r.access & FI_REMOTE_READ) ? dev::rma_access::remote_read : 0) |
             ((r.access & FI_REMOTE_WRITE) ? dev::rma_access::remote_write : 0);
  g.events = ep.caps & FI_RMA_EVENT;
  g.may_fault = r.may_fault;
  std::uint32_t slot = 0;
  // The protection table lives in shared memory and is written only here, under the registry
  // lock; the endpoint's own lock is not needed (its progress only reads the table).
  const core::status s = ep.proto.expose(g, slot);
  if (!core::ok(s)) return s == core::status::no_memory ? -FI_ENOSPC : core::to_int(s);
  try {
    r.exposed.emplace_back(&ep, slot);
    if (r.remote_cntr) cntr_attach(*r.remote_cntr, endpoint_progress_source(ep));
  } catch (...) {
    if (!r.exposed.empty() && r.exposed.back().first == &ep) r.exposed.pop_back();
    ep.proto.withdraw(slot);
    return -FI_ENOMEM;
  }
  return 0;
}

void mr_registry::withdraw_all(registered_region& r) noexcept {
  for (auto& [ep, slot] : r.exposed) {
    ep->proto.withdraw(slot);
    if (r.remote_cntr) cntr_detach(*r.remote_cntr, endpoint_progress_source(*ep));
  }
  r.exposed.clear();
}

int mr_registry::add(registered_region& r, std::uint64_t requested_key) noexcept {
  core::level_guard g(lock_);
  std::uint64_t key = requested_key;
  if (mr_mode_ & FI_MR_PROV_KEY) {
    while (regions_.count(next_key_)) ++next_key_;
    key = next_key_++;
  } else if (regions_.count(key)) {
    return -FI_ENOKEY;
  }
  try {
    regions_.emplace(key, &r);
  } catch (...) {
    return -FI_ENOMEM;
  }
  r.mr_fid.key = key;
  if (mr_mode_ & FI_MR_ENDPOINT) return 0;  // exposed by enable, through its endpoint only
  for (endpoint* ep : endpoints_) {
    if (int rc = expose(r, *ep); rc != 0) {
      withdraw_all(r);
      regions_.erase(key);
      return rc;
    }
  }
  return 0;
}

void mr_registry::remove(registered_region& r) noexcept {
  core::level_guard g(lock_);
  withdraw_all(r);
  if (r.remote_cntr) cntr_detach(*r.remote_cntr, {&r, nullptr});
  regions_.erase(r.mr_fid.key);
}

int mr_registry::enable(registered_region& r) noexcept {
  core::level_guard g(lock_);
  if (!(mr_mode_ & FI_MR_ENDPOINT) || !r.exposed.empty()) return 0;
  if (!r.bound_ep) return -FI_EINVAL;
  return expose(r, *r.bound_ep);
}

int mr_registry::attach(endpoint& ep) noexcept {
  core::level_guard g(lock_);
  try {
    endpoints_.push_back(&ep);
  } catch (...) {
    return -FI_ENOMEM;
  }
  if (mr_mode_ & FI_MR_ENDPOINT) return 0;
  for (auto& [key, r] : regions_)
    if (int rc = expose(*r, ep); rc != 0) return rc;  // the endpoint's close detaches it
  return 0;
}

void mr_registry::detach(endpoint& ep) noexcept {
  core::level_guard g(lock_);
  std::erase(endpoints_, &ep);
  for (auto& [key, r] : regions_) {
    const auto n = std::erase_if(r->exposed, [&](const auto& e) { return e.first == &ep; });
    if (n && r->remote_cntr) cntr_detach(*r->remote_cntr, endpoint_progress_source(ep));
    if (r->bound_ep == &ep) r->bound_ep = nullptr;
  }
}

void mr_registry::count_remote_access(std::uint64_t key, std::uint64_t event) noexcept {
  core::level_guard g(lock_);
  auto it = regions_.find(key);
  if (it == regions_.end()) return;
  const registered_region& r = *it->second;
  if (r.remote_cntr && (r.remote_cntr_events & event)) {
    const proto::counter_sink c = cntr_sink(*r.remote_cntr);
    c.add(c.self, false);
  }
}

int mr_registry::set_remote_cntr(registered_region& r, cntr& c, std::uint64_t events) noexcept {
  core::level_guard g(lock_);
  if (r.remote_cntr) return -FI_EINVAL;  // one counter per region
  std::size_t attached = 0;
  try {
    // The region's own entry keeps the counter open while bound; it progresses nothing.
    cntr_attach(c, {&r, nullptr});
    for (auto& [ep, slot] : r.exposed) {
      cntr_attach(c, endpoint_progress_source(*ep));
      ++attached;
    }
  } catch (...) {
    for (std::size_t i = 0; i < attached; ++i)
      cntr_detach(c, endpoint_progress_source(*r.exposed[i].first));
    cntr_detach(c, {&r, nullptr});
    return -FI_ENOMEM;
  }
  r.remote_cntr = &c;
  r.remote_cntr_events = events;
  return 0;
}

// ---- fid_mr ---------------------------------------------------------------------------------------

namespace {

constexpr std::uint64_t access_known = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ |
                                       FI_REMOTE_WRITE;

registered_region& mr_of(fid* f) noexcept { return from_fid<registered_region>(f); }

int mr_close(fid* f) noexcept {
  registered_region& r = mr_of(f);
  domain_mr_registry(r.domain).remove(r);
  domain_unref(r.domain);
  delete &r;
  return 0;
}

int mr_bind(fid* f, fid* bfid, uint64_t flags) noexcept {
  if (!bfid) return -FI_EINVAL;
  registered_region& r = mr_of(f);
  if (bfid->fclass == FI_CLASS_CNTR) {
    if (!flags || (flags & ~(FI_REMOTE_WRITE | FI_REMOTE_READ))) return -FI_EBADFLAGS;
    cntr* c = cntr_from(bfid);
    if (!c) return -FI_EINVAL;
    return domain_mr_registry(r.domain).set_remote_cntr(r, *c, flags);
  }
  if (bfid->fclass != FI_CLASS_EP) return -FI_EINVAL;
  if (flags) return -FI_EBADFLAGS;
  // Without FI_MR_ENDPOINT every region is domain-wide already: the binding changes nothing.
  if (!(domain_mr_registry(r.domain).mr_mode() & FI_MR_ENDPOINT)) return 0;
  if (r.enabled) return -FI_EOPBADSTATE;
  r.bound_ep = &from_fid<endpoint>(bfid);
  return 0;
}

int mr_control(fid* f, int command, void*) noexcept {
  if (command != FI_ENABLE) return -FI_ENOSYS;
  registered_region& r = mr_of(f);
  if (r.enabled) return 0;
  if (int rc = domain_mr_registry(r.domain).enable(r); rc != 0) return rc;
  r.enabled = true;
  return 0;
}

constinit fi_ops g_mr_fid_ops = {
    .size = sizeof(fi_ops),
    .close = &mr_close,
    .bind = &mr_bind,
    .control = &mr_control,
    .ops_open = enosys_ptr<decltype(fi_ops::ops_open)>,
    .tostr = enosys_ptr<decltype(fi_ops::tostr)>,
    .ops_set = enosys_ptr<decltype(fi_ops::ops_set)>,
};

int mr_regattr(fid* f, const fi_mr_attr* attr, uint64_t flags, fid_mr** out) noexcept {
  if (!f || f->fclass != FI_CLASS_DOMAIN || !attr || !out) return -FI_EINVAL;
  if (flags) return -FI_EBADFLAGS;
  if (attr->access & ~access_known) return -FI_EINVAL;
  if (attr->iov_count > mr_iov_limit || (attr->iov_count && !attr->mr_iov)) return -FI_EINVAL;
  if (attr->iface != FI_HMEM_SYSTEM) return -FI_ENOSYS;
  auto* dom = reinterpret_cast<fid_domain*>(f);
  auto* r = new (std::nothrow) registered_region;
  if (!r) return -FI_ENOMEM;
  r->domain = dom;
  if (attr->iov_count) r->iov = attr->mr_iov[0];
  // We do not ask for FI_MR_ALLOCATED, so memory no page backs yet may be registered (fi_mr(3)):
  // MPICH registers the whole address space (NULL, UINTPTR_MAX) for dynamic windows. Accesses to
  // such a region are checked at the target, and a missing page is an access error at the
  // initiator, never a fault here (core/checked_memory.hpp).
  r->may_fault = !core::range_mapped(r->iov.iov_base, r->iov.iov_len);
  r->access = attr->access;
  r->offset = attr->offset;
  mr_registry& reg = domain_mr_registry(dom);
  r->enabled = !(reg.mr_mode() & FI_MR_ENDPOINT);  // FI_MR_ENDPOINT: bind, then enable
  r->mr_fid.fid.fclass = FI_CLASS_MR;
  r->mr_fid.fid.context = attr->context;
  r->mr_fid.fid.ops = &g_mr_fid_ops;
  r->mr_fid.mem_desc = r;
  if (int rc = reg.add(*r, attr->requested_key); rc != 0) {
    delete r;
    return rc;
  }
  domain_ref(dom);
  *out = &r->mr_fid;
  return 0;
}

int mr_regv(fid* f, const iovec* iov, size_t count, uint64_t access, uint64_t offset,
            uint64_t requested_key, uint64_t flags, fid_mr** out, void* context) noexcept {
  fi_mr_attr attr{};
  attr.mr_iov = iov;
  attr.iov_count = count;
  attr.access = access;
  attr.offset = offset;
  attr.requested_key = requested_key;
  attr.context = context;
  attr.iface = FI_HMEM_SYSTEM;
  return mr_regattr(f, &attr, flags, out);
}

int mr_reg(fid* f, const void* buf, size_t len, uint64_t access, uint64_t offset,
           uint64_t requested_key, uint64_t flags, fid_mr** out, void* context) noexcept {
  const iovec v{const_cast<void*>(buf), len};
  return mr_regv(f, &v, 1, access, offset, requested_key, flags, out, context);
}

}  // namespace

constinit fi_ops_mr g_mr_ops = {
    .size = sizeof(fi_ops_mr),
    .reg = &mr_reg,
    .regv = &mr_regv,
    .regattr = &mr_regattr,
};

}  // namespace exanet::fi
