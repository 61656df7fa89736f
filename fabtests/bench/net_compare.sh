#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# exanet over its network backend against libfabric's tcp;ofi_rxm used directly, between two
# "hosts" (two network namespaces joined by a veth pair, each process with a private /dev/shm:
# fabtests/multinode/netns_lib.sh), in one run: tagged ping-pong latency with every receive
# posted first, streaming bandwidth (window 64) and the 8 B message rate, each for exanet's
# default protocol variant (write: a posted receive sends an RTR and the sender writes straight
# into it), its read variant (FI_EXANET_PROTOCOL=read: RTS, then the receiver reads) and
# tcp;ofi_rxm. The RTR share (xfer_bench's RTR_PCT: data messages written straight into a buffer
# its RTR announced) says which protocol carried each size. Then the goals of issue 13 against
# the numbers of this run. A benchmark, not a test: nothing asserts on time (xfer_bench verifies
# the data of every cell, so a fast wrong answer fails instead of flattering). Exit status: 77
# without root, 1 if any program run failed (its cells read NA), else 0 whatever the goals say.
#
#   fabtests/bench/net_compare.sh [build-dir] [out-dir]     (root; default build/, build/bench)
#
# Each run is one xfer_bench follower (-S PORT) in the second namespace and its leader (-c) in
# the first, every size in one run, at placement 0:0 (the placement sweep is a shared-memory
# question; PLACEMENTS="0:0,16:40" runs more). The three series take turns, REPEAT times (default
# 5), rotating the order; a size's value is the median over repeats. One line per size as it
# goes, then the tables, $out/net_*.csv, .samples and .png, and the programs' output in
# $out/net_raw/. Ratios: exanet/tcp (latency below 1 and bandwidth above 1 favour exanet) and
# exanet/exanet_read (write over read).
#
# Lower tcp settings, the same for both (say what ran): FI_TCP_NODELAY=1 and FI_TCP_IFACE set to
# each namespace's veth; exanet binds its lower endpoint to the namespace's address
# (FI_EXANET_NETWORK_NODE) with FI_EXANET_NETWORK=every_peer (across namespaces the same as
# other_hosts). NET_ENV adds more variables to every run of both (e.g. FI_OFI_RXM_USE_RNDV_WRITE=1).
# NET_CC chooses the namespaces' TCP congestion control (netns_lib.sh; the header says which ran):
# under this VM's default, bbr, a new connection paces its bulk data at a rate it learns from its
# own deliveries, and 256 KiB ping-pongs ran 60-120 us for the first 0.2-0.5 s of a run, then
# 45-50 (exanet) while tcp;ofi_rxm stayed at 80 (2026-12-07); reno has no such start.
#
# PHASE (lib.sh: near, the default, waits up to PHASE_WAIT seconds, default 5 here, before each
# run for the two vCPUs to share a cache; any: no waiting; every probe is in $out/core_probe.csv).
# NET_PROBE=1 (default) also runs net_probe (dev/net's mailbox ping-pong alone, no protocol
# above it) over the same tcp: the floor under exanet's small messages.
# Environment: SIZES (default 8 64 1K 8K 64K 1M 4M), RATE_SIZES (default 8), MODES (default
# "tagged_lat bw rate"), SERIES (default "exanet exanet_read tcp"; exanet_before: exanet's
# default variant from the provider directory BEFORE_LIB, with the variables BEFORE_ENV if set: an
# A/B of two builds, or of one build, BEFORE_LIB=build/lib, in two settings), REPEAT (5), CELL_MS (30),
# PLACEMENTS (0:0), RUN_TIMEOUT (seconds per program run, default 120), BIND (default 1: pins
# the two processes to cpus 0 and 1), RT (default 1: both under SCHED_FIFO, chrt -f 50, as
# lib.sh's RT=1; RT=0 runs them as ordinary processes), LOCK (lib.sh's benchmark lock).
# Duration: about 2 minutes with the defaults (a loaded 2-cpu machine); bounded by
# 3 modes x 3 series x REPEAT x RUN_TIMEOUT plus net_probe's RUN_TIMEOUT.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
# shellcheck source=../multinode/netns_lib.sh
source "$here/../multinode/netns_lib.sh"
netns_require net_compare
REPEAT=${REPEAT:-5}
bench_init xfer_bench net "$@"
modes=${MODES:-"tagged_lat bw rate"}
read -r -a series <<<"${SERIES:-exanet exanet_read tcp}"
# shellcheck disable=SC2086  # lists: split them
sizes=$(bench_bytes ${SIZES:-8 64 1K 8K 64K 1M 4M})
# shellcheck disable=SC2086
rate_sizes=$(bench_bytes ${RATE_SIZES:-8})
cell_ms=${CELL_MS:-30}
placements=${PLACEMENTS:-0:0}
run_timeout=${RUN_TIMEOUT:-120}
worst=noworst
[[ $placements == *,* ]] && worst=worst
start=$(date +%s)
mkdir -p "$out/net_raw"

netns_up
# netns_up's trap removes the namespaces; ours also removes bench_init's scratch files.
trap 'netns_cleanup; rm -f "$raw" "$raw".*' EXIT
trap 'exit 130' INT TERM
iface_a=exa$$va iface_b=exa$$vb # netns_up's names for the two ends of the veth pair
port=$((40000 + $$ % 20000))
tcp_cc=$(ip netns exec "$ns_a" sysctl -n net.ipv4.tcp_congestion_control)
echo "# hosts: $ns_a ($addr_a, leader) and $ns_b ($addr_b, follower); lower tcp: FI_TCP_NODELAY=1 FI_TCP_IFACE=<veth>${NET_ENV:+ $NET_ENV}; TCP congestion control: $tcp_cc"

# env's arguments for series $1 on the host whose address is $2 and veth $3, into `senv`.
series_env() {
  local s=$1 addr=$2 iface=$3
  senv=(FI_TCP_NODELAY=1 FI_TCP_IFACE="$iface")
  case $s in
    exanet | exanet_write | exanet_read | exanet_optimistic | exanet_before)
      # FI_PROVIDER unset: it would hide the lower tcp from exanet (xfer_bench asks for exanet)
      local lib=$build/lib
      [[ $s == exanet_before ]] && lib=${BEFORE_LIB:?exanet_before needs BEFORE_LIB}
      senv=(-u FI_PROVIDER "${senv[@]}" FI_PROVIDER_PATH="$lib" FI_EXANET_NETWORK=every_peer FI_EXANET_NETWORK_NODE="$addr")
      [[ $s != exanet && $s != exanet_before ]] && senv+=(FI_EXANET_PROTOCOL="${s#exanet_}")
      # shellcheck disable=SC2206  # BEFORE_ENV is a list of VAR=value
      [[ $s == exanet_before ]] && senv+=(${BEFORE_ENV:-})
      ;;
    *) senv+=(FI_PROVIDER="$s") ;;
  esac
  # shellcheck disable=SC2206  # NET_ENV is a list of VAR=value
  senv+=(${NET_ENV:-})
}

# Spinning processes on a loaded 2-cpu machine are preempted for whole time slices (2 ms steps
# in the samples): by default both run under SCHED_FIFO, each pinned to its own cpu.
export BIND=${BIND:-1}
rt=()
if [[ ${RT:-1} == 1 ]]; then
  command -v chrt >/dev/null || { echo "RT=1 needs chrt" >&2; exit 1; }
  rt=(chrt -f 50)
fi

# One program run: series $1, mode $2, repeat $3, sizes $4...: the samples into $raw.run as
# "series size value placement rtr_pct" (NA for sizes it did not reach).
run_one() {
  local s=$1 mode=$2 rep=$3
  shift 3
  local log="$out/net_raw/${mode}_${s//;/+}_r$rep" rc=0 src=0 follower
  port=$((port + 1))
  # The machine's phase (lib.sh): its two vCPUs sharing a cache or not moves every number here
  # by tens of percent (64 KiB: 47 against 107 us for the same series); wait up to PHASE_WAIT
  # seconds (default 5 here) for the near phase, and record it.
  PHASE_WAIT=${PHASE_WAIT:-5} bench_wait_near "$mode $s r$rep before"
  bench_lock
  series_env "$s" "$addr_b" "$iface_b"
  netns_start "$ns_b" env "${senv[@]}" timeout "$run_timeout" "${rt[@]}" "$bench" -m "$mode" -t "$cell_ms" \
    -P "$placements" -S "$port" "$@" >"$log.follower" 2>&1
  follower=${netns_pids[-1]}
  series_env "$s" "$addr_a" "$iface_a"
  on_host "$ns_a" env "${senv[@]}" timeout "$run_timeout" "${rt[@]}" "$bench" -m "$mode" -t "$cell_ms" \
    -P "$placements" -c "$addr_b:$port" "$@" >"$log.out" 2>"$log.err" || rc=$?
  wait "$follower" || src=$?
  bench_unlock
  bench_probe "$mode $s r$rep after"
  if ((rc == 0 && src == 0)); then
    awk -v p="$s" '!/^#/ && NF >= 6 { print p, $1, $3, $2, $6 }' "$log.out" >"$raw.run"
  else
    failures=$((failures + 1))
    echo "  xfer_bench -m $mode over $s failed (leader exit $rc, follower exit $src):" \
      "$(grep -h -m1 FAIL "$log.err" "$log.follower" | head -1 || tail -1 "$log.err")" >&2
    : >"$raw.run"
  fi
  local size
  for size in "$@"; do
    grep -q "^[^ ]* $size " "$raw.run" || echo "$s $size NA - NA" >>"$raw.run"
  done
}

failures=0
turn=0
for mode in $modes; do
  case $mode in
    bw | bibw) better=high unit=MBps ylabel="bandwidth (MB/s, 1e6 B/s)" ;;
    rate) better=high unit=Mmsgps ylabel="message rate (millions per second)" ;;
    *) better=low unit=us ylabel="latency (usec, one way)" ;;
  esac
  list=$sizes
  [[ $mode == rate ]] && list=$rate_sizes
  read -r -a msizes <<<"$list"
  ratios=""
  [[ " ${series[*]} " == *" exanet "* && " ${series[*]} " == *" tcp "* ]] && ratios+="exanet/tcp "
  [[ " ${series[*]} " == *" exanet "* && " ${series[*]} " == *" exanet_read "* ]] && ratios+="exanet/exanet_read "
  [[ " ${series[*]} " == *" exanet_read "* && " ${series[*]} " == *" tcp "* ]] && ratios+="exanet_read/tcp "
  [[ " ${series[*]} " == *" exanet "* && " ${series[*]} " == *" exanet_before "* ]] && ratios+="exanet/exanet_before"
  table=net_$mode
  echo
  bench_table_begin "$table" "$better" "$unit" "${series[*]}" "$ratios" "$worst"
  rtr=net_${mode}_rtr
  : >"$out/$rtr.samples"
  for ((rep = 1; rep <= repeat; rep++)); do
    n=${#series[@]}
    for ((k = 0; k < n; k++)); do
      s=${series[(k + turn) % n]}
      run_one "$s" "$mode" "$rep" "${msizes[@]}"
      bench_table_add_file "$table" "$raw.run"
      awk '{ print $1, $2, $5 }' "$raw.run" >>"$out/$rtr.samples"
    done
    turn=$((turn + 1))
  done
  for size in "${msizes[@]}"; do
    printf '%s ' "$(date -u +%T)"
    bench_table_row "$table" "$size"
  done
  bench_plot "$table" "exanet (network backend) vs tcp;ofi_rxm across two namespaces: $mode" "$ylabel"
done

# The floor under exanet's small messages: dev/net alone (net_probe: one 64-byte mailbox packet
# ping-pong, no protocol, matching or completion queue above it) over the same lower tcp.
probe_line="(skipped: NET_PROBE=0, or net_probe not built)"
if [[ ${NET_PROBE:-1} == 1 && -x $build/fabtests/net_probe ]]; then
  series_env tcp "$addr_b" "$iface_b"
  netns_start "$ns_b" env "${senv[@]}" timeout "$run_timeout" "${rt[@]}" "$build/fabtests/net_probe" serve \
    "$work/probe.addr" "$addr_b" >"$out/net_raw/net_probe.follower" 2>&1
  series_env tcp "$addr_a" "$iface_a"
  probe_line=$(on_host "$ns_a" env "${senv[@]}" timeout "$run_timeout" "${rt[@]}" "$build/fabtests/net_probe" client \
    "$work/probe.addr" "$addr_a" 2>"$out/net_raw/net_probe.err") || probe_line="(net_probe failed: $(tail -1 "$out/net_raw/net_probe.err"))"
  wait "${netns_pids[-1]}" 2>/dev/null || true
fi
echo
echo "== dev/net floor: $probe_line"

# The RTR share per mode, series and size (median over repeats and placements), as a table.
echo
echo "== RTR share (% of data messages written straight into a buffer its RTR announced; NA: no counters)"
for mode in $modes; do
  [[ -s $out/net_${mode}_rtr.samples ]] || continue
  awk -v mode="$mode" -v series="${series[*]}" -f "$here/stats.awk" -f /dev/stdin "$out/net_${mode}_rtr.samples" <<'AWK'
    $1 ~ /^exanet/ && $3 != "NA" { v[$1 " " $2] = v[$1 " " $2] " " $3; seen[$1]
                                   if (!($2 in sz)) { sz[$2]; sizes[++nz] = $2 } }
    END {
      n = split(series, S, " "); ns = 0
      for (j = 1; j <= n; j++) if (S[j] in seen) ser[++ns] = S[j]
      line = sprintf("%-11s", mode); for (j = 1; j <= ns; j++) line = line sprintf(" %12s", ser[j]); print line
      for (i = 1; i <= nz; i++) {
        line = sprintf("%-11s", human(sizes[i]))
        for (j = 1; j <= ns; j++) { k = ser[j] " " sizes[i]; line = line sprintf(" %12s", (k in v) ? median(v[k]) : "NA") }
        print line
      }
    }
AWK
done | tee "$out/net_rtr.txt"

echo
for mode in $modes; do
  [[ -s $out/net_$mode.csv ]] && bench_table_show "net_$mode"
done

# The goals of issue 13 (part 5) against this run's medians. Reported, never asserted.
goal() { printf '%-72s %s\n' "$1" "$2"; }
col() { # col TABLE SIZE COLUMN: the value of a column of a CSV row
  awk -F, -v size="$2" -v c="$3" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next }
    $1 == size && k { print $k }' "$out/$1.csv"
}
echo
echo "== goals (issue 13, part 5; TCP congestion control $tcp_cc: the large sizes' times depend on it)"
if [[ -s $out/net_tagged_lat.csv && ${ratios} == *exanet/tcp* ]]; then
  r=$(col net_tagged_lat 8 exanet_over_tcp)
  [[ -n $r ]] && goal "8 B latency <= 1.1 x tcp;ofi_rxm" \
    "$(awk -v r="$r" 'BEGIN { print (r != "NA" && r <= 1.1 ? "met" : "NOT met") " (" r ")" }')"
  big="" ok=met
  for s in $sizes; do
    ((s >= 65536 && s <= 4194304)) || continue
    r=$(col net_tagged_lat "$s" exanet_over_tcp)
    big+=" $s:$r"
    awk -v r="$r" 'BEGIN { exit !(r != "NA" && r <= 0.9) }' || ok="NOT met"
  done
  [[ -n $big ]] && goal "64 KiB-4 MiB latency (receives posted first) <= 0.9 x tcp;ofi_rxm" "$ok (${big# })"
fi
if [[ -s $out/net_bw.csv && ${ratios} == *exanet/tcp* ]]; then
  all="" ok=met
  for s in $sizes; do
    r=$(col net_bw "$s" exanet_over_tcp)
    [[ -n $r ]] || continue
    all+=" $s:$r"
    awk -v r="$r" 'BEGIN { exit !(r != "NA" && r >= 1.0) }' || ok="NOT met"
  done
  [[ -n $all ]] && goal "bandwidth >= 1.0 x tcp;ofi_rxm at every size" "$ok (${all# })"
fi
if [[ -s $out/net_tagged_lat.csv && -s $out/net_tagged_lat_rtr.samples && ${ratios} == *exanet/exanet_read* &&
      ${ratios} == *exanet/tcp* ]]; then
  # One network round trip: twice tcp;ofi_rxm's 8 B one-way latency of this run. The sizes
  # judged are those the write variant carried by RTR (share at least half).
  rtt=$(awk -v t="$(col net_tagged_lat 8 tcp_us)" 'BEGIN { if (t != "" && t != "NA") printf "%.1f", 2 * t }')
  all="" ok=met
  for s in $sizes; do
    share=$(awk -v s="$s" -f "$here/stats.awk" -f /dev/stdin "$out/net_tagged_lat_rtr.samples" <<'AWK'
      $1 == "exanet" && $2 == s && $3 != "NA" { v = v " " $3 } END { print v == "" ? "NA" : median(v) }
AWK
)
    awk -v x="$share" 'BEGIN { exit !(x != "NA" && x >= 50) }' || continue
    w=$(col net_tagged_lat "$s" exanet_us) r=$(col net_tagged_lat "$s" exanet_read_us)
    d=$(awk -v w="$w" -v r="$r" 'BEGIN { if (w == "NA" || r == "NA" || w == "" || r == "") print "NA"; else printf "%.1f", r - w }')
    all+=" $s:${d}us"
    awk -v d="$d" -v rtt="${rtt:-NA}" 'BEGIN { exit !(d != "NA" && rtt != "NA" && d >= rtt) }' || ok="NOT met"
  done
  if [[ -n $all ]]; then
    goal "write beats read by >= 1 round trip (${rtt:-NA} us) per rendezvous, posted first" "$ok (read-write:${all})"
  else
    goal "write beats read by >= 1 round trip per rendezvous" "no size went by RTR (see the RTR share)"
  fi
fi
echo
echo "CSV, samples and plots: $out/net_*.{csv,samples,png}; program output: $out/net_raw/"
bench_phase_summary
echo "took $(($(date +%s) - start)) s"
# A benchmark: no time is judged, but a run that failed (wrong data, a hang cut by the timeout,
# a crash) makes the whole script fail, after everything else was reported.
if ((failures > 0)); then
  echo "net_compare: $failures program run(s) failed (their cells read NA; see $out/net_raw/)" >&2
  exit 1
fi
