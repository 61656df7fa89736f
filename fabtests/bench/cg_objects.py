#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Instructions per message by object (shared library), from two callgrind runs of one rank.

  cg_objects.py SHORT.cg LONG.cg UNITS

SHORT.cg and LONG.cg are callgrind files of the same program doing UNITS more messages (or round
trips) in LONG than in SHORT; differencing them removes start-up and shutdown. Each instruction
is charged to the object (library) it lives in; what one calls of another counts to the callee.
Printed: one line per object with at least one instruction per unit, then the groups that
mpi_path_instructions.sh compares:

  mpi       Open MPI's own layers: libmpi, libopen-pal and every mca_* component except the
            byte-moving BTLs (vader, sm, tcp, self): pml ob1/cm/ucx, mtl ofi, coll...
  transport what moves and matches bytes below them: a libfabric provider (libexanet-fi,
            libfabric), UCX (libucp, libuct, libucs) or a BTL (mca_btl_vader...)
  other     libc, the benchmark program, the loader, and what callgrind could not place
"""
import collections
import re
import subprocess
import sys

TRANSPORT = re.compile(r"^(libexanet-fi|libfabric|libucp|libuct|libucs|libucm|mca_btl_(vader|sm|tcp|self))")
MPI = re.compile(r"^(libmpi|libopen-pal|libopen-rte|mca_|libmca_common)")


def by_object(path):
    """Self instructions per object, read from the callgrind file itself (callgrind_annotate
    leaves inlined lines without their object)."""
    cost = collections.Counter()
    names = {}
    cur = None
    call = False
    for line in open(path, errors="replace"):
        if line.startswith(("ob=", "cob=")):
            # An object's name is given once, where it first appears (a call's cob= included),
            # and named by its number after that.
            m = re.match(r"c?ob=\((\d+)\)(?: (.*))?", line.rstrip("\n"))
            if m.group(2):
                names[m.group(1)] = m.group(2).split("/")[-1]
            if line.startswith("ob="):
                cur = names.get(m.group(1), "?")
            continue
        if line.startswith("calls="):
            call = True  # the next cost line is the call's inclusive cost: not self
            continue
        c = line[:1]
        if not (c.isdigit() or c in "+-*"):
            continue
        parts = line.split()
        if not call and len(parts) >= 2 and cur:
            cost[cur] += int(parts[-1])
        call = False
    return cost


def group(obj):
    if TRANSPORT.match(obj):
        return "transport"
    if MPI.match(obj):
        return "mpi"
    return "other"


def main():
    short, long_, units = sys.argv[1], sys.argv[2], float(sys.argv[3])
    a, b = by_object(short), by_object(long_)
    per = {k: (b[k] - a[k]) / units for k in set(a) | set(b)}
    groups = collections.Counter()
    for k, v in sorted(per.items(), key=lambda kv: -kv[1]):
        groups[group(k)] += v
        if abs(v) >= 1:
            print(f"  {v:8.1f}  {k}")
    total = sum(groups.values())
    print(f"mpi {groups['mpi']:.1f}  transport {groups['transport']:.1f}  "
          f"other {groups['other']:.1f}  total {total:.1f}")


if __name__ == "__main__":
    main()
