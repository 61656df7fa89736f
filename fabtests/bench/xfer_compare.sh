#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# exanet, libfabric's shm and tcp side by side in one run, every mode of our xfer_bench program:
# tagged and untagged ping-pong latency with receives posted first and with every message arriving
# unexpected, streaming bandwidth (window 64) with reused buffers and with buffers cycling through
# more memory than the caches hold (bw_cold), bidirectional bandwidth, 8 B message rate, RMA write
# and read latency and bandwidth. Every size runs a sweep of buffer placements (send and receive
# buffers at 0, 8, 16, 24, 40 and 63 bytes past a page, chosen independently; see xfer_bench.c)
# and is reported as the median over placements and the WORST placement, which is named.
# A benchmark, not a test: nothing asserts on time; xfer_bench verifies the data of every size and
# placement, so a fast wrong answer fails the run instead of flattering it.
#
#   fabtests/bench/xfer_compare.sh [build-dir] [out-dir]        (default build/, build/bench)
#
# The providers take turns within each mode and each group of sizes (CHUNK sizes per program run),
# so a machine that drifts (frequency, a neighbour) hits all three alike; the order rotates from
# group to group. One line per size as it completes, then per mode: $out/xfer_MODE.csv (size; per
# provider the median, the worst value and its placement; exanet/shm and exanet/tcp of the medians
# and of the worsts), $out/xfer_MODE.samples (every placement's value) and $out/xfer_MODE.png.
# Latency ratios below 1 and bandwidth or rate ratios above 1 favour exanet. The programs' own
# output (with exanet's share of receives that found their message waiting) is in $out/xfer_raw/.
#
# Environment:
#   MODES      default: tagged_lat tagged_unexp msg_lat msg_unexp bw bw_cold bibw rate
#              rma_write_lat rma_read_lat rma_write_bw rma_read_bw (bw_cold: xfer_bench -m bw
#              -C COLD_BYTES, default 64M, twice this machine's L3: see xfer_bench.c)
#   PROVIDERS  default "exanet shm tcp" (names as lib.sh's bench_env knows them: exanet_cma...);
#              ratios are taken of the first over each other one
#   SIZES      default 1 B .. 64 MiB by powers of 2 (rate: 8 B; RATE_SIZES overrides that)
#   CELL_MS    time per size and placement (default 15 ms); xfer_bench adapts its iterations to it
#   CHUNK      sizes per program run (default 6: fewer program starts; lines come per group)
#   REPEAT     runs of each group and provider (default 1: the sweep already gives 36 samples)
#   XFER_ARGS  more xfer_bench options for every run (-P 16:40 for one placement, -T, -A, -d US)
#   LOCK       flock file every run holds (default /tmp/exanet-bench.lock; empty: none)
#   BIND=1     pins the two processes of each run to cpus 0 and 1
#   RT=1       runs them (and the machine probe) under SCHED_FIFO: others cannot preempt them
#              (lib.sh, bench_locked; root only)
#   PHASE      near (default): each run waits (up to PHASE_WAIT s, default 60) until the machine
#              probe (core_probe) shows the two cores sharing a cache, and a run under which that
#              changed runs again once; any: no waiting. Every probe is in $out/core_probe.csv.
# Duration: by the budget (12 modes x 3 providers x (21 sizes x 36 placements + 6 sizes x 12) cells
# of CELL_MS, plus the sizes above 1 MiB where a few iterations take longer) about 15 minutes on a
# quiet 2-core machine; a loaded one takes longer (each size's time is in xfer_raw/*.out). For a
# quicker look: SIZES="8 4K 64K 1M 16M" CELL_MS=5, or MODES="tagged_lat bw".
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
REPEAT=${REPEAT:-1}
bench_init xfer_bench xfer "$@"
modes=${MODES:-"tagged_lat tagged_unexp msg_lat msg_unexp bw bw_cold bibw rate rma_write_lat rma_read_lat rma_write_bw rma_read_bw"}
providers=${PROVIDERS:-"exanet shm tcp"}
all_sizes=${SIZES:-"$(s=1; while ((s <= 67108864)); do printf '%s ' $s; s=$((s * 2)); done)"}
cell_ms=${CELL_MS:-15}
chunk=${CHUNK:-6}
mkdir -p "$out/xfer_raw"
read -r -a provs <<<"$providers"
ratios=""
for p in "${provs[@]:1}"; do ratios+="${provs[0]}/$p "; done
start=$(date +%s)

# One program run: provider $1, mode $2, sizes $3...; samples into the table, NA on failure.
run_one() {
  local prov=$1 mode=$2 table=$3 rep=$4
  shift 4
  local log="$out/xfer_raw/${mode}_${prov//;/+}_${1}-${*: -1}_r$rep"
  bench_env "$prov"
  local label="$mode $prov ${1}-${*: -1} r$rep" attempt ok
  local -a mode_args=(-m "$mode")
  [[ $mode == bw_cold ]] && mode_args=(-m bw -C "${COLD_BYTES:-64M}")
  # In the near phase of the machine (lib.sh, bench_wait_near), and once more if the phase
  # changed under the run: the providers are compared under the same conditions.
  for attempt in 1 2; do
    bench_wait_near "$label before"
    # shellcheck disable=SC2086
    bench_locked env "${benv[@]}" timeout 1800 "$bench" "${mode_args[@]}" -t "$cell_ms" ${XFER_ARGS:-} "$@" \
      >"$log.out" 2>"$log.err"
    ok=$?
    bench_probe "$label after"
    [[ ${PHASE:-near} == near && $probe_phase == far && $attempt == 1 && $ok == 0 ]] || break
  done
  if ((ok == 0)); then
    awk -v p="$prov" '!/^#/ && NF >= 3 { print p, $1, $3, $2 }' "$log.out" >"$raw.run"
  else
    echo "  xfer_bench -m $mode over $prov failed: $(grep -m1 FAIL "$log.err" || tail -1 "$log.err")" >&2
    : >"$raw.run"
  fi
  # sizes the run did not reach read NA
  local s
  for s in "$@"; do
    grep -q "^[^ ]* $s " "$raw.run" || echo "$prov $s NA -" >>"$raw.run"
  done
  bench_table_add_file "$table" "$raw.run"
}

turn=0
for mode in $modes; do
  case $mode in
    bw | bw_cold | bibw | rma_write_bw | rma_read_bw) better=high unit=MBps ylabel="bandwidth (MB/s, 1e6 B/s)" ;;
    rate) better=high unit=Mmsgps ylabel="message rate (millions per second)" ;;
    rma_read_lat) better=low unit=us ylabel="latency (usec, a whole read)" ;;
    *) better=low unit=us ylabel="latency (usec, one way)" ;;
  esac
  sizes=$all_sizes
  [[ $mode == rate ]] && sizes=${RATE_SIZES:-8}
  # shellcheck disable=SC2086
  sizes=$(bench_bytes $sizes)
  table=xfer_$mode
  echo
  bench_table_begin "$table" "$better" "$unit" "$providers" "$ratios"
  read -r -a list <<<"$sizes"
  for ((i = 0; i < ${#list[@]}; i += chunk)); do
    group=("${list[@]:i:chunk}")
    for ((rep = 1; rep <= repeat; rep++)); do
      n=${#provs[@]}
      for ((k = 0; k < n; k++)); do
        run_one "${provs[(k + turn) % n]}" "$mode" "$table" "$rep" "${group[@]}"
      done
      turn=$((turn + 1))
    done
    for s in "${group[@]}"; do bench_table_row "$table" "$s"; done
  done
  bench_plot "$table" "xfer_bench $mode: median (solid) and worst placement (dashed)" "$ylabel"
done
echo
echo "CSV, samples and plots: $out/xfer_*.{csv,samples,png}; program output: $out/xfer_raw/"
bench_phase_summary
echo "took $(($(date +%s) - start)) s"
