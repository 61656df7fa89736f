// SPDX-License-Identifier: BSD-2-Clause
// fi_domain: reads the provider parameters once, owns the memory-registration keys, and opens
// every other object. There is no domain-wide lock on the data path (DESIGN.md §6).
#include "fi/domain.hpp"

#include <rdma/fi_errno.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

#include "core/copy.hpp"
#include "core/log.hpp"
#include "fi/av.hpp"
#include "fi/cntr.hpp"
#include "fi/common.hpp"
#include "fi/cq.hpp"
#include "fi/enosys.hpp"
#include "fi/poll.hpp"
#include "fi/ep.hpp"
#include "fi/addr_format.hpp"
#include "fi/fabric.hpp"
#include "fi/mr.hpp"
#include "fi/params.hpp"
#include "fi/progress_thread.hpp"
#include "fi/provider.hpp"

namespace exanet::fi {
namespace {

class domain {
 public:
  fid_domain domain_fid{};  // first member
  fid_fabric* fabric = nullptr;
  fi_threading threading = FI_THREAD_SAFE;
  proto::config cfg{};
  addr_codec names;  // the address format of fi_getname and the AVs (info->addr_format)
  mr_registry mrs;
  std::atomic<int> children{0};  // endpoints, AVs, CQs, counters, MRs opened from it
  // FI_PROGRESS_AUTO only; the thread starts with the first enabled endpoint and is joined at
  // close (no endpoint is left by then: children).
  std::unique_ptr<progress_thread> progress;
};

domain& domain_of(const fid_domain* f) noexcept {
  return from_fid<domain>(const_cast<fid_domain*>(f));
}

int domain_close(fid* f) noexcept {
  domain& d = domain_of(reinterpret_cast<fid_domain*>(f));
  if (d.children.load(std::memory_order_acquire) != 0) return -FI_EBUSY;
  if (d.progress) d.progress->stop();
  fabric_unref(d.fabric);
  delete &d;
  return 0;
}

constinit fi_ops g_domain_fid_ops = {
    .size = sizeof(fi_ops),
    .close = &domain_close,
    .bind = enosys_ptr<decltype(fi_ops::bind)>,
    .control = enosys_ptr<decltype(fi_ops::control)>,
    .ops_open = enosys_ptr<decltype(fi_ops::ops_open)>,
    .tostr = enosys_ptr<decltype(fi_ops::tostr)>,
    .ops_set = enosys_ptr<decltype(fi_ops::ops_set)>,
};

constinit fi_ops_domain g_domain_ops = {
    .size = sizeof(fi_ops_domain),
    .av_open = &av_open,
    .cq_open = &cq_open,
    .endpoint = &endpoint_open,
    .scalable_ep = enosys_ptr<decltype(fi_ops_domain::scalable_ep)>,
    .cntr_open = &cntr_open,
    .poll_open = &poll_open,
    .stx_ctx = enosys_ptr<decltype(fi_ops_domain::stx_ctx)>,
    .srx_ctx = enosys_ptr<decltype(fi_ops_domain::srx_ctx)>,
    .query_atomic = &domain_query_atomic,
    .query_collective = enosys_ptr<decltype(fi_ops_domain::query_collective)>,
    .endpoint2 = enosys_ptr<decltype(fi_ops_domain::endpoint2)>,
};

}  // namespace

int domain_open(fid_fabric* fabric, fi_info* info, fid_domain** out, void* context) noexcept {
  if (!fabric || !info || !out) return -FI_EINVAL;
  if (info->domain_attr && info->domain_attr->name &&
      std::strcmp(info->domain_attr->name, domain_name) != 0)
    return -FI_EINVAL;
  return fi_guard([&]() -> int {
    auto* d = new domain;
    d->fabric = fabric;
    d->cfg = params_read();
    {
      // The emulated device's link model (off by default): for endpoints opened from now on.
      dev::link_params link;
      dev::link_placement where;
      (void)params_link(link, where);
      dev::set_link_params(link, std::move(where));
    }
    // Process-wide and measured once: how copies between misaligned buffers are made.
    const core::copy_choice copy = core::copy_calibrate(d->cfg.copy);
    EXANET_LOG(info, core,
               "misaligned copies: %s (memcpy %.0f ns, %s loop %.0f ns per 64 KiB); copies to just "
               "ahead of their source: %s (memcpy %.0f ns, backward loop %.0f ns)",
               copy.vector ? "loop" : "memcpy", copy.libc_ns, copy.isa, copy.vector_ns,
               copy.backward ? "backward loop" : "memcpy", copy.ahead_libc_ns, copy.ahead_loop_ns);
    if (!addr_format_supported(info->addr_format)) {
      delete d;
      return -FI_EINVAL;
    }
    d->names = addr_codec_for(info->addr_format, info->src_addr, info->src_addrlen, d->cfg);
    if (info->domain_attr && info->domain_attr->threading != FI_THREAD_UNSPEC)
      d->threading = info->domain_attr->threading;
    // Data progress as fi_getinfo granted it (unset: FI_EXANET_PROGRESS). Control operations
    // (AV, MR, EQ) complete within their calls, so only data progress needs the thread.
    const fi_progress data = info->domain_attr ? info->domain_attr->data_progress
                                               : FI_PROGRESS_UNSPEC;
    if (data == FI_PROGRESS_AUTO || (data == FI_PROGRESS_UNSPEC && params_auto_progress())) {
      d->progress = std::make_unique<progress_thread>(d->cfg.dead_peer_check_ms);
      // The thread progresses endpoints, writes CQs and counters and reads the keys while the
      // application uses them: every object locks as under FI_THREAD_SAFE.
      d->threading = FI_THREAD_SAFE;
    }
    std::uint64_t mr_mode =
        info->domain_attr ? static_cast<std::uint64_t>(info->domain_attr->mr_mode) : 0;
    // The pre-1.5 names: BASIC is virtual addresses with provider keys, SCALABLE is neither.
    if (mr_mode == FI_MR_BASIC) mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
    else if (mr_mode == FI_MR_SCALABLE) mr_mode = 0;
    d->mrs.init(mr_mode, d->threading != FI_THREAD_DOMAIN);
    d->domain_fid.fid.fclass = FI_CLASS_DOMAIN;
    d->domain_fid.fid.context = context;
    d->domain_fid.fid.ops = &g_domain_fid_ops;
    d->domain_fid.ops = &g_domain_ops;
    d->domain_fid.mr = &g_mr_ops;
    fabric_ref(fabric);
    *out = &d->domain_fid;
    return 0;
  });
}

void domain_ref(fid_domain* f) noexcept {
  domain_of(f).children.fetch_add(1, std::memory_order_acq_rel);
}
void domain_unref(fid_domain* f) noexcept {
  domain_of(f).children.fetch_sub(1, std::memory_order_acq_rel);
}

fi_threading domain_threading(const fid_domain* f) noexcept { return domain_of(f).threading; }
const proto::config& domain_config(const fid_domain* f) noexcept { return domain_of(f).cfg; }
const addr_codec& domain_names(const fid_domain* f) noexcept { return domain_of(f).names; }
mr_registry& domain_mr_registry(fid_domain* f) noexcept { return domain_of(f).mrs; }
progress_thread* domain_progress_thread(fid_domain* f) noexcept {
  return domain_of(f).progress.get();
}

}  // namespace exanet::fi
