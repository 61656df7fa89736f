// SPDX-License-Identifier: BSD-2-Clause
// FI_EXANET_PROFILE's report (profile.hpp): made at endpoint close, off the data path.
#include "proto/profile.hpp"

#include <algorithm>
#include <cstdio>
#include <new>
#include <vector>

namespace exanet::proto {

namespace {

constexpr const char* proto_names[profile_protos] = {"eager", "medium", "rndv"};
constexpr const char* phase_names[profile_phases] = {"post", "issued", "arrival",
                                                     "match", "copy", "done"};

void append_u128(std::string& out, unsigned __int128 v) {
  char digits[40];
  std::size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + static_cast<unsigned>(v % 10));
    v /= 10;
  } while (v != 0);
  while (n > 0) out += digits[--n];
}

}  // namespace

profile::profile() noexcept : log_(new (std::nothrow) stamp[log_capacity]) {
  // The cost of one stamp: the least of a few back-to-back reads (a preempted read only adds).
  std::uint64_t best = ~0ull;
  for (int i = 0; i < 32; ++i) {
    const std::uint64_t a = now_ns(), b = now_ns();
    if (b - a < best) best = b - a;
  }
  clock_ns_ = best;
}

std::string profile::format(int pid, unsigned port, bool with_stamps) const {
  std::string out;
  char buf[160];
  for (std::size_t p = 0; p < profile_protos; ++p) {
    for (std::size_t k = 0; k < profile_classes; ++k) {
      const cell& c = cells_[p][k];
      bool any = false;
      for (std::uint64_t n : c.count) any = any || n != 0;
      if (!any) continue;
      std::snprintf(buf, sizeof buf, "exanet-profile pid=%d port=%u proto=%s size=%zu clock_ns=%llu",
                    pid, port, proto_names[p], profile_class_low(k),
                    static_cast<unsigned long long>(clock_ns_));
      out += buf;
      for (std::size_t i = 0; i < profile_phases; ++i) {
        std::snprintf(buf, sizeof buf, " n_%s=%llu sum_%s=", phase_names[i],
                      static_cast<unsigned long long>(c.count[i]), phase_names[i]);
        out += buf;
        append_u128(out, c.sum_ns[i]);
      }
      // This endpoint's own parts (the link needs the peer's stamps: model.py).
      static constexpr struct {
        const char* name;
        std::size_t from, to;
      } parts[] = {{"post_ns", 0, 1}, {"match_ns", 2, 3}, {"copy_ns", 3, 4}, {"completion_ns", 4, 5}};
      for (const auto& part : parts) {
        const std::uint64_t n = c.count[part.to];
        if (n == 0 || n != c.count[part.from]) {
          out += ' ';
          out += part.name;
          out += "=-";
          continue;
        }
        const auto d = static_cast<double>(static_cast<__int128>(c.sum_ns[part.to] - c.sum_ns[part.from]));
        std::snprintf(buf, sizeof buf, " %s=%.1f", part.name, d / static_cast<double>(n));
        out += buf;
      }
      out += '\n';
    }
  }
  if (!with_stamps || !log_ || log_n_ == 0) return out;
  // Grouped by class and phase, each group in the order taken (a stable sort of a copy).
  std::vector<stamp> v(log_.get(), log_.get() + log_n_);
  std::stable_sort(v.begin(), v.end(), [](const stamp& a, const stamp& b) {
    return a.cell != b.cell ? a.cell < b.cell : a.phase < b.phase;
  });
  for (std::size_t i = 0; i < v.size();) {
    const std::size_t p = v[i].cell / profile_classes, k = v[i].cell % profile_classes;
    std::snprintf(buf, sizeof buf, "exanet-profile-stamps pid=%d port=%u proto=%s size=%zu phase=%s first=%llu",
                  pid, port, proto_names[p], profile_class_low(k), phase_names[v[i].phase],
                  static_cast<unsigned long long>(v[i].t));
    out += buf;
    std::size_t j = i + 1;
    for (; j < v.size() && v[j].cell == v[i].cell && v[j].phase == v[i].phase; ++j) {
      std::snprintf(buf, sizeof buf, " %llu", static_cast<unsigned long long>(v[j].t - v[j - 1].t));
      out += buf;
    }
    out += '\n';
    i = j;
  }
  return out;
}

}  // namespace exanet::proto
