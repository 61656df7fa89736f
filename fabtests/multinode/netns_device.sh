#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The network backend (dev/net) across two "hosts" (netns_lib.sh: two network namespaces, each
# with a private /dev/shm). The target runs in one, the initiator in the other
# (prov/exanet/test/dev/net_device_test serve / client), over libfabric's tcp provider. Every
# process it starts is bounded by a timeout. Needs root (as CI has): exit 77 (skipped) otherwise.
#   fabtests/multinode/netns_device.sh PATH-TO-net_device_test [provider]
set -euo pipefail
prog=${1:?usage: $0 net_device_test [provider]}
prov=${2:-tcp}
source "$(dirname "${BASH_SOURCE[0]}")/netns_lib.sh"
netns_require netns_device
netns_up

echo "netns_device: target in $ns_b ($addr_b), initiator in $ns_a ($addr_a), over $prov"
netns_start "$ns_b" timeout 120 "$prog" serve "$work/target.addr" "$addr_b" "$prov"
target_pid=${netns_pids[-1]}
rc_a=0
on_host "$ns_a" timeout 120 "$prog" client "$work/target.addr" "$addr_a" "$prov" || rc_a=$?
rc_b=0
wait "$target_pid" || rc_b=$?
echo "netns_device: initiator exit $rc_a, target exit $rc_b"
[[ $rc_a -eq 0 && $rc_b -eq 0 ]]
