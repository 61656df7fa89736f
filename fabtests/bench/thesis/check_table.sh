#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Is the claims table of run.sh complete? Every claim the thesis comparison must report has its
# row in claims.csv, and no cell of it is empty or NA; only rows marked optional (applications
# that may not be installed) may say "not run (...)". Checks the table, not the numbers.
#   check_table.sh OUT     (exit 0: complete; 1: a row is missing or unfilled, each said on stderr)
set -u
csv=${1:?usage: check_table.sh OUT}/claims.csv
[[ -s $csv ]] || { echo "check_table: no $csv" >&2; exit 1; }
expected="lat-intra lat-3hops lat-5hops lat-grows lat-fades lat-large-intra lat-eager-pool
lat-optimistic lat-ack lat-anysource bw-large bw-distance ffr-intra ffr-3hops ffr-5hops ri-beats-si
ri-gain-hops ffr-optimistic ffr-anysource bcast reduce allreduce scatter bcast-optimistic
share-p2p_lat share-p2p_latlate share-p2p_bw share-p2p_ffr share-osu_bcast share-osu_reduce share-osu_allreduce
share-osu_scatter share-lammps share-netpipe"
# shellcheck disable=SC2086  # expected is a list
python3 - "$csv" $expected <<'PY'
import csv, sys
path, expected = sys.argv[1], sys.argv[2:]
with open(path) as f:
    rows = {r["id"]: r for r in csv.DictReader(f)}
bad = 0
for rid in expected:
    r = rows.get(rid)
    if r is None:
        print(f"check_table: row {rid} is missing", file=sys.stderr)
        bad = 1
        continue
    for col in ("claim", "thesis", "exanet", "same", "ratio_def", "ratio"):
        v = (r.get(col) or "").strip()
        unfilled = not v or "NA" in v.replace("/", " ").split() or v == "nan"
        if unfilled or (v.startswith("not run") and r.get("optional") != "True"):
            print(f"check_table: row {rid}: {col} is not filled ({v!r})", file=sys.stderr)
            bad = 1
print(f"check_table: {len(expected)} rows expected, {len(rows)} present, {'complete' if not bad else 'INCOMPLETE'}")
sys.exit(bad)
PY
