#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The libFuzzer targets (issue 12; prov/exanet/test/fuzz): built with clang into build-fuzz.
#   ci/fuzz.sh              build, then run each target for EXANET_FUZZ_SECONDS (default 60) from
#                           the corpus in the repository (ci/test.sh runs this)
#   ci/fuzz.sh campaign S   build, then fuzz the packet target for S seconds with the corpus kept
#                           in build-fuzz/campaign (findings in build-fuzz/campaign/findings)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build-fuzz
seconds=${EXANET_FUZZ_SECONDS:-60}
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEXANET_FUZZ=ON \
  -DEXANET_FUZZ_SECONDS="$seconds" >/dev/null
cmake --build "$build" -j"$(nproc)"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
if [[ ${1:-} == campaign ]]; then
  work=$build/campaign
  mkdir -p "$work/corpus" "$work/findings"
  cp -n "$root"/prov/exanet/test/fuzz/corpus/* "$work/corpus/"
  exec "$build/prov/exanet/test/fuzz/packet_fuzz" -max_total_time="${2:-3600}" -timeout=20 \
    -max_len=2600 -print_final_stats=1 -artifact_prefix="$work/findings/" "$work/corpus"
fi
ctest --test-dir "$build" --output-on-failure -L fuzz
