// SPDX-License-Identifier: BSD-2-Clause
#include "core/unlink_at_exit.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <utility>
#include <vector>

namespace exanet::core {
namespace {

// Never freed: it must outlive every static destructor that might still close something.
struct exit_list {
  std::mutex lock;
  std::vector<std::pair<std::string, pid_t>> names;
};

exit_list& list() noexcept {
  static exit_list* l = new exit_list;
  return *l;
}

// Run at exit, or when the provider is unloaded (atexit from a shared object runs at dlclose).
void unlink_listed() noexcept {
  exit_list& l = list();
  const std::lock_guard g(l.lock);
  for (const auto& [name, pid] : l.names)
    if (pid == getpid()) shm_unlink(name.c_str());
  l.names.clear();
}

}  // namespace

bool unlink_at_exit(const std::string& shm_name) noexcept {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(unlink_listed); });
  exit_list& l = list();
  const std::lock_guard g(l.lock);
  try {
    l.names.emplace_back(shm_name, getpid());
    return true;
  } catch (...) {
    return false;
  }
}

void forget_at_exit(const std::string& shm_name) noexcept {
  exit_list& l = list();
  const std::lock_guard g(l.lock);
  std::erase_if(l.names,
                [&](const auto& e) { return e.first == shm_name && e.second == getpid(); });
}

}  // namespace exanet::core
