# SPDX-License-Identifier: BSD-2-Clause
# Two "hosts" on one machine, for the multi-host tests (sourced, not run): two network
# namespaces joined by a veth pair, each process started in one of them with a private /dev/shm
# (a mount namespace with its own tmpfs), so only the network connects them, as on a cluster.
# netns_up creates them and installs a trap that removes them, and kills what netns_start
# started, on every exit path. Needs root and iproute2: callers exit 77 (skipped) otherwise.
#   netns_up               sets ns_a, ns_b, addr_a, addr_b, work (a scratch folder); with
#                          NET_CC set, both namespaces' TCP congestion control (a namespace
#                          may choose only among net.ipv4.tcp_allowed_congestion_control; this
#                          VM's default is bbr, and only reno and bbr are allowed)
#   on_host NS CMD...      runs CMD on that host (in the foreground)
#   netns_start NS CMD...  the same in the background; its pid is appended to netns_pids
#   netns_one_iface NAME   renames both ends of the veth pair NAME, as a cluster's nodes share
#                          an interface name, so that one setting (FI_TCP_IFACE, Open MPI's
#                          oob_tcp_if_include) names it for every process; sets iface

netns_require() {
  [[ $(id -u) -eq 0 ]] || { echo "$1: needs root (network namespaces); skipped"; exit 77; }
  command -v ip >/dev/null || { echo "$1: iproute2 missing; skipped"; exit 77; }
}

# Kills whatever still runs in either namespace: mpirun's daemon on the other host and the MPI
# ranks are none of netns_start's, so netns_cleanup does not know them.
netns_kill_all() {
  local ns pids
  for ns in "$ns_a" "$ns_b"; do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -n $pids ]] && kill -9 $pids 2>/dev/null || true
  done
}

netns_cleanup() {
  local p
  for p in "${netns_pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  ip netns del "$ns_a" 2>/dev/null || true  # takes its end of the veth pair, and the pair, along
  ip netns del "$ns_b" 2>/dev/null || true
  rm -rf "$work"
}

netns_up() {
  local tag=exa$$
  ns_a=${tag}a ns_b=${tag}b
  local net=10.$((200 + $$ % 50)).$(( ($$ / 50) % 250 )).
  addr_a=${net}1 addr_b=${net}2
  work=$(mktemp -d)
  netns_pids=()
  trap netns_cleanup EXIT
  trap "exit 143" INT TERM  # a signal ends the script, and so runs the EXIT trap once
  ip netns add "$ns_a"
  ip netns add "$ns_b"
  ip link add "${tag}va" type veth peer name "${tag}vb"
  ip link set "${tag}va" netns "$ns_a"
  ip link set "${tag}vb" netns "$ns_b"
  ip -n "$ns_a" addr add "$addr_a/24" dev "${tag}va"
  ip -n "$ns_b" addr add "$addr_b/24" dev "${tag}vb"
  local ns
  for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
  ip -n "$ns_a" link set "${tag}va" up
  ip -n "$ns_b" link set "${tag}vb" up
  if [[ -n ${NET_CC:-} ]]; then
    for ns in "$ns_a" "$ns_b"; do
      ip netns exec "$ns" sysctl -q -w net.ipv4.tcp_congestion_control="$NET_CC" || return 1
    done
  fi
}

# rank_preload: mpirun arguments that give the ranks the LD_PRELOAD of this shell, if any. A
# sanitized build's tests carry the sanitizer runtime there (ctest's environment) for programs
# that load the sanitized provider without being instrumented themselves (our MPI programs are
# instrumented; the preload still reaches any rank that is not). Open MPI's launcher is not our
# code, and AddressSanitizer once stopped mpirun at a race of ORTE's own (CI, ASan stage: a use
# after free in its forwarding of a rank's error log, as ranks reported a lost host). So mpirun
# runs as `env -u LD_PRELOAD mpirun "${rank_preload[@]}" ...`; without a preload both do nothing.
rank_preload=()
[[ -n ${LD_PRELOAD:-} ]] && rank_preload=(-x "LD_PRELOAD=$LD_PRELOAD")

on_host() {
  local ns=$1
  shift
  ip netns exec "$ns" unshare --mount --propagation private \
    sh -c 'mount -t tmpfs -o size=64m tmpfs /dev/shm && exec "$@"' host "$@"
}

netns_start() {
  on_host "$@" &
  netns_pids+=($!)
}

netns_one_iface() {
  iface=$1
  local end ns
  for end in a b; do
    ns=${ns_a%a}$end
    ip -n "$ns" link set "${ns_a%a}v$end" down
    ip -n "$ns" link set "${ns_a%a}v$end" name "$iface"
    ip -n "$ns" link set "$iface" up
  done
}
