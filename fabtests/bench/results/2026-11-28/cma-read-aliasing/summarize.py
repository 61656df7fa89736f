#!/usr/bin/env python3
"""Medians and spread (min-max) over the rounds of run.sh, per mode, build, size and placement.
   python3 summarize.py [dir]   (prints Markdown tables)"""
import glob
import os
import re
import statistics
import sys

d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
vals = {}  # (mode, which, size, placement) -> [values]
for f in glob.glob(os.path.join(d, "rma_read_*_r*.txt")):
    m = re.match(r"(rma_read_(?:lat|bw))_(\w+?)_r(\d+)\.txt", os.path.basename(f))
    mode, which = m.group(1), m.group(2)
    for line in open(f):
        p = line.split()
        if len(p) >= 3 and not line.startswith("#") and p[0].isdigit():
            vals.setdefault((mode, which, int(p[0]), p[1]), []).append(float(p[2]))

def size_name(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"

def cell(v, digits):
    med = statistics.median(v)
    return f"{med:.{digits}f} ({min(v):.{digits}f}-{max(v):.{digits}f})"

builds = ["before", "after", "default"]
for mode, unit, digits in (("rma_read_lat", "us", 1), ("rma_read_bw", "MB/s", 0)):
    sizes = sorted({k[2] for k in vals if k[0] == mode})
    places = []
    for k in sorted(vals):
        if k[0] == mode and k[3] not in places:
            places.append(k[3])
    places.sort(key=lambda s: (s not in ("0:0", "8:8"), s))
    rounds = max(len(v) for k, v in vals.items() if k[0] == mode)
    print(f"\n{mode} ({unit}), median over {rounds} rounds (min-max); before/after: "
          "FI_EXANET_DMA_ENGINE=cma, default: the after build with the default engine\n")
    print("| size | placement | " + " | ".join(builds) + " | after/before |")
    print("|---|---|" + "---:|" * (len(builds) + 1))
    for n in sizes:
        for pl in places:
            row = [size_name(n), pl]
            meds = {}
            for b in builds:
                v = vals.get((mode, b, n, pl))
                row.append(cell(v, digits) if v else "-")
                if v:
                    meds[b] = statistics.median(v)
            row.append(f"{meds['after'] / meds['before']:.2f}" if "after" in meds and "before" in meds else "-")
            print("| " + " | ".join(row) + " |")
