#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# ctest bench.coll_model: coll_model.py (issue 16), the discrete-event model of thesis_coll's
# collectives, on fixed inputs, against facts that hold by construction (no measurement, no
# time of this machine):
#   - with no hop latency and no bandwidth term every call takes 0;
#   - Open MPI's binomial trees on 16 ranks are 4 edges deep, and their deepest paths cross 9
#     (bcast) and 5 (in-order: reduce, scatter) hops of the linear placement;
#   - each call sends the algorithm's count of messages (15 per tree, 64 for recursive doubling);
#   - two ranks, 1 ms a hop: a bcast takes 2 ms a call with the write and optimistic families
#     (RTR one way, the write the other) and 4 ms with read (RTS, CTS, write, ack);
#   - everything scales with the hop latency (double it, double every time);
#   - the write family is never slower than read, with or without the shared cores;
#   - read sends no RTR and finds none; write finds some on a bcast (the leaves post early).
# Then the same checks must reject broken models (a read family that does not wait for its ack,
# a recursive doubling one step short, a bcast root that forgets a child): the checks can fail.
#   coll_model_test.sh [coll_model.py]
# Exit 77 (skipped) without python3.
set -u
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
model=${1:-$here/coll_model.py}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# check MODEL: prints each failed fact, returns 1 if any failed
check() {
  local m=$1 bad=0 f
  fail() { echo "FAIL: $*"; bad=1; }
  nobw=(--intra-mbps 0 --inter-mbps 0)
  f=$tmp/zero
  python3 "$m" facts --hop-ns 0 "${nobw[@]}" --sizes 64 8192 --iters 5 >"$f" ||
    fail "model failed (hop 0)"
  [[ $(grep -c '\.avg_us=' "$f") == 24 ]] || fail "hop 0: expected 24 cells"
  grep '\.avg_us=' "$f" | grep -v '=0\.000$' | sed 's/^/FAIL: hop 0 not 0: /' | grep . && bad=1
  f=$tmp/facts
  python3 "$m" facts --sizes 64 1024 --iters 6 >"$f" || fail "model failed"
  for want in depth_bcast=4 depth_in_order=4 deepest_hops_bcast=9 deepest_hops_in_order=5; do
    grep -qx "$want" "$f" || fail "not $want: $(grep "^${want%=*}=" "$f")"
  done
  awk -F'[.=]' '/\.msgs_per_call=/ { got[$1 "." $2 "." $3] = $NF }
                /\.expected_msgs=/ { want[$1 "." $2 "." $3] = $NF }
                END { n = 0; for (k in want) { n++; if (got[k] != want[k])
                        printf "FAIL: %s sends %s messages a call, the algorithm %s\n",
                               k, got[k], want[k] }
                      if (n != 24) print "FAIL: " n " cells with a message count, expected 24" }' \
    "$f" | grep . && bad=1
  # write <= read, per collective and size, without and with two shared cores
  for extra in "" "--cpus 2"; do
    # shellcheck disable=SC2086  # extra is a list of arguments
    python3 "$m" facts --sizes 64 8192 --iters 6 --families write read $extra >"$tmp/wr" ||
      fail "model failed ($extra)"
    awk -F'[.=]' -v x="$extra" '/\.avg_us=/ { t[$1 "." $2 "." $3] = $5 "." $6 }
       END { n = 0; for (k in t) { split(k, p, "."); if (p[3] != "write") continue; n++
               r = p[1] "." p[2] ".read"; if (t[k] + 0 > t[r] + 0)
                 printf "FAIL: %s %s write %s us > read %s us %s\n", p[1], p[2], t[k], t[r], x }
             if (n != 8) print "FAIL: " n " write cells, expected 8" }' "$tmp/wr" | grep . && bad=1
  done
  # two ranks: the protocol's trips
  python3 "$m" facts --np 2 --coll bcast --sizes 64 "${nobw[@]}" --iters 10 >"$tmp/two" ||
    fail "model failed (2 ranks)"
  for want in bcast.64.write.avg_us=2000.000 bcast.64.optimistic.avg_us=2000.000 \
              bcast.64.read.avg_us=4000.000; do
    grep -qx "$want" "$tmp/two" || fail "2 ranks: not $want: $(grep "^${want%=*}=" "$tmp/two")"
  done
  # scaling with the hop latency (no bandwidth term: every time is a sum of hops)
  if ! python3 "$m" facts --hop-ns 1000000 "${nobw[@]}" --sizes 256 --iters 6 >"$tmp/h1" ||
     ! python3 "$m" facts --hop-ns 2000000 "${nobw[@]}" --sizes 256 --iters 6 >"$tmp/h2"; then
    fail "model failed (scaling)"
  fi
  join -t= <(grep '\.avg_us=' "$tmp/h1" | sort) <(grep '\.avg_us=' "$tmp/h2" | sort) |
    awk -F= '{ n++; d = $3 - 2 * $2; if (d > 0.002 || d < -0.002)
                 printf "FAIL: %s: %s us at 1 ms a hop, %s at 2 ms\n", $1, $2, $3 }
             END { if (n != 12) print "FAIL: " n " cells scaled, expected 12" }' | grep . && bad=1
  # RTRs: none in read; some fast sends in write's bcast
  grep -E '\.read\.(rtr|fast_sends)=' "$f" | grep -v '=0$' | sed 's/^/FAIL: read: /' | grep . &&
    bad=1
  grep -qE '^bcast\.64\.write\.fast_sends=[1-9]' "$f" || fail "write bcast: no send found its RTR"
  return $bad
}

check "$model" || { echo "FAIL: coll_model.py"; exit 1; }

# The checks must be able to fail: each broken copy must be rejected.
mutate() { # mutate NAME SED-EXPRESSION
  local copy=$tmp/$1.py
  if ! sed "$2" "$model" >"$copy"; then
    echo "FAIL: mutation $1: sed failed"
    exit 1
  fi
  if cmp -s "$model" "$copy"; then
    echo "FAIL: mutation $1 changed nothing (the model's text moved: update the test)"
    exit 1
  fi
  if check "$copy" >"$tmp/$1.out" 2>&1; then
    echo "FAIL: the checks passed a broken model ($1)"
    exit 1
  fi
  echo "ok: broken model rejected ($1): $(grep -m1 FAIL "$tmp/$1.out")"
}
# the read family's sender completes at its write, and no ack is sent
mutate no_ack 's/^\( *\)self\.pending\[key\] = s *# completes on the ack$/\1self.complete(s)/
                s/^\( *\)self\.packet("ack", dst, src, key)$/\1pass/'
# recursive doubling stops one exchange short
mutate short_allreduce 's/^\( *\)while d < np_:$/\1while d < np_ \/\/ 2:/'
# a model that crashes is rejected too (the bcast root forgets its last child: a deadlock)
mutate lost_child 's/^\( *yield \[p\.isend(k, size) for k in kids\)\]$/\1[:-1] or kids]/'
echo "PASS: coll_model.py's structural facts hold, and broken models are rejected"
