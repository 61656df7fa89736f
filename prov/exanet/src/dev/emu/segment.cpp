#include "dev/emu/segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "core/log.hpp"

namespace exanet::dev::emu {

shm_segment& shm_segment::operator=(shm_segment&& o) noexcept {
  if (this != &o) {
    reset();
    data_ = o.data_;
    size_ = o.size_;
    name_ = std::move(o.name_);
    owner_ = o.owner_;
    o.data_ = nullptr;
    o.size_ = 0;
    o.owner_ = false;
  }
  return *this;
}

void shm_segment::reset() noexcept {
  if (owner_ && !name_.empty()) shm_unlink(name_.c_str());
  if (data_) munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
  owner_ = false;
  name_.clear();
}

core::status shm_segment::create(const std::string& name, std::size_t bytes,
                                 shm_segment& out) noexcept {
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return core::status::exists;
    EXANET_LOG(warn, core, "shm_open(%s) failed: errno %d", name.c_str(), errno);
    return core::status::io;
  }
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    EXANET_LOG(warn, core, "ftruncate(%s, %zu) failed: errno %d", name.c_str(), bytes, errno);
    close(fd);
    shm_unlink(name.c_str());
    return core::status::no_memory;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name.c_str());
    return core::status::no_memory;
  }
  out.reset();
  out.data_ = p;
  out.size_ = bytes;
  out.owner_ = true;
  try {
    out.name_ = name;
  } catch (...) {
    munmap(p, bytes);
    shm_unlink(name.c_str());
    out.data_ = nullptr;
    return core::status::no_memory;
  }
  return core::status::ok;
}

core::status shm_segment::open(const std::string& name, shm_segment& out) noexcept {
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return errno == EACCES ? core::status::access : core::status::unreachable;
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size <= 0) {
    close(fd);
    return core::status::unreachable;
  }
  const auto bytes = static_cast<std::size_t>(st.st_size);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return core::status::no_memory;
  out.reset();
  out.data_ = p;
  out.size_ = bytes;
  try {
    out.name_ = name;
  } catch (...) {
    munmap(p, bytes);
    out.data_ = nullptr;
    return core::status::no_memory;
  }
  return core::status::ok;
}

std::string segment_name(unsigned uid, std::uint32_t pdid, std::uint32_t port) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "/exanet.%u.%u.%u", uid, pdid, port);
  return buf;
}

}  // namespace exanet::dev::emu
