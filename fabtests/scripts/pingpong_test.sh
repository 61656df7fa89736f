#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Runs Debian's fi_pingpong over exanet for every size (-S all), server and client as separate
# processes, and fails if either side fails or the sweep is incomplete.
#   pingpong_test.sh <msg|tagged>
set -u
mode=${1:-msg}
port=$((20000 + RANDOM % 30000))
out=$(mktemp -d)
trap 'kill "$server" 2>/dev/null; rm -rf "$out"' EXIT
timeout 180 fi_pingpong -p exanet -e rdm -m "$mode" -S all -I 50 -B "$port" >"$out/server" 2>&1 &
server=$!
for _ in $(seq 50); do  # wait for the server's control socket
  ss -ltn 2>/dev/null | grep -q ":$port " && break
  sleep 0.1
done
timeout 180 fi_pingpong -p exanet -e rdm -m "$mode" -S all -I 50 -P "$port" 127.0.0.1 >"$out/client" 2>&1
client_rc=$?
wait "$server"
server_rc=$?
cat "$out/client"
if ((client_rc != 0 || server_rc != 0)); then
  echo "FAIL: client rc=$client_rc server rc=$server_rc"
  cat "$out/server"
  exit 1
fi
# The sweep must reach the largest size fi_pingpong tries (it clamps to max_msg_size).
if ! grep -qE '^(6m|8m)\b' "$out/client"; then
  echo "FAIL: sweep incomplete"
  exit 1
fi
echo "PASS: fi_pingpong -m $mode over exanet, every size"
