#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The analytic model against the measured ping-pong (issue 16 part 3; model.py says what it
# fits). For each network setting (the link model off; on at 1 hop, two FPGAs of one QFDB; on at
# 3 hops), thesis_bench lat (osu_latency's order, write family) measures the same sizes twice,
# the protocol forced by the thresholds:
#   fast  FI_EXANET_MEDIUM_MAX=131072 (half the bounce ring, the most allowed): eager, then medium
#   slow  FI_EXANET_MEDIUM_MAX=FI_EXANET_EAGER_MAX: everything above the eager limit rendezvous
# then model.py fit predicts the crossover from the two fitted lines and finds the measured one.
# A third pair of runs, with FI_EXANET_PROFILE, gives the parts of each size (model.py profile;
# one size per profile size class, the others named in model.txt: model.py distinct),
# and model.py check compares their sum with that run's own ping-pong. The fits use the runs
# without the profile (instrumentation adds its clock reads).
#   fabtests/bench/thesis/model_run.sh [build-dir] [out-dir]
# Environment: REPEAT (default 3: the fast and slow runs take turns that many times, and each
# size's value is the median over them), SIZES (bytes), ITERS (default 400), PCTL (default 50: medians), HOP_NS (default
# the model's 500), SETTINGS (default "0 1 3": hops, 0 the model off), LOCK (lib.sh), QUICK=1
# (3 sizes, 40 iterations, setting 1 only, hop 5 us: the ctest bench.model_quick), RING_BYTES
# (below).
# Output in OUT (default fabtests/bench/results/<UTC date>/model): <setting>.{fast,slow}.lat (every
# repeat),
# <setting>.profile.{fast,slow}, model.txt (every fit, crossover and profile table).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bench_dir=$(cd "$here/.." && pwd)
# shellcheck source=../lib.sh
source "$bench_dir/lib.sh"
repeat=${REPEAT:-3}
[[ ${QUICK:-0} == 1 ]] && repeat=${REPEAT:-1}
export REPEAT=$repeat
root_guess=$(cd "$bench_dir/../.." && pwd)
bench_init thesis_bench model "${1:-$root_guess/build}" "${2:-$root_guess/fabtests/bench/results/$(date -u +%F)/model}"
if [[ ${QUICK:-0} == 1 ]]; then
  sizes=${SIZES:-"64 8192 65536"}
  iters=${ITERS:-40}
  settings=${SETTINGS:-1}
  hop_ns=${HOP_NS:-5000}
else
  sizes=${SIZES:-"256 512 1024 2048 4096 8192 12288 16384 24576 32768 49152 65536 98304 131072"}
  iters=${ITERS:-400}
  settings=${SETTINGS:-"0 1 3"}
  hop_ns=${HOP_NS:-500}
fi
eager_max=84  # the default FI_EXANET_EAGER_MAX
# RING_BYTES: FI_EXANET_BOUNCE_RING_BYTES of every run (default the provider's, 262144); the
# fast runs' FI_EXANET_MEDIUM_MAX is half of it, the most the provider allows.
ring=${RING_BYTES:-262144}
fast_medium=$((ring / 2))
declare -A places=([0]="0,0,0,0 0,0,0,1" [1]="0,0,0,0 0,0,0,1" [3]="0,0,0,1 1,0,0,1" [5]="0,0,0,1 2,1,0,1")
bench_env exanet
lat() { # lat SETTING MEDIUM_MAX OUTFILE [ENV...]: one thesis_bench lat run
  local hops=$1 medium=$2 file=$3 on=1
  shift 3
  [[ $hops == 0 ]] && on=0
  # shellcheck disable=SC2086  # sizes is a list
  bench_locked env "${benv[@]}" FI_EXANET_LINK_MODEL=$on FI_EXANET_LINK_HOP_NS="$hop_ns" \
    LINK_POSITIONS="${places[$hops]}" FI_EXANET_MEDIUM_MAX="$medium" FI_EXANET_EAGER_MAX=$eager_max \
    FI_EXANET_BOUNCE_RING_BYTES="$ring" \
    VARIANTS=write ITERS="$iters" PCTL="${PCTL:-50}" "$@" timeout 300 "$bench" lat ${lat_sizes:-$sizes} >"$file" 2>"$file.err" ||
    { echo "thesis_bench lat failed ($file): $(tail -2 "$file.err")" >&2; return 1; }
  rm -f "$file.err"
}
{
  echo "# model_run.sh on $bench_machine; $bench_date; git $(git -C "$root" rev-parse --short HEAD 2>/dev/null)"
  echo "# sizes: $sizes; iters $iters; PCTL ${PCTL:-50}; repeat $repeat; hop_ns $hop_ns; ring $ring; fast: MEDIUM_MAX=$fast_medium, slow: MEDIUM_MAX=$eager_max"
} >"$out/model.txt"
# The profiled runs take one size per FI_EXANET_PROFILE size class: two sizes in one class would
# share its cell, and neither size's parts would be its own (model.py distinct).
# shellcheck disable=SC2086  # sizes is a list
profile_sizes=$(python3 "$here/model.py" distinct $sizes 2>"$out/distinct.err")
{
  echo "# profiled sizes: $profile_sizes"
  sed 's/^/# /' "$out/distinct.err"
} >>"$out/model.txt"
rm -f "$out/distinct.err"
rc=0
for s in $settings; do
  label=$([[ $s == 0 ]] && echo "model off" || echo "$s hops")
  f=$out/$s
  rm -f "$f".{fast,slow}.lat
  for ((r = 1; r <= repeat; r++)); do
    for kind in fast slow; do
      medium=$fast_medium
      [[ $kind == slow ]] && medium=$eager_max
      lat "$s" $medium "$f.$kind.lat.tmp" && cat "$f.$kind.lat.tmp" >>"$f.$kind.lat" || rc=1
      rm -f "$f.$kind.lat.tmp"
    done
  done
  for kind in fast slow; do
    medium=$fast_medium
    [[ $kind == slow ]] && medium=$eager_max
    rm -f "$f.profile.$kind"
    lat_sizes=$profile_sizes lat "$s" $medium "$f.profile.$kind.lat" FI_EXANET_PROFILE="$f.profile.$kind" || rc=1
  done
  {
    echo
    echo "## $label"
    python3 "$here/model.py" fit "$f.fast.lat" "$f.slow.lat" --label "$label" || rc=1
    for kind in fast slow; do
      echo "# profile, $kind run:"
      python3 "$here/model.py" profile "$f.profile.$kind" || rc=1
      python3 "$here/model.py" check "$f.profile.$kind" "$f.profile.$kind.lat" || rc=1
    done
  } >>"$out/model.txt"
done
cat "$out/model.txt"
exit $rc
