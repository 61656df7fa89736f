#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# What waiting receives cost everyone else, side by side in one run: our tagged_bench ping-pong
# (directed receives posted first) while each process also keeps PENDING other 64 KiB receives
# posted from the same peer (an application with many receives up at once), over exanet and
# libfabric's shm and tcp. One table per message size, one row per pending count: the latency
# (median over buffer placements, and the worst placement), the ratios between providers, and at
# the end each provider's growth over no pending receives. A benchmark, not a test: nothing
# asserts on time.
#   fabtests/bench/pending_compare.sh [build-dir] [out-dir]
# Environment: PENDING (default "0 64 512"; the first is the baseline of the growth), SIZES
# (default "8 65536"), PLACEMENTS (default "0:0 16:40 63:8"), REPEAT (default 3), ITERS (default
# 2000, passed on), LOCK. Writes $out/pending_SIZE.{csv,samples,png} (the plot: latency against
# the pending receives, and the ratios between providers).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
bench_init tagged_bench pending "$@"
pendings=${PENDING:-"0 64 512"}
sizes=${SIZES:-"8 65536"}
placements=${PLACEMENTS:-"0:0 16:40 63:8"}
providers=(exanet shm tcp)

for s in $sizes; do
  bench_table_begin "pending_$s" low us "${providers[*]}" "exanet/shm exanet/tcp"
  echo "(rows: pending receives; message size $s)"
done
turn=0
for pending in $pendings; do
  for _ in $(seq "$repeat"); do
    for pl in $placements; do
      for ((k = 0; k < 3; k++)); do
        prov=${providers[(k + turn) % 3]}
        bench_env "$prov"
        # shellcheck disable=SC2086
        if bench_locked env "${benv[@]}" PENDING="$pending" ITERS="${ITERS:-2000}" PLACEMENT="$pl" \
            timeout 600 "$bench" $sizes >"$raw.run" 2>"$raw.err"; then
          awk -v p="$prov" -v pl="$pl" 'NR > 1 { print p, $1, $2, pl }' "$raw.run" >"$raw.rows"
        else
          echo "tagged_bench over $prov with $pending pending, placement $pl failed: $(tail -1 "$raw.err")" >&2
          : >"$raw.rows"
        fi
        for s in $sizes; do
          v=$(awk -v s="$s" '$2 == s { print $3 }' "$raw.rows")
          bench_table_add "pending_$s" "$prov" "$pending" "${v:-NA}" "$pl"
        done
      done
      turn=$((turn + 1))
    done
  done
  for s in $sizes; do bench_table_row "pending_$s" "$pending" | sed "s/^/size $s, pending /"; done
done
for s in $sizes; do
  echo
  bench_table_show "pending_$s"
  echo "growth over $(awk '{ print $1 }' <<<"$pendings") pending (median; worst placement):"
  awk -F, -f "$here/stats.awk" -f /dev/stdin "$out/pending_$s.csv" <<'AWK'
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    NR == 2 { for (p = 1; p <= 3; p++) { P = p == 1 ? "exanet" : p == 2 ? "shm" : "tcp"
                base[P] = $col[P "_us"]; wbase[P] = $col[P "_us_worst"] } }
    { line = sprintf("  %6s pending:", $1)
      for (p = 1; p <= 3; p++) { P = p == 1 ? "exanet" : p == 2 ? "shm" : "tcp"
        line = line sprintf("  %s %s; %s", P, ratio($col[P "_us"], base[P]), ratio($col[P "_us_worst"], wbase[P])) }
      print line }
AWK
  bench_plot "pending_$s" "tagged_bench ping-pong of $s B with pending 64 KiB receives: median (solid) and worst placement (dashed)" \
    "latency (usec, one way)" log "receives pending at each process"
done
