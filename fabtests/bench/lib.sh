# SPDX-License-Identifier: BSD-2-Clause
# shellcheck shell=bash disable=SC2034  # (the variables it sets are the callers')
# The one helper of the benchmark scripts in fabtests/bench: where things are, how a provider is
# selected, and the statistics, CSV, tables and plots. Source it after setting `here`:
#   here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
#   source "$here/lib.sh"
# Benchmarks, not tests: nothing here asserts on time.
#
# The interface (stable; other scripts depend on it):
#
# bench_init PROGRAM NAME [build-dir] [out-dir]
#   Sets root (the checkout), build (default $root/build), out (default $build/bench, created),
#   repeat (REPEAT, default 3), bench ($build/fabtests/PROGRAM, which must exist; PROGRAM "-"
#   skips that), csv ($out/NAME.csv, for scripts that write one CSV of their own) and raw (a
#   scratch file; it and raw.* are removed at exit). Prints one line saying the machine, the
#   date and the repetition count, and keeps the first two in bench_machine and bench_date (every
#   plot carries the three).
#
# bench_env SERIES
#   Fills the array `benv` with the environment that selects SERIES for a libfabric program:
#     exanet               FI_PROVIDER=exanet FI_PROVIDER_PATH=$build/lib
#     exanet_cma           the same with FI_EXANET_DMA_ENGINE=cma (exanet_staged: =staged;
#                          plain exanet: auto, each write the engine measured cheaper)
#     exanet_write|_read|_optimistic   the same with FI_EXANET_PROTOCOL=write|read|optimistic
#     exanet_train         the same with FI_EXANET_EAGER_MAX=276 (trains up to their limit)
#     exanet_net           every peer over the network backend on this host (FI_PROVIDER unset,
#                          FI_EXANET_NETWORK=every_peer); exanet_net_before: BEFORE_LIB's build
#     tcp                  FI_PROVIDER=tcp (libfabric 1.17 serves RDM as "tcp;ofi_rxm")
#     anything else        FI_PROVIDER=SERIES (shm, "tcp;ofi_rxm", sockets, ...)
#   Run with: env "${benv[@]}" timeout ... program
#
# bench_locked COMMAND...   runs COMMAND holding the benchmark lock, so that the timing runs of
#   different people on one machine do not overlap: LOCK (default /tmp/exanet-bench.lock; LOCK=
#   empty: no lock). bench_lock / bench_unlock hold it around several commands (a server and its
#   client). RT=1 (root only) also runs COMMAND under SCHED_FIFO (chrt -f 50), so that builds and
#   tests of other people on the machine cannot preempt the two timed processes; the kernel's
#   real-time throttling still leaves others 5% of each second. Use it for the libfabric programs
#   (xfer_bench, core_probe); Open MPI's UCX path hung under it here, so the MPI scripts ignore it.
#
# bench_probe LABEL
#   Measures the machine between the two benchmark cores (core_probe: the round trip of one cache
#   line, and a 1 MiB handoff), with no provider involved, appends "unix_time LABEL rtt_ns
#   handoff_us phase" to $out/core_probe.csv and sets probe_rtt and probe_phase (near or far:
#   the line round trip below or above FAR_NS, default 200). On a virtual machine the host may
#   move the two vCPUs to cores that share no cache, for seconds at a time; every transport that
#   copies between the cores then slows (see core_probe.c). Does nothing, phase "unknown", if
#   core_probe was not built.
# bench_wait_near LABEL
#   With PHASE=near (the default): probes until the phase is near, for at most PHASE_WAIT seconds
#   (default 60), so that the runs compared with each other run in the same phase; then runs
#   anyway (the record says far). PHASE=any: one probe, no waiting.
#
# bench_bytes SIZE...
#   Prints the sizes in bytes, one line, space separated: 512, 4K, 64M, 1G are understood.
#
# Tables. A table is a set of samples "series size value [label]" and becomes $out/TABLE.csv
# (one row per size), $out/TABLE.samples (every sample, for whoever doubts a median) and, with
# bench_plot, $out/TABLE.png.
#   bench_table_begin TABLE BETTER UNIT "SERIES ..." ["NUM/DEN ..."] [worst|noworst]
#     BETTER is low (latency: the worst is the largest) or high (bandwidth, rate: the smallest).
#     UNIT names the value (us, MBps, Mmsgps) in the column names. NUM/DEN pairs are the ratios
#     to report (e.g. "exanet/shm exanet/tcp"). With worst (the default) each series has three
#     columns: SERIES_UNIT (median), SERIES_UNIT_worst, SERIES_worst_at; noworst keeps the median
#     alone (when samples carry no label there is no placement to be worst). Writes the CSV
#     header, empties the samples and prints the table header.
#   bench_table_add TABLE SERIES SIZE VALUE [LABEL]
#     One sample. LABEL says what varied within the size (a buffer placement "16:40"); a missing
#     LABEL is "-". VALUE NA records a failed measurement (the cell then reads NA).
#   bench_table_add_file TABLE FILE
#     Many samples at once: FILE holds lines "series size value [label]".
#   bench_table_row TABLE SIZE
#     Computes the row of SIZE from the table's samples, appends it to the CSV and prints it as a
#     line of the table (call it as soon as a size is complete: one line per size as it goes).
#     Per series: samples with the same label (repeats) are reduced to their median first; the
#     row then holds the median over labels and the worst label with its value. Ratios are
#     NUM/DEN of the medians and of the worsts (worst against worst).
#   bench_table_show TABLE     the whole CSV as an aligned table, and where the files are
#   bench_plot TABLE TITLE YLABEL [log|linear] [XLABEL]
#     $out/TABLE.png: left the values against size (median solid, worst dashed, log scales;
#     "linear" keeps y linear), right the ratios (median solid, worst dashed, log scale) with 1
#     marked. Every row of the CSV is a point, the smallest size included. XLABEL: the rows are
#     not message sizes but a count (pending_compare.sh's pending receives), on a linear x axis.
#     Under the title: the machine, the date and the repetition count (REPEAT).
#     Prints where it is, or that gnuplot is missing (ci/install-deps.sh installs it).
#
# Statistics for scripts of their own: stats.awk (median, worst, ratio, human), loaded as
#   awk -f "$here/stats.awk" -f /dev/stdin ... <<'AWK'

bench_lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

bench_init() {
  local program=$1 name=$2
  shift 2
  root=$(cd "$bench_lib_dir/../.." && pwd)
  build=$(cd "${1:-$root/build}" 2>/dev/null && pwd) || { echo "no build directory ${1:-$root/build}" >&2; exit 1; }
  out=${2:-$build/bench}
  repeat=${REPEAT:-3}
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  if [[ $program != - ]]; then
    bench=$build/fabtests/$program
    [[ -x $bench ]] || { echo "build first: $bench is missing" >&2; exit 1; }
  fi
  csv=$out/$name.csv
  raw=$(mktemp)
  trap 'rm -f "$raw" "$raw".*' EXIT
  bench_machine="$(hostname), $(bench_cpu_model), $(nproc) cpus, $(uname -r)"
  bench_date=$(date -u '+%F %H:%M UTC')
  echo "# $name on $bench_machine; $bench_date; REPEAT=$repeat"
}

# The processor's name as /proc/cpuinfo (x86) or lscpu (others) gives it.
bench_cpu_model() {
  local m
  m=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null)
  [[ -n $m ]] || m=$(lscpu 2>/dev/null | awk -F': *' '/^Model name/ { print $2; exit }')
  echo "${m:-unknown cpu}"
}

bench_env() {
  local series=$1
  case $series in
    exanet) benv=(FI_PROVIDER=exanet FI_PROVIDER_PATH="$build/lib") ;;
    exanet_cma) benv=(FI_PROVIDER=exanet FI_PROVIDER_PATH="$build/lib" FI_EXANET_DMA_ENGINE=cma) ;;
    exanet_staged) benv=(FI_PROVIDER=exanet FI_PROVIDER_PATH="$build/lib" FI_EXANET_DMA_ENGINE=staged) ;;
    # Another build of exanet, for an A/B in the same run: BEFORE_LIB is its provider directory.
    exanet_before) benv=(FI_PROVIDER=exanet FI_PROVIDER_PATH="${BEFORE_LIB:?exanet_before needs BEFORE_LIB}") ;;
    # Every peer over the network backend (tcp;ofi_rxm) on this host; FI_PROVIDER would hide tcp
    # from exanet too (fi_exanet(7)). _before: BEFORE_LIB's build the same way.
    exanet_net) benv=(-u FI_PROVIDER FI_PROVIDER_PATH="$build/lib" FI_EXANET_NETWORK=every_peer FI_TCP_NODELAY=1) ;;
    exanet_net_before)
      benv=(-u FI_PROVIDER FI_PROVIDER_PATH="${BEFORE_LIB:?exanet_net_before needs BEFORE_LIB}"
            FI_EXANET_NETWORK=every_peer FI_TCP_NODELAY=1) ;;
    # Every message an eager train can carry (276 B) goes as one, not through the bounce ring.
    exanet_train) benv=(FI_PROVIDER=exanet FI_PROVIDER_PATH="$build/lib" FI_EXANET_EAGER_MAX=276) ;;
    exanet_write | exanet_read | exanet_optimistic)
      benv=(FI_PROVIDER=exanet FI_PROVIDER_PATH="$build/lib" FI_EXANET_PROTOCOL="${series#exanet_}") ;;
    *) benv=(FI_PROVIDER="$series") ;;
  esac
}

bench_lock_file=${LOCK-/tmp/exanet-bench.lock}

bench_locked() {
  local -a rt=()
  if [[ ${RT:-0} == 1 ]]; then
    [[ $(id -u) == 0 ]] && command -v chrt >/dev/null || { echo "RT=1 needs root and chrt" >&2; return 1; }
    rt=(chrt -f 50)
  fi
  if [[ -n $bench_lock_file ]]; then
    flock "$bench_lock_file" "${rt[@]}" "$@"
  else
    "${rt[@]}" "$@"
  fi
}

bench_lock() {
  [[ -n $bench_lock_file ]] || return 0
  exec {bench_lock_fd}>>"$bench_lock_file"
  flock "$bench_lock_fd"
}

bench_unlock() {
  [[ -n $bench_lock_file && -n ${bench_lock_fd:-} ]] || return 0
  exec {bench_lock_fd}>&-
  bench_lock_fd=
}

bench_probe() {
  local label=$1 line
  probe_rtt=NA probe_phase=unknown
  [[ -x $build/fabtests/core_probe ]] || return 0
  line=$(bench_locked "$build/fabtests/core_probe" 2>/dev/null) || return 0
  read -r _ probe_rtt _ probe_handoff <<<"$line"
  probe_phase=near
  ((probe_rtt > ${FAR_NS:-200})) && probe_phase=far
  echo "$(date +%s) $label $probe_rtt $probe_handoff $probe_phase" >>"$out/core_probe.csv"
}

bench_wait_near() {
  local label=$1 waited=0
  bench_probe "$label"
  [[ ${PHASE:-near} == near ]] || return 0
  while [[ $probe_phase == far ]] && ((waited < ${PHASE_WAIT:-60})); do
    sleep 2
    waited=$((waited + 2))
    bench_probe "$label (waiting for the near phase)"
  done
}

# One line: how many probes of this run saw each phase.
bench_phase_summary() {
  [[ -s $out/core_probe.csv ]] || return 0
  awk '{ r = $(NF - 2) } NR == 1 { min = max = r } { n[$NF]++; if (r + 0 < min + 0) min = r; if (r + 0 > max + 0) max = r }
       END { printf "machine probe (core_probe.csv): line round trip %s-%s ns; near %d, far %d probes\n",
             min, max, n["near"], n["far"] }' "$out/core_probe.csv"
}

# bench_mpi_options DEFAULT_PATHS  (the MPI scripts) reads SIZES, BW_SIZES, PATHS, OFFSETS,
#   BLOCKS, TOUCH and BENCH_LOCK into lat_sizes, bw_sizes, paths, offsets, blocks, touch, locker,
#   and sets ratios to exanet over each other path.
bench_mpi_options() {
  # shellcheck disable=SC2086  # SIZES is a list: split it
  read -r -a lat_sizes <<<"$(bench_bytes ${SIZES:-1 8 64 512 4K 16K 64K 256K 1M 4M})"
  # shellcheck disable=SC2086
  read -r -a bw_sizes <<<"$(bench_bytes ${BW_SIZES:-${SIZES:-1 8 64 512 4K 16K 64K 256K 1M 4M}})"
  read -r -a paths <<<"${PATHS:-$1}"
  offsets=${OFFSETS:-0,8,16,24,40,63}
  blocks=${BLOCKS:-2}
  touch=()
  [[ ${TOUCH:-1} != 0 ]] && touch=(-r)
  local lock=${BENCH_LOCK-/tmp/exanet-bench.lock}
  locker=()
  [[ -n $lock ]] && command -v flock >/dev/null && locker=(flock "$lock")
  ratios=""
  local p
  for p in "${paths[@]}"; do
    [[ $p != exanet && " ${paths[*]} " == *" exanet "* ]] && ratios+="${ratios:+ }exanet/$p"
  done
}

# bench_mpi_sweep PREFIX TITLE  latency then bandwidth, every size, the paths taking turns
#   (REPEAT times each), through the caller's function `run PATH KIND SIZE TABLE`; tables
#   PREFIX_lat and PREFIX_bw, shown and plotted with TITLE, and the machine probe's summary.
bench_mpi_sweep() {
  local prefix=$1 title=$2 kind table size p
  local -a mpi_sizes
  for kind in lat bw; do
    table=${prefix}_$kind
    if [[ $kind == lat ]]; then
      mpi_sizes=("${lat_sizes[@]}")
      bench_table_begin "$table" low us "${paths[*]}" "$ratios"
    else
      mpi_sizes=("${bw_sizes[@]}")
      bench_table_begin "$table" high MBps "${paths[*]}" "$ratios"
    fi
    for size in "${mpi_sizes[@]}"; do
      for _ in $(seq "$repeat"); do
        for p in "${paths[@]}"; do run "$p" "$kind" "$size" "$table"; done
      done
      printf '%s ' "$(date -u +%T)"
      bench_table_row "$table" "$size"
    done
  done
  bench_table_show "${prefix}_lat"
  bench_table_show "${prefix}_bw"
  bench_plot "${prefix}_lat" "$title ping-pong latency (median and worst placement)" "latency (us, one way)"
  bench_plot "${prefix}_bw" "$title streaming bandwidth, window 64 (median and worst placement)" "bandwidth (MB/s)"
  bench_phase_summary
}

bench_bytes() {
  local s n out_sizes=()
  for s in "$@"; do
    n=${s%[kKmMgG]}
    case $s in
      *[kK]) n=$((n * 1024)) ;;
      *[mM]) n=$((n * 1048576)) ;;
      *[gG]) n=$((n * 1073741824)) ;;
    esac
    out_sizes+=("$n")
  done
  echo "${out_sizes[*]}"
}

declare -gA bench_t_better bench_t_unit bench_t_series bench_t_ratios bench_t_worst

bench_table_begin() {
  local t=$1
  bench_t_better[$t]=$2
  bench_t_unit[$t]=$3
  bench_t_series[$t]=$4
  bench_t_ratios[$t]=${5:-}
  bench_t_worst[$t]=${6:-worst}
  : >"$out/$t.samples"
  awk -v series="$4" -v ratios="${5:-}" -v unit="$3" -v withworst="${6:-worst}" -v better="$2" -v csvfile="$out/$t.csv" -v t="$t" '
    BEGIN {
      ns = split(series, S, " "); nr = split(ratios, R, " ")
      hdr = "size"; line = sprintf("%-8s", "size")
      w = withworst == "worst"
      for (i = 1; i <= ns; i++) {
        hdr = hdr "," S[i] "_" unit
        if (w) hdr = hdr "," S[i] "_" unit "_worst," S[i] "_worst_at"
        line = line sprintf(w ? " %22s" : " %12s", S[i] (w ? " median/worst@s:r" : ""))
      }
      for (i = 1; i <= nr; i++) {
        split(R[i], nd, "/")
        hdr = hdr "," nd[1] "_over_" nd[2]
        if (w) hdr = hdr "," nd[1] "_over_" nd[2] "_worst"
        line = line sprintf(w ? " %13s" : " %9s", R[i] (w ? " med/worst" : ""))
      }
      print hdr > csvfile
      printf "== %s (%s, %s is better)\n%s\n", t, unit, better == "low" ? "lower" : "higher", line
    }'
}

bench_table_add() {
  echo "$2 $3 $4 ${5:--}" >>"$out/$1.samples"
}

bench_table_add_file() {
  awk 'NF >= 3 { print $1, $2, $3, (NF >= 4 ? $4 : "-") }' "$2" >>"$out/$1.samples"
}

bench_table_row() {
  local t=$1 size=$2
  awk -v size="$size" -v series="${bench_t_series[$t]}" -v ratios="${bench_t_ratios[$t]}" \
      -v withworst="${bench_t_worst[$t]}" -v better="${bench_t_better[$t]}" -v csvfile="$out/$t.csv" \
      -f "$bench_lib_dir/stats.awk" -f /dev/stdin "$out/$t.samples" <<'AWK'
    $2 == size {
      if (!(($1, $4) in vals)) labels[$1] = labels[$1] " " $4
      vals[$1, $4] = vals[$1, $4] " " $3
    }
    END {
      ns = split(series, S, " "); nr = split(ratios, R, " ")
      w = withworst == "worst"
      csv = size; line = sprintf("%-8s", human(size))
      for (i = 1; i <= ns; i++) {
        s = S[i]; n = split(labels[s], L, " "); per = ""
        for (k = 1; k <= n; k++) per = per " " median(vals[s, L[k]])
        med[s] = n ? median(per) : "NA"
        wi = worst_index(per, better)
        wv[s] = wi ? worst(per, better) : "NA"
        wat = wi ? L[wi] : "NA"
        csv = csv "," med[s]
        if (w) {
          csv = csv "," wv[s] "," wat
          line = line sprintf(" %22s", num(med[s]) " " num(wv[s]) "@" wat)
        } else {
          line = line sprintf(" %12s", num(med[s]))
        }
      }
      for (i = 1; i <= nr; i++) {
        split(R[i], nd, "/")
        a = ratio(med[nd[1]], med[nd[2]])
        csv = csv "," a
        if (w) {
          b = ratio(wv[nd[1]], wv[nd[2]])
          csv = csv "," b
          line = line sprintf(" %13s", a " " b)
        } else {
          line = line sprintf(" %9s", a)
        }
      }
      print csv >> csvfile
      print line
    }
AWK
}

bench_table_show() {
  column -s, -t <"$out/$1.csv"
  echo "CSV: $out/$1.csv  samples: $out/$1.samples"
}

bench_plot() {
  local t=$1 title=$2 ylabel=$3 scale=${4:-log} xlabel=${5:-}
  if ! command -v gnuplot >/dev/null; then
    echo "(no plot: gnuplot is missing; bash ci/install-deps.sh installs it)"
    return 0
  fi
  local series=${bench_t_series[$t]} ratios=${bench_t_ratios[$t]} unit=${bench_t_unit[$t]}
  local w=${bench_t_worst[$t]} plot="" rplot="" i=1 s nd q="'"
  for s in $series; do
    plot+="${plot:+, }csv using 1:\"${s}_${unit}\" with linespoints lt $i dt 1 title \"$s median\""
    [[ $w == worst ]] && plot+=", csv using 1:\"${s}_${unit}_worst\" with linespoints lt $i dt 2 title \"$s worst placement\""
    i=$((i + 1))
  done
  local rcolors=(black red orange brown purple) j=0
  for nd in $ratios; do
    local col=${nd/\//_over_} c=${rcolors[j % 5]}
    rplot+="${rplot:+, }csv using 1:\"$col\" with linespoints lc \"$c\" dt 1 title \"$nd median\""
    [[ $w == worst ]] && rplot+=", csv using 1:\"${col}_worst\" with linespoints lc \"$c\" dt 2 title \"$nd worst\""
    j=$((j + 1))
  done
  local csvf=$out/$t.csv png=$out/$t.png
  {
    echo "csv = \"$csvf\""
    echo "set terminal pngcairo size 1400,550 noenhanced"
    echo "set output \"$png\""
    echo "set datafile separator \",\""
    echo "set datafile missing \"NA\""
    # (gnuplot strings: a double quote in the title would end it)
    echo "set multiplot layout 1,$([[ -n $ratios ]] && echo 2 || echo 1) title \"${title//\"/$q}\\n${bench_machine//\"/$q}; ${bench_date:-}; REPEAT=$repeat\""
    if [[ -z $xlabel ]]; then
      echo "set logscale x 2"
      echo "set format x \"%.0b%B\""
      echo "set xlabel \"message size (bytes)\""
    else
      echo "set xlabel \"$xlabel\""
    fi
    # log x: a margin so that the smallest and largest sizes are not drawn on the frame
    echo "set offsets graph 0.02, graph 0.02, 0, 0"
    echo "set grid"
    echo "set key top left font \",9\""
    [[ $scale == log ]] && echo "set logscale y"
    echo "set ylabel \"$ylabel\""
    echo "plot $plot"
    if [[ -n $ratios ]]; then
      echo "set logscale y"
      echo "set format y \"%g\""
      echo "set ylabel \"ratio (log scale)\""
      echo "set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 3 lw 2"
      echo "plot $rplot"
    fi
    echo "unset multiplot"
  } >"$out/$t.gp"
  rm -f "$png"
  gnuplot "$out/$t.gp" 2>"$out/$t.gp.err"
  if [[ -s $png ]]; then
    echo "plot: $png"
    rm -f "$out/$t.gp.err"
  else
    echo "(plot failed: $(head -3 "$out/$t.gp.err"))" >&2
  fi
}
