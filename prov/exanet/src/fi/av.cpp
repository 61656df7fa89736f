#include "fi/av.hpp"

#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/lock.hpp"
#include "fi/addr_format.hpp"
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

// Inserts one exanet address (MAP: a known one gives back its fi_addr).
fi_addr_t insert_one_native(av& a, const dev::address& addr) {
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

// Inserts one name in the domain's format (for FI_ADDR_STR, the string); FI_ADDR_NOTAVAIL if it
// names no exanet endpoint it can reach.
fi_addr_t insert_one(av& a, const void* name, std::size_t len) {
  dev::address addr;
  if (addr_decode(domain_names(a.domain), name, len, addr) != 0) return FI_ADDR_NOTAVAIL;
  return insert_one_native(a, addr);
}

// With FI_EVENT (or an EQ bound), the result goes to the EQ: an error entry per address that
// failed (data: its index), then FI_AV_COMPLETE with the count inserted (fi_av(3)).
int report(av& a, int inserted, std::uint64_t flags, void* context,
           std::span<const std::size_t> failed) noexcept {
  if (!(flags & FI_EVENT) && !a.events) return inserted;
  if (!a.events) return -FI_ENOEQ;
  for (const std::size_t i : failed) {
    fi_eq_err_entry err{};
    err.fid = &a.av_fid.fid;
    err.context = context;
    err.data = i;
    err.err = FI_EINVAL;
    if (const ssize_t r = eq_write_error(*a.events, err); r < 0) return static_cast<int>(r);
  }
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
  std::vector<std::size_t> failed;
  {
    core::level_guard g(a.lock);
    // Names are packed at the format's stride; FI_ADDR_STR passes an array of strings (fi_av(3)).
    const addr_codec& names = domain_names(a.domain);
    const std::size_t stride = addr_stride(names.format);
    for (size_t i = 0; i < count; ++i) {
      fi_addr_t r = FI_ADDR_NOTAVAIL;
      try {
        if (stride)
          r = insert_one(a, static_cast<const std::byte*>(addr) + i * stride, stride);
        else if (const char* s = static_cast<const char* const*>(addr)[i])
          r = insert_one(a, s, 0);
      } catch (...) {
        r = FI_ADDR_NOTAVAIL;
      }
      if (fi_addr) fi_addr[i] = r;
      if (flags & FI_SYNC_ERR) static_cast<int*>(context)[i] = r == FI_ADDR_NOTAVAIL ? FI_EINVAL : 0;
      if (r != FI_ADDR_NOTAVAIL) {
        ++inserted;
      } else if (a.events) {
        try {
          failed.push_back(i);
        } catch (...) {
          return -FI_ENOMEM;
        }
      }
    }
  }
  return report(a, inserted, flags, context, failed);
}

// node/service name endpoints the same way fi_getinfo does: this host, numeric port (or, for
// FI_ADDR_STR, a whole name as node).
int av_insertsvc(fid_av* f, const char* node, const char* service, fi_addr_t* fi_addr,
                 uint64_t flags, void* context) noexcept {
  av& a = av_of(f);
  dev::address addr;
  fi_addr_t r = FI_ADDR_NOTAVAIL;
  if (addr_from_node_service(domain_names(a.domain), node, service, addr) == 0 && addr.port != 0) {
    core::level_guard g(a.lock);
    try {
      r = insert_one_native(a, addr);
    } catch (...) {
      r = FI_ADDR_NOTAVAIL;
    }
  }
  if (fi_addr) *fi_addr = r;
  constexpr std::size_t first[] = {0};
  const bool inserted = r != FI_ADDR_NOTAVAIL;
  return report(a, inserted ? 1 : 0, flags, context,
                inserted ? std::span<const std::size_t>{} : std::span<const std::size_t>{first});
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
  av& a = av_of(f);
  if (!av_lookup(a, fi_addr, found)) return -FI_ENOENT;
  // fi_av(3): as much of the name as fits, and the size it needs.
  char full[256];  // larger than a name of any format
  std::size_t len = sizeof full;
  if (addr_encode(domain_names(a.domain), found, full, &len) != 0) return -FI_EINVAL;
  if (addr) std::memcpy(addr, full, std::min(*addrlen, len));
  *addrlen = len;
  return 0;
}

// The FI_ADDR_STR form of a name in the domain's format ("fi_exanet://HOST:PORT/PDID").
const char* av_straddr(fid_av* f, const void* addr, char* buf, size_t* len) noexcept {
  if (!addr || !buf || !len) return nullptr;
  const addr_codec& names = domain_names(av_of(f).domain);
  dev::address a;
  char text[128];
  addr_codec as_text = names;
  as_text.format = FI_ADDR_STR;
  std::size_t tl = sizeof text;
  const bool ok = addr_decode(names, addr, addr_stride(names.format), a) == 0 &&
                  addr_encode(as_text, a, text, &tl) == 0;
  const int n = ok ? static_cast<int>(tl) - 1 : std::snprintf(text, sizeof text, "fi_exanet://invalid");
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

const std::atomic<std::uint64_t>& av_remove_epoch_counter(const av& a) noexcept { return a.epoch; }

void av_ref(av& a) noexcept { a.refs.fetch_add(1, std::memory_order_acq_rel); }
void av_unref(av& a) noexcept { a.refs.fetch_sub(1, std::memory_order_acq_rel); }

}  // namespace exanet::fi
