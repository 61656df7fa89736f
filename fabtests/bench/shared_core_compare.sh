#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# More MPI ranks than cores (NP, default 4, on however many cores there are; 2 here), as a user
# runs a 2x2 process grid on a laptop or a CI runner: the time of one Sendrecv ring step, one
# Allreduce and one Bcast per size (fabtests/bench/mpi_shared_core.c), side by side in one run:
#   exanet          pml cm + mtl ofi over exanet (its polls yield after FI_EXANET_IDLE_YIELD)
#   exanet_noyield  the same with FI_EXANET_IDLE_YIELD=0 (how it was before 2026-12-07)
#   vader           pml ob1 + btl vader (Open MPI's own shared memory)
#   tcp             pml cm + mtl ofi over libfabric's tcp: the same MPI layers, another provider
# (exanet_before: another build, BEFORE_LIB its provider directory.) Open MPI sees the
# oversubscription and makes its own progress loop yield (mpi_yield_when_idle); mtl ofi's wait
# for a blocking send does not, which is what FI_EXANET_IDLE_YIELD is about (fi_exanet(7),
# PROGRESS). The paths take turns at every repetition; the tables come at the end. A benchmark,
# not a test.
#   fabtests/bench/shared_core_compare.sh [build-dir] [out-dir]
# Environment: NP, SIZES (bytes, default "8 1K 8K 48K 256K"), REPEAT (default 3), PATHS
# (default "exanet exanet_noyield vader tcp"), SECONDS_PER_OP (default 0.3).
# Output: $out/shared_ring.csv, shared_allreduce.csv, shared_bcast.csv (us per operation,
# medians of the repetitions, and the ratios to vader and tcp).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"
bench_init - shared_core "$@"
prog=$build/fabtests/mpi/mpi_shared_core
[[ -x $prog ]] || { echo "build first: $prog is missing (it needs mpicc)" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "mpirun missing: apt-get install openmpi-bin" >&2; exit 1; }
NP=${NP:-4}
PATHS=${PATHS:-exanet exanet_noyield vader tcp}
read -r -a sizes <<<"$(bench_bytes ${SIZES:-8 1K 8K 48K 256K})"
export SECONDS_PER_OP=${SECONDS_PER_OP:-0.3}
echo "$NP ranks on $(nproc) cores"

exanet_of() { echo "--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include exanet --mca btl ^ofi -x FI_PROVIDER=exanet -x FI_PROVIDER_PATH=$1"; }
declare -A mca
mca[exanet]=$(exanet_of "$build/lib")
mca[exanet_noyield]="$(exanet_of "$build/lib") -x FI_EXANET_IDLE_YIELD=0"
[[ -n ${BEFORE_LIB:-} ]] && mca[exanet_before]=$(exanet_of "$BEFORE_LIB")
mca[vader]="--mca pml ob1 --mca btl vader,self --mca mtl ^ofi"
mca[tcp]="--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include tcp --mca btl ^ofi -x FI_PROVIDER=tcp"

ratios=""
for p in $PATHS; do
  [[ $p == vader || $p == tcp ]] && continue
  for base in vader tcp; do [[ " $PATHS " == *" $base "* ]] && ratios+=" $p/$base"; done
done
: >"$raw.all"
for r in $(seq "$REPEAT"); do
  for p in $PATHS; do
    # shellcheck disable=SC2086  # the MCA options are words
    if ! timeout 600 mpirun --allow-run-as-root --oversubscribe -np "$NP" -x SECONDS_PER_OP \
        ${mca[$p]} "$prog" "${sizes[@]}" >"$raw.$p" 2>"$raw.err"; then
      echo "run $r of $p failed: $(tail -2 "$raw.err" | tr '\n' ' ')" >&2
      continue
    fi
    awk -v p="$p" '{ print $1, p, $2, $3 }' "$raw.$p" >>"$raw.all"
  done
done
for op in ring allreduce bcast; do
  bench_table_begin "shared_$op" low us "$PATHS" "$ratios" noworst
  awk -v op="$op" '$1 == op { print $2, $3, $4 }' "$raw.all" >"$raw.op"
  bench_table_add_file "shared_$op" "$raw.op"
  for s in "${sizes[@]}"; do bench_table_row "shared_$op" "$s"; done
  bench_plot "shared_$op" "MPI $op, $NP ranks on $(nproc) cores" "us per operation"
done
