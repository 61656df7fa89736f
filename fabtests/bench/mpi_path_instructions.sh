#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Instructions per streamed MPI message, by layer, for each of Open MPI's paths: exanet (pml cm,
# mtl ofi), vader (pml ob1), UCX (pml ucx) and libfabric tcp (pml cm, mtl ofi). callgrind runs
# on one rank of mpi_bench's streaming test (window 64; rank 1, the receiver, by default), two
# runs differenced so the warm-up cancels (only the timed function, sweep, is counted); cg_objects.py charges each instruction to its
# library and sums Open MPI's own layers ("mpi") apart from what moves and matches the bytes
# ("transport"). The budget line says how many instructions a provider behind pml cm has per
# message if the whole receive is to cost no more than vader's whole path: vader's total minus
# what Open MPI's cm path costs with exanet (issue 17, "MPI streaming >= 1.0x vader").
#   fabtests/bench/mpi_path_instructions.sh [build-dir] [out-dir]
# Environment: PATHS (default "exanet vader ucx tcp"), SIZE (default 8), RANK (default 1),
# SHORT / LONG windows (default 20 / 100). Under valgrind the profiled rank is the slow one, so
# it seldom polls in vain: the streaming test is used because its counts hold still (a ping-pong's
# profiled rank waits a varying number of polls; mpi_instructions.sh separates those for exanet).
# Needs valgrind, python3, mpirun. A benchmark, not a test: nothing is judged.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
out=${2:-$(mktemp -d /tmp/exanet-mpi-paths.XXXXXX)}
mkdir -p "$out"
size=${SIZE:-8} prank=${RANK:-1} short=${SHORT:-20} long=${LONG:-100}
prog=$build/fabtests/mpi/mpi_bench
for tool in valgrind python3 callgrind_annotate mpirun; do
  command -v "$tool" >/dev/null || { echo "$tool missing" >&2; exit 1; }
done
[[ -x $prog ]] || { echo "build first: $prog is missing" >&2; exit 1; }
declare -A mca
mca[exanet]="--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include exanet -x FI_PROVIDER=exanet -x FI_PROVIDER_PATH=$build/lib"
mca[tcp]="--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include tcp -x FI_PROVIDER=tcp"
mca[vader]="--mca pml ob1 --mca btl vader,self --mca mtl ^ofi"
mca[ucx]="--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any"
declare -A mpi_of total_of transport_of
units=$(( (long - short) * 64 ))
for p in ${PATHS:-exanet vader ucx tcp}; do
  [[ -n ${mca[$p]:-} ]] || { echo "unknown path $p" >&2; exit 1; }
  ok=1
  for n in "$short" "$long"; do
    # pml cm, ucx and tcp need no BTL but self; vader names its own.
    btl="--mca btl self"; [[ $p == vader ]] && btl=""
    # shellcheck disable=SC2086
    if ! timeout 600 mpirun --allow-run-as-root -np 2 --bind-to core ${mca[$p]} $btl \
        -x CG_FILE="$out/$p.cg.$n" -x PRANK="$prank" \
        bash -c 'if [ "$OMPI_COMM_WORLD_RANK" = "$PRANK" ]; then
                   exec valgrind --tool=callgrind --toggle-collect=sweep --callgrind-out-file="$CG_FILE" "$@"
                 else exec "$@"; fi' rank "$prog" -t bw -m "$size" -M "$size" -P 0:0 -b 1 \
        -i "$n" -n "$n" -w 64 >"$out/$p.run.$n.log" 2>&1 ||
        ! grep -q "^bw $size " "$out/$p.run.$n.log"; then
      echo "$p: run of $n failed ($out/$p.run.$n.log)" >&2
      ok=0
      break
    fi
  done
  [[ $ok == 1 ]] || continue
  echo "== $p, $size B streamed, rank $prank, instructions per message"
  python3 "$here/cg_objects.py" "$out/$p.cg.$short" "$out/$p.cg.$long" "$units" | tee "$out/$p.txt"
  read -r _ m _ tr _ _ _ t < <(tail -1 "$out/$p.txt")
  mpi_of[$p]=$m transport_of[$p]=$tr total_of[$p]=$t
done
# The budget: what a provider behind pml cm may execute per message for the whole receive to
# cost what vader's does, against exanet's, and UCX's transport (ucp + uct) behind the same cm
# layers, for scale.
if [[ -n ${total_of[vader]:-} && -n ${mpi_of[exanet]:-} ]]; then
  awk -v v="${total_of[vader]}" -v m="${mpi_of[exanet]}" -v e="${transport_of[exanet]}" \
      -v u="${transport_of[ucx]:-}" 'BEGIN {
    printf "budget: vader %.0f per message in all; Open MPI'"'"'s cm layers %.0f -> a provider has %.0f to tie; exanet %.0f (%.2fx the budget)\n", v, m, v - m, e, e / (v - m)
    if (u != "") printf "UCX'"'"'s transport (ucp + uct) %.0f: behind the cm layers it would total %.0f, %.2fx vader\n", u, m + u, (m + u) / v }' |
    tee "$out/budget.txt"
fi
