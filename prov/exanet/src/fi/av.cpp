#include "fi/av.hpp"

#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "core/lock.hpp"
#include "fi/attr.hpp"
#include "fi/common.hpp"
#include "fi/domain.hpp"
#include "fi/enosys.hpp"
#include "fi/eq.hpp"
#include "fi/provider.hpp"

namespace exanet::fi {

class av {
 public:
  fid_av av_fid{};  // first member
  fi_av_type type = FI_AV_MAP;
  fid_domain* domain = nullptr;
  core::level_lock lock;
  struct entry {
    dev::address addr{};
    bool live = false;
  };
  std::vector<entry> entries;
  std::unordered_map<std::uint64_t, fi_addr_t> reverse;  // key(address) -> newest fi_addr
  std::atomic<std::uint64_t> epoch{0};
  std::atomic<int> refs{0};
  eq* events = nullptr;  // FI_EVENT: insert results go here

  static std::uint64_t key(const dev::address& a) noexcept {
    // pdid is folded in: an address of another PDID is a different peer.
    return (std::uint64_t{a.node} << 48) ^ (std::uint64_t{a.pdid} << 32) ^ a.port;
  }
};

namespace {

av& av_of(fid* f) noexcept { return from_fid<av>(f); }
av& av_of(fid_av* f) noexcept { return from_fid<av>(&f->fid); }

// Inserts one name; FI_ADDR_NOTAVAIL if it is not an exanet address.
fi_addr_t insert_one(av& a, const void* name) {
  dev::address addr;
  std::memcpy(&addr, name, sizeof addr);
  if (!addr.valid()) return FI_ADDR_NOTAVAIL;
  const std::uint64_t k = av::key(addr);
  if (a.type == FI_AV_MAP) {
    // Re-inserting a known address gives back its fi_addr: MAP addresses name peers.
    if (auto it = a.reverse.find(k); it != a.reverse.end() && a.entries[it->second].addr == addr)
      return it->second;
  }
  a.entries.push_back({addr, true});  // TABLE: consecutive indices in insertion order
  const fi_addr_t idx = a.entries.size() - 1;
  a.reverse[k] = idx;
  return idx;
}

int report(av& a, int inserted, std::uint64_t flags, void* context) noexcept {
  if (!(flags & FI_EVENT) && !a.events) return inserted;
  if (!a.events) return -FI_ENOEQ;
  fi_eq_entry e{};
  e.fid = &a.av_fid.fid;
  e.context = context;
  e.data = static_cast<std::uint64_t>(inserted);
  const ssize_t r = eq_write_event(*a.events, FI_AV_COMPLETE, &e, sizeof e, 0);
  return r < 0 ? static_cast<int>(r) : 0;
}

int av_insert(fid_av* f, const void* addr, size_t count, fi_addr_t* fi_addr, uint64_t flags,
              void* context) noexcept {
  av& a = av_of(f);
  if (flags & ~(FI_MORE | FI_SYNC_ERR | FI_EVENT)) return -FI_EBADFLAGS;
  if (count && !addr) return -FI_EINVAL;
  if ((flags & FI_SYNC_ERR) && !context) return -FI_EINVAL;
  int inserted = 0;
  {
    core::level_guard g(a.lock);
    const auto* names = static_cast<const std::byte*>(addr);
    for (size_t i = 0; i < count; ++i) {
      fi_addr_t r = FI_ADDR_NOTAVAIL;
      try {
        r = insert_one(a, names + i * sizeof(dev::address));
      } catch (...) {
        r = FI_ADDR_NOTAVAIL;
      }
      if (fi_addr) fi_addr[i] = r;
      if (flags & FI_SYNC_ERR) static_cast<int*>(context)[i] = r == FI_ADDR_NOTAVAIL ? FI_EINVAL : 0;
      if (r != FI_ADDR_NOTAVAIL) ++inserted;
    }
  }
  return report(a, inserted, flags, context);
}

// node/service name endpoints the same way fi_getinfo does: local node, numeric port.
int av_insertsvc(fid_av* f, const char* node, const char* service, fi_addr_t* fi_addr,
                 uint64_t flags, void* context) noexcept {
  fi_info* info = nullptr;
  int rc = getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), node, service, 0, nullptr, &info);
  if (rc != 0) {
    if (fi_addr) *fi_addr = FI_ADDR_NOTAVAIL;
    return rc == -FI_ENODATA ? 0 : rc;
  }
  rc = av_insert(f, info->dest_addr, 1, fi_addr, flags, context);
  fi_freeinfo(info);
  return rc;
}

int av_remove(fid_av* f, fi_addr_t* fi_addr, size_t count, uint64_t flags) noexcept {
  av& a = av_of(f);
  if (flags) return -FI_EBADFLAGS;
  if (count && !fi_addr) return -FI_EINVAL;
  core::level_guard g(a.lock);
  int rc = 0;
  for (size_t i = 0; i < count; ++i) {
    const fi_addr_t idx = fi_addr[i];
    if (idx >= a.entries.size() || !a.entries[idx].live) {
      rc = -FI_EINVAL;
      continue;
    }
    a.entries[idx].live = false;
    if (auto it = a.reverse.find(av::key(a.entries[idx].addr));
        it != a.reverse.end() && it->second == idx)
      a.reverse.erase(it);
  }
  a.epoch.fetch_add(1, std::memory_order_release);
  return rc;
}

int av_lookup_op(fid_av* f, fi_addr_t fi_addr, void* addr, size_t* addrlen) noexcept {
  if (!addrlen) return -FI_EINVAL;
  dev::address found;
  if (!av_lookup(av_of(f), fi_addr, found)) return -FI_ENOENT;
  if (addr) std::memcpy(addr, &found, std::min(*addrlen, sizeof found));
  *addrlen = sizeof found;
  return 0;
}

const char* av_straddr(fid_av*, const void* addr, char* buf, size_t* len) noexcept {
  if (!addr || !buf || !len) return nullptr;
  dev::address a;
  std::memcpy(&a, addr, sizeof a);
  char text[64];
  const int n = a.valid() ? std::snprintf(text, sizeof text, "exanet://%u:%u:%u", a.node, a.pdid, a.port)
                          : std::snprintf(text, sizeof text, "exanet://invalid");
  if (*len) {
    std::strncpy(buf, text, *len - 1);
    buf[*len - 1] = '\0';
  }
  *len = static_cast<size_t>(n) + 1;
  return buf;
}

int av_close(fid* f) noexcept {
  av& a = av_of(f);
  if (a.refs.load(std::memory_order_acquire) != 0) return -FI_EBUSY;
  domain_unref(a.domain);
  delete &a;
  return 0;
}

int av_bind(fid* f, fid* bfid, uint64_t flags) noexcept {
  av& a = av_of(f);
  if (flags) return -FI_EBADFLAGS;
  eq* q = eq_from(bfid);
  if (!q) return -FI_EINVAL;
  a.events = q;
  return 0;
}

constinit fi_ops g_av_fid_ops = {
    .size = sizeof(fi_ops),
    .close = &av_close,
    .bind = &av_bind,
    .control = enosys_ptr<decltype(fi_ops::control)>,
    .ops_open = enosys_ptr<decltype(fi_ops::ops_open)>,
    .tostr = enosys_ptr<decltype(fi_ops::tostr)>,
    .ops_set = enosys_ptr<decltype(fi_ops::ops_set)>,
};

constinit fi_ops_av g_av_ops = {
    .size = sizeof(fi_ops_av),
    .insert = &av_insert,
    .insertsvc = &av_insertsvc,
    .insertsym = enosys_ptr<decltype(fi_ops_av::insertsym)>,
    .remove = &av_remove,
    .lookup = &av_lookup_op,
    .straddr = &av_straddr,
    .av_set = enosys_ptr<decltype(fi_ops_av::av_set)>,
};

}  // namespace

int av_open(fid_domain* domain, fi_av_attr* attr, fid_av** out, void* context) noexcept {
  if (!domain || !attr || !out) return -FI_EINVAL;
  if (attr->type != FI_AV_UNSPEC && attr->type != FI_AV_MAP && attr->type != FI_AV_TABLE)
    return -FI_EINVAL;
  if (attr->name || attr->rx_ctx_bits || attr->ep_per_node > 1) return -FI_ENOSYS;  // no shared AVs
  if (attr->flags & ~static_cast<std::uint64_t>(FI_EVENT)) return -FI_EBADFLAGS;
  return fi_guard([&]() -> int {
    auto* a = new av;
    a->type = attr->type == FI_AV_TABLE ? FI_AV_TABLE : FI_AV_MAP;
    attr->type = a->type;
    a->domain = domain;
    a->lock.enable(domain_threading(domain) != FI_THREAD_DOMAIN);
    a->entries.reserve(attr->count ? attr->count : 64);
    a->av_fid.fid.fclass = FI_CLASS_AV;
    a->av_fid.fid.context = context;
    a->av_fid.fid.ops = &g_av_fid_ops;
    a->av_fid.ops = &g_av_ops;
    domain_ref(domain);
    *out = &a->av_fid;
    return 0;
  });
}

av* av_from(fid* f) noexcept {
  if (!f || f->fclass != FI_CLASS_AV || f->ops != &g_av_fid_ops) return nullptr;
  return &av_of(f);
}

bool av_lookup(av& a, fi_addr_t addr, dev::address& out) noexcept {
  core::level_guard g(a.lock);
  if (addr >= a.entries.size() || !a.entries[addr].live) return false;
  out = a.entries[addr].addr;
  return true;
}

fi_addr_t av_reverse_lookup(av& a, const dev::address& addr) noexcept {
  core::level_guard g(a.lock);
  auto it = a.reverse.find(av::key(addr));
  if (it == a.reverse.end() || !(a.entries[it->second].addr == addr)) return FI_ADDR_NOTAVAIL;
  return it->second;
}

std::uint64_t av_remove_epoch(const av& a) noexcept {
  return a.epoch.load(std::memory_order_acquire);
}

void av_ref(av& a) noexcept { a.refs.fetch_add(1, std::memory_order_acq_rel); }
void av_unref(av& a) noexcept { a.refs.fetch_sub(1, std::memory_order_acq_rel); }

}  // namespace exanet::fi
