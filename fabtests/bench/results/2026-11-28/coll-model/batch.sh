#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Issue 16: thesis_coll (Open MPI's own collective) beside coll_sched_probe's copies of its
# schedule with MPI_Send and with MPI_Isend+MPI_Wait, alternated, REPS times, through probe.sh.
#   batch.sh BUILD PROBE-BINARY OUT "FAMILIES" "COLLS" SIZE
# OUT gets "program coll wait size family avg_us min_us max_us load1" lines (wait: "-" for
# thesis_coll, whose algorithm waits as Open MPI's does: isend+waitall for bcast, blocking sends
# for the others); the stats files go to OUT.stats/.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$1 probe=$2 out=$3 families=$4 colls=$5 size=$6
mkdir -p "$out.stats"
declare -A algo=([bcast]=6 [reduce]=5 [allreduce]=3 [scatter]=2)
one() { # one TAG FAMILY WAIT COLL ARGS...
  local tag=$1 fam=$2 wait=$3 coll=$4 load line
  shift 4
  load=$(cut -d' ' -f1 /proc/loadavg)
  line=$("$here/probe.sh" "$build" "$fam" "$out.stats/$tag.$coll.$wait.$fam.$rep" "$@" 2>/dev/null |
         awk 'NF == 5 || NF == 6 { print $(NF-2), $(NF-1), $NF }')
  echo "$tag $coll $wait $size $fam ${line:-failed - -} $load" >>"$out"
}
for ((rep = 1; rep <= ${REPS:-3}; rep++)); do
  for fam in $families; do
    for coll in $colls; do
      EXTRA_MCA="--mca coll_tuned_${coll}_algorithm ${algo[$coll]}" \
        one thesis_coll "$fam" - "$coll" "$build/fabtests/thesis_coll" "$coll" "$size"
      [[ $coll == bcast ]] && continue
      for wait in send isend; do
        one probe "$fam" "$wait" "$coll" "$probe" "$coll" "$wait" "$size"
      done
    done
  done
done
