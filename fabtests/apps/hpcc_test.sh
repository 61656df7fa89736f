#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The HPC Challenge benchmark (Debian's hpcc, built for Open MPI) with its example input (Debian's
# /usr/share/doc/hpcc/examples/_hpccinf.txt: HPL at N=1000 on a 2x2 grid, PTRANS, DGEMM,
# STREAM, RandomAccess, FFT and the b_eff latency and bandwidth rings), 4 ranks over exanet
# (pml cm, mtl ofi), then over Open MPI's own shared memory (pml ob1, btl vader) as the
# reference. A program we did not write, which checks its own results: over both transports
# it must report Success=1, pass HPL's and PTRANS's residual checks, find no node with errors,
# no RandomAccess update lost (exactly: its MPI variants apply every update at the owner) and
# an FFT error below 1e-10; exanet's counters (FI_EXANET_STATS) must show 4 endpoints that
# carried eager, medium and rendezvous messages. Prints the b_eff figures side by side
# (informative: 4 ranks may share 2 cores, nothing is judged on time).
# Usage: hpcc_test.sh <provider-dir> <exanet-stats tool> [out-dir]
set -u
dir=$1
stats_tool=$2
out=${3:-$(mktemp -d)}
input=/usr/share/doc/hpcc/examples/_hpccinf.txt
command -v hpcc >/dev/null && [[ -r $input ]] || { echo "SKIP: hpcc not installed (hpcc)"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
common=(--allow-run-as-root --oversubscribe -np 4)
exanet=(--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include exanet --mca btl ^ofi
        -x FI_PROVIDER=exanet -x FI_PROVIDER_PATH="$dir" -x FI_EXANET_STATS="$out/exanet/stats.txt")
vader=(--mca pml ob1 --mca btl vader,self --mca mtl ^ofi)
value() { grep "^$2=" "$out/$1/hpccoutf.txt" | tail -1 | cut -d= -f2; }
for t in exanet vader; do
  mkdir -p "$out/$t"
  cd "$out/$t" || exit 1
  rm -f hpccoutf.txt stats.txt
  cp "$input" hpccinf.txt
  declare -n args=$t
  timeout 600 mpirun "${common[@]}" "${args[@]}" hpcc >run.txt 2>&1 ||
    { tail -20 run.txt; fail "hpcc over $t"; }
  f=$out/$t/hpccoutf.txt
  [[ $(value "$t" Success) == 1 ]] || fail "hpcc over $t: Success is not 1"
  [[ $(grep -c "0 tests completed and failed residual checks" "$f") -eq 2 ]] ||
    { grep -i "residual checks" "$f"; fail "hpcc over $t: HPL or PTRANS failed a residual check"; }
  if grep -E "Node\(s\) with error [1-9]" "$f"; then fail "hpcc over $t: nodes with errors"; fi
  for k in MPIRandomAccess_Errors MPIRandomAccess_LCG_Errors; do
    [[ $(value "$t" "$k") == 0 ]] || fail "hpcc over $t: $k=$(value "$t" "$k")"
  done
  awk -v e="$(value "$t" MPIFFT_maxErr)" 'BEGIN { exit !(e != "" && e + 0 < 1e-10) }' ||
    fail "hpcc over $t: MPIFFT_maxErr=$(value "$t" MPIFFT_maxErr)"
  echo "hpcc over $t: Success=1, residuals passed, no RandomAccess error, FFT error $(value "$t" MPIFFT_maxErr)"
done
"$stats_tool" "$out/exanet/stats.txt" >"$out/exanet/stats_table.txt" || fail "no exanet counters"
count() { awk -v k="$1" '$1 == k { print $2 }' "$out/exanet/stats_table.txt"; }
[[ $(awk '/endpoint\(s\)/ { print $1 }' "$out/exanet/stats_table.txt") == 4 ]] ||
  { cat "$out/exanet/stats_table.txt"; fail "not 4 exanet endpoints"; }
for k in eager_recv medium_recv; do
  [[ $(count $k) -gt 0 ]] || fail "no $k over exanet"
done
[[ $(($(count rndv_recv) + $(count ri_recv))) -gt 0 ]] || fail "no rendezvous over exanet"
printf "%-40s %14s %14s\n" b_eff exanet vader
for k in AvgPingPongLatency_usec AvgPingPongBandwidth_GBytes RandomlyOrderedRingLatency_usec \
         RandomlyOrderedRingBandwidth_GBytes MPIRandomAccess_GUPs MPIFFT_Gflops; do
  printf "%-40s %14s %14s\n" "$k" "$(value exanet "$k")" "$(value vader "$k")"
done
echo "PASS: hpcc over exanet, every check of its own passed, as over vader"
