// SPDX-License-Identifier: BSD-2-Clause
#include "dev/emu/segment.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/log.hpp"
#include "core/unlink_at_exit.hpp"
#include "dev/address.hpp"

namespace exanet::dev::emu {

namespace {

void remove_wake_socket(const std::string& segment) noexcept {
  try {
    if (const std::string name = wake_socket_name(segment); !name.empty()) shm_unlink(name.c_str());
  } catch (...) {
    // Out of memory for a name: the socket is left, and removed by the name's next owner.
  }
}

// Whether nobody holds the exclusive lock a segment's creator keeps for its life: a shared
// lock is granted only then (the kernel released the creator's with its last descriptor).
// Given back at once, so two processes probing together both learn the same. False when the
// probe fails otherwise: unknown is never proof of death.
bool creator_lock_free(int fd) noexcept {
  if (flock(fd, LOCK_SH | LOCK_NB) != 0) return false;
  flock(fd, LOCK_UN);
  return true;
}

// Whether a file has not changed for shm_segment::unfinished_after_s seconds.
bool unchanged_for_a_while(const struct stat& st) noexcept {
  timespec now{};
  return clock_gettime(CLOCK_REALTIME, &now) == 0 &&
         now.tv_sec - st.st_mtim.tv_sec > shm_segment::unfinished_after_s;
}

// Unlinks a segment name (its wake socket first: a new owner can take the names only once the
// segment went) only while it still names the file (dev, ino): never a file put there since.
bool unlink_if_names(const std::string& name, dev_t dev, ino_t ino) noexcept {
  const int fd = shm_open(name.c_str(), O_RDONLY, 0);
  if (fd < 0) return false;
  struct stat st {};
  const bool same = fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
  close(fd);
  if (!same) return false;
  remove_wake_socket(name);
  return shm_unlink(name.c_str()) == 0;
}

}  // namespace

shm_segment& shm_segment::operator=(shm_segment&& o) noexcept {
  if (this != &o) {
    reset();
    data_ = o.data_;
    size_ = o.size_;
    name_ = std::move(o.name_);
    owner_ = o.owner_;
    dev_ = o.dev_;
    ino_ = o.ino_;
    fd_ = o.fd_;
    o.fd_ = -1;
    o.data_ = nullptr;
    o.size_ = 0;
    o.owner_ = false;
  }
  return *this;
}

void shm_segment::reset() noexcept {
  if (owner_ && !name_.empty()) {
    remove_wake_socket(name_);
    shm_unlink(name_.c_str());
    core::forget_at_exit(name_);
  }
  if (data_) munmap(data_, size_);
  if (fd_ >= 0) ::close(fd_);  // last: an owner's lock says "alive" until the name is gone
  fd_ = -1;
  data_ = nullptr;
  size_ = 0;
  owner_ = false;
  dev_ = 0;
  ino_ = 0;
  name_.clear();
}

namespace {

// Whether fd is a segment only we can have written: a regular file (not a FIFO or a link a
// squatter left) that our effective uid owns, with mode exactly 0600. Logs why not.
core::status check_ours(int fd, const std::string& name, struct stat& st) noexcept {
  if (fstat(fd, &st) != 0) {
    EXANET_LOG(warn, core, "fstat(%s) failed: errno %d", name.c_str(), errno);
    return core::status::io;
  }
  if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 07777) != 0600) {
    EXANET_LOG(warn, core,
               "refusing segment %s: owner uid %u, mode %03o, %s; exanet maps only regular files "
               "of its own uid (%u) with mode 600 (another user may have created this name)",
               name.c_str(), static_cast<unsigned>(st.st_uid),
               static_cast<unsigned>(st.st_mode & 07777),
               S_ISREG(st.st_mode) ? "regular file" : "not a regular file",
               static_cast<unsigned>(geteuid()));
    return core::status::access;
  }
  return core::status::ok;
}

}  // namespace

core::status shm_segment::create(const std::string& name, std::size_t bytes, std::size_t reserve,
                                 shm_segment& out) noexcept {
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return core::status::exists;
    EXANET_LOG(warn, core, "shm_open(%s) failed: errno %d", name.c_str(), errno);
    return core::status::io;
  }
  const auto fail = [&](core::status s) {
    close(fd);
    shm_unlink(name.c_str());
    return s;
  };
  // Held until reset() or the process's end. Nobody judges the segment before its header says
  // ready, which comes after this; a new file cannot be locked by anyone else yet.
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    EXANET_LOG(warn, core, "flock(%s) failed: errno %d", name.c_str(), errno);
    return fail(core::status::io);
  }
  // The umask may have taken bits from 0600 (a segment we could not map) but never adds any;
  // set the mode explicitly so peers of our uid accept it (check_ours).
  struct stat st {};
  if (fchmod(fd, 0600) != 0 || !core::ok(check_ours(fd, name, st))) return fail(core::status::io);
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    EXANET_LOG(warn, core, "ftruncate(%s, %zu) failed: errno %d", name.c_str(), bytes, errno);
    return fail(core::status::no_memory);
  }
  // ftruncate leaves the file sparse: a page first touched (by us or by a peer writing into our
  // mailbox) when /dev/shm is full raises SIGBUS in whoever touched it. Reserving the pages used
  // from the start turns that into a clean error at open (issue 12 part 8); the others are
  // reserved by reserve() before anyone touches them.
  if (reserve > bytes) reserve = bytes;
  if (const int e = reserve ? posix_fallocate(fd, 0, static_cast<off_t>(reserve)) : 0; e != 0) {
    EXANET_LOG(warn, core,
               "cannot reserve %zu bytes for segment %s in /dev/shm: %s; free space in /dev/shm, "
               "enlarge it, or shrink the segment (fi_exanet(7), FOOTPRINT)",
               reserve, name.c_str(), std::strerror(e));
    return fail(e == ENOSPC || e == ENOMEM || e == EFBIG ? core::status::no_memory
                                                          : core::status::io);
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return fail(core::status::no_memory);
  out.reset();
  out.data_ = p;
  out.size_ = bytes;
  out.fd_ = fd;
  out.owner_ = true;
  out.dev_ = st.st_dev;
  out.ino_ = st.st_ino;
  try {
    out.name_ = name;
  } catch (...) {
    munmap(p, bytes);
    shm_unlink(name.c_str());
    close(fd);
    out.data_ = nullptr;
    out.fd_ = -1;
    out.owner_ = false;
    return core::status::no_memory;
  }
  (void)core::unlink_at_exit(name);  // not remembered: left for the next open to reclaim
  return core::status::ok;
}

core::status shm_segment::open(const std::string& name, shm_segment& out) noexcept {
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    if (errno != EACCES) return core::status::unreachable;
    EXANET_LOG(warn, core, "refusing segment %s: not ours (open: permission denied)", name.c_str());
    return core::status::access;
  }
  // Checked on the descriptor we map, not on the name, so nothing can be swapped in between.
  struct stat st {};
  if (core::status s = check_ours(fd, name, st); !core::ok(s)) {
    close(fd);
    return s;
  }
  if (st.st_size <= 0) {
    close(fd);
    return core::status::unreachable;
  }
  const auto bytes = static_cast<std::size_t>(st.st_size);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return core::status::no_memory;
  }
  out.reset();
  out.data_ = p;
  out.size_ = bytes;
  out.fd_ = fd;
  out.dev_ = st.st_dev;
  out.ino_ = st.st_ino;
  try {
    out.name_ = name;
  } catch (...) {
    munmap(p, bytes);
    close(fd);
    out.data_ = nullptr;
    out.fd_ = -1;
    return core::status::no_memory;
  }
  return core::status::ok;
}

namespace {

// The effective uid of pid: proc(5) gives /proc/<pid> the process's effective uid as owner (root
// for a process that is not dumpable, which is then not ours to trust). False if there is none.
bool effective_uid_of(pid_t pid, uid_t& out) noexcept {
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%d", static_cast<int>(pid));
  struct stat st {};
  if (stat(path, &st) != 0) return false;
  out = st.st_uid;
  return true;
}

enum class mapping { of_file, others_only, none };

// Whether /proc/<pid>/maps has a mapping of the file (dev, ino), only other mappings, or none at
// all: a process being killed loses its whole address space before it becomes a zombie, and
// for that moment it is neither a zombie nor a mapper of anything. Lines longer than the
// buffer (long paths) are read on to their end and only their start is parsed.
mapping maps_file(pid_t pid, dev_t dev, ino_t ino) noexcept {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/maps", static_cast<int>(pid));
  FILE* f = std::fopen(path, "re");
  // Gone (reaped since we looked): dead. Unreadable (pid 1 here, another user's): unknown,
  // never proof of death.
  if (!f) return errno == ENOENT || errno == ESRCH ? mapping::none : mapping::others_only;
  char line[512];
  bool at_line_start = true, found = false, any = false;
  while (!found && std::fgets(line, sizeof line, f)) {
    const bool starts = at_line_start;
    at_line_start = std::strchr(line, '\n') != nullptr;
    if (!starts) continue;
    any = true;
    unsigned maj = 0, min = 0;
    unsigned long long inode = 0;
    if (std::sscanf(line, "%*x-%*x %*s %*x %x:%x %llu", &maj, &min, &inode) == 3)
      found = inode == static_cast<unsigned long long>(ino) && maj == major(dev) &&
              min == minor(dev);
  }
  std::fclose(f);
  return found ? mapping::of_file : any ? mapping::others_only : mapping::none;
}

}  // namespace

bool shm_segment::owner_alive() const noexcept {
  if (owner_) return true;  // never probe our own lock: flock on its description would convert it
  if (fd_ < 0) return false;
  return !creator_lock_free(fd_);
}

bool shm_segment::abandoned_unfinished() const noexcept {
  struct stat st {};
  return !owner_alive() && fstat(fd_, &st) == 0 && unchanged_for_a_while(st);
}

bool shm_segment::remove_if_abandoned_empty(const std::string& name) noexcept {
  const int fd = shm_open(name.c_str(), O_RDONLY, 0);
  if (fd < 0) return false;
  struct stat st {};
  const bool abandoned = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                         st.st_uid == geteuid() && st.st_size == 0 &&
                         unchanged_for_a_while(st) && creator_lock_free(fd);
  close(fd);
  return abandoned && unlink_if_names(name, st.st_dev, st.st_ino);
}

bool shm_segment::mapped_by(pid_t pid, const char*& why) const noexcept {
  uid_t uid = 0;
  why = nullptr;
  if (pid <= 0)
    why = "no process id";
  else if (!effective_uid_of(pid, uid) || process_exited(pid))
    why = "no such process here";
  else if (uid != geteuid())
    why = "that process id runs as another user here";
  else if (maps_file(pid, dev_, ino_) != mapping::of_file)
    why = "that process id does not map this segment here";
  return why == nullptr;
}

core::status shm_segment::reserve(std::size_t offset, std::size_t len) const noexcept {
  if (name_.empty() || offset > size_ || len > size_ - offset) return core::status::invalid;
  const int fd = shm_open(name_.c_str(), O_RDWR, 0);
  if (fd < 0) return core::status::unreachable;
  // The same file we map (a name can be unlinked and taken again), and still ours and 0600.
  struct stat st {};
  core::status s = core::status::unreachable;
  if (fstat(fd, &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_ && S_ISREG(st.st_mode) &&
      st.st_uid == geteuid()) {
    // tmpfs allocates whole pages and, when it fails part way, frees what this call allocated.
    const int e = posix_fallocate(fd, static_cast<off_t>(offset), static_cast<off_t>(len));
    s = e == 0 ? core::status::ok
               : (e == ENOSPC || e == ENOMEM || e == EFBIG ? core::status::no_memory
                                                            : core::status::io);
  }
  close(fd);
  return s;
}

void shm_segment::unlink_name() const noexcept {
  if (!name_.empty()) (void)unlink_if_names(name_, dev_, ino_);
}

std::string segment_name(unsigned uid, std::uint32_t pdid, std::uint32_t port) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "/exanet.%u.%u.%u", uid, pdid, port);
  return buf;
}

std::string wake_socket_name(const std::string& segment) {
  static constexpr char prefix[] = "/exanet.";
  if (segment.compare(0, sizeof prefix - 1, prefix) != 0) return {};
  return "/exanet-wake." + segment.substr(sizeof prefix - 1);
}

// Whether pid has exited and waits to be reaped (state Z or X in /proc/<pid>/stat).
bool process_alive(pid_t pid) noexcept {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno != EPERM) return false;
  return !process_exited(pid);
}

bool process_exited(pid_t pid) noexcept {
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "re");
  if (!f) return true;  // gone between the two looks
  char line[512];
  const bool read = std::fgets(line, sizeof line, f) != nullptr;
  std::fclose(f);
  if (!read) return true;
  const char* close = std::strrchr(line, ')');  // the command name may hold anything
  return close && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
}

std::uint64_t host_identity() noexcept {
  static const std::uint64_t id = [] {
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a over what names this host's memory
    auto mix = [&h](const void* p, std::size_t n) {
      for (std::size_t i = 0; i < n; ++i) {
        h ^= static_cast<const unsigned char*>(p)[i];
        h *= 1099511628211ull;
      }
    };
    char boot[64] = {};
    if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "re")) {
      if (!std::fgets(boot, sizeof boot, f)) boot[0] = '\0';
      std::fclose(f);
    }
    mix(boot, std::strlen(boot));
    struct stat st{};
    if (stat("/dev/shm", &st) == 0) {
      mix(&st.st_dev, sizeof st.st_dev);
      mix(&st.st_ino, sizeof st.st_ino);
    }
    h &= id_mask;  // 48 bits, so a name fits its compact form (dev/address.hpp)
    if (h == unknown_host) --h;  // that value means "another host, not yet known"
    return h ? h : 1;
  }();
  return id;
}

}  // namespace exanet::dev::emu
