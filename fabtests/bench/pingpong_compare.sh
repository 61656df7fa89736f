#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Latency side by side: Debian's fi_pingpong over exanet, libfabric's shm and tcp providers, in one
# run, per message size, with the ratios. A benchmark, not a test: nothing here asserts on time.
# fi_pingpong chooses its own buffers (no placement option), so the table has medians only; the
# placement sweep with median and worst placement is xfer_compare.sh's.
#   fabtests/bench/pingpong_compare.sh [build-dir] [out-dir]
# Environment: ITERS (default 2000), MODE (msg|tagged, default msg), SIZES (space separated),
# REPEAT (default 3: each cell is the median of that many runs, the providers taking turns; two
# processes spinning on two cores make single runs noisy), LOCK (see lib.sh).
# Writes $out/pingpong_MODE.{csv,samples,png}.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
mode=${MODE:-msg}
bench_init - "pingpong_$mode" "$@"
command -v fi_pingpong >/dev/null || { echo "fi_pingpong missing: bash ci/install-deps.sh" >&2; exit 1; }
iters=${ITERS:-2000}
sizes=${SIZES:-"8 64 256 1024 4096 16384 65536 262144 1048576 4194304"}
providers="exanet shm tcp"
table=pingpong_$mode

# One latency (usec/xfer) for provider $1 at size $2, or NA.
measure() {
  local prov=$1 size=$2 port=$((20000 + RANDOM % 30000))
  bench_env "$prov"
  bench_lock
  env "${benv[@]}" timeout 120 fi_pingpong -p "$prov" -e rdm -m "$mode" -S "$size" -I "$iters" \
    -B "$port" >/dev/null 2>&1 &
  local server=$!
  for _ in $(seq 50); do ss -ltn 2>/dev/null | grep -q ":$port " && break; sleep 0.1; done
  env "${benv[@]}" timeout 120 fi_pingpong -p "$prov" -e rdm -m "$mode" -S "$size" \
    -I "$iters" -P "$port" 127.0.0.1 >"$raw.client" 2>/dev/null
  wait "$server" 2>/dev/null
  bench_unlock
  local line
  line=$(awk 'NR > 1 { print $7 }' "$raw.client")
  echo "${line:-NA}"
}

bench_table_begin "$table" low us "$providers" "exanet/shm exanet/tcp" noworst
turn=0
for s in $sizes; do
  for _ in $(seq "$repeat"); do
    # the providers take turns, starting with another one each round
    for k in 0 1 2; do
      read -r -a p <<<"$providers"
      prov=${p[(k + turn) % 3]}
      bench_table_add "$table" "$prov" "$s" "$(measure "$prov" "$s")"
    done
    turn=$((turn + 1))
  done
  bench_table_row "$table" "$s"
done
bench_table_show "$table"
bench_plot "$table" "fi_pingpong -m $mode: exanet, shm, tcp (medians of $repeat runs)" "latency (usec, one way)"
