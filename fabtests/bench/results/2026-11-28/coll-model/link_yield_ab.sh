#!/bin/bash
# yieldab.sh ROUNDS: thesis_coll write family, 16 ranks, 1 ms hop, LINK_YIELD 0/1 alternated
B=${BUILD:-$(cd "$(dirname "$0")/../../../../.." && pwd)/build}  # the repository's build
declare -A algo=([bcast]="coll_tuned_bcast_algorithm 6" [reduce]="coll_tuned_reduce_algorithm 5" [allreduce]="coll_tuned_allreduce_algorithm 3" [scatter]="coll_tuned_scatter_algorithm 2")
for r in $(seq $1); do
 for fam in ${FAMILIES:-write}; do
  for coll in ${COLLS:-reduce allreduce scatter bcast}; do
   for y in 0 1; do
    read -r -a extra <<<"--mca ${algo[$coll]}"
    v=$(timeout 300 mpirun --allow-run-as-root --oversubscribe -np 16 --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include exanet --mca btl self --mca mpi_yield_when_idle 1 --mca coll_tuned_use_dynamic_rules 1 "${extra[@]}" -x FI_PROVIDER=exanet -x FI_PROVIDER_PATH=$B/lib -x FI_EXANET_PROTOCOL=$fam -x FI_EXANET_LINK_MODEL=1 -x FI_EXANET_LINK_YIELD=$y -x FI_EXANET_LINK_HOP_NS=1000000 -x FI_EXANET_MEDIUM_MAX=36 -x FI_EXANET_EAGER_MAX=36 -x ITERS=${ITERS:-10} $B/fabtests/thesis_coll $coll 1024 2>/dev/null | awk '{print $3}')
    echo "$r $fam $coll yield=$y avg_us=$v $(uptime | sed 's/.*average: //')"
   done
  done
 done
done
