#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# RMA with a busy target (seed 004), side by side in one run: our busy_target_bench program, the
# target computing for compute_us between its calls into libfabric, and the initiator's RMA write
# and read rates, over exanet with manual progress, exanet with FI_PROGRESS_AUTO (its progress
# thread), exanet with cross-memory attach (manual: writes and reads land without the target),
# libfabric's shm (manual: its RMA is cross-memory attach too) and tcp;ofi_rxm with
# FI_PROGRESS_AUTO. Flat is the goal. One row per compute time; each value is the median of
# REPEAT runs (the label column says which run was worst). A benchmark, not a test: nothing
# asserts on time.
#   fabtests/bench/busy_target_compare.sh [build-dir] [out-dir]
# Environment: COMPUTE (default "0 1 10 100 1000 10000", microseconds), SERIES (default
# "exanet exanet_auto exanet_cma shm tcp_auto"; a _auto suffix runs the target with
# PROGRESS=auto), REPEAT (default 3), SIZE, WINDOW, DURATION_MS, WAIT (passed on), LOCK.
# Writes $out/busy_write.{csv,samples,png} and $out/busy_read.{...}.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
bench_init busy_target_bench busy "$@"
computes=${COMPUTE:-"0 1 10 100 1000 10000"}
read -r -a series <<<"${SERIES:-exanet exanet_auto exanet_cma shm tcp_auto}"
ratios=""
for s in "${series[@]:1}"; do ratios+="${series[0]}/$s "; done

bench_table_begin busy_write high kops "${series[*]}" "$ratios"
bench_table_begin busy_read high kops "${series[*]}" "$ratios"
echo "(rows: microseconds the target computes between calls; SIZE ${SIZE:-4096} B, window ${WINDOW:-16})"
turn=0
n=${#series[@]}
for run in $(seq "$repeat"); do
  for ((k = 0; k < n; k++)); do
    s=${series[(k + turn) % n]}
    progress=manual
    base=$s
    if [[ $s == *_auto ]]; then
      progress=auto
      base=${s%_auto}
    fi
    bench_env "$base"
    # shellcheck disable=SC2086
    if bench_locked env "${benv[@]}" PROGRESS="$progress" timeout 900 "$bench" $computes \
        >"$raw.run" 2>"$raw.err"; then
      awk -v s="$s" -v r="run$run" 'NR > 1 { print s, $1, $2, r }' "$raw.run" >"$raw.w"
      awk -v s="$s" -v r="run$run" 'NR > 1 { print s, $1, $4, r }' "$raw.run" >"$raw.r"
    else
      echo "busy_target_bench over $s failed: $(tail -1 "$raw.err")" >&2
      : >"$raw.w"
      : >"$raw.r"
      for c in $computes; do echo "$s $c NA run$run" >>"$raw.w"; echo "$s $c NA run$run" >>"$raw.r"; done
    fi
    bench_table_add_file busy_write "$raw.w"
    bench_table_add_file busy_read "$raw.r"
  done
  turn=$((turn + 1))
done
for c in $computes; do
  bench_table_row busy_write "$c" | sed "s/^/write, compute $c us: /"
  bench_table_row busy_read "$c" | sed "s/^/read,  compute $c us: /"
done
for t in busy_write busy_read; do echo; bench_table_show "$t"; done
bench_plot busy_write "RMA write rate against target compute time (SIZE ${SIZE:-4096} B)" "kops/s"
bench_plot busy_read "RMA read rate against target compute time (SIZE ${SIZE:-4096} B)" "kops/s"
