// A POSIX shared-memory segment, owned RAII-style: the mapping is released on destruction and the
// name unlinked if this object created it. Segments hold mailboxes, notification slots, bounce
// rings and DMA staging chunks of one emulated endpoint.
#pragma once
#include <cstddef>
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

  /// Creates name exclusively (mode 0600) with the given size; status::exists if it is taken.
  static core::status create(const std::string& name, std::size_t bytes, shm_segment& out) noexcept;
  /// Maps an existing segment whole; status::unreachable if there is none.
  static core::status open(const std::string& name, shm_segment& out) noexcept;

  void* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  const std::string& name() const noexcept { return name_; }
  explicit operator bool() const noexcept { return data_ != nullptr; }
  /// Unmaps; unlinks first if this object created the segment.
  void reset() noexcept;

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
  std::string name_;
  bool owner_ = false;
};

/// "/exanet.<uid>.<pdid>.<port>": the user id keeps users apart (and the 0600 mode enforces it),
/// the PDID keeps jobs apart, the port names the endpoint.
std::string segment_name(unsigned uid, std::uint32_t pdid, std::uint32_t port);

}  // namespace exanet::dev::emu
