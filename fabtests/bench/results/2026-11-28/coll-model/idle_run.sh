#!/usr/bin/env bash
# waits for an idle machine (no process above 20% CPU in two looks 5 s apart), then runs the checks
cd /work/wt-coll/fabtests/bench/results/2026-11-28/coll-model || exit 1
B=/work/wt-coll/build; P=/tmp/h16/bin/coll_sched_probe; out=/tmp/h16/idle.txt; : > $out
busy() { ps -eo pcpu,comm --sort=-pcpu | awk 'NR>1 && $1 > 20 && $2 != "ps"' | wc -l; }
end=$((SECONDS + 1500))
while (( SECONDS < end )); do
  if [[ $(busy) == 0 ]]; then sleep 5; [[ $(busy) == 0 ]] && break; fi
  sleep 10
done
echo "# start $(date -u +%T) busy=$(busy)" >> $out
run() { local tag=$1; shift; local r; r=$("$@" 2>/dev/null); echo "$tag $r busy_after=$(busy) $(date -u +%T)" >> $out; }
for rep in 1 2; do
run np2.bcast.write env NP=2 EXTRA_MCA="--mca coll_tuned_bcast_algorithm 6" ITERS=10 ./probe.sh $B write /tmp/h16/st.i1 $B/fabtests/thesis_coll bcast 1024
run np2.bcast.read env NP=2 EXTRA_MCA="--mca coll_tuned_bcast_algorithm 6" ITERS=10 ./probe.sh $B read /tmp/h16/st.i2 $B/fabtests/thesis_coll bcast 1024
run np2.allreduce.isend.write env NP=2 ITERS=10 ./probe.sh $B write /tmp/h16/st.i3 $P allreduce isend 1024
run np16.bcast.write env EXTRA_MCA="--mca coll_tuned_bcast_algorithm 6" ITERS=10 ./probe.sh $B write /tmp/h16/st.i4 $B/fabtests/thesis_coll bcast 1024
run np16.reduce.isend.write env ITERS=10 ./probe.sh $B write /tmp/h16/st.i5 $P reduce isend 1024
run np16.allreduce.isend.write env ITERS=10 ./probe.sh $B write /tmp/h16/st.i6.$rep $P allreduce isend 1024
run np16.scatter.isend.write env ITERS=10 ./probe.sh $B write /tmp/h16/st.i7 $P scatter isend 1024
run np16.reduce.thesis_coll.write env EXTRA_MCA="--mca coll_tuned_reduce_algorithm 5" ITERS=10 ./probe.sh $B write /tmp/h16/st.i8 $B/fabtests/thesis_coll reduce 1024
done
echo "# end $(date -u +%T)" >> $out
