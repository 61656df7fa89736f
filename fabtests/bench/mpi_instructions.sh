#!/usr/bin/env bash
# Instructions exanet executes per 8 B MPI round trip under Open MPI (pml cm, mtl ofi), counted by
# callgrind on rank 0 of mpi_bench's ping-pong: deterministic where wall-clock latency on a shared
# machine is not, so a change to the small-message path can be judged by its count.
#   fabtests/bench/mpi_instructions.sh [build-dir] [out-dir]
# Two runs (SHORT and LONG round trips, plus mpi_bench's 10% warm-up each) are differenced, so
# start-up and shutdown cancel; cg_instr.py prints the figures (see there) and the functions.
# Needs valgrind, python3 and objdump. A benchmark, not a test: nothing is judged.
# Environment: SHORT (default 2000), LONG (default 10000).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
out=${2:-$(mktemp -d /tmp/exanet-mpi-instr.XXXXXX)}
mkdir -p "$out"
short=${SHORT:-2000} long=${LONG:-10000}
prog=$build/fabtests/mpi/mpi_bench
for tool in valgrind python3 objdump mpirun; do
  command -v "$tool" >/dev/null || { echo "$tool missing" >&2; exit 1; }
done
[[ -x $prog ]] || { echo "build first: $prog is missing" >&2; exit 1; }
for n in "$short" "$long"; do
  # Rank 0 under callgrind, rank 1 at full speed.
  mpirun --allow-run-as-root -np 2 --bind-to core --mca pml cm --mca mtl ofi \
    --mca mtl_ofi_provider_include exanet --mca btl ^ofi -x FI_PROVIDER=exanet \
    -x FI_PROVIDER_PATH="$build/lib" -x CG_FILE="$out/cg.$n" \
    bash -c 'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then
               exec valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$CG_FILE" "$@"
             else exec "$@"; fi' rank "$prog" -t lat -m 8 -M 8 -P 0:0 -b 1 -i "$n" \
    >"$out/run.$n.log" 2>&1
  grep -q '^lat 8 ' "$out/run.$n.log" || { echo "run of $n failed: $out/run.$n.log" >&2; exit 1; }
done
# mpi_bench adds a tenth of the round trips as warm-up.
python3 "$here/cg_instr.py" "$build/lib/libexanet-fi.so" "$out/cg.$short" "$out/cg.$long" \
  "$(( (long - short) * 11 / 10 ))" "${TOP:-25}" | tee "$out/instructions.txt"
