#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""The claims table of fabtests/bench/thesis/run.sh: each directional claim of the ExaNeST
write-based MPI thesis (research seed 000, §9.3-§9.6) beside what exanet measured under its link
model, as claims.md (markdown) and claims.csv in OUT.

    table.py OUT

Reads OUT/p2p.samples, coll.samples, share.samples, p2p_share.samples, apps.note, run.info
(run.sh writes them). A row whose measurement is missing says NA in its cells; check_table.sh
fails on that. Only the rows marked optional (applications that may not be installed) may say
"not run". Ratios are of medians (over the iterations of a run, then over runs); "write" is
exanet's write family (the thesis's v3: tickets, RTR), "read" the read-based baseline
(RTS, CTS, write, ack), "optimistic" the thesis's speculative variant, "write:any" the write
family with any-source receives (no RTR: sender-initiated).
"""
import csv
import math
import os
import statistics
import sys
from collections import defaultdict

out = sys.argv[1]


def lines(name):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [l.split() for l in f if l.strip()]


p2p = defaultdict(list)      # (hops, mode, size, variant) -> [value]
deliver = defaultdict(list)  # (hops, size, variant) -> [deliver_us]
for h, mode, size, var, val, dl, ri in lines("p2p.samples"):
    p2p[int(h), mode, int(size), var].append(float(val))
    if mode == "ffr":
        deliver[int(h), int(size), var].append(float(dl))
coll = defaultdict(list)     # (coll, size, family) -> [avg_us]
for c, size, fam, avg, lo, hi in lines("coll.samples"):
    coll[c, int(size), fam].append(float(avg))
share = {}                   # program -> percent of rendezvous sends an RTR found waiting
for prog, fam, rndv, ri in lines("share.samples"):
    if fam == "write":
        share[prog] = 100.0 * int(ri) / int(rndv) if int(rndv) else float("nan")
for prog, fam, n, pct in lines("p2p_share.samples"):
    share[prog] = float(pct)
apps_note = open(os.path.join(out, "apps.note")).read().strip() if os.path.exists(
    os.path.join(out, "apps.note")) else ""
info = open(os.path.join(out, "run.info")).read() if os.path.exists(os.path.join(out, "run.info")) else ""

NA = float("nan")


def med(v):
    return statistics.median(v) if v else NA


def sizes_of(table, pred):
    return sorted({k[2] if len(k) == 4 else k[1] for k in table if pred(k)})


def in_range(s, lo, hi):
    return lo <= s <= hi


def lat_ratio(h, num, den, lo, hi, mode="lat", agg=max):
    """agg over the sizes in [lo, hi] of num/den (latency: >1 means den is faster); bandwidth
    tables pass the ratio the other way round themselves."""
    rs = []
    for s in sizes_of(p2p, lambda k: k[0] == h and k[1] == mode and in_range(k[2], lo, hi)):
        a, b = med(p2p[h, mode, s, num]), med(p2p[h, mode, s, den])
        if a == a and b == b and b > 0:
            rs.append(a / b)
    return agg(rs) if rs else NA


def ffr_ratio(h, num, den, lo, hi, what="send", agg=max):
    rs = []
    for s in sizes_of(p2p, lambda k: k[0] == h and k[1] == "ffr" and in_range(k[2], lo, hi)):
        if what == "send":
            a, b = med(p2p[h, "ffr", s, num]), med(p2p[h, "ffr", s, den])
        else:
            a, b = med(deliver[h, s, num]), med(deliver[h, s, den])
        if a == a and b == b and b > 0:
            rs.append(a / b)
    return agg(rs) if rs else NA


def coll_ratio(c, num, den, lo, hi, agg=max):
    rs = []
    for s in sorted({k[1] for k in coll if k[0] == c and in_range(k[1], lo, hi)}):
        a, b = med(coll[c, s, num]), med(coll[c, s, den])
        if a == a and b == b and b > 0:
            rs.append(a / b)
    return agg(rs) if rs else NA


def gmean(v):
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else NA


def f(x, d=2):
    return "NA" if x != x else f"{x:.{d}f}"


def lower(who, r, up_to=""):
    """num/den = r of times: who (the den) is (1 - 1/r) lower, or higher when r < 1."""
    if r != r:
        return "NA"
    if r >= 1:
        return f"{who} {up_to}{100 * (1 - 1 / r):.0f}% lower"
    return f"{who} {100 * (1 / r - 1):.0f}% higher"


rows = []


def row(rid, claim, thesis, ratio_def, value, same, exanet, note="", optional=False):
    rows.append(dict(id=rid, claim=claim, thesis=thesis, ratio_def=ratio_def,
                     ratio=value if isinstance(value, str) else f(value),
                     same=same, exanet=exanet, note=note, optional=optional))


def yes_if(cond, value_ok):
    if not value_ok:
        return "NA"
    return "yes" if cond else "no"


def ok(*xs):
    return all(x == x for x in xs)


# --- osu_latency (a) -------------------------------------------------------------------------
r = lat_ratio(1, "read", "write", 512, 4096)
row("lat-intra", "osu_latency, intra-QFDB, 512-4096 B: write-based (v3) better than read-based",
    "v3 up to 8% lower (Fig. 4.2): read/write up to 1.09", "read/write, max over 512-4096 B", r,
    yes_if(r > 1, ok(r)), lower("write", r))
r3 = lat_ratio(3, "read", "write", 64, 512, agg=gmean)
row("lat-3hops", "osu_latency, 3 hops, 64-512 B: write-based lower (the ack leaves the SI path)",
    "about 11% lower (Fig. 4.5): read/write about 1.12", "read/write, geometric mean 64-512 B", r3,
    yes_if(r3 > 1, ok(r3)), lower("write", r3))
r5 = lat_ratio(5, "read", "write", 64, 512)
row("lat-5hops", "osu_latency, 5 hops, 64-512 B: write-based lower",
    "up to 30% lower (Fig. 4.7): read/write up to 1.43", "read/write, max over 64-512 B", r5,
    yes_if(r5 > 1, ok(r5)), lower("write", r5, "up to "))
g = [lat_ratio(h, "read", "write", 64, 512, agg=gmean) for h in (1, 3, 5)]
row("lat-grows", "osu_latency 64-512 B: the write-based gain grows with hops",
    "grows: intra small, 3 hops about 11%, 5 hops up to 30%",
    "read/write (geometric mean 64-512 B) at 1 / 3 / 5 hops", " / ".join(f(x) for x in g),
    yes_if(g[0] < g[1] < g[2], ok(*g)), "grows" if ok(*g) and g[0] < g[1] < g[2] else
    ("does not grow" if ok(*g) else "NA"))
small5 = lat_ratio(5, "read", "write", 64, 512, agg=gmean)
large5 = lat_ratio(5, "read", "write", 65536, 1 << 30, agg=gmean)
row("lat-fades", "osu_latency, 5 hops: the gain fades at larger sizes",
    "fades (Fig. 4.8; the optimizations are control-path only)",
    "read/write 64-512 B vs 64 KiB and above (geometric means)", f"{f(small5)} vs {f(large5)}",
    yes_if(large5 < small5, ok(small5, large5)),
    "fades" if ok(small5, large5) and large5 < small5 else ("does not fade" if ok(small5, large5) else "NA"))
rl = lat_ratio(1, "read", "write", 1 << 20, 1 << 30)
row("lat-large-intra", "osu_latency, intra-QFDB, 1 MiB: read-based significantly worse",
    "significantly worse (Fig. 4.4; the authors suspect a sleep in its completion detection)",
    "read/write at 1 MiB, 1 hop", rl, yes_if(rl > 1.05, ok(rl)),
    f"read {100 * (rl - 1):.0f}% slower" if ok(rl) else "NA",
    "exanet's read family has no such sleep: it costs two control trips more per message (RTS "
    "and CTS), which are small beside 1 MiB on the link.")
re = lat_ratio(1, "read", "write", 0, 36)
row("lat-eager-pool", "osu_latency eager (32 B): v3 better than read-based (memory pool)",
    "v3 slightly better; about 10% (eager) in the collectives, from the pool, not the protocol",
    "read/write at 32 B, 1 hop", re, "no" if ok(re) and abs(re - 1) < 0.05 else yes_if(re > 1, ok(re)),
    f"equal within {100 * abs(re - 1):.0f}%" if ok(re) and abs(re - 1) < 0.05 else (
        f"read/write {f(re)}" if ok(re) else "NA"),
    "Not expressible: every exanet family sends eager messages the same way and allocates "
    "nothing per message; the thesis attributes this gain to its memory pool.")
ro = [lat_ratio(h, "write", "optimistic", 64, 512, agg=gmean) for h in (0, 1, 5)]
row("lat-optimistic", "osu_latency 64-512 B: optimistic slightly better than v3",
    "optimistic lower still (Fig. 4.1; no tickets); about 5% in bcast",
    "write/optimistic (geometric mean 64-512 B): model off / 1 / 5 hops", " / ".join(f(x) for x in ro),
    yes_if(ro[0] > 1.02 and min(ro[1:]) > 0.97, ok(*ro)),
    ("optimistic faster where the CPU cost shows (model off), equal within 3% under modelled distance"
     if ro[0] > 1.02 and min(ro[1:]) > 0.97 else
     "equal within 3% everywhere" if max(abs(x - 1) for x in ro) <= 0.03 else "optimistic not faster") if ok(*ro) else "NA",
    "What optimistic saves is CPU work (no tickets, no posted-queue entry for long receives); "
    "both families take one traversal per message here, so modelled distance hides it.")
rk = lat_ratio(3, "read", "write:any", 64, 512, agg=gmean)
row("lat-ack", "osu_latency, 3 hops, 64-512 B: removing the ack from the sender-initiated path",
    "about 11% lower (Fig. 4.5; the thesis's osu_latency had 0.1% fast receives, so its gain is this)",
    "read/write:any (both RTS, CTS, write; read adds the ack), geometric mean 64-512 B", rk,
    yes_if(rk > 1.03, ok(rk)), (f"equal within {100 * abs(rk - 1):.0f}%" if abs(rk - 1) <= 0.03 else
                                f"read/write:any {f(rk)}") if ok(rk) else "NA",
    "The read family's ack travels back ahead of the reply's RTS on the same ordered path, and the "
    "first process posts its receive as soon as the ack completes its send: the ack is never waited for.")
ra = [lat_ratio(h, "write:any", "write", 64, 8192, agg=gmean) for h in (1, 5)]
row("lat-anysource", "osu_latency 64-8192 B: ANY_SOURCE receives hurt the receiver-initiated protocol",
    "ANY_SOURCE / ANY_TAG measurably hurt RI protocols (§9.6)",
    "write:any/write (geometric mean 64-8192 B) at 1 / 5 hops", " / ".join(f(x) for x in ra),
    yes_if(min(ra) > 1, ok(*ra)), "any-source slower" if ok(*ra) and min(ra) > 1 else (
        "any-source not slower" if ok(*ra) else "NA"))

# --- osu_bw (a) ------------------------------------------------------------------------------
bwr = [lat_ratio(h, "write", "read", 1 << 20, 1 << 30, mode="bw") for h in (1, 3, 5)]
row("bw-large", "osu_bw 1 MiB: write-based (v3, optimistic) best, read-based worst, at every distance",
    "v3 and optimistic best, read-based worst at 0.5-4 MiB (Fig. 4.10); distance does not change the order",
    "bandwidth write/read at 1 MiB, 1 / 3 / 5 hops", " / ".join(f(x) for x in bwr),
    yes_if(min(bwr) > 1.05, ok(*bwr)), ("write ahead everywhere" if min(bwr) > 1.05 else
                                        "equal within 15%" if max(abs(x - 1) for x in bwr) <= 0.15 else
                                        "not ahead everywhere") if ok(*bwr) else "NA",
    "Every family moves a large message as the same DMA write; the thesis's authors suspect a sleep "
    "in the read-based completion detection, which exanet's read family does not have. At 1 MiB "
    "the emulation copies the data, so this machine's load shows in the ratio.")
b1 = med(p2p[1, "bw", 1 << 20, "write"])
b5 = med(p2p[5, "bw", 1 << 20, "write"])
row("bw-distance", "osu_bw 1 MiB: distance lowers the bandwidth",
    "changing distance lowers all bandwidths (Fig. 4.10)", "write bandwidth 1 hop / 5 hops at 1 MiB",
    b1 / b5 if ok(b1, b5) and b5 else NA, yes_if(b1 > b5, ok(b1, b5)),
    f"{f(b1, 0)} vs {f(b5, 0)} MB/s" if ok(b1, b5) else "NA",
    "1 hop runs on an intra-QFDB link, 5 hops on the torus's slower links (run.info gives the rates).")

# --- forced fast receive (b) -----------------------------------------------------------------
fi1 = ffr_ratio(1, "read", "write", 64, 1024, agg=gmean)
fi8 = ffr_ratio(1, "read", "write", 8192, 8192)
row("ffr-intra", "forced fast receive, intra-QFDB: write-based MPI_Send faster, 64-1024 B and 8 KiB",
    "25% lower 64-1024 B (read/write 1.33), 10% at 8 KiB (1.11) (Fig. 4.11)",
    "send time read/write: geometric mean 64-1024 B; 8 KiB", f"{f(fi1)}; {f(fi8)}",
    yes_if(fi1 > 1 and fi8 > 1, ok(fi1, fi8)), lower("write", fi1),
    "The send of an RTR-served write completes when its write is handed to the engine; the "
    "read family's waits for RTS, CTS, write and ack: four traversals of the modelled path, "
    "so at modelled distances the ratio is the traversal count, not the thesis's software cost.")
for h in (3, 5):
    a64 = ffr_ratio(h, "read", "write", 64, 64)
    a8k = ffr_ratio(h, "read", "write", 8192, 8192)
    d64 = ffr_ratio(h, "read", "write", 64, 64, what="deliver")
    row(f"ffr-{h}hops", f"forced fast receive, {h} hops: read-based initially much higher, fading with size",
        "read-based initially 50% higher (read/write 1.5), the advantage fading faster with size (Fig. 4.12/4.13)",
        "send read/write at 64 B; at 8 KiB; delivery read/write at 64 B", f"{f(a64)}; {f(a8k)}; {f(d64)}",
        yes_if(a64 > 1 and d64 > 1, ok(a64, d64)),
        (f"read {100 * (a64 - 1):.0f}% higher (send), {100 * (d64 - 1):.0f}% (delivery)" if ok(a64, d64) else "NA")
        + ("; fades" if ok(a64, a8k) and a8k < a64 else "; does not fade" if ok(a64, a8k) else ""))
rs = [ffr_ratio(h, "write:any", "write", 64, 8192, what="deliver", agg=gmean) for h in (1, 3, 5)]
row("ri-beats-si", "receives posted first: receiver-initiated (RTR) beats sender-initiated",
    "RI removes RTS and CTS: the write-based gain (§9.6)",
    "delivery write:any/write (same family, SI vs RI), geometric mean 64-8192 B, 1 / 3 / 5 hops",
    " / ".join(f(x) for x in rs), yes_if(min(rs) > 1, ok(*rs)),
    "RI faster at every distance" if ok(*rs) and min(rs) > 1 else ("RI not faster everywhere" if ok(*rs) else "NA"))
gd = []
for h in (1, 3, 5):
    a = [med(deliver[h, s, "write:any"]) - med(deliver[h, s, "write"])
         for s in sizes_of(p2p, lambda k: k[0] == h and k[1] == "ffr")]
    gd.append(statistics.median(a) if a and ok(*a) else NA)
row("ri-gain-hops", "the RI gain grows with hops (each removed control message saves a multi-hop traversal)",
    "benefits grow with network distance (§9.6)",
    "delivery saved by RI (write:any - write, us, median over sizes) at 1 / 3 / 5 hops; ratios in ri-beats-si",
    " / ".join(f(x, 1) for x in gd), yes_if(gd[0] < gd[1] < gd[2], ok(*gd)),
    "grows" if ok(*gd) and gd[0] < gd[1] < gd[2] else ("does not grow" if ok(*gd) else "NA"))
fo = [ffr_ratio(h, "write", "optimistic", 64, 512, agg=gmean) for h in (1, 5)]
row("ffr-optimistic", "forced fast receive 64-512 B: optimistic slightly better than v3",
    "optimistic slightly better than v3 on small messages (§8, §9.4)",
    "send write/optimistic (geometric mean 64-512 B) at 1 / 5 hops", " / ".join(f(x) for x in fo),
    yes_if(min(fo) > 1.02, ok(*fo)), "optimistic faster" if ok(*fo) and min(fo) > 1.02 else (
        "optimistic not faster everywhere" if ok(*fo) else "NA"))
fa = [ffr_ratio(h, "write:any", "write", 64, 8192, agg=gmean) for h in (1, 5)]
row("ffr-anysource", "forced fast receive: ANY_SOURCE receives lose the RTR",
    "ANY_SOURCE suspends receiver initiation (§4.2, §9.6)",
    "send write:any/write (geometric mean 64-8192 B) at 1 / 5 hops", " / ".join(f(x) for x in fa),
    yes_if(min(fa) > 1, ok(*fa)), "any-source slower" if ok(*fa) and min(fa) > 1 else (
        "any-source not slower" if ok(*fa) else "NA"))

# --- collectives (c) -------------------------------------------------------------------------
np_ranks = next((l.split("np: ")[1].split()[0] for l in info.splitlines() if "np: " in l), "?")
for c, lo, hi, thesis, tr in (
        ("bcast", 64, 1024, "25-30% lower latency 64-1024 B (Fig. 4.14): read/write 1.33-1.43", ">1"),
        ("reduce", 64, 8192, "7-10% better 64-8192 B: read/write 1.08-1.11", ">1"),
        ("allreduce", 64, 8192, "read-based up to 20% higher 64-8192 B: read/write up to 1.2", ">1"),
        ("scatter", 64, 1024, "read-based 20-36% higher 64-1024 B (elsewhere: never above 7%): read/write 1.07-1.36", ">1")):
    rc = coll_ratio(c, "read", "write", lo, hi, agg=gmean)
    row(f"{c}", f"osu_{c}, {np_ranks} ranks, {lo}-{hi} B: write-based lower latency than read-based",
        thesis + " (16 ranks)", f"read/write, geometric mean {lo}-{hi} B", rc, yes_if(rc > 1, ok(rc)),
        lower("write", rc),
        "Open MPI's tuned component with the thesis's algorithm; ranks time-share two cores.")
rb = coll_ratio("bcast", "write", "optimistic", 64, 512, agg=gmean)
row("bcast-optimistic", f"osu_bcast, {np_ranks} ranks, 64-512 B: optimistic slightly better than v3",
    "about 5% better (§9.4): write/optimistic about 1.05", "write/optimistic, geometric mean 64-512 B",
    rb, yes_if(rb > 1.02, ok(rb)), (lower("optimistic", rb) if rb > 1.02 else
                                    f"equal within {100 * abs(rb - 1):.0f}%" if abs(rb - 1) <= 0.02 else
                                    f"optimistic {100 * (1 / rb - 1):.0f}% higher") if ok(rb) else "NA",
    "Both families serve a receive posted in time with one write; what optimistic saves in the "
    "thesis is CPU work (no tickets, no lock), which the modelled trips of 1 ms per hop hide.")

# --- fast-receive share (d) ------------------------------------------------------------------
for prog, thesis_share, band in (
        ("p2p_lat", "about 0.1% (osu_latency)", (0, 5)),
        ("p2p_bw", "about 0.1% (osu_bw)", (0, 5)),
        ("p2p_ffr", "forced: every send (the program's purpose)", (90, 100.01)),
        ("osu_bcast", "about 40% (some ranks 0%)", (5, 100)),
        ("osu_reduce", "19-25%", (5, 100)),
        ("osu_allreduce", "25-30%", (5, 100)),
        ("osu_scatter", "about 45% in some ranks", (5, 100))):
    v = share.get(prog, NA)
    inb = ok(v) and band[0] <= v < band[1]
    row(f"share-{prog}", f"fast-receive share, {prog.replace('p2p_', 'thesis_bench ')} (write family)",
        thesis_share, "sends an RTR found waiting / rendezvous sends (%)", f(v, 1),
        yes_if(inb, ok(v)), ("same band" if inb else "other band") if ok(v) else "NA",
        "same band: below 5% where the thesis has about 0.1%, above 5% where it has tens of percent"
        if prog == "p2p_lat" else "")
v = share.get("p2p_latlate", NA)
row("share-p2p_latlate", "fast-receive share, thesis_bench lat with each receive posted one modelled trip "
    "after its send completed (write family)", "about 0.1% (osu_latency)",
    "sends an RTR found waiting / rendezvous sends (%)", f(v, 1), yes_if(v < 5, ok(v)),
    ("same band" if v < 5 else "other band") if ok(v) else "NA",
    "Why share-p2p_lat differs: the emulated engine completes a DMA write when it is issued, "
    "so the next receive's RTR leaves right behind the data and is often at the peer before "
    "its reply; delayed by one modelled trip (a send completing at delivery) the RTR comes late.")
lm = share.get("lammps", NA)
lammps_why = next((p for p in apps_note.split("; ") if p.startswith("lammps")), "")
row("share-lammps", "fast-receive share, LAMMPS melt (write family, 4 ranks)", "not stated (LAMMPS: 2-3% faster at 128 nodes)",
    "sends an RTR found waiting / rendezvous sends (%)", f(lm, 1) if ok(lm) else (lammps_why or "NA"),
    "n/a (no thesis figure)" if ok(lm) else (lammps_why or "NA"), f(lm, 1) + "%" if ok(lm) else (lammps_why or "NA"),
    optional=True)
npv = share.get("netpipe", NA)
np_why = next((p for p in apps_note.split("; ") if p.startswith("netpipe")), "")
row("share-netpipe", "fast-receive share, NetPIPE (write family, 2 ranks)", "not in the thesis's table",
    "sends an RTR found waiting / rendezvous sends (%)", f(npv, 1) if ok(npv) else (np_why or "NA"),
    "n/a (no thesis figure)" if ok(npv) else (np_why or "NA"), f(npv, 1) + "%" if ok(npv) else (np_why or "NA"),
    optional=True)

# --- output ----------------------------------------------------------------------------------
cols = ["id", "claim", "thesis", "exanet", "same", "ratio_def", "ratio", "note", "optional"]
with open(os.path.join(out, "claims.csv"), "w", newline="") as fh:
    w = csv.writer(fh)
    w.writerow(cols)
    for r in rows:
        w.writerow([r[c] for c in cols])
with open(os.path.join(out, "claims.md"), "w") as fh:
    fh.write("# The thesis's claims beside exanet's link model\n\n")
    fh.write("```\n" + info.strip() + "\n```\n\n")
    fh.write("| id | claim | thesis | exanet (same direction?) | ratio |\n|---|---|---|---|---|\n")
    for r in rows:
        fh.write(f"| {r['id']} | {r['claim']} | {r['thesis']} | {r['exanet']} ({r['same']}) | "
                 f"{r['ratio_def']}: **{r['ratio']}** |\n")
    notes = [r for r in rows if r["note"]]
    if notes:
        fh.write("\nNotes:\n\n")
        for r in notes:
            fh.write(f"- {r['id']}: {r['note']}\n")
print(open(os.path.join(out, "claims.md")).read())
