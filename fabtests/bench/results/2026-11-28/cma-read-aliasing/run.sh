#!/usr/bin/env bash
# The A/B of this directory: RMA read latency and bandwidth with cross-memory attach asked for
# (FI_EXANET_DMA_ENGINE=cma), exanet before (BEFORE=dir of its libexanet-fi.so) and after (AFTER=
# likewise), alternated in ROUNDS rounds, each run under the benchmark lock, pinned (BIND=1),
# with a core_probe line before each round (the machine's phase, BENCHMARKS.md). For reference,
# each round also runs the after build with the default engine ("default": reads by request).
#   BEFORE=... AFTER=... OUT=dir bash run.sh BUILD
# Placements for a read (xfer_bench -P S:R): S the remote (source) offset past a page, R the
# local (destination) one; 0:24, 0:8 and 16:40 put the destination 1-63 bytes ahead.
set -euo pipefail
build=${1:?build dir}
out=${OUT:?out dir}
rounds=${ROUNDS:-4}
placements=${PLACEMENTS:-0:0,8:8,0:24,0:8,16:40}
sizes=${SIZES:-16K 64K 256K 1M 4M}
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  echo "$(date +%s) round $r $(flock /tmp/exanet-bench.lock "$build/fabtests/core_probe" 2>/dev/null)" >>"$out/core_probe.txt"
  for mode in rma_read_lat rma_read_bw; do
    # Alternate which build goes first, so a drift within a round hits both alike.
    if ((r % 2)); then order="before after default"; else order="default after before"; fi
    for which in $order; do
      lib=$BEFORE engine=cma
      [[ $which == after ]] && lib=$AFTER
      [[ $which == default ]] && lib=$AFTER engine=auto
      # shellcheck disable=SC2086
      FI_PROVIDER=exanet FI_PROVIDER_PATH=$lib FI_EXANET_DMA_ENGINE=$engine BIND=1 \
        flock /tmp/exanet-bench.lock "$build/fabtests/xfer_bench" -m $mode -P "$placements" $sizes \
        >"$out/${mode}_${which}_r$r.txt" 2>&1
      echo "round $r $mode $which done"
    done
  done
done
