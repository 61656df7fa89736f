#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Instructions exanet executes per MPI round trip under Open MPI (pml cm, mtl ofi), counted by
# callgrind on rank 0 of mpi_bench's ping-pong (8 B by default, SIZE bytes if set): deterministic
# where wall-clock latency on a shared machine is not, so a change to the small-message path can be
# judged by its count.
#   fabtests/bench/mpi_instructions.sh [build-dir] [out-dir]
# (FI_EXANET_* variables in the environment reach both ranks, e.g. FI_EXANET_EAGER_MAX=36.)
# Two runs (SHORT and LONG round trips, plus mpi_bench's 10% warm-up each) are differenced, so
# start-up and shutdown cancel; cg_instr.py prints the figures (see there) and the functions.
# Needs valgrind, python3 and objdump. A benchmark, not a test: nothing is judged.
# Environment: SHORT (default 2000), LONG (default 10000), SIZE (message bytes, default 8);
# TEST=bw counts streaming instead (mpi_bench -t bw, window 64; SHORT and LONG are then windows,
# default 20 and 100, and the figures are per message, acknowledgement share included), and
# RANK=1 profiles rank 1 (in bw, the receiver) instead of rank 0. CG_OPTS adds callgrind options,
# e.g. CG_OPTS=--cache-sim=yes to count simulated L1 misses too (read them with callgrind_annotate
# --show=D1mr,D1mw on the two cg.* files).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
out=${2:-$(mktemp -d /tmp/exanet-mpi-instr.XXXXXX)}
mkdir -p "$out"
test=${TEST:-lat} size=${SIZE:-8} prank=${RANK:-0}
if [[ $test == bw ]]; then short=${SHORT:-20} long=${LONG:-100}; else short=${SHORT:-2000} long=${LONG:-10000}; fi
prog=$build/fabtests/mpi/mpi_bench
for tool in valgrind python3 objdump mpirun; do
  command -v "$tool" >/dev/null || { echo "$tool missing" >&2; exit 1; }
done
[[ -x $prog ]] || { echo "build first: $prog is missing" >&2; exit 1; }
for n in "$short" "$long"; do
  # The profiled rank under callgrind, the other at full speed; FI_EXANET_* settings pass on.
  mpirun $(env | sed -n 's/^\(FI_EXANET_[A-Z0-9_]*\)=.*/-x \1/p') --allow-run-as-root -np 2 --bind-to core --mca pml cm --mca mtl ofi \
    --mca mtl_ofi_provider_include exanet --mca btl ^ofi -x FI_PROVIDER=exanet \
    -x FI_PROVIDER_PATH="$build/lib" -x CG_FILE="$out/cg.$n" -x PRANK="$prank" -x CG_OPTS="${CG_OPTS:-}" \
    bash -c 'if [ "$OMPI_COMM_WORLD_RANK" = "$PRANK" ]; then
               exec valgrind --tool=callgrind --dump-instr=yes $CG_OPTS --callgrind-out-file="$CG_FILE" "$@"
             else exec "$@"; fi' rank "$prog" -t "$test" -m "$size" -M "$size" -P 0:0 -b 1 -i "$n" -n "$n" -w 64 \
    >"$out/run.$n.log" 2>&1
  grep -q "^$test $size " "$out/run.$n.log" || { echo "run of $n failed: $out/run.$n.log" >&2; exit 1; }
done
# mpi_bench adds a tenth of the round trips as warm-up (lat); bw has a fixed warm-up of 2 windows.
if [[ $test == bw ]]; then units=$(( (long - short) * 64 )); else units=$(( (long - short) * 11 / 10 )); fi
python3 "$here/cg_instr.py" "$build/lib/libexanet-fi.so" "$out/cg.$short" "$out/cg.$long" \
  "$units" "${TOP:-25}" | tee "$out/instructions.txt"
