#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The floor under exanet's large messages across two network namespaces (as net_compare.sh):
# lower_floor (the lower provider alone, no exanet) times its own tagged message against its RMA
# write plus a notification, one way, per size. Root (network namespaces); takes lib.sh's
# benchmark lock for the whole run; RT=1 (default) runs both ends under SCHED_FIFO, BIND=1
# (default) pins them to cpus 0 and 1.
#   fabtests/bench/net_floor.sh [BUILD]     FLOOR_SIZES, FLOOR_MODES, REPEAT (default 3 runs)
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
# shellcheck source=../multinode/netns_lib.sh
source "$here/../multinode/netns_lib.sh"
netns_require net_floor
bench_init lower_floor net_floor "$@"
netns_up
trap 'netns_cleanup; rm -f "$raw" "$raw".*' EXIT
trap 'exit 130' INT TERM
rt=()
[[ ${RT:-1} == 1 ]] && rt=(chrt -f 50)
pin_a=() pin_b=()
[[ ${BIND:-1} == 1 ]] && pin_a=(taskset -c 0) pin_b=(taskset -c 1)
env_a=(-u FI_PROVIDER FI_TCP_NODELAY=1 FI_TCP_IFACE=exa$$va)
env_b=(-u FI_PROVIDER FI_TCP_NODELAY=1 FI_TCP_IFACE=exa$$vb)
echo "# hosts: $ns_a ($addr_a, leader) and $ns_b ($addr_b); FI_TCP_NODELAY=1 FI_TCP_IFACE=<veth>; TCP congestion control: $(ip netns exec "$ns_a" sysctl -n net.ipv4.tcp_congestion_control)"
bench_lock
rc=0
for ((r = 1; r <= repeat; r++)); do
  rm -f "$work/card"
  netns_start "$ns_b" env "${env_b[@]}" timeout "${RUN_TIMEOUT:-60}" "${pin_b[@]}" "${rt[@]}" "$bench" serve "$work/card" "$addr_b"
  echo "# run $r"
  on_host "$ns_a" env "${env_a[@]}" timeout "${RUN_TIMEOUT:-60}" "${pin_a[@]}" "${rt[@]}" "$bench" client "$work/card" "$addr_a" || rc=1
  wait "${netns_pids[-1]}" || rc=1
done
bench_unlock
exit $rc
