#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# RMA latency and bandwidth side by side: our rma_bench program over exanet, libfabric's shm and
# tcp providers, in one run, per size, with exanet/shm and exanet/tcp ratios, the median over
# buffer placements and the worst placement. A benchmark, not a test: nothing asserts on time.
#   fabtests/bench/rma_compare.sh [build-dir] [out-dir]
# Environment: SIZES (space separated, default 8 B .. 4 MiB by powers of 4), PLACEMENTS (rma_bench
# PLACEMENT=S:R values, default "0:0 16:40 63:8": aligned, and two placements whose source and
# destination disagree within a cache line; the full sweep of 36 is xfer_compare.sh's, which this
# would make nine times as long), REPEAT (default 3: each placement's value is the median of that
# many runs), ITERS and WINDOW (passed to rma_bench), PROVIDERS (default "exanet shm tcp"), LOCK.
# One program run per size, placement and provider, the providers taking turns, so each size
# prints its line as soon as it is done. Writes $out/rma_{write_lat,write_bw,read_bw,put_notify_lat}
# .{csv,...} (put-notify: fi_write then at once an 8-byte fi_send, rma_bench's last column).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
bench_init rma_bench rma "$@"
sizes=${SIZES:-"8 32 128 512 2048 8192 32768 131072 524288 2097152 4194304"}
placements=${PLACEMENTS:-"0:0 16:40 63:8"}
providers=${PROVIDERS:-"exanet shm tcp"}
read -r -a provs <<<"$providers"
ratios=""
for p in "${provs[@]:1}"; do ratios+="${provs[0]}/$p "; done

bench_table_begin rma_write_lat low us "$providers" "$ratios"
bench_table_begin rma_write_bw high MBps "$providers" "$ratios"
bench_table_begin rma_read_bw high MBps "$providers" "$ratios"
bench_table_begin rma_put_notify_lat low us "$providers" "$ratios"
turn=0
for s in $sizes; do
  for _ in $(seq "$repeat"); do
    for pl in $placements; do
      n=${#provs[@]}
      for ((k = 0; k < n; k++)); do
        prov=${provs[(k + turn) % n]}
        bench_env "$prov"
        if bench_locked env "${benv[@]}" PLACEMENT="$pl" timeout 600 "$bench" "$s" >"$raw.run" 2>"$raw.err"; then
          read -r _ lat wbw rbw pn < <(awk 'NR == 2' "$raw.run")
        else
          echo "rma_bench over $prov at $s, placement $pl failed: $(tail -1 "$raw.err")" >&2
          lat=NA wbw=NA rbw=NA pn=NA
        fi
        bench_table_add rma_write_lat "$prov" "$s" "${lat:-NA}" "$pl"
        bench_table_add rma_write_bw "$prov" "$s" "${wbw:-NA}" "$pl"
        bench_table_add rma_read_bw "$prov" "$s" "${rbw:-NA}" "$pl"
        bench_table_add rma_put_notify_lat "$prov" "$s" "${pn:-NA}" "$pl"
      done
      turn=$((turn + 1))
    done
  done
  for t in rma_write_lat rma_write_bw rma_read_bw rma_put_notify_lat; do bench_table_row "$t" "$s" | sed "s/^/$t  /"; done
done
for t in rma_write_lat rma_write_bw rma_read_bw rma_put_notify_lat; do echo; bench_table_show "$t"; done
bench_plot rma_write_lat "rma_bench writedata ping-pong: median (solid) and worst placement (dashed)" "latency (usec, one way)"
bench_plot rma_write_bw "rma_bench write bandwidth, window ${WINDOW:-64}" "bandwidth (MB/s)"
bench_plot rma_read_bw "rma_bench read bandwidth, window ${WINDOW:-64}" "bandwidth (MB/s)"
bench_plot rma_put_notify_lat "rma_bench put-notify ping-pong (fi_write, then fi_send at once)" "latency (usec, one way)"
