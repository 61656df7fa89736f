#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The provider across two "hosts" as a user runs it (netns_lib.sh: two network namespaces, each
# with a private /dev/shm, so shared memory cannot carry a byte between them): Debian's
# fi_pingpong over exanet with FI_EXANET_NETWORK=other_hosts, server on one host, client on the
# other, at a size that fits one packet (eager), 1 KiB (an fi_inject through the network's
# bounce ring: the server's last pong must arrive though it never calls libfabric again), 8 KiB
# (a send through the bounce ring), 64 KiB and 1 MiB (rendezvous: RTS, CTS, DMA write,
# notification). FI_PROVIDER stays unset (it would hide tcp from
# exanet); fi_pingpong -p exanet selects by hints. Bounded by timeouts; needs root (exit 77
# without it).
#   fabtests/multinode/netns_pingpong.sh PROVIDER-DIR
set -euo pipefail
provider_dir=${1:?usage: $0 directory-of-libexanet-fi.so}
source "$(dirname "${BASH_SOURCE[0]}")/netns_lib.sh"
netns_require netns_pingpong
command -v fi_pingpong >/dev/null || { echo "netns_pingpong: fi_pingpong missing; skipped"; exit 77; }
netns_up
unset FI_PROVIDER
export FI_PROVIDER_PATH=$provider_dir FI_EXANET_NETWORK=other_hosts FI_TCP_NODELAY=1

port=$((40000 + $$ % 20000))
for size in 16 1024 8192 65536 1048576; do
  FI_EXANET_NETWORK_NODE=$addr_b netns_start "$ns_b" timeout 60 \
    fi_pingpong -p exanet -e rdm -B "$port" -I 50 -S "$size" >"$work/server.$size" 2>&1
  server=${netns_pids[-1]}
  sleep 1
  rc=0
  FI_EXANET_NETWORK_NODE=$addr_a on_host "$ns_a" timeout 60 \
    fi_pingpong -p exanet -e rdm -P "$port" -I 50 -S "$size" "$addr_b" >"$work/client.$size" 2>&1 || rc=$?
  src=0
  wait "$server" || src=$?
  if [[ $rc -ne 0 || $src -ne 0 ]] || ! grep -Eq "^[0-9.]+[kmg]?[[:space:]]+50[[:space:]]+=50" "$work/client.$size"; then
    echo "netns_pingpong: $size bytes failed (client exit $rc, server exit $src)"
    grep -v "returned -61\|mrail" "$work/client.$size" | tail -5
    grep -v "returned -61\|mrail" "$work/server.$size" | tail -5
    exit 1
  fi
  echo "netns_pingpong: $size bytes: $(grep -E "^[0-9.]+[kmg]?[[:space:]]+50" "$work/client.$size")"
  port=$((port + 1))
done
echo "netns_pingpong: fi_pingpong across two hosts over exanet's network backend: 16 B, 1 KiB, 8 KiB, 64 KiB, 1 MiB"
