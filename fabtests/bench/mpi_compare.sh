#!/usr/bin/env bash
# MPI latency and bandwidth, four ways side by side in one run, with NetPIPE (NPopenmpi) and
# Debian's Open MPI, 2 ranks on this host:
#   exanet  pml cm + mtl ofi over exanet
#   ofi_shm pml cm + mtl ofi over libfabric's shm (Open MPI 4.1.4 refuses shm 1.17: it lacks
#           FI_LOCAL_COMM/FI_REMOTE_COMM; the column then reads NA and the reason is printed)
#   vader   pml ob1 + btl vader (Open MPI's own shared memory)
#   ucx     pml ucx (with pml_ucx_tls/devices "any", which Debian's defaults need)
# A benchmark, not a test: nothing asserts on time. Each cell is the median of REPEAT sweeps.
#   fabtests/bench/mpi_compare.sh [build-dir] [out-dir]
# Environment: REPEAT (default 3), UPPER (largest size, default 4194304).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
out=${2:-$build/bench}
repeat=${REPEAT:-3}
upper=${UPPER:-4194304}
mkdir -p "$out"
command -v NPopenmpi >/dev/null || { echo "NPopenmpi missing: apt-get install netpipe-openmpi" >&2; exit 1; }
base=(--allow-run-as-root --oversubscribe -np 2)
declare -A path
path[exanet]="--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include exanet --mca btl ^ofi -x FI_PROVIDER=exanet -x FI_PROVIDER_PATH=$build/lib"
path[ofi_shm]="--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include shm --mca btl ^ofi -x FI_PROVIDER=shm"
path[vader]="--mca pml ob1 --mca btl vader,self --mca mtl ^ofi"
path[ucx]="--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any --mca btl ^ofi"
order=(exanet ofi_shm vader ucx)
raw=$(mktemp)
trap 'rm -f "$raw" "$raw".*' EXIT

# rows "path size usec mbps"; paths take turns within each repetition
for _ in $(seq "$repeat"); do
  for p in "${order[@]}"; do
    # shellcheck disable=SC2086
    if timeout 600 mpirun "${base[@]}" ${path[$p]} NPopenmpi -u "$upper" -o "$raw.np" \
        >"$raw.log" 2>&1 && [[ -s $raw.np ]]; then
      awk -v p="$p" '{ printf "%s %d %.3f %.1f\n", p, $1, $3 * 1e6, $2 }' "$raw.np" >>"$raw"
    else
      echo "$p: no run ($(grep -m1 -E 'cannot be selected|No components|error' "$raw.log" || tail -1 "$raw.log"))" >&2
    fi
    rm -f "$raw.np"
  done
done

csv=$out/mpi.csv
# NetPIPE's sizes are powers of two and +-3 perturbations; report the powers of two.
awk -v order="${order[*]}" -f "$here/stats.awk" -f /dev/stdin "$raw" >"$csv" <<'AWK'
  function pow2(x) { while (x > 1 && x % 2 == 0) x /= 2; return x == 1 }
  pow2($2) { lat[$1, $2] = lat[$1, $2] " " $3; bw[$1, $2] = bw[$1, $2] " " $4; sizes[$2] = 1 }
  END {
    np = split(order, P, " ")
    hdr = "size"
    for (i = 1; i <= np; i++) hdr = hdr "," P[i] "_usec"
    for (i = 1; i <= np; i++) hdr = hdr "," P[i] "_Mbps"
    print hdr ",exanet_over_vader_usec,exanet_over_ucx_usec"
    n = 0; for (s in sizes) S[++n] = s + 0
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (S[j] < S[i]) { t = S[i]; S[i] = S[j]; S[j] = t }
    for (k = 1; k <= n; k++) {
      line = S[k]
      for (i = 1; i <= np; i++) { L[P[i]] = median(lat[P[i], S[k]]); line = line "," L[P[i]] }
      for (i = 1; i <= np; i++) line = line "," median(bw[P[i], S[k]])
      print line "," ratio(L["exanet"], L["vader"]) "," ratio(L["exanet"], L["ucx"])
    }
  }
AWK
column -s, -t <"$csv"
echo "CSV: $csv"
if command -v gnuplot >/dev/null; then
  gnuplot <<GP
set terminal pngcairo size 1200,500 noenhanced
set output "$out/mpi.png"
set datafile separator ","
set multiplot layout 1,2
set logscale xy
set xlabel "message size (bytes)"
set key top left
set ylabel "latency (usec, one way)"
plot for [i=2:5] "$csv" every ::1 using 1:i with linespoints title columnhead(i)
set ylabel "bandwidth (Mbps)"
plot for [i=6:9] "$csv" every ::1 using 1:i with linespoints title columnhead(i)
unset multiplot
GP
  echo "plot: $out/mpi.png"
else
  echo "(install gnuplot for $out/mpi.png)"
fi
