#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""The analytic latency model of issue 16 (research seeds-002-004 §C.7), from measurements.

  model.py profile FILE...
      Adds the FI_EXANET_PROFILE lines (exanet-profile ...) of one run's endpoints and prints,
      per protocol and size, the mean parts of a message's latency in us: post, link, match,
      copy, completion, and their total (send call to receive completion). The link part needs
      the stamps of both ends. With the stamps (FI_EXANET_PROFILE naming a file) of exactly two
      endpoints, the k-th message sent of a class is the k-th received (a ping-pong): each part
      is the median over messages, and the total the median of the per-message sums. Otherwise
      the means from the sums: link = (sum(arrival) - sum(issued)) / n over every endpoint,
      exact only when every message sent was received (the counts must agree), and dragged by
      every preemption on a shared machine.
  model.py check PROFILE BENCH [--low R] [--high R]     (default 0.6 and 1.2)
      The ctest's judgement (bench.model_quick): for each size in BENCH (thesis_bench lat
      output, "lat SIZE VARIANT US RI"), the profile must hold every part (each phase counted,
      as many receives as sends, no part negative) and a message's parts, post to completion,
      must add up to between R_low and R_high times the measured half round trip (the median
      of the per-message sums against the bench's median; the rest is the application's side:
      the fi_tsend and fi_cq_read calls around the provider's stamps). Exit 1 on any failure.
  model.py fit FAST SLOW [--label L]
      FAST and SLOW: thesis_bench lat output (or "SIZE US" lines) of the same sizes, measured
      with the protocol forced: FAST the buffered one (eager/medium: FI_EXANET_MEDIUM_MAX raised
      above every size), SLOW the rendezvous (FI_EXANET_MEDIUM_MAX at the eager limit). Fits
      latency = a + b * size to each (least squares on relative error, so small sizes count as
      much as large ones), prints the fits' residuals, the crossover they predict,
      x* = (a_slow - a_fast) / (b_fast - b_slow) (§C.7's threshold), and the measured one (where
      the measured curves cross, interpolated linearly between the two sizes around the sign
      change), and the prediction's error. Then the same with one change of slope per curve
      (fit_knee: where the copies outgrow a cache or the ring, a straight line cannot follow).
      A size in FAST or SLOW more than once (REPEAT runs appended) counts as its median.
  model.py distinct SIZE...
      The sizes a profiled run can tell apart: FI_EXANET_PROFILE sums a message into its size
      class (profile.hpp: four classes per power of two), so of two sizes in one class only the
      first is kept (printed on one line); each size left out is named on stderr. model_run.sh
      profiles only these, and check fails on a run that mixed two sizes in a class.

Python 3 standard library only. Not a test of speed: nothing here judges an absolute time.
"""
import argparse
import math
import sys
from collections import defaultdict

PHASES = ("post", "issued", "arrival", "match", "copy", "done")
PARTS = (("post", "post", "issued"), ("link", "issued", "arrival"), ("match", "arrival", "match"),
         ("copy", "match", "copy"), ("completion", "copy", "done"))


def profile_class(n):
    """FI_EXANET_PROFILE's size class of a length (proto/profile.hpp profile_class_of)."""
    if n < 8:
        return n
    e = n.bit_length() - 1
    if e >= 32:
        return 8 + (32 - 3) * 4 - 1
    return 8 + (e - 3) * 4 + ((n >> (e - 2)) & 3)


def distinct(sizes):
    """(kept, [(left out, the kept size of its class)]): the first size of each class."""
    first, kept, dropped = {}, [], []
    for n in sizes:
        c = profile_class(n)
        if c in first:
            dropped.append((n, first[c]))
        else:
            first[c] = n
            kept.append(n)
    return kept, dropped


def read_profile(paths):
    """({(proto, size): {"n_<phase>": int, "sum_<phase>": int}} summed over every line,
    the least clock read, {(proto, size): {(pid, port): {phase: [ns, ...]}}} the stamps)."""
    cells = defaultdict(lambda: defaultdict(int))
    stamps = defaultdict(lambda: defaultdict(dict))
    clock = []
    for path in paths:
        with open(path) as f:
            for line in f:
                if line.startswith("exanet-profile-stamps "):
                    w = line.split()
                    kv = dict(x.split("=", 1) for x in w[1:] if "=" in x)
                    t = [int(kv["first"])]
                    for d in w[7:]:
                        t.append(t[-1] + int(d))
                    stamps[(kv["proto"], int(kv["size"]))][(kv["pid"], kv["port"])][kv["phase"]] = t
                    continue
                if not line.startswith("exanet-profile "):
                    continue
                kv = dict(w.split("=", 1) for w in line.split()[1:] if "=" in w)
                key = (kv["proto"], int(kv["size"]))
                for ph in PHASES:
                    cells[key]["n_" + ph] += int(kv["n_" + ph])
                    cells[key]["sum_" + ph] += int(kv["sum_" + ph])
                clock.append(int(kv.get("clock_ns", 0)))
    return cells, (min(clock) if clock else 0), stamps


def median(v):
    v = sorted(v)
    n = len(v)
    return (v[n // 2] + v[(n - 1) // 2]) / 2 if n else float("nan")


def messages_of(by_ep):
    """Per-message parts {part: [ns...], "total": [...]} from the stamps of one class, pairing
    the k-th issued stamp of one endpoint with the k-th arrival of the other: exactly two
    endpoints (a ping-pong, or one sender and one receiver). None otherwise."""
    eps = [e for e in by_ep.values() if e]
    if len(eps) != 2:
        return None
    out = defaultdict(list)
    for snd, rcv in ((eps[0], eps[1]), (eps[1], eps[0])):
        lists = [snd.get("post", []), snd.get("issued", [])] + [rcv.get(ph, []) for ph in PHASES[2:]]
        n = min(len(x) for x in lists)
        for k in range(n):
            t = dict(zip(PHASES, (x[k] for x in lists)))
            for name, a, b in PARTS:
                out[name].append(t[b] - t[a])
            out["total"].append(t["done"] - t["post"])
    return out if out["total"] else None


def parts_of(cell):
    """The mean parts in ns, or (None, reason) when a part cannot be derived."""
    n = {ph: cell["n_" + ph] for ph in PHASES}
    missing = [ph for ph in PHASES if n[ph] == 0]
    if missing:
        return None, "no %s stamps" % ",".join(missing)
    if n["post"] != n["issued"] or n["arrival"] != n["match"] or n["match"] != n["copy"] \
            or n["copy"] != n["done"]:
        return None, "unequal counts %s" % " ".join("%s=%d" % (ph, n[ph]) for ph in PHASES)
    if n["issued"] != n["arrival"]:
        return None, "sent %d but received %d (link needs every message)" % (n["issued"], n["arrival"])
    out = {}
    for name, a, b in PARTS:
        out[name] = (cell["sum_" + b] - cell["sum_" + a]) / n[b]
    return out, ""


def read_curve(path):
    """{size: us} from thesis_bench lat lines or plain "SIZE US" lines; a size measured more
    than once (runs appended) takes the median of its values."""
    values = defaultdict(list)
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) >= 4 and w[0] == "lat":
                values[int(w[1])].append(float(w[3]))
            elif len(w) == 2 and w[0].isdigit():
                values[int(w[0])].append(float(w[1]))
    return {s: median(v) for s, v in values.items()}


def solve_weighted(rows, ys, ws):
    """Least squares of rows . c = ys with weights ws (normal equations, Gauss-Jordan)."""
    n = len(rows[0])
    m = [[0.0] * (n + 1) for _ in range(n)]
    for row, y, w in zip(rows, ys, ws):
        for i in range(n):
            m[i][n] += w * row[i] * y
            for j in range(n):
                m[i][j] += w * row[i] * row[j]
    for i in range(n):
        p = max(range(i, n), key=lambda r: abs(m[r][i]))
        m[i], m[p] = m[p], m[i]
        if abs(m[i][i]) < 1e-300:
            return None
        for r in range(n):
            if r != i:
                f = m[r][i] / m[i][i]
                for c in range(i, n + 1):
                    m[r][c] -= f * m[i][c]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit_knee(curve):
    """latency = a + b x + c max(0, x - k): a line with one change of slope at k (a cache or
    ring size the protocol's copies outgrow), k the measured size that fits best (relative least
    squares, as fit_line). Returns (function, k, rms relative residual) or None."""
    xs = sorted(curve)
    best = None
    for k in xs[1:-2]:  # at least two sizes beyond the knee
        rows = [[1.0, x, max(0.0, x - k)] for x in xs]
        ys = [curve[x] for x in xs]
        c = solve_weighted(rows, ys, [1.0 / (y * y) for y in ys])
        if c is None:
            continue
        f = (lambda a, b, d, kk: lambda x: a + b * x + d * max(0.0, x - kk))(c[0], c[1], c[2], k)
        r = math.sqrt(sum(((f(x) - curve[x]) / curve[x]) ** 2 for x in xs) / len(xs))
        if best is None or r < best[2]:
            best = (f, k, r)
    return best


def first_crossing(f_fast, f_slow, lo, hi, step=64):
    """The least size in [lo, hi] (on a step grid) where f_slow - f_fast turns <= 0 after being
    > 0, or None."""
    prev = f_slow(lo) - f_fast(lo)
    x = lo
    while x <= hi:
        d = f_slow(x) - f_fast(x)
        if prev > 0 and d <= 0:
            return x
        prev = d
        x += step
    return None


def fit_line(points):
    """a, b minimising sum(((a + b x - y) / y)^2): weighted least squares, weights 1/y^2."""
    sw = swx = swy = swxx = swxy = 0.0
    for x, y in points:
        w = 1.0 / (y * y)
        sw += w
        swx += w * x
        swy += w * y
        swxx += w * x * x
        swxy += w * x * y
    det = sw * swxx - swx * swx
    if len(points) < 2 or det == 0:
        raise ValueError("need two sizes or more")
    b = (sw * swxy - swx * swy) / det
    a = (swy - b * swx) / sw
    return a, b


def measured_crossover(fast, slow, sizes):
    """The size where slow - fast changes sign from > 0 to <= 0 (interpolated), or None."""
    prev = None
    for s in sizes:
        d = slow[s] - fast[s]
        if d <= 0:
            if prev is None:
                return None  # already crossed at the first size: below the range
            s0, d0 = prev
            return s0 + (s - s0) * d0 / (d0 - d)
        prev = (s, d)
    return None


def parts_median(cells, stamps, key):
    """(parts {name: ns}, total ns, n, how, reason): the medians of the per-message parts when
    the stamps pair up, else the means from the sums; total is the median (or mean) of the
    per-message sums. parts None (and a reason) when a part is missing."""
    mean, why = parts_of(cells[key])
    if mean is None:
        return None, 0, 0, "", why
    msgs = messages_of(stamps.get(key, {}))
    if msgs is None:
        return mean, sum(mean.values()), cells[key]["n_done"], "mean", ""
    parts = {name: median(msgs[name]) for name, _, _ in PARTS}
    return parts, median(msgs["total"]), len(msgs["total"]), "median", ""


def cmd_profile(args):
    cells, clock, stamps = read_profile(args.files)
    if not cells:
        print("no exanet-profile lines", file=sys.stderr)
        return 1
    print("# FI_EXANET_PROFILE, per message in us: the medians of the per-message parts where the "
          "stamps pair up, else the means (clock read: %d ns, in every part)" % clock)
    print("%-7s %8s %6s %6s %8s %8s %8s %8s %10s %9s" % (
        "proto", "size", "n", "stat", "post", "link", "match", "copy", "completion", "total"))
    for key in sorted(cells, key=lambda k: (k[1], k[0])):
        p, total, n, how, why = parts_median(cells, stamps, key)
        if p is None:
            print("%-7s %8d %6d  (%s)" % (key[0], key[1], cells[key]["n_done"], why))
            continue
        print("%-7s %8d %6d %6s %8.3f %8.3f %8.3f %8.3f %10.3f %9.3f" % (
            key[0], key[1], n, how, p["post"] / 1e3, p["link"] / 1e3, p["match"] / 1e3,
            p["copy"] / 1e3, p["completion"] / 1e3, total / 1e3))
    return 0


def cmd_check(args):
    cells, _, stamps = read_profile([args.profile])
    curve = read_curve(args.bench)
    if not curve:
        print("FAIL: no latency in %s" % args.bench)
        return 1
    bad = 0
    _, mixed = distinct(sorted(curve))
    for size, other in mixed:
        # Both sizes' messages went into one profile cell: neither size's parts are its own.
        print("FAIL: sizes %d and %d share a profile class: profile them in separate runs" % (
            other, size))
        bad += 1
    for size in sorted(curve):
        found = [(k, c) for k, c in cells.items() if k[1] == size]
        if not found:
            print("FAIL: size %d: no profile line" % size)
            bad += 1
            continue
        for key, cell in found:
            proto = key[0]
            p, total, _, how, why = parts_median(cells, stamps, key)
            if p is None:
                print("FAIL: %s %d: %s" % (proto, size, why))
                bad += 1
                continue
            total /= 1e3
            ratio = total / curve[size]
            neg = [k for k, v in p.items() if v < 0]
            ok = args.low <= ratio <= args.high and not neg
            print("%s %s %d: parts (%s) %s; total %.3f us, measured %.3f us, ratio %.2f" % (
                "ok  " if ok else "FAIL", proto, size, how,
                " ".join("%s=%.3f" % (k, v / 1e3) for k, v in p.items()), total, curve[size], ratio))
            bad += 0 if ok else 1
    return 1 if bad else 0


def cmd_fit(args):
    fast, slow = read_curve(args.fast), read_curve(args.slow)
    sizes = sorted(set(fast) & set(slow))
    if len(sizes) < 2:
        print("need two common sizes or more", file=sys.stderr)
        return 1
    fits = {}
    label = args.label + ": " if args.label else ""
    for name, curve in (("fast", fast), ("slow", slow)):
        a, b = fit_line([(s, curve[s]) for s in sizes])
        res = [(a + b * s - curve[s]) / curve[s] for s in sizes]
        rms = math.sqrt(sum(r * r for r in res) / len(res))
        worst = max(res, key=abs)
        fits[name] = (a, b)
        print("%sfit %s: %.3f us + %.3f ns/B; residuals rms %.1f%%, worst %+.1f%% (%s)" % (
            label, name, a, b * 1e3, 100 * rms, 100 * worst,
            " ".join("%d:%+.1f%%" % (s, 100 * r) for s, r in zip(sizes, res))))
    (af, bf), (asl, bsl) = fits["fast"], fits["slow"]
    pred = (asl - af) / (bf - bsl) if bf != bsl else float("nan")
    meas = measured_crossover(fast, slow, sizes)
    if not (pred > 0 and math.isfinite(pred)):
        pred_txt = "none (the fitted lines do not cross at a positive size)"
    else:
        pred_txt = "%.0f B" % pred
    meas_txt = "%.0f B" % meas if meas is not None else "none in %d..%d B" % (sizes[0], sizes[-1])
    err = ""
    if meas is not None and pred > 0 and math.isfinite(pred):
        err = ", error %+.1f%%" % (100 * (pred - meas) / meas)
    print("%scrossover predicted %s, measured %s%s" % (label, pred_txt, meas_txt, err))
    # The same with a knee per curve (fit_knee): the crossing of the two fitted curves.
    kf, ks = fit_knee(fast), fit_knee(slow)
    if kf and ks:
        x = first_crossing(kf[0], ks[0], sizes[0], sizes[-1])
        kerr = ""
        if x is not None and meas is not None:
            kerr = ", error %+.1f%%" % (100 * (x - meas) / meas)
        print("%sknee fits: fast knee %d B rms %.1f%%, slow knee %d B rms %.1f%%; crossover "
              "predicted %s, measured %s%s" % (
                  label, kf[1], 100 * kf[2], ks[1], 100 * ks[2],
                  "%d B" % x if x is not None else "none in range", meas_txt, kerr))
    return 0


def cmd_distinct(args):
    kept, dropped = distinct(args.sizes)
    for n, other in dropped:
        print("%d shares its profile class with %d: not profiled" % (n, other), file=sys.stderr)
    print(" ".join(str(n) for n in kept))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("profile")
    p.add_argument("files", nargs="+")
    c = sub.add_parser("check")
    c.add_argument("profile")
    c.add_argument("bench")
    c.add_argument("--low", type=float, default=0.6)
    c.add_argument("--high", type=float, default=1.2)
    f = sub.add_parser("fit")
    f.add_argument("fast")
    f.add_argument("slow")
    f.add_argument("--label", default="")
    d = sub.add_parser("distinct")
    d.add_argument("sizes", nargs="+", type=int)
    args = ap.parse_args()
    return {"profile": cmd_profile, "check": cmd_check, "fit": cmd_fit,
            "distinct": cmd_distinct}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
