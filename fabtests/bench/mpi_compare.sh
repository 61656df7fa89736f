#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# MPI latency and streaming bandwidth, four ways side by side in one run, with our own benchmark
# (fabtests/bench/mpi_bench.c, built as build/fabtests/mpi/mpi_bench) and Debian's Open MPI,
# 2 ranks on this host, --bind-to core:
#   exanet  pml cm + mtl ofi over exanet
#   vader   pml ob1 + btl vader (Open MPI's own shared memory)
#   ucx     pml ucx (with pml_ucx_tls/devices "any", which Debian's defaults need)
#   tcp     pml cm + mtl ofi over libfabric's tcp provider: the control for what the MTL itself
#           costs (the same Open MPI code above a different provider)
# (libfabric's shm cannot serve here: Open MPI 4.1.4 refuses shm 1.17, which lacks
# FI_LOCAL_COMM/FI_REMOTE_COMM.)
# Every size runs every buffer placement (send and receive buffers 0, 8, 16, 24, 40 and 63 bytes
# past a page, chosen independently); a cell is the median over placements and the worst
# placement, each placement's value being the median of its REPEAT runs. The paths take turns at
# every size (paired measurement), and a line per size is printed as soon as it is complete.
# A benchmark, not a test: nothing asserts on time.
#   fabtests/bench/mpi_compare.sh [build-dir] [out-dir]
# Environment:
#   SIZES     latency sizes (default "1 8 64 512 4K 16K 64K 256K 1M 4M")
#   BW_SIZES  bandwidth sizes (default: SIZES)
#   REPEAT    runs per path and size (default 2)
#   PATHS     the paths, in turn order (default "exanet vader ucx tcp"); exanet_before is
#             another build of exanet whose provider directory BEFORE_LIB names (an A/B)
#   OFFSETS   placements, comma separated (default 0,8,16,24,40,63); OFFSETS=0 for aligned only
#   BLOCKS    timed blocks per placement inside a run, the best kept (default 2)
#   TOUCH     1 (default): the receiver reads every cache line it received (mpi_bench -r), as an
#             application would; 0: osu's convention, where a transport that writes straight into
#             the receive buffer leaves the data in the sender's cache and looks faster than it is
#   PHASE     near (default) or any: see xfer_compare.sh (each run first waits for the machine
#             probe's near phase; every probe is in $out/core_probe.csv)
#   BENCH_LOCK  a lock file every run holds (flock), so benchmarks of others sharing the
#             machine do not run at the same time (default /tmp/exanet-bench.lock; empty: none)
# Output: $out/mpi_lat.csv and $out/mpi_bw.csv (and .samples, .png), with the ratios
# exanet/vader, exanet/ucx and exanet/tcp of the medians and of the worst placements.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"
REPEAT=${REPEAT:-2}
bench_init - mpi "$@"
prog=$build/fabtests/mpi/mpi_bench
[[ -x $prog ]] || { echo "build first: $prog is missing (it needs mpicc)" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "mpirun missing: apt-get install openmpi-bin" >&2; exit 1; }
bench_mpi_options "exanet vader ucx tcp"

base=(--allow-run-as-root -np 2 --bind-to core)
declare -A mca
mca[exanet]="--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include exanet --mca btl ^ofi -x FI_PROVIDER=exanet -x FI_PROVIDER_PATH=$build/lib"
# Another build of exanet for an A/B in the same run (PATHS="exanet exanet_before vader"):
# BEFORE_LIB is its provider directory, as in xfer_compare.sh.
[[ -n ${BEFORE_LIB:-} ]] && mca[exanet_before]="--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include exanet --mca btl ^ofi -x FI_PROVIDER=exanet -x FI_PROVIDER_PATH=$BEFORE_LIB"
mca[tcp]="--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include tcp --mca btl ^ofi -x FI_PROVIDER=tcp"
mca[vader]="--mca pml ob1 --mca btl vader,self --mca mtl ^ofi"
mca[ucx]="--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any --mca btl ^ofi"

# One run of path $1, kind $2 (lat|bw), size $3: adds its placement samples to table $4.
# A run that fails adds one NA sample (the cell then reads NA) and says why.
run() {
  local p=$1 kind=$2 size=$3 table=$4
  bench_wait_near "$kind $p $size"  # lib.sh: the paths compared in the same phase of the machine
  # shellcheck disable=SC2086
  if "${locker[@]}" timeout 600 mpirun "${base[@]}" ${mca[$p]} "$prog" -t "$kind" -m "$size" \
      -M "$size" -p "$offsets" -b "$blocks" "${touch[@]}" -v >"$raw.log" 2>&1 &&
      grep -q "^place $kind $size " "$raw.log"; then
    awk -v p="$p" -v k="$kind" '$1 == "place" && $2 == k { print p, $3, $5, $4 }' "$raw.log" >"$raw.s"
    bench_table_add_file "$table" "$raw.s"
  else
    echo "$p $kind $size: no run ($(grep -m1 -E 'cannot be selected|No components|rror|FAIL' "$raw.log" || tail -1 "$raw.log"))" >&2
    bench_table_add "$table" "$p" "$size" NA
  fi
}

bench_mpi_sweep mpi "MPI, 2 ranks, --bind-to core:"
