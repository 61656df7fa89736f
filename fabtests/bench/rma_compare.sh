#!/usr/bin/env bash
# RMA latency and bandwidth side by side: our rma_bench program over exanet, libfabric's shm and
# tcp providers, in one run, per size, with exanet/shm ratios. A benchmark, not a test: nothing
# here asserts on time.
#   fabtests/bench/rma_compare.sh [build-dir] [out-dir]
# Environment: SIZES (space separated, default 8 B .. 4 MiB by powers of 4), REPEAT (default 3:
# each cell is the median of that many runs), ITERS and WINDOW (passed to rma_bench),
# PROVIDERS (default "exanet shm tcp").
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
source "$here/common.sh"
bench_init rma_bench rma "$@"
sizes=${SIZES:-"8 32 128 512 2048 8192 32768 131072 524288 2097152 4194304"}
providers=${PROVIDERS:-"exanet shm tcp"}

# rows "provider size lat wbw rbw", one per size and run. Providers take turns within each
# repetition, so a slow drift of the machine (frequency, a neighbour) hits them alike.
for _ in $(seq "$repeat"); do
  for prov in $providers; do
    env=(FI_PROVIDER="$prov")
    [[ $prov == exanet ]] && env+=(FI_PROVIDER_PATH="$build/lib")
    # shellcheck disable=SC2086
    if ! env "${env[@]}" timeout 600 "$bench" $sizes >"$raw.run" 2>"$raw.err"; then
      echo "rma_bench over $prov failed: $(tail -1 "$raw.err")" >&2
      continue
    fi
    awk -v p="$prov" 'NR > 1 { print p, $1, $2, $3, $4 }' "$raw.run" >>"$raw"
  done
done
rm -f "$raw.run" "$raw.err"

# median per (provider, size, metric); NA where a provider produced nothing
awk -v sizes="$sizes" -v provs="$providers" -f "$here/stats.awk" -f /dev/stdin "$raw" >"$csv" <<'AWK'
  { for (m = 3; m <= 5; m++) v[$1, $2, m] = v[$1, $2, m] " " $m }
  END {
    np = split(provs, P, " "); ns = split(sizes, S, " ")
    hdr = "size"
    for (m = 3; m <= 5; m++) for (i = 1; i <= np; i++)
      hdr = hdr "," P[i] "_" (m == 3 ? "write_lat_us" : m == 4 ? "write_MBps" : "read_MBps")
    print hdr ",write_lat_exanet_over_shm,write_bw_exanet_over_shm,read_bw_exanet_over_shm"
    for (s = 1; s <= ns; s++) {
      line = S[s]
      for (m = 3; m <= 5; m++) for (i = 1; i <= np; i++) { med[P[i], m] = median(v[P[i], S[s], m]); line = line "," med[P[i], m] }
      print line "," ratio(med["exanet", 3], med["shm", 3]) "," ratio(med["exanet", 4], med["shm", 4]) "," ratio(med["exanet", 5], med["shm", 5])
    }
  }
AWK

bench_table
if command -v gnuplot >/dev/null; then
  gnuplot <<GP
set terminal pngcairo size 1200,500 noenhanced
set output "$out/rma.png"
set datafile separator ","
set multiplot layout 1,2
set logscale x
set xlabel "size (bytes)"
set key top left
set ylabel "write bandwidth (MB/s)"
plot for [i=0:2] "$csv" every ::1 using 1:(column(5 + i)) with linespoints title columnhead(5 + i)
set logscale y
set ylabel "write latency (usec, one way)"
plot for [i=0:2] "$csv" every ::1 using 1:(column(2 + i)) with linespoints title columnhead(2 + i)
unset multiplot
GP
  echo "plot: $out/rma.png"
fi
