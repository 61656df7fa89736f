#!/usr/bin/env bash
# Latency side by side: Debian's fi_pingpong over exanet, libfabric's shm and tcp providers, in one
# run, per message size, with the ratios. A benchmark, not a test: nothing here asserts on time.
#   fabtests/bench/pingpong_compare.sh [build-dir] [out-dir]
# Environment: ITERS (default 2000), MODE (msg|tagged, default msg), SIZES (space separated),
# REPEAT (default 3: each cell is the median of that many runs; two processes spinning on two
# cores make single runs noisy).
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$root/build}
out=${2:-$build/bench}
iters=${ITERS:-2000}
repeat=${REPEAT:-3}
mode=${MODE:-msg}
sizes=${SIZES:-"8 64 256 1024 4096 16384 65536 262144 1048576 4194304"}
mkdir -p "$out"
csv=$out/pingpong_${mode}.csv

# One latency (usec/xfer) for provider $1 at size $2, or NA.
measure() {
  local prov=$1 size=$2 port=$((20000 + RANDOM % 30000)) env=()
  [[ $prov == exanet ]] && env=(FI_PROVIDER_PATH="$build/lib")
  env "${env[@]}" timeout 120 fi_pingpong -p "$prov" -e rdm -m "$mode" -S "$size" -I "$iters" \
    -B "$port" >/dev/null 2>&1 &
  local server=$!
  for _ in $(seq 50); do ss -ltn 2>/dev/null | grep -q ":$port " && break; sleep 0.1; done
  local line
  line=$(env "${env[@]}" timeout 120 fi_pingpong -p "$prov" -e rdm -m "$mode" -S "$size" \
    -I "$iters" -P "$port" 127.0.0.1 2>/dev/null | awk -v s="$size" 'NR > 1 { print $7 }')
  wait "$server" 2>/dev/null
  echo "${line:-NA}"
}

# Median of REPEAT measurements (NA if any run failed).
median() {
  local prov=$1 size=$2 vals=()
  for _ in $(seq "$repeat"); do vals+=("$(measure "$prov" "$size")"); done
  printf '%s\n' "${vals[@]}" | sort -g | awk '/NA/ { na = 1 } { v[NR] = $1 }
    END { if (na || NR == 0) print "NA"; else print v[int((NR + 1) / 2)] }'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "NA" || b == "NA" || b == 0) print "NA"; else printf "%.2f", a / b }'; }

echo "size,exanet_us,shm_us,tcp_us,exanet_over_shm,exanet_over_tcp" >"$csv"
printf '%-10s %12s %12s %12s %14s %14s\n' size exanet_us shm_us tcp_us exanet/shm exanet/tcp
for s in $sizes; do
  e=$(median exanet "$s")
  m=$(median shm "$s")
  t=$(median tcp "$s")
  rs=$(ratio "$e" "$m")
  rt=$(ratio "$e" "$t")
  echo "$s,$e,$m,$t,$rs,$rt" >>"$csv"
  printf '%-10s %12s %12s %12s %14s %14s\n' "$s" "$e" "$m" "$t" "$rs" "$rt"
done
echo "CSV: $csv"
if command -v gnuplot >/dev/null; then
  gnuplot <<GP
set terminal pngcairo size 900,600
set output "$out/pingpong_${mode}.png"
set datafile separator ","
set logscale xy
set xlabel "message size (bytes)"
set ylabel "latency (usec, one way)"
set key top left
plot "$csv" every ::1 using 1:2 with linespoints title "exanet", \
     "" every ::1 using 1:3 with linespoints title "shm", \
     "" every ::1 using 1:4 with linespoints title "tcp"
GP
  echo "plot: $out/pingpong_${mode}.png"
fi
