#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# ctest bench.thesis_quick: run.sh in QUICK=1 mode (under 2 minutes) must produce the claims
# table with every row filled (check_table.sh), and the check must catch a table that lost a row
# or a measurement. Not a performance test: no number is judged. Skips (77) without mpirun or
# thesis_coll (the collectives' rows could not be filled).
#   quick_test.sh BUILD-DIR
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: quick_test.sh BUILD-DIR}
if ! command -v mpirun >/dev/null || [[ ! -x $build/fabtests/thesis_coll ]]; then
  echo "SKIP: no mpirun or no thesis_coll"
  exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
QUICK=1 timeout 300 bash "$here/run.sh" "$build" "$out" >"$out/run.out" 2>&1
rc=$?
tail -5 "$out/run.out"
[[ $rc == 0 ]] || { echo "FAIL: run.sh exited $rc"; cat "$out/run.out"; exit 1; }
bash "$here/check_table.sh" "$out" || { cat "$out/claims.md"; echo "FAIL: table incomplete"; exit 1; }
# The check must be able to fail: a row removed, and a measurement lost.
mkdir -p "$out/cut" "$out/lost"
grep -v '^bcast,' "$out/claims.csv" >"$out/cut/claims.csv"
if bash "$here/check_table.sh" "$out/cut" >/dev/null 2>&1; then echo "FAIL: a missing row passed"; exit 1; fi
grep -v '^[0-9]* [a-z]* [0-9]* read ' "$out/p2p.samples" >"$out/lost/p2p.samples"
cp "$out"/{coll.samples,share.samples,p2p_share.samples,apps.note,run.info} "$out/lost/"
python3 "$here/table.py" "$out/lost" >/dev/null
if bash "$here/check_table.sh" "$out/lost" >/dev/null 2>&1; then echo "FAIL: lost read samples passed"; exit 1; fi
echo "PASS: thesis table complete ($(($(wc -l <"$out/claims.csv") - 1)) rows)"
