#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The ExaNeST write-based MPI thesis's experiments as one command (issue 16, research seed 000
# §9.3, §9.4, §9.6), on exanet's emulated device with its link model on (fi_exanet(7), LINK
# MODEL), every protocol family seeing the same network:
#   a. osu_latency and osu_bw order (thesis_bench lat, bw) for the write (the thesis's v3), read
#      (read-based baseline) and optimistic families, and write with any-source receives, at
#      1 hop (two FPGAs of one QFDB), 3 and 5 hops, and the latency with the model off (the
#      emulation's own cost, where the families' CPU work differs);
#   b. the forced-fast-receive program (thesis_bench ffr): receiver-initiated (RTR waiting at the
#      sender) against sender-initiated (read; write with any-source receives);
#   c. bcast, reduce, allreduce and scatter (thesis_coll) on NP ranks under Open MPI (pml cm,
#      mtl ofi), the thesis's algorithms forced in Open MPI's tuned component, time-shared on this
#      machine's cores: only the ratios between families mean anything;
#   d. the fast-receive share (exanet's counters: sends an RTR found waiting, over rendezvous
#      sends) of each program, and of LAMMPS (its melt example) if lmp is installed; NetPIPE if
#      NPopenmpi is (NETPIPE_MAX: its largest size, default 64 KiB: it adapts its repetitions to a
#      time per size, so under the model each size takes seconds).
# The thesis's message classes: FI_EXANET_MEDIUM_MAX=EAGER_MAX=36 (its eager limit is 40 B; every
# larger message is a rendezvous, where the families differ).
# Output in OUT (default fabtests/bench/results/<UTC date>/thesis): claims.md and claims.csv (the
# table "claim | thesis | exanet (same direction?) | ratio", by table.py), p2p.samples,
# coll.samples, share.samples (and the logs of runs that failed). A benchmark, not a test: nothing asserts on time
# (quick_test.sh checks only that every row of the table is filled).
#   fabtests/bench/thesis/run.sh [build-dir] [out-dir]
# Environment:
#   QUICK=1       fewer sizes and iterations, NP 8, no LAMMPS (about 90 s; the ctest)
#   HOP_NS        per-hop latency of the point-to-point runs (default 10000: 10 us, where the
#                 model's delay dwarfs the emulation's own cost; link_model_check.sh)
#   INTRA_MBPS, INTER_MBPS  link bandwidths of the point-to-point runs (default 1600 and 1000
#                 MB/s, a tenth of the thesis's: see below)
#   COLL_HOP_NS   per-hop latency of the collectives (default 1000000, 1 ms: 16 ranks on 2 cores,
#                 which other people's builds share, wait milliseconds for a core; 0.2 ms still
#                 let that noise invert the order of the families)
#   PCTL          the percentile of the point-to-point iterations each value is (default 10;
#                 thesis_bench.c says why)
#   NP            ranks of the collectives (default 16; QUICK 8)
#   LINK_YIELD    FI_EXANET_LINK_YIELD of the MPI runs (default 1; 0 to see the spinning)
#   LAT_SIZES (osu_latency and osu_bw), FFR_SIZES, COLL_SIZES: sizes in bytes
#   ITERS, WINDOWS, COLL_ITERS, REPEAT (point-to-point runs per distance, default 1)
#   LOCK          the benchmark lock (lib.sh)
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bench_dir=$(cd "$here/.." && pwd)
# shellcheck source=../lib.sh
source "$bench_dir/lib.sh"
quick=${QUICK:-0}
export REPEAT=${REPEAT:-1}  # (bench_init prints it; one run per distance is the default here)
root_guess=$(cd "$bench_dir/../.." && pwd)
default_out=$root_guess/fabtests/bench/results/$(date -u +%F)/thesis
bench_init thesis_bench thesis "${1:-$root_guess/build}" "${2:-$default_out}"
repeat=${REPEAT:-1}
t_start=$(date +%s)

hop_ns=${HOP_NS:-10000}
# A tenth of the thesis's 16 and 10 GB/s links: this machine copies about 5 GB/s with the model
# off, and the modelled links, not the copy, must bound the bandwidth for distance to show.
intra_mbps=${INTRA_MBPS:-1600}
inter_mbps=${INTER_MBPS:-1000}
coll_hop_ns=${COLL_HOP_NS:-1000000}
# The MPI runs' waits give their core away (FI_EXANET_LINK_YIELD): NP ranks share this
# machine's cores, and Open MPI's blocking sends poll without yielding, so without it the
# scheduler's tick, not the model, sets reduce's, allreduce's and scatter's times (BENCHMARKS.md,
# "Collectives against a discrete-event model").
link_yield=${LINK_YIELD:-1}
if [[ $quick == 1 ]]; then
  p2p_sizes=${LAT_SIZES:-"32 64 512 8192 1048576"}
  ffr_sizes=${FFR_SIZES:-"64 1024 8192"}
  iters=${ITERS:-40}
  windows=${WINDOWS:-4}
  np=${NP:-8}
  coll_sizes=${COLL_SIZES:-"64 1024"}
  coll_iters=${COLL_ITERS:-6}
else
  p2p_sizes=${LAT_SIZES:-"32 64 128 256 512 1024 2048 4096 8192 65536 1048576"}
  ffr_sizes=${FFR_SIZES:-"64 128 256 512 1024 2048 4096 8192"}
  iters=${ITERS:-150}
  windows=${WINDOWS:-8}
  np=${NP:-16}
  coll_sizes=${COLL_SIZES:-"64 256 1024 8192"}
  coll_iters=${COLL_ITERS:-15}
fi
# 1 hop: FPGAs 0 and 1 of one QFDB; 3: FPGA 1 of neighbouring QFDBs; 5: FPGA 1 of QFDBs (0,0,0)
# and (2,1,0) (fi_exanet(7), LINK MODEL).
# 0: the 1-hop places with the model off (the emulation's own cost: what the families' CPU work
# differs by, which modelled distances hide).
declare -A places=([0]="0,0,0,0 0,0,0,1" [1]="0,0,0,0 0,0,0,1" [3]="0,0,0,1 1,0,0,1" [5]="0,0,0,1 2,1,0,1")
model=(FI_EXANET_LINK_MODEL=1 FI_EXANET_MEDIUM_MAX=36 FI_EXANET_EAGER_MAX=36)
{
  echo "machine: $bench_machine"
  echo "date: $bench_date"
  echo "links (point to point): intra-QFDB $intra_mbps MB/s, torus $inter_mbps MB/s; collectives: the defaults (16000, 10000)"
  echo "quick: $quick  hop_ns: $hop_ns  coll_hop_ns: $coll_hop_ns  np: $np  link_yield: $link_yield  repeat: $repeat"
  echo "iters: $iters  windows: $windows  coll_iters: $coll_iters"
  echo "git: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
} >"$out/run.info"

# ---- a, b: point to point -------------------------------------------------------------------
# p2p.samples: "hops mode size variant value deliver_us ri_pct" (deliver_us "-" but for ffr).
: >"$out/p2p.samples"
p2p() { # p2p HOPS MODE VARIANTS SIZES [LABEL [ENV...]]: LABEL replaces MODE in the samples
  local hops=$1 mode=$2 variants=$3 sizes=$4 label=${5:-$2} log
  local -a more=("${@:6}")
  log=$out/p2p.$label.$hops.log
  bench_env exanet
  # shellcheck disable=SC2086  # sizes is a list
  local on=1
  [[ $hops == 0 ]] && on=0
  if bench_locked env "${benv[@]}" "${model[@]}" FI_EXANET_LINK_MODEL=$on FI_EXANET_LINK_HOP_NS="$hop_ns" \
      FI_EXANET_LINK_INTRA_MBPS="$intra_mbps" FI_EXANET_LINK_INTER_MBPS="$inter_mbps" \
      LINK_POSITIONS="${places[$hops]}" VARIANTS="$variants" ITERS="$iters" WINDOWS="$windows" PCTL="${PCTL:-10}" \
      "${more[@]}" timeout 600 "$bench" "$mode" $sizes >"$log" 2>"$log.err"; then
    awk -v h="$hops" -v m="$label" '$1 == "ffr" { print h, m, $2, $3, $4, $5, $6; next }
                      { print h, m, $2, $3, $4, "-", $5 }' "$log" >>"$out/p2p.samples"
    rm -f "$log" "$log.err"
  else
    echo "thesis_bench $mode at $hops hops failed: $(tail -1 "$log.err")" >&2
  fi
}
for ((r = 1; r <= repeat; r++)); do
  p2p 0 lat "write read optimistic write:any" "$ffr_sizes"
  for hops in 1 3 5; do
    p2p "$hops" lat "write read optimistic write:any" "$p2p_sizes"
    p2p "$hops" bw "write read optimistic" "$p2p_sizes"
    p2p "$hops" ffr "write read optimistic write:any" "$ffr_sizes"
    # The same ping-pong with each receive posted one modelled trip after the send completed
    # (the share of fast receives when a send completes at delivery).
    p2p "$hops" lat write "$ffr_sizes" latlate \
      LAT_POST_DELAY_US=$(((hops * hop_ns + 999) / 1000 + 1))
    echo "$(date -u +%T) point to point, $hops hops, run $r of $repeat: $(grep -c "^$hops " "$out/p2p.samples") samples"
  done
done

# ---- c, d: collectives under Open MPI, and the fast-receive share ----------------------------
# coll.samples: "coll size family avg_us min_us max_us"; share.samples: "program family
# rndv_sends ri_sends" (the counters every endpoint printed when it closed, summed).
: >"$out/coll.samples"
: >"$out/share.samples"
coll_bin=$build/fabtests/thesis_coll
# Sums the exanet-stats lines of one run: rendezvous sends (sender-initiated and by RTR) and
# those an RTR found waiting.
share_of() {
  local program=$1 family=$2 stats=$3
  awk -v p="$program" -v f="$family" '
    /exanet-stats/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); c[kv[1]] += kv[2] } }
    END { print p, f, c["rndv_sent"] + c["ri_sent"], c["ri_sent"] + 0 }' "$stats" >>"$out/share.samples"
}
# The thesis's algorithms (seed 000 §7.7): bcast binomial, reduce binomial, allreduce recursive
# doubling, scatter binomial (Open MPI 4.1 coll_tuned numbering).
declare -A algo=([bcast]="coll_tuned_bcast_algorithm 6" [reduce]="coll_tuned_reduce_algorithm 5"
                 [allreduce]="coll_tuned_allreduce_algorithm 3" [scatter]="coll_tuned_scatter_algorithm 2")
mpi_run() { # mpi_run FAMILY HOP_NS STATS_FILE PROGRAM ARGS...
  local family=$1 hop=$2 stats=$3
  shift 3
  rm -f "$stats"
  timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$np" \
    --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include exanet --mca btl self \
    --mca mpi_yield_when_idle 1 --mca coll_tuned_use_dynamic_rules 1 "${extra_mca[@]}" \
    -x FI_PROVIDER=exanet -x FI_PROVIDER_PATH="$build/lib" -x FI_EXANET_PROTOCOL="$family" \
    -x FI_EXANET_LINK_MODEL=1 -x FI_EXANET_LINK_YIELD="$link_yield" \
    -x FI_EXANET_LINK_HOP_NS="$hop" -x FI_EXANET_MEDIUM_MAX=36 \
    -x FI_EXANET_EAGER_MAX=36 -x FI_EXANET_STATS="$stats" -x ITERS="$coll_iters" "$@"
}
if ! command -v mpirun >/dev/null || [[ ! -x $coll_bin ]]; then
  echo "no mpirun or no $coll_bin: the collectives are not run" >&2
else
  for coll in bcast reduce allreduce scatter; do
    read -r -a extra_mca <<<"--mca ${algo[$coll]}"
    for ((r = 1; r <= repeat; r++)); do
      for family in write read optimistic; do
        log=$out/coll.$coll.$family.log
        # shellcheck disable=SC2086  # coll_sizes is a list
        bench_lock
        if mpi_run "$family" "$coll_hop_ns" "$out/stats.$coll.$family" \
            "$coll_bin" "$coll" $coll_sizes >"$log" 2>"$log.err"; then
          awk -v f="$family" 'NF == 5 { print $1, $2, f, $3, $4, $5 }' "$log" >>"$out/coll.samples"
          share_of "osu_$coll" "$family" "$out/stats.$coll.$family"
          rm -f "$log" "$log.err"
        else
          echo "$coll ($family) failed: $(grep -v '^ *$' "$log.err" | tail -2 | tr '\n' ' ')" >&2
        fi
        bench_unlock
      done
    done
    echo "$(date -u +%T) $coll on $np ranks done"
  done
fi
# The point-to-point programs' share comes from thesis_bench's own count (both processes).
# The median over distances and sizes: a preempted process lets an RTR win a size's race.
awk '$1 > 0 && $4 == "write" && $7 != "NA" { print $2, $7 }' "$out/p2p.samples" | sort -k1,1 -k2,2g |
  awk '{ v[$1, ++n[$1]] = $2 }
       END { for (m in n) { k = n[m]; med = k % 2 ? v[m, (k + 1) / 2] : (v[m, k / 2] + v[m, k / 2 + 1]) / 2
                            printf "p2p_%s write %d %.4f\n", m, k, med } }' >"$out/p2p_share.samples"

# LAMMPS (the melt example, shortened) and NetPIPE, if installed (ci/install-deps.sh installs both).
lammps_input=""
for d in /usr/share/lammps/examples/melt /usr/share/doc/lammps/examples/melt; do
  [[ -f $d/in.melt ]] && lammps_input=$d/in.melt && break
done
apps_note=""
if [[ $quick == 1 ]]; then
  apps_note="lammps: not run (QUICK=1)"
elif ! command -v lmp >/dev/null || [[ -z $lammps_input ]]; then
  apps_note="lammps: not run (lmp or its melt example is not installed)"
else
  sed 's/^run[[:space:]].*/run 100/' "$lammps_input" >"$out/in.melt"
  extra_mca=()
  lnp=$((np < 4 ? np : 4))
  if (cd "$out" && np=$lnp mpi_run write "$hop_ns" "$out/stats.lammps.write" lmp -in in.melt -log none \
      >"$out/lammps.log" 2>"$out/lammps.log.err"); then
    share_of lammps write "$out/stats.lammps.write"
    rm -f "$out/lammps.log" "$out/lammps.log.err"
  else
    apps_note="lammps: failed ($(tail -1 "$out/lammps.log.err"))"
  fi
  rm -f "$out/in.melt"
fi
# NetPIPE (Debian's netpipe-openmpi: NPopenmpi), its ping-pong from 1 B to NETPIPE_MAX over two
# ranks at the point-to-point distance, write family: the share of its rendezvous sends that
# found their RTR waiting.
if [[ $quick == 1 ]]; then
  apps_note="${apps_note:+$apps_note; }netpipe: not run (QUICK=1)"
elif ! command -v NPopenmpi >/dev/null; then
  apps_note="${apps_note:+$apps_note; }netpipe: not run (NPopenmpi is not installed: netpipe-openmpi)"
else
  extra_mca=()
  if (cd "$out" && np=2 mpi_run write "$hop_ns" "$out/stats.netpipe.write" NPopenmpi \
      -u "${NETPIPE_MAX:-65536}" -o /dev/null >"$out/netpipe.log" 2>"$out/netpipe.log.err"); then
    share_of netpipe write "$out/stats.netpipe.write"
    rm -f "$out/netpipe.log" "$out/netpipe.log.err"
  else
    apps_note="${apps_note:+$apps_note; }netpipe: failed ($(tail -1 "$out/netpipe.log.err"))"
  fi
fi
echo "$apps_note" >"$out/apps.note"

python3 "$here/table.py" "$out" && echo "table: $out/claims.md  csv: $out/claims.csv"
rm -f "$out"/stats.*
echo "run time: $(($(date +%s) - t_start)) s"
