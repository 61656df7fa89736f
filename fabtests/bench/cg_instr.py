#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Instructions exanet executes per MPI round trip, from two callgrind runs of one rank.

  cg_instr.py LIB SHORT.cg LONG.cg ROUND_TRIPS [TOP]

SHORT.cg and LONG.cg are callgrind files (--dump-instr=yes) of the same program making
ROUND_TRIPS more round trips in LONG than in SHORT; differencing them removes start-up and
shutdown. LIB is the libexanet-fi.so both ran. Counted: the instructions of LIB's own code, plus
what LIB's calls into other objects cost (memcpy, free...), charged to the call. Printed:

  round trips, fi_cq_read calls per round trip, the cost E of a poll that finds nothing, the
  total per round trip, and "one read": the total with the empty polls taken out, as if every
  round trip found its message at the first fi_cq_read (the profile is of one rank slowed down
  by valgrind, so how often it polls in vain depends on the other rank: noise, not path);
  then the TOP functions by instructions per round trip.

E counts the instructions of the polling functions (cq_read, the endpoint's progress) executed
at least as often as the empty polls were: the path every poll takes.
"""
import collections
import re
import subprocess
import sys


def costs(path, lib):
    """Per-instruction costs of lib's code in one callgrind file."""
    cost = collections.Counter()
    names = {}
    cur = callee = None
    call = False
    last = 0

    def obj(m):
        if m.group(2):
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1))

    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if not line:
            continue
        if line.startswith("ob="):
            cur = obj(re.match(r"ob=\((\d+)\)(?: (.*))?", line))
            continue
        if line.startswith("cob="):
            callee = obj(re.match(r"cob=\((\d+)\)(?: (.*))?", line))
            continue
        if line.startswith("calls="):
            call = True
            continue
        if line.startswith(("fn=", "fl=", "fi=", "fe=")):
            callee = None
            continue
        c = line[0]
        if not (c.isdigit() or c in "+-*"):
            continue
        parts = line.split()
        a = parts[0]
        if a.startswith("0x"):
            addr = int(a, 16)
        elif a[0] == "+":
            addr = last + int(a[1:])
        elif a[0] == "-":
            addr = last - int(a[1:])
        elif a == "*":
            addr = last
        else:
            addr = int(a)
        last = addr
        if len(parts) >= 3 and cur and lib in cur:
            if not call:
                cost[addr] += int(parts[2])
            elif lib not in (callee or cur):  # a call out of lib: its inclusive cost
                cost[addr] += int(parts[2])
        if call:
            call = False
            callee = None
    return cost


def functions(lib):
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", lib],
                         capture_output=True, text=True, check=True).stdout
    funcs = collections.OrderedDict()
    cur = None
    for line in out.splitlines():
        m = re.match(r"^([0-9a-f]+) <(.*)>:$", line)
        if m:
            cur = m.group(2)
            funcs[cur] = []
            continue
        m = re.match(r"^\s+([0-9a-f]+):", line)
        if m and cur:
            funcs[cur].append(int(m.group(1), 16))
    return funcs


def main():
    lib, short, long_, rt = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    top = int(sys.argv[5]) if len(sys.argv) > 5 else 25
    name = lib.split("/")[-1]
    a, b = costs(short, name), costs(long_, name)
    d = {k: b.get(k, 0) - a.get(k, 0) for k in set(a) | set(b)}
    funcs = functions(lib)

    def calls(pattern):
        for f, addrs in funcs.items():
            if re.search(pattern, f) and addrs and "clone" not in f:
                return d.get(addrs[0], 0)
        return 0

    reads = calls(r"cq_read<\(fi_cq_format\)4>\(fid_cq")
    found = calls(r"endpoint::on_env_data\(")  # polls that found a message
    polling = (r"cq_read<\(fi_cq_format\)4>\(fid_cq|read_entries<\(fi_cq_format\)4>|"
               r"fi::endpoint::progress\(\)|source_of\(exanet::fi::endpoint&\)::\{lambda|"
               r"^exanet::proto::endpoint::progress\(\)$|progress_mailbox\(\)$")
    empty = 0
    for f, addrs in funcs.items():
        if re.search(polling, f):
            empty += sum(1 for x in addrs if d.get(x, 0) >= reads - found - 2 > 0)
    total = sum(d.values()) / rt
    r = reads / rt
    print(f"round trips {rt:.0f}  fi_cq_read per round trip {r:.2f}  empty poll E {empty}  "
          f"total {total:.1f}  one read {total - (r - 1) * empty:.1f}")
    per = collections.Counter()
    for f, addrs in funcs.items():
        per[f] = sum(d.get(x, 0) for x in addrs)
    for f, v in per.most_common(top):
        if v:
            print(f"{v / rt:8.1f}  {f[:120]}")


if __name__ == "__main__":
    main()
