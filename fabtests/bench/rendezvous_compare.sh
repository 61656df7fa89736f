#!/usr/bin/env bash
# Large-message latency with receives posted first, side by side in one run: exanet's default
# write-based rendezvous (receiver-initiated when the receive is posted first), its optimistic
# variant (no RTS, no tickets: FI_EXANET_PROTOCOL=optimistic; this program meets its
# assumptions), exanet's read variant (the thesis baseline, FI_EXANET_PROTOCOL=read), and
# libfabric's shm and tcp providers,
# all through our tagged_bench program (directed, pre-posted receives). Reports the ratios and
# the share of rendezvous sends an RTR served. The exanet variants are also measured paired
# (tagged_bench VARIANTS: one endpoint pair per variant, taking turns iteration by iteration), so a
# machine that changes speed between runs cannot decide a difference of a few percent; the
# paired_* columns are those ratios (absolute paired latencies are higher from 1 MiB: three pairs
# of buffers do not stay in cache). A benchmark, not a test: nothing asserts on time.
#   fabtests/bench/rendezvous_compare.sh [build-dir] [out-dir]
# Environment: SIZES (default 64 KiB .. 4 MiB by powers of 2), REPEAT (default 3: each cell is the
# median of that many runs, the paths taking turns in each round), ITERS (passed on).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
source "$here/common.sh"
bench_init tagged_bench rendezvous "$@"
sizes=${SIZES:-"65536 131072 262144 524288 1048576 2097152 4194304"}
paths="exanet exanet_optimistic exanet_read shm tcp"

for _ in $(seq "$repeat"); do
  for path in $paths; do
    case $path in
      exanet) env=(FI_PROVIDER=exanet FI_PROVIDER_PATH="$build/lib" FI_EXANET_PROTOCOL=write) ;;
      exanet_optimistic) env=(FI_PROVIDER=exanet FI_PROVIDER_PATH="$build/lib" FI_EXANET_PROTOCOL=optimistic) ;;
      exanet_read) env=(FI_PROVIDER=exanet FI_PROVIDER_PATH="$build/lib" FI_EXANET_PROTOCOL=read) ;;
      *) env=(FI_PROVIDER="$path") ;;
    esac
    # shellcheck disable=SC2086
    if ! env "${env[@]}" timeout 900 "$bench" $sizes >"$raw.run" 2>"$raw.err"; then
      echo "tagged_bench over $path failed: $(tail -1 "$raw.err")" >&2
      continue
    fi
    awk -v p="$path" 'NR > 1 { print p, $1, $2, $3 }' "$raw.run" >>"$raw"
  done
  # shellcheck disable=SC2086
  if env FI_PROVIDER=exanet FI_PROVIDER_PATH="$build/lib" VARIANTS="write optimistic read" \
      timeout 900 "$bench" $sizes >"$raw.run" 2>"$raw.err"; then
    awk 'NR > 1 { print "paired_" $4, $1, $2, $3 }' "$raw.run" >>"$raw"
  else
    echo "paired tagged_bench failed: $(tail -1 "$raw.err")" >&2
  fi
done

awk -v sizes="$sizes" -v paths="$paths" -f "$here/stats.awk" -f /dev/stdin "$raw" >"$csv" <<'AWK'
  { lat[$1, $2] = lat[$1, $2] " " $3; if ($1 == "exanet") ri[$2] = ri[$2] " " $4 }
  END {
    np = split(paths, P, " "); ns = split(sizes, S, " ")
    hdr = "size"
    for (i = 1; i <= np; i++) hdr = hdr "," P[i] "_lat_us"
    print hdr ",exanet_over_read,optimistic_over_read,paired_exanet_over_read,paired_optimistic_over_read,exanet_over_shm,exanet_ri_pct"
    for (s = 1; s <= ns; s++) {
      line = S[s]
      for (i = 1; i <= np; i++) { m[P[i]] = median(lat[P[i], S[s]]); line = line "," m[P[i]] }
      pw = median(lat["paired_write", S[s]]); po = median(lat["paired_optimistic", S[s]])
      pr = median(lat["paired_read", S[s]])
      print line "," ratio(m["exanet"], m["exanet_read"]) "," ratio(m["exanet_optimistic"], m["exanet_read"]) \
                 "," ratio(pw, pr) "," ratio(po, pr) "," ratio(m["exanet"], m["shm"]) "," median(ri[S[s]])
    }
  }
AWK

bench_table
if command -v gnuplot >/dev/null; then
  gnuplot <<GP
set terminal pngcairo size 800,500 noenhanced
set output "$out/rendezvous.png"
set datafile separator ","
set logscale xy
set xlabel "size (bytes)"
set ylabel "latency (usec, one way, receives posted first)"
set key top left
plot for [i=0:4] "$csv" every ::1 using 1:(column(2 + i)) with linespoints title columnhead(2 + i)
GP
  echo "plot: $out/rendezvous.png"
fi
