// SPDX-License-Identifier: BSD-2-Clause
// fi_av: maps fi_addr_t to exanet endpoint names, both ways. FI_AV_MAP and FI_AV_TABLE share
// one representation: an fi_addr is the index of the entry (opaque for MAP, as fi_av(3) allows).
#pragma once
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <atomic>
#include <cstdint>

#include "dev/address.hpp"

namespace exanet::fi {

class av;

int av_open(fid_domain* domain, fi_av_attr* attr, fid_av** out, void* context) noexcept;
av* av_from(fid* f) noexcept;
/// The address stored at addr; false if addr names no live entry.
bool av_lookup(av& a, fi_addr_t addr, dev::address& out) noexcept;
/// The fi_addr under which a is stored, or FI_ADDR_NOTAVAIL (FI_SOURCE for unknown senders).
fi_addr_t av_reverse_lookup(av& a, const dev::address& addr) noexcept;
/// Changes whenever an entry is removed, so endpoints drop cached translations.
std::uint64_t av_remove_epoch(const av& a) noexcept;
/// The counter behind av_remove_epoch, for an endpoint to read inline on its data path.
const std::atomic<std::uint64_t>& av_remove_epoch_counter(const av& a) noexcept;
void av_ref(av& a) noexcept;
void av_unref(av& a) noexcept;

}  // namespace exanet::fi
