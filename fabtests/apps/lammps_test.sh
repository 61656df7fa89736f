#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# LAMMPS (Debian's lammps, the "melt" example from lammps-examples: 4000 Lennard-Jones atoms,
# 250 steps) with N ranks over exanet (pml cm, mtl ofi), then the same run over Open MPI's own
# shared-memory transport (pml ob1, btl vader); the thermodynamic output must match to the
# printed precision. The exanet run's endpoint counters (FI_EXANET_STATS) prove the traffic went
# through exanet and give its protocol mix and fast-receive share.
# Usage: lammps_test.sh <provider-dir> <ranks> <exanet-stats tool> [out-dir]
set -u
dir=$1
np=$2
stats_tool=$3
out=${4:-$(mktemp -d)}
mkdir -p "$out"
input=/usr/share/lammps/examples/melt/in.melt
command -v lmp >/dev/null && [[ -r $input ]] || {
  echo "SKIP: lmp or $input missing (lammps, lammps-examples)"; exit 77; }
cd "$out" || exit 1
cp "$input" in.melt
common=(--allow-run-as-root --oversubscribe -np "$np")
exanet=(--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include exanet --mca btl ^ofi
        -x FI_PROVIDER=exanet -x FI_PROVIDER_PATH="$dir")
vader=(--mca pml ob1 --mca btl vader,self --mca mtl ^ofi)
rm -f stats.txt
timeout 600 mpirun "${common[@]}" "${exanet[@]}" -x FI_EXANET_STATS="$PWD/stats.txt" \
  lmp -in in.melt -log none -echo none \
  >exanet.txt 2>&1 || { tail -20 exanet.txt; echo "FAIL: LAMMPS over exanet"; exit 1; }
"$stats_tool" stats.txt >stats_table.txt || { echo "FAIL: no exanet counters from the run"; exit 1; }
grep -q "^$np endpoint" stats_table.txt || { cat stats_table.txt; echo "FAIL: not $np exanet endpoints"; exit 1; }
timeout 600 mpirun "${common[@]}" "${vader[@]}" lmp -in in.melt -log none -echo none \
  >vader.txt 2>&1 || { tail -20 vader.txt; echo "FAIL: LAMMPS over vader"; exit 1; }
# The thermo table: from the "Step" header to the "Loop time" line.
thermo() { awk '/^ *Step /{ on = 1 } /^Loop time/{ on = 0 } on' "$1"; }
thermo exanet.txt >thermo_exanet.txt
thermo vader.txt >thermo_vader.txt
rows=$(($(wc -l <thermo_exanet.txt) - 1))
[[ $rows -ge 5 ]] || { cat exanet.txt; echo "FAIL: no thermo output over exanet"; exit 1; }
grep -q "on $np procs for 250 steps" exanet.txt || { echo "FAIL: not $np ranks, 250 steps"; exit 1; }
if ! diff -u thermo_vader.txt thermo_exanet.txt; then
  echo "FAIL: thermodynamic output differs between vader and exanet"; exit 1
fi
cat thermo_exanet.txt
grep -E "^messages received|^fast receives|^rendezvous sent" stats_table.txt
# Issue 5 part 3: under Open MPI's defaults, receives posted first take the RTR path. LAMMPS
# posts most of its receives ahead of the halo exchange: some rendezvous must be receiver-
# initiated (or served by a crossing RTR), or the RTR path is broken.
rtr_served=$(awk '$1 == "ri_sent" || $1 == "concurrent" { n += $2 } END { print n + 0 }' stats_table.txt)
[[ $rtr_served -gt 0 ]] || { echo "FAIL: no rendezvous took the RTR path under Open MPI"; exit 1; }
echo "PASS: LAMMPS melt, $np ranks, $rows thermo rows identical over exanet and vader"
