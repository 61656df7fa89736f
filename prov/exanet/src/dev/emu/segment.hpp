// SPDX-License-Identifier: BSD-2-Clause
// A POSIX shared-memory segment, owned RAII-style: the mapping is released on destruction and the
// name unlinked if this object created it. Segments hold mailboxes, notification slots, bounce
// rings and DMA staging chunks of one emulated endpoint.
//
// Between users, isolation is enforced here (issue 12): /dev/shm is world-writable, so any user
// can create a file under our segment names. A segment is created exclusively with mode 0600
// (whatever the umask) and its pages reserved, and one is mapped only if it is a regular file
// that our effective uid owns with mode exactly 0600, so no other user can have written a byte.
//
// Liveness is a lock on the file, not a process id: the creator holds an exclusive flock(2) on
// it for as long as the segment lives, and the kernel drops that lock when the process ends,
// however it ends. A pid means nothing across PID namespaces (a container, `unshare --pid`),
// where another process of the same user shares /dev/shm; a lock on the very file does.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.hpp"

namespace exanet::dev::emu {

class shm_segment {
 public:
  shm_segment() noexcept = default;
  shm_segment(shm_segment&& o) noexcept { *this = std::move(o); }
  shm_segment& operator=(shm_segment&& o) noexcept;
  shm_segment(const shm_segment&) = delete;
  shm_segment& operator=(const shm_segment&) = delete;
  ~shm_segment() { reset(); }

  /// Creates name exclusively with mode 0600, `bytes` long, and reserves its first `reserve`
  /// bytes in /dev/shm (posix_fallocate), so touching any of them later cannot raise SIGBUS;
  /// the rest stays a hole until reserve() is called for it. status::exists if the name is
  /// taken (by anyone), status::no_memory if /dev/shm cannot hold `reserve` bytes (logged).
  static core::status create(const std::string& name, std::size_t bytes, std::size_t reserve,
                             shm_segment& out) noexcept;
  /// Maps an existing segment whole. status::unreachable if there is none; status::access
  /// (logged, with the reason) if it is not a regular file of our uid with mode 0600.
  static core::status open(const std::string& name, shm_segment& out) noexcept;

  void* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  const std::string& name() const noexcept { return name_; }
  /// The file's identity, as /proc/<pid>/maps shows it for a process that maps it.
  dev_t file_device() const noexcept { return dev_; }
  ino_t file_inode() const noexcept { return ino_; }
  explicit operator bool() const noexcept { return data_ != nullptr; }
  /// Whether the process that created this file still holds it: its exclusive lock cannot be
  /// shared. True for a segment we created ourselves, and when the probe itself fails (unknown
  /// is never proof of death). A segment a process created and then lost to exit, kill or
  /// crash answers false from then on, in any PID namespace.
  bool owner_alive() const noexcept;
  /// Whether a segment whose header never said ready was left by a creator killed while making
  /// it: nobody holds its lock, and its file has not changed for unfinished_after_s seconds
  /// (between shm_open and flock a live creator holds no lock for an instant; the rest of the
  /// making holds it).
  bool abandoned_unfinished() const noexcept;
  static constexpr int unfinished_after_s = 2;
  /// The same for a segment name whose file is still empty (its creator killed before it gave
  /// the file its size, so it cannot be opened as a segment): removes it if it is this user's,
  /// nobody holds its lock, and it has not changed for unfinished_after_s seconds. True if
  /// removed.
  static bool remove_if_abandoned_empty(const std::string& name) noexcept;
  /// Whether pid, as this process's PID namespace numbers it, is a live process of our
  /// effective uid that maps this very file (by device and inode in /proc/<pid>/maps): the
  /// check that lets a pid read from a segment header be used for process_vm_writev(2). When
  /// not, `why` says why (the owner may live in another PID namespace, under another number).
  bool mapped_by(pid_t pid, const char*& why) const noexcept;
  /// Reserves [offset, offset + len) of this segment's file in /dev/shm, from whichever process
  /// maps it: after ok, touching those bytes cannot raise SIGBUS. Reopens the file by name (no
  /// descriptor is kept per mapping) and reserves only if the name still names this file.
  /// status::no_memory when /dev/shm is full (nothing of the range stays allocated);
  /// status::unreachable when the name is gone or names another file. Not logged.
  core::status reserve(std::size_t offset, std::size_t len) const noexcept;
  /// Unlinks the name only while it still names this file: never a file put there since.
  void unlink_name() const noexcept;
  /// Unmaps; unlinks first if this object created the segment.
  void reset() noexcept;

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
  std::string name_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  int fd_ = -1;  // kept open: the creator's lock lives on it; others probe the lock through it
  bool owner_ = false;
};

/// "/exanet.<uid>.<pdid>.<port>": the user id keeps users apart (and the 0600 mode enforces it),
/// the PDID keeps jobs apart, the port names the endpoint.
std::string segment_name(unsigned uid, std::uint32_t pdid, std::uint32_t port);
/// The name of the owner's wake socket (device::arm_wake_socket) of a segment, as shm_open and
/// shm_unlink take names: "/exanet-wake.<uid>.<pdid>.<port>" for "/exanet.<uid>.<pdid>.<port>";
/// the socket is bound at shm_dir + that name. It lives and goes with the segment: whatever
/// removes the segment (its owner, a reclaim) removes it first, so a socket without its segment
/// is left behind (exanet-stats segments --stale). Empty if the name is not a segment's.
std::string wake_socket_name(const std::string& segment);
/// Where shm_open's names live.
inline constexpr char shm_dir[] = "/dev/shm";

/// True once pid has exited, even before its parent reaps it (a zombie answers kill(pid, 0)).
bool process_exited(pid_t pid) noexcept;
/// kill(pid, 0) and not a zombie: only for segments of an older layout, made by a version of
/// exanet that held no lock; a pid from another PID namespace may mislead it.
bool process_alive(pid_t pid) noexcept;

/// Which host this process shares memory with, as a nonzero 64-bit id: the kernel's boot id and
/// the device and inode of /dev/shm, where segments live. Two processes with the same id reach
/// each other's segments; a container or namespace with a /dev/shm of its own is another host.
/// Computed once per process.
std::uint64_t host_identity() noexcept;

}  // namespace exanet::dev::emu
