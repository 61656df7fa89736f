#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Losing a host (netns_lib.sh: two network namespaces, each with a private /dev/shm), at the
# libfabric level: lost_host's survivor on host A and its peer on host B, over exanet's network
# backend (FI_EXANET_NETWORK=other_hosts over tcp), connected and busy; then host B goes away:
#   link  B's end of the veth pair is taken down (B's process lives on, and must lose A too)
#   kill  every process of B is killed (SIGKILL)
# The survivor's outstanding operations with B must end in error completions within a bound
# (lost_host.c), and both processes must end. FI_EXANET_NETWORK_LOST_AFTER_MS=2000: silence
# counts as a loss after 2 s (the default, 30 s, only makes the test slower). Every process is
# bounded by a timeout; the namespaces, link and /dev/shm go on every exit path (netns_lib.sh).
# Needs root (exit 77 without it).
#   fabtests/multinode/netns_lost.sh PROVIDER-DIR LOST_HOST link|kill
set -euo pipefail
provider_dir=${1:?usage: $0 PROVIDER-DIR LOST_HOST link|kill}
prog=${2:?} mode=${3:?}
[[ $mode == link || $mode == kill ]] || { echo "netns_lost: mode is link or kill, not $mode"; exit 2; }
source "$(dirname "${BASH_SOURCE[0]}")/netns_lib.sh"
netns_require netns_lost
netns_up
netns_one_iface exanet0
unset FI_PROVIDER  # it would hide tcp from exanet
export FI_PROVIDER_PATH=$provider_dir FI_EXANET_NETWORK=other_hosts FI_TCP_NODELAY=1
export FI_TCP_IFACE=$iface FI_EXANET_NETWORK_LOST_AFTER_MS=2000 LOST_HOST_BOUND_S=15
chmod 777 "$work"

echo "netns_lost: survivor on $ns_a ($addr_a), peer on $ns_b ($addr_b), host B lost by: $mode"
netns_start "$ns_b" timeout 150 "$prog" peer "$work" >"$work/peer.log" 2>&1
peer=${netns_pids[-1]}
netns_start "$ns_a" timeout 150 "$prog" survivor "$work" >"$work/survivor.log" 2>&1
survivor=${netns_pids[-1]}

show() { echo "--- survivor"; cat "$work/survivor.log"; echo "--- peer"; cat "$work/peer.log"; }
for _ in $(seq 600); do  # both sides connected and their operations posted
  [[ -e $work/a.ready ]] && break
  kill -0 "$survivor" 2>/dev/null || break
  sleep 0.1
done
[[ -e $work/a.ready ]] || { echo "netns_lost: FAIL: the survivor never got ready"; show; exit 1; }
sleep 0.5  # the send's RTS is at B, B's pings answered
if [[ $mode == link ]]; then
  ip -n "$ns_b" link set "$iface" down
else
  pids=$(ip netns pids "$ns_b")
  kill -9 $pids
fi
touch "$work/down"
start=$SECONDS

rc_a=0 rc_b=0
wait "$survivor" || rc_a=$?
wait "$peer" || rc_b=$?
show
echo "netns_lost: survivor exit $rc_a, peer exit $rc_b, both gone $((SECONDS - start)) s after host B was lost"
if [[ $rc_a -ne 0 ]] || ! grep -q "^PASS: survivor" "$work/survivor.log"; then
  echo "netns_lost: FAIL: the survivor"
  exit 1
fi
if [[ $mode == link ]] && { [[ $rc_b -ne 0 ]] || ! grep -q "^PASS: peer" "$work/peer.log"; }; then
  echo "netns_lost: FAIL: the peer on the unplugged host did not lose the survivor cleanly"
  exit 1
fi
if [[ -n $(ip netns pids "$ns_a") || -n $(ip netns pids "$ns_b") ]]; then
  echo "netns_lost: FAIL: processes outlived the test in a namespace"
  exit 1
fi
echo "netns_lost: PASS: host B lost ($mode): error completions, no hang"
