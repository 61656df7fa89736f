#!/usr/bin/env bash
# What waiting receives cost everyone else, side by side in one run: our tagged_bench ping-pong
# (directed receives posted first) while each process also keeps PENDING other 64 KiB receives
# posted from the same peer (an application with many receives up at once), over exanet and
# libfabric's shm and tcp. Reports the latency per pending count and its growth over none.
# A benchmark, not a test: nothing asserts on time.
#   fabtests/bench/pending_compare.sh [build-dir] [out-dir]
# Environment: PENDING (default "0 64 512"), SIZES (default "8 65536"), REPEAT (default 3),
# ITERS (default 2000, passed on).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
source "$here/common.sh"
bench_init tagged_bench pending "$@"
pendings=${PENDING:-"0 64 512"}
sizes=${SIZES:-"8 65536"}
providers="exanet shm tcp"

for _ in $(seq "$repeat"); do
  for pending in $pendings; do
    for prov in $providers; do
      env=(FI_PROVIDER="$prov" PENDING="$pending" ITERS="${ITERS:-2000}")
      [[ $prov == exanet ]] && env+=(FI_PROVIDER_PATH="$build/lib")
      # shellcheck disable=SC2086
      if ! env "${env[@]}" timeout 600 "$bench" $sizes >"$raw.run" 2>"$raw.err"; then
        echo "tagged_bench over $prov with $pending pending failed: $(tail -1 "$raw.err")" >&2
        continue
      fi
      awk -v p="$prov" -v n="$pending" 'NR > 1 { print p, n, $1, $2 }' "$raw.run" >>"$raw"
    done
  done
done

awk -v sizes="$sizes" -v pendings="$pendings" -v provs="$providers" \
    -f "$here/stats.awk" -f /dev/stdin "$raw" >"$csv" <<'AWK'
  { lat[$1, $2, $3] = lat[$1, $2, $3] " " $4 }
  END {
    np = split(provs, P, " "); nn = split(pendings, N, " "); ns = split(sizes, S, " ")
    hdr = "size,pending"
    for (i = 1; i <= np; i++) hdr = hdr "," P[i] "_lat_us"
    for (i = 1; i <= np; i++) hdr = hdr "," P[i] "_over_none"
    print hdr
    for (s = 1; s <= ns; s++)
      for (k = 1; k <= nn; k++) {
        line = S[s] "," N[k]
        for (i = 1; i <= np; i++) { m[P[i]] = median(lat[P[i], N[k], S[s]]); line = line "," m[P[i]] }
        for (i = 1; i <= np; i++) line = line "," ratio(m[P[i]], median(lat[P[i], N[1], S[s]]))
        print line
      }
  }
AWK

bench_table
