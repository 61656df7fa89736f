#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Does the emulated device's link model (FI_EXANET_LINK_*, fi_exanet(7) LINK MODEL) deliver what
# it predicts? A tagged ping-pong (tagged_bench, receives posted first) between two processes
# placed 1, 3 and 5 hops apart, against the same ping-pong with the model off:
#   predicted(size, hops) = measured with the model off + the model's one-way delay
#   delay = per packet: injection + 64 B / bandwidth; a medium message's bytes / bandwidth before
#           its packet; a rendezvous (receive posted first: one staged DMA write in pieces of
#           16 KiB, a quarter of the message above 64 KiB) each piece's packet and the bytes;
#           then hops x per-hop latency
#   residual = measured / predicted - 1
# The places: 1 hop, FPGAs 0 and 1 of one QFDB (intra-QFDB bandwidth); 3 hops, FPGA 1 of two
# neighbouring QFDBs; 5 hops, FPGA 1 of QFDBs (0,0,0) and (2,1,0); both over the torus (inter-QFDB
# bandwidth). The per-hop latency is large (HOP_NS, default 10 us) so the emulation's own cost is
# small beside it, and each cell is the fastest iteration (TAGGED_STAT=min) of each run, the
# median over REPEAT runs: a machine shared with other work only adds to a ping-pong, and the
# model's delay is the same in every iteration. A check, not a test: nothing asserts on time.
#   fabtests/bench/link_model_check.sh [build-dir] [out-dir]
# Environment: SIZES (default "8 1024 4096 65536"), HOP_NS (10000), INJECT_NS (0), INTRA_MBPS
# (16000), INTER_MBPS (10000), ITERS (default 1000), REPEAT (default 3), LOCK.
# Writes $out/link_model.csv: size, hops, off_us, measured_us, predicted_us, residual_pct.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
bench_init tagged_bench link_model "$@"
sizes=${SIZES:-"8 1024 4096 65536"}
hop_ns=${HOP_NS:-10000}
inject_ns=${INJECT_NS:-0}
intra=${INTRA_MBPS:-16000}
inter=${INTER_MBPS:-10000}
iters=${ITERS:-1000}
declare -A places=([0]="0,0,0,0 0,0,0,1" [1]="0,0,0,0 0,0,0,1" [3]="0,0,0,1 1,0,0,1"
                   [5]="0,0,0,1 2,1,0,1")

# The fastest iteration of one run per size, "hops size lat" lines appended to $raw.all;
# hops 0 is the model off.
run() {
  local hops=$1 model=1
  [[ $hops == 0 ]] && model=0
  bench_env exanet
  # shellcheck disable=SC2086  # sizes is a list
  if bench_locked env "${benv[@]}" FI_EXANET_LINK_MODEL=$model FI_EXANET_LINK_HOP_NS="$hop_ns" \
      FI_EXANET_LINK_INJECT_NS="$inject_ns" FI_EXANET_LINK_INTRA_MBPS="$intra" \
      FI_EXANET_LINK_INTER_MBPS="$inter" LINK_POSITIONS="${places[$hops]}" TAGGED_STAT=min \
      ITERS="$iters" timeout 600 "$bench" $sizes >"$raw.run" 2>"$raw.err"; then
    awk -v h="$hops" 'NR > 1 { print h, $1, $2 }' "$raw.run" >>"$raw.all"
  else
    echo "tagged_bench at $hops hops failed: $(tail -1 "$raw.err")" >&2
  fi
}

: >"$raw.all"
for ((r = 1; r <= repeat; r++)); do
  for hops in 0 1 3 5; do run "$hops"; done
  echo "run $r of $repeat done"
done

echo "size,hops,off_us,measured_us,predicted_us,residual_pct" >"$csv"
awk -v hop="$hop_ns" -v inj="$inject_ns" -v intra="$intra" -v inter="$inter" -v csv="$csv" \
    -f "$here/stats.awk" -f /dev/stdin "$raw.all" <<'AWK'
  function ser(bytes, mbps) { return int((bytes * 1000 + mbps - 1) / mbps) }
  # The model's one-way delay (ns) of a message of s bytes over h hops (exanet's defaults:
  # eager up to 36 B, medium up to 8 KiB, then the rendezvous as one staged write).
  function delay(s, h,   bw, d, piece, left, n) {
    bw = h == 1 ? intra : inter
    if (s <= 36) return inj + ser(64, bw) + h * hop
    if (s <= 8192) return ser(s, bw) + inj + ser(64, bw) + h * hop
    piece = int(s / 4 / 64 + 0.999999) * 64
    if (piece < 16384) piece = 16384
    if (piece > 65536) piece = 65536
    d = 0
    for (left = s; left > 0; left -= piece) d += ser(left < piece ? left : piece, bw) + inj + ser(64, bw)
    return d + h * hop
  }
  { v[$1, $2] = v[$1, $2] " " $3; if (!($2 in seen)) { seen[$2] = 1; order[++ns] = $2 } }
  END {
    printf "%-8s %5s %10s %12s %12s %9s\n", "size", "hops", "off_us", "measured_us", "predicted_us", "residual"
    for (i = 1; i <= ns; i++) {
      s = order[i]; off = median(v[0, s])
      for (h = 1; h <= 5; h += 2) {
        m = median(v[h, s])
        p = off == "NA" ? "NA" : off + delay(s, h) / 1000
        res = (m == "NA" || p == "NA") ? "NA" : sprintf("%+.1f%%", 100 * (m / p - 1))
        printf "%-8s %5d %10s %12s %12s %9s\n", human(s), h, num(off), num(m), p == "NA" ? "NA" : num(p), res
        sub(/%/, "", res)
        print s "," h "," off "," m "," p "," res >> csv
      }
    }
  }
AWK
echo "CSV: $csv (per-hop latency ${hop_ns} ns, injection ${inject_ns} ns, ${intra}/${inter} MB/s)"
