#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# MPICH 4.0.2 ch4:ofi latency and streaming bandwidth, paths side by side in one run, with our own
# benchmark (fabtests/bench/mpi_bench.c, built here with MPICH's mpicc) and an MPICH built by
# fabtests/bench/mpich_build.sh (the device a user picks with --with-device=ch4:ofi, over
# Debian's libfabric 1.17), 2 ranks on this host, `mpiexec -bind-to core` (hydra):
#   exanet     ch4:ofi over exanet (FI_PROVIDER=exanet), MPICH's shared memory disabled
#   shm        ch4:ofi over libfabric's shm provider, MPICH's shared memory disabled
#   mpich_shm  MPICH's own shared memory (ch4's posix shmmod, the default between ranks of a node)
#   tcp        ch4:ofi over libfabric's tcp (tcp;ofi_rxm), MPICH's shared memory disabled: the
#              control for what MPICH's netmod costs above a provider
# MPICH's shared memory is disabled with MPIR_CVAR_NOLOCAL=1 (4.0.2 has no separate switch for
# ch4's shmmod at run time: NOLOCAL makes every rank look remote, so the netmod carries all
# point-to-point traffic). Before measuring, the script checks that it is in effect: one exanet
# run with FI_EXANET_STATS must count the benchmark's messages in exanet's counters, and the same
# run without NOLOCAL must not (MPICH then kept them in its own shared memory).
# For mpich_shm the netmod still opens a provider at MPI_Init (FI_PROVIDER=shm), but carries no
# point-to-point message between the two ranks.
# Every size runs every buffer placement (send and receive buffers 0, 8, 16, 24, 40 and 63 bytes
# past a page, chosen independently); a cell is the median over placements and the worst
# placement, each placement's value being the median of its REPEAT runs. The paths take turns at
# every size (paired measurement, so they see the same phases of the machine: see
# "Intermittent slow phases" in BENCHMARKS.md), and a line per size is printed as soon as it is
# complete, with the time it completed. $out/mpich_runs.log has the date of every run.
# A benchmark, not a test, and not run in CI: MPICH has to be built first (tens of minutes on a
# 2-core machine), and nothing asserts on time. The CI stand-in for MPICH's use of a provider is
# fabtests/conformance/mpich_usage.c.
#   fabtests/bench/mpich_compare.sh [build-dir] [out-dir]
# Environment:
#   MPICH_CACHE as for mpich_build.sh (which this script runs; it does nothing once built)
#   SIZES     latency sizes (default "1 8 64 512 4K 16K 64K 256K 1M 4M")
#   BW_SIZES  bandwidth sizes (default: SIZES)
#   REPEAT    runs per path and size (default 2)
#   PATHS     the paths, in turn order (default "exanet shm mpich_shm tcp")
#   OFFSETS   placements, comma separated (default 0,8,16,24,40,63); OFFSETS=0 for aligned only
#   BLOCKS    timed blocks per placement inside a run, the best kept (default 2)
#   TOUCH     1 (default): the receiver reads every cache line it received (mpi_bench -r)
#   PHASE     near (default) or any: lib.sh's machine probe (bench_wait_near): each
#             run first waits for the probe's near phase; every probe is in $out/core_probe.csv
#   BENCH_LOCK  a lock file every run holds (flock), so benchmarks of others sharing the
#             machine do not run at the same time (default /tmp/exanet-bench.lock; empty: none)
# Output: $out/mpich_lat.csv and $out/mpich_bw.csv (and .samples, .png), with the ratios
# exanet/shm, exanet/mpich_shm and exanet/tcp of the medians and of the worst placements.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"
REPEAT=${REPEAT:-2}
bench_init - mpich "$@"
[[ -f $build/lib/libexanet-fi.so ]] || { echo "build first: $build/lib/libexanet-fi.so is missing" >&2; exit 1; }
prefix=$(bash "$here/mpich_build.sh") || { echo "MPICH is not built (fabtests/bench/mpich_build.sh)" >&2; exit 1; }
cache=$(dirname "$prefix")
prog=$cache/mpi_bench
if [[ ! -x $prog || $here/mpi_bench.c -nt $prog ]]; then
  # (-Wno-stringop-overflow: gcc 12 misreads MPICH's MPI_STATUSES_IGNORE as an empty array)
  "$prefix/bin/mpicc" -O2 -Wno-stringop-overflow -o "$prog" "$here/mpi_bench.c" || { echo "cannot build $prog" >&2; exit 1; }
fi
mpiexec=$prefix/bin/mpiexec
bench_mpi_options "exanet shm mpich_shm tcp"
runs_log=$out/mpich_runs.log

declare -A penv
penv[exanet]="FI_PROVIDER=exanet FI_PROVIDER_PATH=$build/lib MPIR_CVAR_NOLOCAL=1"
penv[shm]="FI_PROVIDER=shm MPIR_CVAR_NOLOCAL=1"
penv[mpich_shm]="FI_PROVIDER=shm"
penv[tcp]="FI_PROVIDER=tcp MPIR_CVAR_NOLOCAL=1"

# The check that MPIR_CVAR_NOLOCAL=1 sends MPICH's messages through the netmod: 8 B ping-pongs
# over exanet, counting with FI_EXANET_STATS; prints the messages exanet sent, summed over ranks.
exanet_msgs() {
  local stats=$raw.stats
  rm -f "$stats"
  # shellcheck disable=SC2086
  env FI_PROVIDER=exanet FI_PROVIDER_PATH="$build/lib" FI_EXANET_STATS="$stats" "$@" \
    timeout 120 "$mpiexec" -n 2 -bind-to core "$prog" -t lat -m 8 -M 8 -P 0:0 -i 1000 -b 1 \
      >"$raw.check" 2>&1 || { echo "check run failed: $(tail -3 "$raw.check")" >&2; echo 0; return; }
  # messages sent by every protocol (see COUNTERS in fi_exanet.7), summed over both ranks
  tr ' ' '\n' <"$stats" | awk -F= '$1 ~ /^(eager|medium|rndv)_sent$/ { n += $2 } END { print n + 0 }'
}
if [[ " ${paths[*]} " == *" exanet "* ]]; then
  with=$(exanet_msgs MPIR_CVAR_NOLOCAL=1)
  without=$(exanet_msgs)
  echo "check: exanet counted $with messages sent with MPIR_CVAR_NOLOCAL=1, $without without (the run makes 2000)"
  if ((with < 2000)); then
    echo "MPIR_CVAR_NOLOCAL=1 did not send MPICH's messages through exanet: stopping" >&2
    exit 1
  fi
fi

# One run of path $1, kind $2 (lat|bw), size $3: adds its placement samples to table $4.
# A run that fails adds one NA sample (the cell then reads NA) and says why.
run() {
  local p=$1 kind=$2 size=$3 table=$4 rc=0
  # the paths compared in the same phase of the machine, where lib.sh has the probe
  bench_wait_near "$kind $p $size"
  # shellcheck disable=SC2086
  env ${penv[$p]} "${locker[@]}" timeout 600 "$mpiexec" -n 2 -bind-to core "$prog" -t "$kind" \
    -m "$size" -M "$size" -p "$offsets" -b "$blocks" "${touch[@]}" -v >"$raw.log" 2>&1 || rc=$?
  echo "$(date -u +%FT%TZ) $p $kind $size rc=$rc phase=${probe_phase:-unknown}" >>"$runs_log"
  if ((rc == 0)) && grep -q "^place $kind $size " "$raw.log"; then
    awk -v p="$p" -v k="$kind" '$1 == "place" && $2 == k { print p, $3, $5, $4 }' "$raw.log" >"$raw.s"
    bench_table_add_file "$table" "$raw.s"
  else
    echo "$p $kind $size: no run, rc $rc ($(grep -m1 -E 'rror|FAIL|Abort' "$raw.log" || tail -1 "$raw.log"))" >&2
    cp "$raw.log" "$out/mpich_fail_${p}_${kind}_$size.log"
    bench_table_add "$table" "$p" "$size" NA
  fi
}

echo "# $(date -u +%FT%TZ) MPICH $prefix, provider $build/lib, paths ${paths[*]}" | tee -a "$runs_log"
bench_mpi_sweep mpich "MPICH 4.0.2 ch4:ofi, 2 ranks, -bind-to core:"
