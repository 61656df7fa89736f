#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# `exanet-stats top` over a running Open MPI job, as a user watches one (issue 15's acceptance):
#   top_mpi_test.sh EXANET_STATS MPI_BENCH MPIRUN [MPIRUN OPTIONS...]
# Starts a two-rank ping-pong (mpi_bench, 64 B, long enough to outlast the test) under pml cm and
# mtl ofi over exanet, finds its two rank processes, and lets `top -i 1 -n 3` draw three frames.
# Passes when both ranks appear alive in every frame and their message and byte counts grow from
# each frame to the next; then kills the job and removes what it left.
set -u
stats=$1 bench=$2
shift 2
. "$(dirname "${BASH_SOURCE[0]}")/job_files.sh"
out=$(mktemp -d)
job= ranks=
fail() { echo "FAIL: $*"; exit 1; }
# Every process below PID (mpirun's ranks, whatever launcher sits between), from /proc in bash
# alone: pgrep hangs with the sanitizer runtimes preloaded (the ASan stage preloads them).
children() {
  local st stat rest
  for st in /proc/[0-9]*/stat; do
    stat=$(<"$st") 2>/dev/null || continue
    rest=${stat##*) }  # after the command name, which may hold spaces: state ppid ...
    rest=${rest#* }
    [ "${rest%% *}" = "$1" ] && { st=${st#/proc/}; echo "${st%/stat}"; }
  done
}
descendants() {
  local kid
  for kid in $(children "$1"); do echo "$kid"; descendants "$kid"; done
}
cleanup() {
  [ -n "$job" ] && kill -TERM "$job" 2>/dev/null
  sleep 1
  # Open MPI stops its ranks on SIGTERM; whatever still runs is killed.
  kill -9 $job $ranks 2>/dev/null
  wait 2>/dev/null
  remove_job_files "$stats" $ranks
  rm -rf "$out"
}
trap cleanup EXIT

timeout 100 "$@" -np 2 "$bench" -t lat -m 64 -M 64 -P 0:0 -b 1 -i 100000000 -n 1 >"$out/job" 2>&1 &
job=$!
# The ranks, once both have opened their endpoints (they show in --json).
for _ in $(seq 150); do
  ranks=$(descendants "$job" | while read -r p; do
            [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$(readlink -f "$bench")" ] && echo "$p"; done)
  if [ "$(echo "$ranks" | grep -c .)" -eq 2 ] &&
     [ "$("$stats" --csv | grep -cE "^($(echo $ranks | tr ' ' '|')),")" -ge 2 ]; then
    break
  fi
  kill -0 "$job" 2>/dev/null || { cat "$out/job"; fail "the MPI job ended before it could be watched"; }
  sleep 0.2
done
[ "$(echo "$ranks" | grep -c .)" -eq 2 ] || { cat "$out/job"; fail "did not find the job's two ranks"; }
ranks=$(echo $ranks)
echo "ranks: $ranks"

"$stats" top -i 1 -n 3 >"$out/top" || fail "exanet-stats top failed"
cat "$out/top"
# Per frame and rank: messages (eager + medium + RI + SI) and bytes (sent + received).
awk -v ranks="$ranks" '
  BEGIN { n = split(ranks, r, " "); for (i = 1; i <= n; i++) want[r[i]] = 1 }
  /^exanet-stats [0-9:]+:/ { frame++ }
  /^PID / { for (i = 1; i <= NF; i++) col[$i] = i }
  frame && ($1 in want) && $3 == "alive" {
    print frame, $1, $col["EAGER"] + $col["MEDIUM"] + $col["RI"] + $col["SI"], $col["TXBYTES"] + $col["RXBYTES"]
  }' "$out/top" >"$out/rows"
frames=$(grep -c '^exanet-stats [0-9:]*:' "$out/top")
[ "$frames" -eq 3 ] || fail "top drew $frames frames, not 3"
for pid in $ranks; do
  seen=$(awk -v p="$pid" '$2 == p' "$out/rows" | wc -l)
  [ "$seen" -eq 3 ] || fail "rank $pid is alive in $seen of the 3 frames"
  awk -v p="$pid" '$2 == p { if (seen && ($3 <= m || $4 <= b)) bad = 1; m = $3; b = $4; seen = 1 }
                   END { exit bad }' "$out/rows" ||
    fail "rank $pid: its counts did not grow from frame to frame ($(awk -v p="$pid" '$2 == p {printf "%s/%s ", $3, $4}' "$out/rows"))"
done
echo "PASS: exanet-stats top showed both ranks of a running Open MPI job, their counts growing in each of 3 frames"
