#!/usr/bin/env bash
# The network backend (dev/net) across two "hosts": two network namespaces joined by a veth pair,
# each with a private /dev/shm (a mount namespace with its own tmpfs), so only the network
# connects them, as on a cluster. The target runs in one, the initiator in the other
# (prov/exanet/test/dev/net_device_test serve / client), over libfabric's tcp provider. The
# script creates the namespaces and the link and removes them on every exit path; every process
# it starts is bounded by a timeout. Needs root (as CI has): exit 77 (skipped) otherwise.
#   fabtests/multinode/netns_device.sh PATH-TO-net_device_test [provider]
set -euo pipefail
prog=${1:?usage: $0 net_device_test [provider]}
prov=${2:-tcp}
[[ $(id -u) -eq 0 ]] || { echo "netns_device: needs root (network namespaces); skipped"; exit 77; }
command -v ip >/dev/null || { echo "netns_device: iproute2 missing; skipped"; exit 77; }

tag=exa$$
ns_a=${tag}a ns_b=${tag}b
net=10.$((200 + $$ % 50)).$(( ($$ / 50) % 250 )).
addr_a=${net}1 addr_b=${net}2
work=$(mktemp -d)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  ip netns del "$ns_a" 2>/dev/null || true   # takes its end of the veth pair, and the pair, along
  ip netns del "$ns_b" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

ip netns add "$ns_a"
ip netns add "$ns_b"
ip link add "${tag}va" type veth peer name "${tag}vb"
ip link set "${tag}va" netns "$ns_a"
ip link set "${tag}vb" netns "$ns_b"
ip -n "$ns_a" addr add "$addr_a/24" dev "${tag}va"
ip -n "$ns_b" addr add "$addr_b/24" dev "${tag}vb"
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set "${tag}va" up
ip -n "$ns_b" link set "${tag}vb" up

# A host: its network namespace and a /dev/shm of its own.
on_host() {
  local ns=$1
  shift
  ip netns exec "$ns" unshare --mount --propagation private \
    sh -c 'mount -t tmpfs -o size=64m tmpfs /dev/shm && exec "$@"' host "$@"
}

echo "netns_device: target in $ns_b ($addr_b), initiator in $ns_a ($addr_a), over $prov"
on_host "$ns_b" timeout 120 "$prog" serve "$work/target.addr" "$addr_b" "$prov" &
pids+=($!)
target_pid=$!
rc_a=0
on_host "$ns_a" timeout 120 "$prog" client "$work/target.addr" "$addr_a" "$prov" || rc_a=$?
rc_b=0
wait "$target_pid" || rc_b=$?
echo "netns_device: initiator exit $rc_a, target exit $rc_b"
[[ $rc_a -eq 0 && $rc_b -eq 0 ]]
