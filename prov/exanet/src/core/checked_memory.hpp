// SPDX-License-Identifier: BSD-2-Clause
// Touching this process's own memory where it may not be there.
//
// fi_mr(3): a provider that does not ask for FI_MR_ALLOCATED must accept registrations of memory
// that no page backs yet. MPICH registers the whole address space that way (base NULL, length
// UINTPTR_MAX) for dynamic windows, and attaches memory later. A peer may then name an address
// that nothing maps; the answer must be an error completion at the peer, never a fault in the
// target. These copies go through the kernel (process_vm_writev(2) on our own pid, always
// allowed for the own process), which reports an unmapped or protected page as EFAULT. They
// cost a system call, so only registrations not known to be backed take them (grant may_fault).
#pragma once
#include <cstddef>

namespace exanet::core {

/// Whether every page of [p, p + len) was mapped when asked (protections are not checked). An
/// empty range is mapped; one that wraps around the address space is not.
bool range_mapped(const void* p, std::size_t len) noexcept;

/// Copies len bytes from src to dst, either of which may be unmapped or protected. False if a
/// fault stopped it; the bytes before the fault may have been copied.
bool copy_or_fault(void* dst, const void* src, std::size_t len) noexcept;

/// Whether every byte of [p, p + len) can be read now (one byte per page is read).
bool range_readable(const void* p, std::size_t len) noexcept;

/// Whether every page of [p, p + len) can be written now: made present and writable by the
/// kernel (madvise MADV_POPULATE_WRITE, Linux 5.14), nothing written. unknown: this kernel
/// cannot tell (the caller must copy through copy_or_fault instead).
enum class writable { yes, no, unknown };
writable range_writable(void* p, std::size_t len) noexcept;

}  // namespace exanet::core
