// SPDX-License-Identifier: BSD-2-Clause
#include "fi/fabric.hpp"

#include <rdma/fi_errno.h>

#include <atomic>
#include <cstring>
#include <new>

#include "fi/common.hpp"
#include "fi/domain.hpp"
#include "fi/enosys.hpp"
#include "fi/eq.hpp"
#include "fi/poll.hpp"
#include "fi/provider.hpp"
#include "fi/wait.hpp"

namespace exanet::fi {
namespace {

class fabric {
 public:
  fid_fabric fabric_fid{};  // first member
  std::atomic<int> domains{0};
};

fabric& fabric_of(fid* f) noexcept { return from_fid<fabric>(f); }

int fabric_close(fid* f) noexcept {
  fabric& fab = fabric_of(f);
  if (fab.domains.load(std::memory_order_acquire) != 0) return -FI_EBUSY;
  delete &fab;
  return 0;
}

int fabric_trywait(fid_fabric*, fid** fids, int count) noexcept {
  if (count < 0 || (count && !fids)) return -FI_EINVAL;
  for (int i = 0; i < count; ++i)
    if (int rc = trywait_one(fids[i]); rc != 0) return rc;
  return 0;
}

constinit fi_ops g_fabric_fid_ops = {
    .size = sizeof(fi_ops),
    .close = &fabric_close,
    .bind = enosys_ptr<decltype(fi_ops::bind)>,
    .control = enosys_ptr<decltype(fi_ops::control)>,
    .ops_open = enosys_ptr<decltype(fi_ops::ops_open)>,
    .tostr = enosys_ptr<decltype(fi_ops::tostr)>,
    .ops_set = enosys_ptr<decltype(fi_ops::ops_set)>,
};

constinit fi_ops_fabric g_fabric_ops = {
    .size = sizeof(fi_ops_fabric),
    .domain = &domain_open,
    .passive_ep = enosys_ptr<decltype(fi_ops_fabric::passive_ep)>,
    .eq_open = &eq_open,
    .wait_open = &wait_open,
    .trywait = &fabric_trywait,
    .domain2 = enosys_ptr<decltype(fi_ops_fabric::domain2)>,
};

}  // namespace

int fabric_open(fi_fabric_attr* attr, fid_fabric** out, void* context) noexcept {
  if (!attr || !out) return -FI_EINVAL;
  if (attr->name && std::strcmp(attr->name, fabric_name) != 0) return -FI_ENODATA;
  auto* fab = new (std::nothrow) fabric;
  if (!fab) return -FI_ENOMEM;
  fab->fabric_fid.fid.fclass = FI_CLASS_FABRIC;
  fab->fabric_fid.fid.context = context;
  fab->fabric_fid.fid.ops = &g_fabric_fid_ops;
  fab->fabric_fid.ops = &g_fabric_ops;
  *out = &fab->fabric_fid;
  return 0;
}

void fabric_ref(fid_fabric* f) noexcept {
  fabric_of(&f->fid).domains.fetch_add(1, std::memory_order_acq_rel);
}

void fabric_unref(fid_fabric* f) noexcept {
  fabric_of(&f->fid).domains.fetch_sub(1, std::memory_order_acq_rel);
}

}  // namespace exanet::fi
