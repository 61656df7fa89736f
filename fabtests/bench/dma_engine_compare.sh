#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Does FI_EXANET_DMA_ENGINE=auto take the cheaper engine? For each buffer placement and size, the
# three settings (staged, cma, auto) and shm run back to back, one xfer_bench each, after the
# machine probe saw the near phase; the probe after the four is printed beside them, so a line
# that straddled a change of phase shows it. Placements matter here: the kernel's copy behind
# cross-memory attach (and behind shm's large messages) is slower when the two buffers disagree
# within a cache line, and exanet's staged copies are not (issue 17).
#
#   fabtests/bench/dma_engine_compare.sh [build-dir] [out-dir]      (default build/, build/bench)
#
# Prints one line per placement and size: the four medians, auto over the better engine, and
# auto over shm (latency: below 1 favours exanet; bandwidth: above 1). $out/dma_engine_MODE.csv has the same. Not a test: nothing asserts on time.
#
# Environment: MODE (xfer_bench mode, default tagged_lat; bw, rma_write_lat, ...), SIZES (default
#   16K 64K 256K 1M 4M), PLACEMENTS (default "0:0 0:8 16:24", send:receive offsets past a page),
#   REPEAT (default 2), CELL_MS (default 20), RT=1 and BIND=1 as lib.sh (BIND=1 by default).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
REPEAT=${REPEAT:-2}
bench_init xfer_bench dma_engine "$@"
mode=${MODE:-tagged_lat}
sizes=${SIZES:-"16384 65536 262144 1048576 4194304"}
placements=${PLACEMENTS:-"0:0 0:8 16:24"}
cell_ms=${CELL_MS:-20}
export BIND=${BIND:-1}
table=$out/dma_engine_$mode.csv
echo "placement,size,staged,cma,auto,shm,auto_over_best,auto_over_shm,probe_after" >"$table"
lower_is_better=1
[[ $mode == *bw* || $mode == rate ]] && lower_is_better=0

one() {  # series placement size -> median, or NA
  bench_env "$1"
  bench_locked env "${benv[@]}" timeout 120 "$bench" -m "$mode" -P "$2" -t "$cell_ms" "$3" 2>/dev/null |
    awk '/^# [0-9]+ median/ { v = $4 } END { print (v == "" ? "NA" : v) }'
}

echo "mode $mode ($( ((lower_is_better)) && echo 'us, lower is better' || echo 'MB/s, higher is better'))"
printf '%-7s %9s %9s %9s %9s %9s %9s %9s %s\n' placement size staged cma auto shm auto/best auto/shm probe
for ((r = 1; r <= repeat; r++)); do
  for p in $placements; do
    for s in $sizes; do
      bench_wait_near "$p $s"
      st=$(one exanet_staged "$p" "$s")
      cm=$(one exanet_cma "$p" "$s")
      au=$(one exanet "$p" "$s")
      sh=$(one shm "$p" "$s")
      bench_probe "after $p $s"
      read -r over_best over_shm < <(awk -v a="$au" -v s="$st" -v c="$cm" -v h="$sh" -v low="$lower_is_better" '
        BEGIN { best = (low ? (s < c ? s : c) : (s > c ? s : c))
                if (a == "NA" || s == "NA" || c == "NA") { print "NA NA"; exit }
                printf "%.2f %s\n", a / best, (h == "NA" ? "NA" : sprintf("%.2f", a / h)) }')
      printf '%-7s %9s %9s %9s %9s %9s %9s %9s %s\n' "$p" "$s" "$st" "$cm" "$au" "$sh" "$over_best" \
        "$over_shm" "$probe_phase"
      echo "$p,$s,$st,$cm,$au,$sh,$over_best,$over_shm,$probe_phase" >>"$table"
    done
  done
done
bench_phase_summary
echo "CSV: $table"
