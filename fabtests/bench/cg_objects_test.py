#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Checks cg_objects.py's reading of callgrind files (the attribution, not any figure).

Two synthetic callgrind files in the format callgrind writes: an object named for the first time
in a call's cob= line and later named by number alone, compressed positions (+n, -n, *), a
call's inclusive cost line that must not count as the caller's own, and a file that runs more
"messages" than the other. The per-object sums and the groups must come out exactly.
"""
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import cg_objects  # noqa: E402

HEADER = "version: 1\ncreator: test\npositions: line\nevents: Ir\n"


def body(n):
    """A program whose main (in mpi_bench) calls into libexanet-fi n times per run."""
    return HEADER + f"""
ob=(1) /build/fabtests/mpi/mpi_bench
fl=(1) mpi_bench.c
fn=(1) sweep
10 {3 * n}
+2 {n}
cob=(2) /build/lib/libexanet-fi.so
cfi=(2) ep.cpp
cfn=(2) tagged_recv
calls={n} 40
* {100 * n}
-1 7
ob=(3) /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_pml_cm.so
fl=(3) ???
fn=(3) cm_irecv
0 {20 * n}

ob=(2)
fl=(2)
fn=(2)
40 {60 * n}
+3 {40 * n}
cob=(4) /usr/lib/x86_64-linux-gnu/libc.so.6
cfn=(4) memcpy
calls={n} 0
+1 {9 * n}
ob=(4)
fn=(4)
0 {9 * n}
"""


def main():
    with tempfile.TemporaryDirectory() as d:
        short, long_ = os.path.join(d, "s.cg"), os.path.join(d, "l.cg")
        open(short, "w").write(body(10))
        open(long_, "w").write(body(30))
        got = cg_objects.by_object(long_)
        want = {"mpi_bench": 4 * 30 + 7, "libexanet-fi.so": 100 * 30, "mca_pml_cm.so": 20 * 30,
                "libc.so.6": 9 * 30}
        if dict(got) != want:
            print(f"by_object: got {dict(got)}, want {want}")
            return 1
        out = subprocess.run([sys.executable, os.path.join(here, "cg_objects.py"), short, long_,
                              "20"], capture_output=True, text=True, check=True).stdout
        last = out.strip().splitlines()[-1]
        # per unit: exanet 100 (transport), pml cm 20 (mpi), main 4 + libc 9 (other)
        if last != "mpi 20.0  transport 100.0  other 13.0  total 133.0":
            print(f"groups: got {last!r}")
            return 1
    print("cg_objects: attribution as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
