// SPDX-License-Identifier: BSD-2-Clause
// Shared-memory files a process created and removes when it exits, if nothing removed them
// before: a process that exits without closing what made them (a forgotten fi_close,
// MPI_Abort, a child returning from main) leaves nothing in /dev/shm. Only a killed process,
// or one that calls _exit, leaves its files, for the next opener to reclaim.
#pragma once
#include <string>

namespace exanet::core {

/// Adds a POSIX shm name (as given to shm_open) this process created. Entries carry the
/// creator's pid, so a forked child, which inherits the list, never removes its parent's.
/// False if it could not be remembered (out of memory): the file is then left at exit.
bool unlink_at_exit(const std::string& shm_name) noexcept;
/// The file was removed (or handed on) by its owner: nothing to do for it at exit.
void forget_at_exit(const std::string& shm_name) noexcept;

}  // namespace exanet::core
