#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# ctest bench.plots: the benchmark scripts' plots, as a reader gets them.
#   fabtests/bench/plot_check.sh BUILD
# Runs pingpong_compare.sh, xfer_compare.sh (latency and bandwidth) and rma_compare.sh (write
# latency and bandwidth, read bandwidth) at a few sizes, briefly (the numbers are not judged), then
# for every table with a plot checks that the PNG exists and is a PNG, that it carries the machine,
# date and REPEAT, and, by replaying its gnuplot script into a table (gnuplot's `set table`, which
# writes the points each curve draws), that every curve draws every size of the CSV, the smallest
# included, and that every median curve has a point per size (worst and ratio curves may miss a
# size only where the CSV cell is NA).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: $0 BUILD}
command -v gnuplot >/dev/null || { echo "SKIPPED: gnuplot missing (ci/install-deps.sh installs it)"; exit 77; }
out=$(mktemp -d /tmp/exanet-plots.XXXXXX)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export LOCK= PHASE=any REPEAT=1

SIZES="8 64 4096" ITERS=100 bash "$here/pingpong_compare.sh" "$build" "$out" >"$out/pingpong.log" 2>&1 ||
  { cat "$out/pingpong.log"; fail "pingpong_compare.sh"; }
MODES="tagged_lat bw" SIZES="1 64 4096" CELL_MS=2 bash "$here/xfer_compare.sh" "$build" "$out" \
  >"$out/xfer.log" 2>&1 || { cat "$out/xfer.log"; fail "xfer_compare.sh"; }
SIZES="8 4096" PLACEMENTS="0:0 16:40" ITERS=50 bash "$here/rma_compare.sh" "$build" "$out" \
  >"$out/rma.log" 2>&1 || { cat "$out/rma.log"; fail "rma_compare.sh"; }

want="pingpong_msg xfer_tagged_lat xfer_bw rma_write_lat rma_write_bw rma_read_bw"
for t in $want; do
  csv=$out/$t.csv gp=$out/$t.gp png=$out/$t.png
  [[ -s $csv && -s $gp ]] || fail "$t: no CSV or gnuplot script in $out ($(ls "$out" | tr '\n' ' '))"
  [[ -s $png ]] || fail "$t: no plot"
  [[ $(head -c 8 "$png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] || fail "$t.png is not a PNG"
  grep -q 'REPEAT=1' "$gp" && grep -q "$(date -u +%Y-%m-%d)" "$gp" && grep -q 'cpus' "$gp" ||
    fail "$t: the plot's title does not name the machine, the date and REPEAT"
  # The same script, its output a table of the points drawn, x in plain numbers.
  sed -e '/^set terminal/d' -e '/^set output/d' -e '/multiplot/d' -e '/^set format x/d' "$gp" |
    sed "1a set table \"$out/$t.tab\"\nset format x \"%.0f\"" >"$out/$t.table.gp"
  gnuplot "$out/$t.table.gp" 2>"$out/$t.table.err" || { cat "$out/$t.table.err"; fail "$t: gnuplot"; }
  python3 - "$csv" "$out/$t.tab" "$t" <<'PY' || exit 1
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
name = sys.argv[3]
sizes = [float(r["size"]) for r in rows]
if len(sizes) < 2:
    sys.exit(f"FAIL: {name}: the CSV has {len(sizes)} sizes")
curves, cur = [], None
for line in open(sys.argv[2]):
    if line.startswith("# Curve title:"):
        cur = {"title": line.split(":", 1)[1].strip().strip('"'), "x": []}
        curves.append(cur)
    elif cur is not None and line.strip() and not line.startswith("#"):
        f = line.split()
        if f[-1] == "i":
            cur["x"].append(float(f[0]))
if not curves:
    sys.exit(f"FAIL: {name}: gnuplot drew no curve")
bad = []
for c in curves:
    missing = [s for s in sizes if s not in c["x"]]
    if "median" in c["title"] and missing:
        bad.append(f'{c["title"]} lacks {missing}')
    elif missing:
        # a worst or ratio curve: only where the CSV has no number
        for r in rows:
            if float(r["size"]) in missing and all(v not in ("NA", "") for v in r.values()):
                bad.append(f'{c["title"]} lacks size {r["size"]} though its row is complete')
if bad:
    sys.exit(f"FAIL: {name}: " + "; ".join(bad))
print(f"{name}: {len(curves)} curves, each with the {len(sizes)} sizes {[int(s) for s in sizes]}")
PY
done
echo "PASS: $(echo $want | wc -w) plots render, every curve with every size"
