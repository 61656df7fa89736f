#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# An Open MPI job that loses a host (netns_lib.sh: two network namespaces, each with a private
# /dev/shm; launched as netns_mpi.sh launches, over exanet with FI_EXANET_NETWORK=other_hosts):
# 4 ranks by node (0 and 2 on host A, where mpirun runs; 1 and 3 on host B) exchange around a
# ring (lost_host_mpi.c) until host B goes away:
#   link  B's end of the veth pair is taken down (B's daemon and ranks live on, cut off)
#   kill  B's ranks are killed (SIGKILL; B's daemon lives and reports it)
# Then the ranks of host A must get an MPI error, or the job must be aborted, within a bound,
# and mpirun must end: no hang. With the link down only exanet can tell (Open MPI's own TCP
# connection to B's daemon is idle and stays open), so there a rank of A must say it got an
# error from MPI. FI_EXANET_NETWORK_LOST_AFTER_MS=2000 (the default is 30 s). Everything started
# is bounded by a timeout; processes, namespaces, link and /dev/shm go on every exit path, and
# are checked gone. Needs root (exit 77 without it).
#   fabtests/multinode/netns_mpi_lost.sh PROVIDER-DIR MPIRUN LOST_HOST_MPI link|kill
set -euo pipefail
provider_dir=${1:?usage: $0 PROVIDER-DIR MPIRUN LOST_HOST_MPI link|kill}
mpirun=${2:?} prog=${3:?} mode=${4:?}
[[ $mode == link || $mode == kill ]] || { echo "netns_mpi_lost: mode is link or kill, not $mode"; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/netns_lib.sh"
netns_require netns_mpi_lost
command -v "$mpirun" >/dev/null || { echo "netns_mpi_lost: $mpirun missing; skipped"; exit 77; }
netns_up

trap 'netns_kill_all; netns_cleanup' EXIT
netns_one_iface exanet0
# Host A's TCP gives up on an unanswered connection after 4 retransmissions (some 3 s) instead
# of Linux's 15 (some 15 minutes), as a cluster that must notice dead nodes sets it. Not for
# exanet, which counts a silent peer lost by itself (FI_EXANET_NETWORK_LOST_AFTER_MS): for
# mpirun, whose abort otherwise waits that long for host B's daemon to confirm its ranks ended.
ip netns exec "$ns_a" sysctl -qw net.ipv4.tcp_retries2=4

export EXANET_NETNS_HOSTS="$addr_a=$ns_a $addr_b=$ns_b"
printf '%s slots=2\n%s slots=2\n' "$addr_a" "$addr_b" >"$work/hostfile"
unset FI_PROVIDER  # it would hide tcp from exanet: Open MPI selects exanet by name instead
export FI_PROVIDER_PATH=$provider_dir FI_EXANET_NETWORK=other_hosts FI_EXANET_NETWORK_LOST_AFTER_MS=2000
export FI_TCP_NODELAY=1 FI_TCP_IFACE=$iface LOST_HOST_MPI_SECONDS=100
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bound=30  # seconds from the loss to the end of mpirun
echo "netns_mpi_lost: host A $ns_a ($addr_a, runs mpirun), host B $ns_b ($addr_b), host B lost by: $mode"

out=$work/job
on_host "$ns_a" timeout 150 env -u LD_PRELOAD "$mpirun" "${rank_preload[@]}" --allow-run-as-root \
  --hostfile "$work/hostfile" -np 4 \
  --map-by node --mca plm_rsh_agent "$here/netns_rsh_agent.sh" \
  --mca plm_rsh_no_tree_spawn 1 --mca oob_tcp_if_include "$iface" \
  --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include exanet --mca btl self \
  -x FI_PROVIDER_PATH -x FI_EXANET_NETWORK -x FI_EXANET_NETWORK_LOST_AFTER_MS -x FI_TCP_NODELAY \
  -x FI_TCP_IFACE -x LOST_HOST_MPI_SECONDS "$prog" >"$out" 2>&1 &
job=$!
for _ in $(seq 600); do
  [[ $(grep -c " ready$" "$out" 2>/dev/null) -eq 4 ]] && break
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
if [[ $(grep -c " ready$" "$out" 2>/dev/null) -ne 4 ]]; then
  echo "netns_mpi_lost: FAIL: the job did not start"
  tail -25 "$out"
  exit 1
fi
sleep 1  # rounds going, across both hosts
if [[ $mode == link ]]; then
  ip -n "$ns_b" link set "$iface" down
else
  ranks_b=$(for r in 1 3; do grep -o "^rank=$r pid=[0-9]*" "$out" | cut -d= -f3; done)
  # The ranks' pids as their PID namespace (the machine's) numbers them: host B's processes.
  for pid in $ranks_b; do
    ip netns identify "$pid" | grep -qx "$ns_b" || { echo "netns_mpi_lost: FAIL: rank pid $pid is not on host B"; exit 1; }
  done
  kill -9 $ranks_b
fi
lost_at=$(date +%s.%N)
start=$SECONDS
rc=0
wait "$job" || rc=$?
took=$((SECONDS - start))
grep -v "^ *$" "$out" | grep -v " ready$" | head -30
echo "netns_mpi_lost: mpirun exit $rc, $took s after host B was lost"
# Which ranks said they got an error, and how long after the loss.
errors_a=0
while read -r line; do
  [[ $line =~ ^rank=([0-9]+)\ error\ at=([0-9.]+) ]] || continue
  r=${BASH_REMATCH[1]}
  after=$(awk -v a="${BASH_REMATCH[2]}" -v b="$lost_at" 'BEGIN { printf "%.2f", a - b }')
  echo "  rank $r (host $([[ $((r % 2)) -eq 0 ]] && echo A || echo B)): MPI error ${after} s after the loss"
  [[ $((r % 2)) -eq 0 ]] && errors_a=$((errors_a + 1))
done <"$out"
if [[ $rc -eq 0 || $rc -eq 124 ]]; then  # 137: mpirun reporting a rank killed by SIGKILL
  echo "netns_mpi_lost: FAIL: mpirun $([[ $rc -eq 0 ]] && echo "succeeded" || echo "hung (killed by its timeout)")"
  exit 1
fi
if [[ $took -gt $bound ]]; then
  echo "netns_mpi_lost: FAIL: mpirun ended $took s after the loss (bound $bound s)"
  exit 1
fi
if grep -q "FAIL" "$out"; then
  echo "netns_mpi_lost: FAIL: a rank failed before the loss"
  exit 1
fi
if [[ $mode == link && $errors_a -eq 0 ]]; then
  echo "netns_mpi_lost: FAIL: no rank of host A got an error from MPI (only exanet can see the link go)"
  exit 1
fi

# Host B's daemon and ranks may outlive a cut link (nothing can tell them to go): the trap's
# netns_kill_all ends them, and whatever is left must be gone.
left_b=$(ip netns pids "$ns_b" | wc -w)
left_a=$(ip netns pids "$ns_a" | wc -w)
echo "netns_mpi_lost: processes left after mpirun: $left_a on host A, $left_b on host B (ended now)"
netns_kill_all
sleep 0.2
for ns in "$ns_a" "$ns_b"; do
  [[ -z $(ip netns pids "$ns") ]] || { echo "netns_mpi_lost: FAIL: processes outlived the job in $ns"; exit 1; }
done
netns_cleanup
trap - EXIT INT TERM
if ip netns list | grep -Eq "^($ns_a|$ns_b)( |$)"; then
  echo "netns_mpi_lost: FAIL: a namespace outlived the test"
  exit 1
fi
echo "netns_mpi_lost: PASS: host B lost ($mode): ranks of A got $errors_a MPI errors, mpirun ended in $took s (bound $bound s)"
