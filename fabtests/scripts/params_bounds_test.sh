#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Parameters out of bounds are clamped, said once in the log, and the provider works with them
# (fi/param_table.hpp). FI_EXANET_MAILBOX_SLOTS=100000000000 once failed every endpoint open, or
# hung a ping-pong with a 137 GB segment in /dev/shm.
#   params_bounds_test.sh      (FI_PROVIDER_PATH names the build's module)
set -u
server=
port=$((20000 + RANDOM % 30000))
out=$(mktemp -d)
trap 'kill "$server" 2>/dev/null; rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export FI_LOG_LEVEL=warn FI_LOG_PROV=exanet

# fi_info: the clamped and the default values are what the application is told.
FI_EXANET_IOV_LIMIT=100 FI_EXANET_TX_SIZE=12abc FI_EXANET_DMA_ENGINE=fastest \
  timeout 60 fi_info -p exanet -v >"$out/info" 2>&1 ||
  { cat "$out/info"; fail "fi_info -p exanet"; }
grep -a 'exanet' "$out/info" | grep -a '<warn>' | sed 's/^/    /'
grep -aq 'FI_EXANET_IOV_LIMIT=100 is out of bounds \[1, 8\]; using 8' "$out/info" ||
  fail "no warning for FI_EXANET_IOV_LIMIT=100"
grep -aq 'FI_EXANET_DMA_ENGINE=fastest is not one of auto, staged, cma; using auto' "$out/info" ||
  fail "no warning for FI_EXANET_DMA_ENGINE=fastest"
grep -aq 'FI_EXANET_TX_SIZE=12abc is not a number' "$out/info" ||
  fail "no warning for FI_EXANET_TX_SIZE=12abc"
grep -aEq '^ +iov_limit: 8$' "$out/info" || fail "iov_limit is not clamped to 8"
grep -aA12 'tx_attr:' "$out/info" | grep -aEq '^ +size: 1024$' || fail "tx size is not the default 1024"
# fi_getinfo is called more than once (libfabric's utility providers ask too): one warning each.
n=$(grep -ac 'FI_EXANET_IOV_LIMIT=100 is out of bounds' "$out/info")
((n == 1)) || fail "the warning for FI_EXANET_IOV_LIMIT was logged $n times, not once"

# At FI_LOG_INFO: the configuration in force after the bounds (once, however often fi_getinfo
# reads it), and why fi_getinfo refused a request.
FI_LOG_LEVEL=info FI_EXANET_MAILBOX_SLOTS=100 FI_EXANET_IOV_LIMIT=100 FI_EXANET_PROTOCOL=read \
  timeout 60 fi_info -p exanet >"$out/info_log" 2>&1 || { cat "$out/info_log"; fail "fi_info at info"; }
config=$(grep -a 'configuration in force' "$out/info_log")
grep -a 'configuration in force' "$out/info_log" | cut -c1-240 | sed 's/$/.../; s/^/    /'
n=$(grep -ac 'configuration in force' "$out/info_log")
((n == 2)) || fail "the configuration was logged in $n lines, not once (2 lines)"
for want in 'protocol family read' 'mailbox 128 slots (8 KiB)' 'iov_limit 8' 'DMA engine auto' \
            'bounce rings 64 x 256 KiB (16 MiB' 'rendezvous timeout 30000 ms'; do
  grep -aqF "$want" <<<"$config" || fail "the configuration does not say \"$want\""
done
FI_LOG_LEVEL=info timeout 60 fi_info -p exanet -e msg >"$out/refused" 2>&1
grep -aq 'no match: endpoint type FI_EP_MSG requested, only FI_EP_RDM supported' "$out/refused" ||
  { cat "$out/refused"; fail "fi_getinfo's refusal of FI_EP_MSG is not logged with its reason"; }

# A ping-pong with the mailbox far beyond its bound: clamped to 2^22 slots, it completes.
export FI_EXANET_MAILBOX_SLOTS=100000000000
timeout 120 fi_pingpong -p exanet -e rdm -S 65536 -I 20 -B "$port" >"$out/server" 2>&1 &
server=$!
for _ in $(seq 50); do  # wait for the server's control socket
  ss -ltn 2>/dev/null | grep -q ":$port " && break
  sleep 0.1
done
timeout 120 fi_pingpong -p exanet -e rdm -S 65536 -I 20 -P "$port" 127.0.0.1 >"$out/client" 2>&1
client_rc=$?
wait "$server"
server_rc=$?
grep -av '<warn>' "$out/client"
((client_rc == 0 && server_rc == 0)) ||
  { cat "$out/server"; fail "fi_pingpong with FI_EXANET_MAILBOX_SLOTS=100000000000: client rc=$client_rc server rc=$server_rc"; }
for side in client server; do
  n=$(grep -ac 'FI_EXANET_MAILBOX_SLOTS=100000000000 is out of bounds \[16, 4194304\]; using 4194304' "$out/$side")
  ((n == 1)) || { cat "$out/$side"; fail "$side logged the mailbox warning $n times, not once"; }
done
echo "PASS: out-of-bounds parameters clamped with one warning each; the configuration in force and a refusal logged at info; fi_pingpong ran with them"
