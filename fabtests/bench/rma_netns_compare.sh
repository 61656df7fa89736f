#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# RMA write bandwidth across two "hosts" as a user measures it: upstream fabtests' fi_rma_bw
# (-e rdm -o write; window 64, both sides writing to each other at once, fi_inject_write below
# inject_size), server in one network namespace and client in the other
# (fabtests/multinode/netns_lib.sh), for exanet over its network backend and tcp;ofi_rxm (run
# without exanet loaded, as its users run it) in one run, the series taking turns, with exanet/tcp ratios. For exanet it also says how many writes
# went inline (one lower message) rather than by DMA (a lower RMA write and the target's verdict),
# from FI_EXANET_STATS: the share that separates a good run from a slow one. A benchmark, not a
# test: nothing asserts on time. Exit status: 77 without root or upstream fabtests, 1 if a run
# failed (its cell reads NA), else 0.
#
#   fabtests/bench/rma_netns_compare.sh [build-dir] [out-dir]     (root; default build/, build/bench)
#
# Environment: FABTESTS (upstream fabtests' install prefix, default build-dir/upstream-fabtests,
# as ci/upstream_fabtests.sh build makes it), SIZES (default 64 1K 4K 16K 64K), ITERS (fi_rma_bw
# -I, default 20000; 2000 from 64 KiB), SERIES (default "exanet tcp"; exanet_before: the build in
# BEFORE_LIB, with the variables BEFORE_ENV if set: an A/B in the same run, of two builds or of
# one build in two settings), REPEAT (default 5; a cell is the median of the client's
# lines), OP (write, writedata or read; default write), LOCK (lib.sh).
# Writes $out/rma_netns_<op>.{csv,samples,png} and the inline shares in $out/rma_netns_inline.txt.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
# shellcheck source=../multinode/netns_lib.sh
source "$here/../multinode/netns_lib.sh"
netns_require rma_netns_compare
REPEAT=${REPEAT:-5}
bench_init - rma_netns "$@"
fabtests=${FABTESTS:-$build/upstream-fabtests}
rma_bw=$fabtests/bin/fi_rma_bw
[[ -x $rma_bw ]] || { echo "no $rma_bw (bash ci/upstream_fabtests.sh build PREFIX); skipped"; exit 77; }
op=${OP:-write}
read -r -a series <<<"${SERIES:-exanet tcp}"
# shellcheck disable=SC2086  # a list: split it
sizes=$(bench_bytes ${SIZES:-64 1K 4K 16K 64K})
ratios=""
for s in "${series[@]}"; do [[ $s == tcp ]] || ratios+="$s/tcp "; done
[[ " ${series[*]} " == *" exanet_before "* ]] && ratios+="exanet/exanet_before"

netns_up
netns_one_iface exanet0
unset FI_PROVIDER  # it would hide tcp from exanet
export FI_TCP_NODELAY=1 FI_TCP_IFACE=$iface
inline_log=$out/rma_netns_inline.txt
: >"$inline_log"
failed=0

# One fi_rma_bw pair for series $1 at size $2: prints the client's MB/s (NA on failure) and
# appends the exanet sides' inline shares to $inline_log.
run_pair() {
  local s=$1 size=$2 iters=${ITERS:-20000} lib='' prov=exanet w rc=0
  ((size >= 65536)) && iters=${ITERS:-2000}
  case $s in
    tcp) prov=tcp ;;
    exanet_before) lib=${BEFORE_LIB:?exanet_before needs BEFORE_LIB} ;;
    *) lib=$build/lib ;;
  esac
  local -a env=(FI_PROVIDER_PATH="$lib" FI_EXANET_NETWORK=every_peer FI_EXANET_STATS=stderr)
  # tcp;ofi_rxm as its users run it: exanet not loaded, whose network backend chooses rxm's
  # buffer size for the whole process (fi_exanet(7), OTHER HOSTS)
  [[ $s == tcp ]] && env=(-u FI_PROVIDER_PATH)
  # shellcheck disable=SC2206  # BEFORE_ENV is a list of VAR=value
  [[ $s == exanet_before ]] && env+=(${BEFORE_ENV:-})
  local -a args=(-e rdm -o "$op" -p "$prov" -E -S "$size" -I "$iters")
  netns_start "$ns_b" env "${env[@]}" timeout -k 5 120 "$rma_bw" "${args[@]}" >"$raw.server" 2>&1
  for ((w = 0; w < 200; w++)); do  # fabtests' out-of-band port
    [[ -n $(ip netns exec "$ns_b" ss -Hltn 'sport = :3000' 2>/dev/null) ]] && break
    sleep 0.05
  done
  on_host "$ns_a" env "${env[@]}" timeout -k 5 120 "$rma_bw" "${args[@]}" "$addr_b" >"$raw.client" 2>&1 || rc=$?
  [[ $rc -ne 0 ]] && kill "${netns_pids[-1]}" 2>/dev/null
  wait "${netns_pids[-1]}" || rc=$((rc ? rc : $?))
  if [[ $s != tcp ]]; then
    awk -v s="$s" -v size="$size" '
      /exanet-stats/ {
        for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        if (v["rma_writes"] > 0)
          line = line sprintf(" %.1f%%", 100 * v["rma_inline_writes"] / v["rma_writes"])
        delete v
      }
      END { print s, size, "inline:" line }' "$raw.server" "$raw.client" >>"$inline_log"
  fi
  if [[ $rc -ne 0 ]]; then
    echo "$s $size: fi_rma_bw exit $rc: $(tail -n 2 "$raw.client" | tr '\n' ' ')" >&2
    echo NA
    return
  fi
  # fi_rma_bw's result line: bytes iters total time MB/sec usec/xfer Mxfers/sec
  awk '/^[0-9]/ { v = $5 } END { print (v == "" ? "NA" : v) }' "$raw.client"
}

t=rma_netns_$op
bench_table_begin "$t" high MBps "${series[*]}" "$ratios" noworst
turn=0
for size in $sizes; do
  for _ in $(seq "$repeat"); do
    n=${#series[@]}
    for ((k = 0; k < n; k++)); do
      s=${series[(k + turn) % n]}
      bench_lock
      v=$(run_pair "$s" "$size")
      bench_unlock
      [[ $v == NA ]] && failed=1
      bench_table_add "$t" "$s" "$size" "$v"
    done
    turn=$((turn + 1))
  done
  bench_table_row "$t" "$size"
done
echo
bench_table_show "$t"
bench_plot "$t" "fi_rma_bw -o $op across two namespaces" "MB/s"
echo "== writes inline (server, client) per exanet run: $inline_log"
cat "$inline_log"
exit "$failed"
