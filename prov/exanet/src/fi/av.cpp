// SPDX-License-Identifier: BSD-2-Clause
#include "fi/av.hpp"

#include <fcntl.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/lock.hpp"
#include "core/log.hpp"
#include "fi/addr_format.hpp"
#include "fi/attr.hpp"
#include "fi/common.hpp"
#include "fi/domain.hpp"
#include "fi/enosys.hpp"
#include "fi/eq.hpp"
#include "fi/provider.hpp"

namespace exanet::fi {

// A named AV (fi_av(3) name, FI_SHARED_AV) lives in a shared-memory file,
// /dev/shm/exanet-av.<uid>.<name>, that every process of the user opening the same name maps:
// the same fi_addr names the same peer in all of them. Its layout:
struct shared_av_header {
  static constexpr std::uint32_t magic_value = 0x45584156;  // "EXAV"
  std::uint32_t magic;
  std::uint32_t version;
  std::uint32_t type;  // FI_AV_MAP or FI_AV_TABLE
  std::int32_t creator_pid;
  std::uint64_t capacity;            // entries the file holds
  std::atomic<std::uint64_t> count;  // entries claimed (an entry is valid once live)
  std::atomic<std::uint64_t> epoch;  // bumped by every removal: endpoints drop cached routes
  std::atomic<std::uint32_t> ready;  // released last by the creator
};
struct shared_av_entry {
  static constexpr std::uint32_t claimed = 0, live = 1, removed = 2;
  dev::address addr;
  std::atomic<std::uint32_t> state;  // claimed (being written), live (released after addr), removed
  std::uint32_t reserved;
};
static_assert(sizeof(shared_av_entry) == 72 && std::atomic<std::uint64_t>::is_always_lock_free);
// creator_pid is for people reading the file; liveness is the holds on it (shared_av_file).

/// The mapping of a named AV's file; the process that created the file unlinks it at close.
/// Every process that has the AV open holds a shared flock(2) on the file for as long: a file
/// nobody holds is stale (its users died), whatever PID namespace they ran in. (A process id
/// cannot tell: in a container or under `unshare --pid` it names another process or none.)
class shared_av_file {
 public:
  shared_av_file() = default;
  shared_av_file(const shared_av_file&) = delete;
  shared_av_file& operator=(const shared_av_file&) = delete;
  ~shared_av_file() {
    if (base_) munmap(base_, bytes_);
    if (created_) shm_unlink(name_.c_str());
    if (fd_ >= 0) ::close(fd_);  // drops our hold
  }
  /// Opens (read_only: it must exist) or creates the file of `name`. -FI_ENOENT when a
  /// read-only open finds none, -FI_EINVAL for a file that is not a named AV of this layout.
  int open(const char* name, bool read_only, fi_av_type type, std::size_t capacity) noexcept;

  shared_av_header& header() const noexcept { return *static_cast<shared_av_header*>(base_); }
  shared_av_entry* entries() const noexcept {
    return reinterpret_cast<shared_av_entry*>(static_cast<char*>(base_) + sizeof(shared_av_header));
  }
  /// fi_av(3)'s map_addr for this AV: an array whose element i is the fi_addr of the i-th
  /// entry inserted (fabtests' fi_rdm_shared_av reads it so).
  fi_addr_t* map() const noexcept {
    return reinterpret_cast<fi_addr_t*>(entries() + header().capacity);
  }
  bool read_only() const noexcept { return read_only_; }
  /// The existing file of name_ is held by no process (every user of it has gone).
  bool creator_is_gone() const noexcept;

  static std::size_t bytes_for(std::size_t capacity) noexcept {
    return sizeof(shared_av_header) + capacity * (sizeof(shared_av_entry) + sizeof(fi_addr_t));
  }

 private:
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
  std::string name_;
  int fd_ = -1;  // kept open: our shared hold on the file lives on it
  bool created_ = false;
  bool read_only_ = false;
};

bool shared_av_file::creator_is_gone() const noexcept {
  const int fd = shm_open(name_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
  if (fd < 0) return false;
  // Held by nobody: an exclusive lock is granted at once (and given back at once). A file that
  // is not ready yet may be one a creator is still setting up (it locks right after creating):
  // stale only once it has been left so for a while.
  bool gone = false;
  if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
    flock(fd, LOCK_UN);
    shared_av_header h{};
    struct stat st {};
    const bool read = pread(fd, &h, sizeof h, 0) == static_cast<ssize_t>(sizeof h);
    const bool ready = read && h.magic == shared_av_header::magic_value &&
                       h.ready.load(std::memory_order_relaxed) != 0;
    gone = ready || (fstat(fd, &st) == 0 && time(nullptr) - st.st_mtime > 10);
  }
  ::close(fd);
  return gone;
}

int shared_av_file::open(const char* name, bool read_only, fi_av_type type,
                         std::size_t capacity) noexcept try {
  // The name becomes one file name: anything but letters, digits, '.', '_' and '-' becomes '_'.
  std::string safe;
  for (const char* c = name; *c && safe.size() < 128; ++c) {
    const bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                    *c == '.' || *c == '_' || *c == '-';
    safe.push_back(ok ? *c : '_');
  }
  name_ = "/exanet-av." + std::to_string(geteuid()) + "." + safe;
  read_only_ = read_only;
  int fd = -1;
  if (!read_only) {
    fd = shm_open(name_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST && creator_is_gone()) {
      // Left by a process that died before closing it (a crashed job): a writer starts afresh.
      shm_unlink(name_.c_str());
      fd = shm_open(name_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    }
    if (fd >= 0) {
      created_ = true;
      flock(fd, LOCK_SH);  // held until close: the file is in use
      bytes_ = bytes_for(capacity);
      if (ftruncate(fd, static_cast<off_t>(bytes_)) != 0) {
        ::close(fd);
        return -FI_ENOMEM;
      }
    }
  }
  if (fd < 0) {  // read-only, or the file exists already: join it
    fd = shm_open(name_.c_str(), (read_only ? O_RDONLY : O_RDWR) | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0) return errno == ENOENT ? -FI_ENOENT : -FI_EACCES;
    flock(fd, LOCK_SH);  // held until close, also by readers: the file is in use
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        static_cast<std::size_t>(st.st_size) < sizeof(shared_av_header)) {
      ::close(fd);
      return -FI_EINVAL;
    }
    bytes_ = static_cast<std::size_t>(st.st_size);
  }
  // Readers map it read-only too: a read-only AV cannot change the others' entries.
  base_ = mmap(nullptr, bytes_, read_only ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  fd_ = fd;
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    return -FI_ENOMEM;
  }
  shared_av_header& h = header();
  if (created_) {
    h.magic = shared_av_header::magic_value;
    h.version = 3;  // 2: its users hold a flock on it (version 1's did not); 3: 64-byte names
    h.type = static_cast<std::uint32_t>(type);
    h.creator_pid = getpid();
    h.capacity = capacity;
    h.count.store(0, std::memory_order_relaxed);
    h.epoch.store(0, std::memory_order_relaxed);
    h.ready.store(1, std::memory_order_release);
    return 0;
  }
  // A creator still writing the header: wait for it briefly (it is a few stores away).
  for (int i = 0; i < 100000 && h.ready.load(std::memory_order_acquire) == 0; ++i) sched_yield();
  if (h.ready.load(std::memory_order_acquire) == 0 || h.magic != shared_av_header::magic_value ||
      h.version != 3 || bytes_for(h.capacity) > bytes_) {
    EXANET_LOG(warn, core, "named AV %s: not an exanet AV of this version", name_.c_str());
    return -FI_EINVAL;
  }
  return 0;
} catch (...) {
  return -FI_ENOMEM;
}

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
  // A named AV keeps its entries in the shared file instead of `entries`; `reverse` then caches
  // the file's entries up to `synced` (others may have added since).
  std::unique_ptr<shared_av_file> shared;
  std::uint64_t synced = 0;
  std::vector<std::uint64_t> unsettled;  // claimed entries below synced (bounded by capacity)

  std::uint64_t size() const noexcept {
    return shared ? std::min(shared->header().count.load(std::memory_order_acquire),
                             shared->header().capacity)
                  : entries.size();
  }
  /// The entry at idx if it is live.
  bool get(std::uint64_t idx, dev::address& out) const noexcept {
    if (!shared) {
      if (idx >= entries.size() || !entries[idx].live) return false;
      out = entries[idx].addr;
      return true;
    }
    if (idx >= size()) return false;
    const shared_av_entry& e = shared->entries()[idx];
    if (e.state.load(std::memory_order_acquire) != shared_av_entry::live) return false;
    out = e.addr;
    return true;
  }
  /// Opened with FI_READ: inserts and removals are refused.
  bool read_only() const noexcept { return shared && shared->read_only(); }
  /// Bumped by every removal (in the file, for a named AV: every process's endpoints see it).
  std::atomic<std::uint64_t>& epoch_counter() noexcept {
    return shared ? shared->header().epoch : epoch;
  }
  const std::atomic<std::uint64_t>& epoch_counter() const noexcept {
    return shared ? shared->header().epoch : epoch;
  }
  void mark_removed(std::uint64_t idx) noexcept {
    if (shared) shared->entries()[idx].state.store(shared_av_entry::removed, std::memory_order_release);
    else entries[idx].live = false;
  }
  /// Adds the entries other processes put in the shared file since the last look. An entry
  /// still being written is looked at again next time without holding up the ones after it:
  /// its writer may have died between claiming and publishing it, and then it never settles.
  void sync_reverse() {
    if (!shared) return;
    std::erase_if(unsettled, [&](std::uint64_t i) { return settle(i); });
    for (const std::uint64_t n = size(); synced < n; ++synced)
      if (!settle(synced)) unsettled.push_back(synced);
  }
  bool settle(std::uint64_t i) {
    const shared_av_entry& e = shared->entries()[i];
    const std::uint32_t st = e.state.load(std::memory_order_acquire);
    if (st == shared_av_entry::claimed) return false;
    if (st == shared_av_entry::live) reverse[key(e.addr)] = i;
    return true;
  }

  static std::uint64_t key(const dev::address& a) noexcept {
    // pdid is folded in: an address of another PDID is a different peer; so is the host.
    return (std::uint64_t{a.node} << 48) ^ (std::uint64_t{a.pdid} << 32) ^ a.port ^
           (a.host * 0x9e3779b97f4a7c15ull);
  }
};

namespace {

// Entries of a named AV when fi_av_attr's count is 0.
constexpr std::size_t shared_av_default_count = 1024;

av& av_of(fid* f) noexcept { return from_fid<av>(f); }
av& av_of(fid_av* f) noexcept { return from_fid<av>(&f->fid); }

// Inserts one exanet address (MAP: a known one gives back its fi_addr).
fi_addr_t insert_one_native(av& a, const dev::address& addr) {
  const std::uint64_t k = av::key(addr);
  a.sync_reverse();
  if (a.type == FI_AV_MAP) {
    // Re-inserting a known address gives back its fi_addr: MAP addresses name peers.
    dev::address known;
    if (auto it = a.reverse.find(k); it != a.reverse.end() && a.get(it->second, known) && known == addr)
      return it->second;
  }
  if (a.shared) {
    shared_av_header& h = a.shared->header();
    // Claimed first, so writers in several processes never take the same entry.
    const std::uint64_t idx = h.count.fetch_add(1, std::memory_order_acq_rel);
    if (idx >= h.capacity) {
      h.count.fetch_sub(1, std::memory_order_acq_rel);
      EXANET_LOG_ONCE(warn, core, "named AV full (%llu entries, its fi_av_attr count)",
                      static_cast<unsigned long long>(h.capacity));
      return FI_ADDR_NOTAVAIL;
    }
    shared_av_entry& e = a.shared->entries()[idx];
    e.addr = addr;
    a.shared->map()[idx] = idx;
    e.state.store(shared_av_entry::live, std::memory_order_release);
    a.reverse[k] = idx;
    return idx;
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
  if (a.read_only()) return -FI_EOPNOTSUPP;
  if ((flags & FI_SYNC_ERR) && !context) return -FI_EINVAL;
  int inserted = 0;
  std::vector<std::size_t> failed;
  {
    core::level_guard g(a.lock);
    // Names are packed at the format's stride; FI_ADDR_STR passes an array of strings (fi_av(3)).
    const addr_codec& names = domain_names(a.domain);
    const std::size_t stride = addr_stride(names.format, addr);
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
  if (a.read_only()) return -FI_EOPNOTSUPP;
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
  if (a.read_only()) return -FI_EOPNOTSUPP;
  core::level_guard g(a.lock);
  int rc = 0;
  for (size_t i = 0; i < count; ++i) {
    const fi_addr_t idx = fi_addr[i];
    dev::address addr;
    if (!a.get(idx, addr)) {
      rc = -FI_EINVAL;
      continue;
    }
    a.mark_removed(idx);
    if (auto it = a.reverse.find(av::key(addr)); it != a.reverse.end() && it->second == idx)
      a.reverse.erase(it);
  }
  // Endpoints (of every process, for a named AV) drop the routes they cached.
  a.epoch_counter().fetch_add(1, std::memory_order_release);
  return rc;
}

int av_lookup_op(fid_av* f, fi_addr_t fi_addr, void* addr, size_t* addrlen) noexcept {
  if (!addrlen) return -FI_EINVAL;
  dev::address found;
  av& a = av_of(f);
  if (!av_lookup(a, fi_addr, found)) return -FI_ENOENT;
  // fi_av(3): as much of the name as fits, and the size it needs.
  char full[addr_str_max];  // room for a name of any format
  std::size_t len = sizeof full;
  if (addr_encode(domain_names(a.domain), found, full, &len) != 0) return -FI_EINVAL;
  if (addr) std::memcpy(addr, full, std::min(*addrlen, len));
  *addrlen = len;
  return 0;
}

// The FI_ADDR_STR form of a name in the domain's format ("fi_exanet://HOST:PORT/PDID", and the
// version 2 fields of a 64-byte name: addr_format.hpp); fi_av_insert of it finds the same peer.
const char* av_straddr(fid_av* f, const void* addr, char* buf, size_t* len) noexcept {
  if (!addr || !buf || !len) return nullptr;
  const addr_codec& names = domain_names(av_of(f).domain);
  dev::address a;
  char text[addr_str_max];
  addr_codec as_text = names;
  as_text.format = FI_ADDR_STR;
  std::size_t tl = sizeof text;
  const bool ok = addr_decode(names, addr, addr_stride(names.format, addr), a) == 0 &&
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
  if (attr->rx_ctx_bits || attr->ep_per_node > 1) return -FI_ENOSYS;  // no scalable endpoints
  if (attr->flags & ~static_cast<std::uint64_t>(FI_EVENT | FI_READ)) return -FI_EBADFLAGS;
  if ((attr->flags & FI_READ) && !attr->name) return -FI_EINVAL;  // fi_av(3): read-only is named
  return fi_guard([&]() -> int {
    auto a = std::make_unique<av>();
    a->type = attr->type == FI_AV_TABLE ? FI_AV_TABLE : FI_AV_MAP;
    if (attr->name) {
      a->shared = std::make_unique<shared_av_file>();
      const std::size_t capacity = attr->count ? attr->count : shared_av_default_count;
      if (int rc = a->shared->open(attr->name, attr->flags & FI_READ, a->type, capacity); rc != 0)
        return rc;
      // The file's type decides: every process must hand out the same fi_addrs.
      a->type = static_cast<fi_av_type>(a->shared->header().type);
      attr->map_addr = a->shared->map();
    }
    attr->type = a->type;
    a->domain = domain;
    a->lock.enable(domain_threading(domain) != FI_THREAD_DOMAIN);
    if (!a->shared) a->entries.reserve(attr->count ? attr->count : 64);
    a->av_fid.fid.fclass = FI_CLASS_AV;
    a->av_fid.fid.context = context;
    a->av_fid.fid.ops = &g_av_fid_ops;
    a->av_fid.ops = &g_av_ops;
    domain_ref(domain);
    *out = &a.release()->av_fid;
    return 0;
  });
}

av* av_from(fid* f) noexcept {
  if (!f || f->fclass != FI_CLASS_AV || f->ops != &g_av_fid_ops) return nullptr;
  return &av_of(f);
}

bool av_lookup(av& a, fi_addr_t addr, dev::address& out) noexcept {
  core::level_guard g(a.lock);
  return a.get(addr, out);
}

fi_addr_t av_reverse_lookup(av& a, const dev::address& addr) noexcept {
  core::level_guard g(a.lock);
  try {
    a.sync_reverse();
  } catch (...) {  // out of memory for the cache: the entries already known still answer
  }
  auto it = a.reverse.find(av::key(addr));
  dev::address known;
  if (it == a.reverse.end() || !a.get(it->second, known) || !(known == addr)) return FI_ADDR_NOTAVAIL;
  return it->second;
}

std::uint64_t av_remove_epoch(const av& a) noexcept {
  return av_remove_epoch_counter(a).load(std::memory_order_acquire);
}

const std::atomic<std::uint64_t>& av_remove_epoch_counter(const av& a) noexcept {
  return a.epoch_counter();
}

void av_ref(av& a) noexcept { a.refs.fetch_add(1, std::memory_order_acq_rel); }
void av_unref(av& a) noexcept { a.refs.fetch_sub(1, std::memory_order_acq_rel); }

}  // namespace exanet::fi
