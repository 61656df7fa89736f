#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Large-message latency with receives posted first, side by side in one run: exanet's default
# write-based rendezvous (receiver-initiated when the receive is posted first), its optimistic
# variant (no RTS, no tickets: FI_EXANET_PROTOCOL=optimistic; this program meets its
# assumptions), exanet's read variant (the thesis baseline, FI_EXANET_PROTOCOL=read), and
# libfabric's shm and tcp providers, all through our tagged_bench program (directed, pre-posted
# receives). Reports the ratios, the median over buffer placements and the worst placement, and
# the share of rendezvous sends an RTR served. The exanet variants are also measured paired
# (tagged_bench VARIANTS: one endpoint pair per variant, taking turns iteration by iteration), so a
# machine that changes speed between runs cannot decide a difference of a few percent; table
# rendezvous_paired holds those (absolute paired latencies are higher from 1 MiB: three pairs of
# buffers do not stay in cache; read its ratios). A benchmark, not a test: nothing asserts on time.
#   fabtests/bench/rendezvous_compare.sh [build-dir] [out-dir]
# Environment: SIZES (default 64 KiB .. 4 MiB by powers of 2), PLACEMENTS (tagged_bench
# PLACEMENT=S:R values, default "0:0 16:40 63:8"; the full sweep is xfer_compare.sh's), REPEAT
# (default 3: each placement's value is the median of that many runs, the paths taking turns),
# ITERS (passed on), LOCK. Writes $out/rendezvous{,_paired,_ri}.{csv,samples,png}.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
bench_init tagged_bench rendezvous "$@"
sizes=${SIZES:-"65536 131072 262144 524288 1048576 2097152 4194304"}
placements=${PLACEMENTS:-"0:0 16:40 63:8"}
paths=(exanet exanet_optimistic exanet_read shm tcp)

bench_table_begin rendezvous low us "${paths[*]}" "exanet/exanet_read exanet_optimistic/exanet_read exanet/shm exanet/tcp"
bench_table_begin rendezvous_paired low us "paired_write paired_optimistic paired_read" \
  "paired_write/paired_read paired_optimistic/paired_read"
bench_table_begin rendezvous_ri high pct "exanet" "" noworst
turn=0
for s in $sizes; do
  for _ in $(seq "$repeat"); do
    for pl in $placements; do
      n=${#paths[@]}
      for ((k = 0; k < n; k++)); do
        path=${paths[(k + turn) % n]}
        case $path in
          exanet) bench_env exanet_write ;;
          *) bench_env "$path" ;;
        esac
        if bench_locked env "${benv[@]}" PLACEMENT="$pl" timeout 900 "$bench" "$s" >"$raw.run" 2>"$raw.err"; then
          read -r _ lat ri < <(awk 'NR == 2' "$raw.run")
        else
          echo "tagged_bench over $path at $s, placement $pl failed: $(tail -1 "$raw.err")" >&2
          lat=NA ri=NA
        fi
        bench_table_add rendezvous "$path" "$s" "${lat:-NA}" "$pl"
        [[ $path == exanet ]] && bench_table_add rendezvous_ri exanet "$s" "${ri:-NA}"
      done
      turn=$((turn + 1))
      bench_env exanet
      if bench_locked env "${benv[@]}" PLACEMENT="$pl" VARIANTS="write optimistic read" \
          timeout 900 "$bench" "$s" >"$raw.run" 2>"$raw.err"; then
        awk -v pl="$pl" 'NR > 1 { print "paired_" $4, $1, $2, pl }' "$raw.run" >"$raw.paired"
        bench_table_add_file rendezvous_paired "$raw.paired"
      else
        echo "paired tagged_bench at $s, placement $pl failed: $(tail -1 "$raw.err")" >&2
        for v in write optimistic read; do bench_table_add rendezvous_paired "paired_$v" "$s" NA "$pl"; done
      fi
    done
  done
  for t in rendezvous rendezvous_paired rendezvous_ri; do bench_table_row "$t" "$s" | sed "s/^/$t  /"; done
done
for t in rendezvous rendezvous_paired rendezvous_ri; do echo; bench_table_show "$t"; done
bench_plot rendezvous "tagged_bench, receives posted first: median (solid) and worst placement (dashed)" \
  "latency (usec, one way)"
bench_plot rendezvous_paired "exanet protocol variants, paired (taking turns per iteration)" "latency (usec, one way)"
bench_plot rendezvous_ri "exanet: rendezvous sends an RTR served (receiver-initiated)" "share of rendezvous sends (%)" linear
