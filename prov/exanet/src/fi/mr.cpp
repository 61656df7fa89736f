#include "fi/mr.hpp"

#include <rdma/fi_errno.h>

#include <new>

#include "fi/common.hpp"
#include "fi/domain.hpp"
#include "fi/enosys.hpp"

namespace exanet::fi {

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
  return 0;
}

void mr_registry::remove(std::uint64_t key) noexcept {
  core::level_guard g(lock_);
  regions_.erase(key);
}

const registered_region* mr_registry::find(std::uint64_t key) noexcept {
  core::level_guard g(lock_);
  auto it = regions_.find(key);
  return it == regions_.end() ? nullptr : it->second;
}

namespace {

constexpr std::uint64_t access_known = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ |
                                       FI_REMOTE_WRITE;

registered_region& mr_of(fid* f) noexcept { return from_fid<registered_region>(f); }

int mr_close(fid* f) noexcept {
  registered_region& r = mr_of(f);
  domain_mr_registry(r.domain).remove(r.mr_fid.key);
  domain_unref(r.domain);
  delete &r;
  return 0;
}

int mr_bind(fid* f, fid* bfid, uint64_t flags) noexcept {
  if (!bfid || flags) return flags ? -FI_EBADFLAGS : -FI_EINVAL;
  if (bfid->fclass != FI_CLASS_EP) return -FI_EINVAL;  // counters bind only for FI_RMA_EVENT
  mr_of(f).bound_ep = bfid;
  return 0;
}

int mr_control(fid* f, int command, void*) noexcept {
  if (command != FI_ENABLE) return -FI_ENOSYS;
  registered_region& r = mr_of(f);
  if ((domain_mr_registry(r.domain).mr_mode() & FI_MR_ENDPOINT) && !r.bound_ep) return -FI_EINVAL;
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
  if (attr->iov_count > 8 || (attr->iov_count && !attr->mr_iov)) return -FI_EINVAL;
  if (attr->iface != FI_HMEM_SYSTEM) return -FI_ENOSYS;
  auto* dom = reinterpret_cast<fid_domain*>(f);
  auto* r = new (std::nothrow) registered_region;
  if (!r) return -FI_ENOMEM;
  r->domain = dom;
  for (std::size_t i = 0; i < attr->iov_count; ++i) r->iov[i] = attr->mr_iov[i];
  r->iov_count = attr->iov_count;
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
