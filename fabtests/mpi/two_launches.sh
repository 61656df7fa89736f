#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# MPI_Comm_accept/MPI_Comm_connect between two separate launches over exanet: two mpiruns of one
# process each, sharing an ompi-server of this script's (Open MPI's way for separate jobs to meet).
# Separate launches are separate protection domains (fi_exanet(7) PROTECTION):
#  1. with no FI_EXANET_PDID, the jobs must fail within a bound, each logging the warning that
#     names both PDIDs and FI_EXANET_PDID (before, exanet refused them without a word);
#  2. with the same FI_EXANET_PDID in both, connect_accept must pass: messages of every protocol's
#     sizes each way, every byte checked.
# Usage: two_launches.sh <provider-dir> <mpirun> <connect_accept program>
set -u
dir=$1 mpirun=$2 prog=$3
command -v ompi-server >/dev/null || { echo "SKIP: no ompi-server (openmpi-bin)"; exit 77; }
out=$(mktemp -d)
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null
  rm -rf "$out"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$out"/*.txt; do echo "--- $f"; tail -n 15 "$f"; done; exit 1; }

ompi-server --no-daemonize -r "$out/uri" >"$out/ompi-server.txt" 2>&1 &
server_pid=$!
for _ in $(seq 50); do [[ -s $out/uri ]] && break; sleep 0.1; done
[[ -s $out/uri ]] || fail "ompi-server wrote no URI"
common=(--allow-run-as-root --ompi-server "file:$out/uri" -np 1 --mca pml cm --mca mtl ofi
        --mca mtl_ofi_provider_include exanet --mca btl self -x FI_PROVIDER=exanet
        -x FI_PROVIDER_PATH="$dir" -x FI_LOG_LEVEL=warn -x FI_LOG_PROV=exanet)

# both_jobs NAME [mpirun args]: the accepting and the connecting job, each bounded; sets
# accept_rc and connect_rc.
both_jobs() {
  local name=$1
  shift
  rm -f "$out/port"
  timeout 60 "$mpirun" "${common[@]}" "$@" "$prog" accept "$out/port" >"$out/$name-accept.txt" 2>&1 &
  local accept_job=$!
  timeout 60 "$mpirun" "${common[@]}" "$@" "$prog" connect "$out/port" >"$out/$name-connect.txt" 2>&1
  connect_rc=$?
  wait "$accept_job"
  accept_rc=$?
}

SECONDS=0
both_jobs apart
echo "separate PDIDs: accept exit $accept_rc, connect exit $connect_rc, $SECONDS s"
((accept_rc != 0 && connect_rc != 0)) || fail "jobs of separate PDIDs did not fail"
((accept_rc != 124 && connect_rc != 124)) || fail "a job of separate PDIDs hung until the timeout"
for side in accept connect; do
  grep -q "is of protection domain [0-9]*, this endpoint's is [0-9]*: refused .*FI_EXANET_PDID" \
    "$out/apart-$side.txt" || fail "the $side job did not log why the peer was refused"
done
grep -h "is of protection domain" "$out"/apart-*.txt | sed 's/^.*<warn> /    /' | head -2

pdid=$((1000 + RANDOM))
both_jobs together -x FI_EXANET_PDID=$pdid
echo "FI_EXANET_PDID=$pdid in both: accept exit $accept_rc, connect exit $connect_rc"
((accept_rc == 0 && connect_rc == 0)) || fail "jobs of one FI_EXANET_PDID failed"
for side in accept connect; do
  grep -q "PASS: connect_accept ($side)" "$out/together-$side.txt" || fail "no PASS from $side"
done
echo "PASS: two_launches"
