#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# An Open MPI job across two "hosts" (netns_lib.sh: two network namespaces, each with a private
# /dev/shm), launched as on a cluster: mpirun runs on host A, reads a hostfile naming both hosts
# (2 slots each) and starts its daemon on host B through its rsh launcher, with
# netns_rsh_agent.sh in place of ssh. exanet runs with FI_EXANET_NETWORK=other_hosts over tcp.
#  1. all_pairs --paths, 4 ranks by slot (0 and 1 on A, 2 and 3 on B): every pair exchanges
#     messages of every protocol size, data checked, plus collectives; each rank then checks from
#     the kernel's counts that its other-host peers' bytes came over TCP and its same-host
#     peers' did not (and that it maps their segments), and here each rank's exanet counters
#     (FI_EXANET_STATS, written when its endpoint closes) must show at least its payload sent.
#  2. p2p, 4 ranks by node (0 and 2 on A, 1 and 3 on B), so its pairs (0-1, 2-3) span the hosts:
#     both orders of arrival, probes, cancel, 4000 outstanding requests, persistent requests.
#  3. Debian's hpcc (the HPC Challenge benchmark), 4 ranks by slot, where installed: its own
#     checks must pass across the hosts.
#  4. ScaLAPACK's BLACS tester (Debian's scalapack-mpi-test, our input files in
#     fabtests/apps/blacs), 4 ranks by slot, where installed: its summaries must be complete and
#     show no failure across the hosts.
# Every mpirun is bounded by a timeout; the namespaces, their links, the processes in them and
# their /dev/shm (segments included) are removed on every exit path, and checked gone at the end.
# Needs root (exit 77 without it).
#   fabtests/multinode/netns_mpi.sh PROVIDER-DIR MPIRUN ALL_PAIRS P2P
# EXANET_NETNS_MPI_NETWORK overrides FI_EXANET_NETWORK (every_peer or off must make it fail).
set -euo pipefail
provider_dir=${1:?usage: $0 PROVIDER-DIR MPIRUN ALL_PAIRS P2P}
mpirun=${2:?} all_pairs=${3:?} p2p=${4:?}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/netns_lib.sh"
netns_require netns_mpi
command -v "$mpirun" >/dev/null || { echo "netns_mpi: $mpirun missing; skipped"; exit 77; }
netns_up

trap 'netns_kill_all; netns_cleanup' EXIT

# One interface name on both hosts (FI_TCP_IFACE for exanet's tcp, oob_tcp_if_include for Open
# MPI's own).
netns_one_iface exanet0

export EXANET_NETNS_HOSTS="$addr_a=$ns_a $addr_b=$ns_b"
printf '%s slots=2\n%s slots=2\n' "$addr_a" "$addr_b" >"$work/hostfile"
unset FI_PROVIDER  # it would hide tcp from exanet: Open MPI selects exanet by name instead
export FI_PROVIDER_PATH=$provider_dir FI_EXANET_NETWORK=${EXANET_NETNS_MPI_NETWORK:-other_hosts}
export FI_TCP_NODELAY=1 FI_TCP_IFACE=$iface FI_EXANET_STATS=$work/stats
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "netns_mpi: host A $ns_a ($addr_a, runs mpirun), host B $ns_b ($addr_b), FI_EXANET_NETWORK=$FI_EXANET_NETWORK"

# One mpirun on host A (NAME MAPPING PROGRAM [ARGS...]), its output in $work/NAME, in the
# current folder (the ranks on host B start in the same one); sets rc to its exit status.
mpirun_job() {
  local name=$1 mapping=$2
  shift 2
  local job
  rc=0
  # In the background, waited for: a signal to this script runs its trap at once (bash defers
  # traps until a foreground command ends), which ends the job's processes on both hosts.
  on_host "$ns_a" timeout 120 env -u LD_PRELOAD "$mpirun" "${rank_preload[@]}" --allow-run-as-root \
    --hostfile "$work/hostfile" -np 4 \
    --map-by "$mapping" --mca plm_rsh_agent "$here/netns_rsh_agent.sh" \
    --mca plm_rsh_no_tree_spawn 1 --mca oob_tcp_if_include "$iface" \
    --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include exanet --mca btl self \
    -x FI_PROVIDER_PATH -x FI_EXANET_NETWORK -x FI_TCP_NODELAY -x FI_TCP_IFACE \
    -x FI_EXANET_STATS \
    "$@" >"$work/$name" 2>&1 &
  job=$!
  wait "$job" || rc=$?
}

run_job() {  # NAME MAPPING PROGRAM [ARGS...]: a program of ours, which must print PASS
  local name=$1
  mpirun_job "$@"
  if [[ $rc -ne 0 ]] || ! grep -q "^PASS: " "$work/$name"; then
    echo "netns_mpi: FAIL: $name (mpirun exit $rc$([[ $rc -eq 124 ]] && echo ", timed out"))"
    grep -v "^ *$" "$work/$name" | tail -25
    exit 1
  fi
}

field() { [[ " $2 " =~ \ $1=([0-9]+)\  ]] && echo "${BASH_REMATCH[1]}"; }  # NAME LINE

start=$SECONDS
run_job all_pairs slot "$all_pairs" --paths
ranks=0
while read -r line; do
  echo "  $line"
  rank=$(field rank "$line") pid=$(field pid "$line")
  payload=$(( $(field payload_here "$line") + $(field payload_other "$line") ))
  # The provider's own count, from the line it wrote when the rank's endpoint closed.
  report=$(grep "^exanet-stats pid=$pid " "$work/stats" | head -1)
  sent=$(field bytes_sent "$report" || true)
  if [[ -z $sent || $sent -lt $payload ]]; then
    echo "netns_mpi: FAIL: rank $rank (pid $pid): exanet counted ${sent:-no} bytes sent, below its payload $payload"
    exit 1
  fi
  # Which path exanet says it took: the two ranks of the other host over the network, at least
  # the one of this host through shared memory (a rank's messages to itself count there too),
  # and network bytes that cover what went to the other host.
  shm_peers=$(field peers_shared_memory "$report" || true)
  net_peers=$(field peers_network "$report" || true)
  net_bytes=$(field network_bytes_sent "$report" || true)
  other=$(field payload_other "$line")
  if [[ ${net_peers:-x} != 2 || ${shm_peers:-0} -lt 1 || ${net_bytes:-0} -lt $other ]]; then
    echo "netns_mpi: FAIL: rank $rank (pid $pid): exanet counted peers_network=${net_peers:-none}" \
         "(want 2), peers_shared_memory=${shm_peers:-none} (want 1 or more)," \
         "network_bytes_sent=${net_bytes:-none} (want at least the $other bytes sent to the other host)"
    exit 1
  fi
  echo "    exanet: peers_shared_memory=$shm_peers peers_network=$net_peers network_bytes_sent=$net_bytes" 
  ranks=$((ranks + 1))
done < <(grep "^rank=" "$work/all_pairs" | sort)
[[ $ranks -eq 4 ]] || { echo "netns_mpi: FAIL: $ranks ranks reported their paths, not 4"; exit 1; }
echo "netns_mpi: each rank's exanet bytes_sent covers its payload, and its path counters agree"
grep "^PASS" "$work/all_pairs"

run_job p2p node "$p2p"
grep "^PASS" "$work/p2p"

# 3. A program we did not write: the HPC Challenge benchmark (Debian's hpcc) with Debian's
#    example input, 4 ranks by slot (HPL's 2x2 grid: each process column spans the hosts). Its
#    own checks must pass: Success=1, HPL's and PTRANS's residuals, no RandomAccess update lost.
#    Skipped where hpcc is not installed (ci/install-deps.sh installs it).
hpcc_input=/usr/share/doc/hpcc/examples/_hpccinf.txt
if command -v hpcc >/dev/null && [[ -r $hpcc_input ]]; then
  mkdir -p "$work/hpcc_dir" && cp "$hpcc_input" "$work/hpcc_dir/hpccinf.txt"
  (cd "$work/hpcc_dir" && mpirun_job hpcc slot hpcc && exit "$rc") || {
    echo "netns_mpi: FAIL: hpcc (mpirun exit $?)"; tail -25 "$work/hpcc"; exit 1; }
  out=$work/hpcc_dir/hpccoutf.txt
  if ! grep -q "^Success=1$" "$out" || ! grep -q "^MPIRandomAccess_Errors=0$" "$out" ||
     [[ $(grep -c "0 tests completed and failed residual checks" "$out") -ne 2 ]]; then
    echo "netns_mpi: FAIL: hpcc's own checks across the hosts"
    grep -E "^(Success|MPIRandomAccess_Errors)=|residual checks" "$out"
    exit 1
  fi
  echo "netns_mpi: hpcc across the hosts: Success=1, residuals passed, no RandomAccess error;" \
       "$(grep -E "^AvgPingPongLatency_usec=" "$out")"
else
  echo "netns_mpi: hpcc not installed; its job skipped"
fi

# 4. The BLACS tester: point-to-point, broadcast and combine over every precision and its grids
#    (2x2 and lines), the process rows and columns spanning the hosts. It ends in its
#    BLACS_ABORT test by design (exit status not 0), so its output says how far it got.
source "$here/../apps/blacs/verdict.sh"
blacs_tests=/usr/lib/x86_64-linux-gnu/scalapack/openmpi-tests
if [[ -x $blacs_tests/xFbtest ]]; then
  mkdir -p "$work/blacs_dir" && cp "$here"/../apps/blacs/*.dat "$work/blacs_dir/"
  (cd "$work/blacs_dir" && mpirun_job blacs slot "$blacs_tests/xFbtest")
  if ! summaries=$(blacs_verdict "$work/blacs"); then
    echo "netns_mpi: FAIL: the BLACS tester across the hosts"
    grep -E "TESTS:|FAILED|DONE" "$work/blacs" | tail -25
    exit 1
  fi
  echo "netns_mpi: BLACS tester across the hosts: $summaries summaries, nothing failed"
else
  echo "netns_mpi: scalapack-mpi-test not installed; the BLACS job skipped"
fi

# What the trap removes must be gone: the processes in either namespace (mpirun's daemon, any
# rank), then the namespaces, which take the veth pair along; the /dev/shm of each host (its
# segments) was a tmpfs of a mount namespace that ended with its last process.
netns_kill_all
sleep 0.2
for ns in "$ns_a" "$ns_b"; do
  [[ -z $(ip netns pids "$ns") ]] || { echo "netns_mpi: FAIL: processes outlived the job in $ns"; exit 1; }
done
for pid in $(grep -o "^rank=[0-9]* pid=[0-9]*" "$work/all_pairs" | cut -d= -f3); do
  [[ ! -e /proc/$pid ]] || { echo "netns_mpi: FAIL: rank process $pid outlived the job"; exit 1; }
done
netns_cleanup
trap - EXIT INT TERM
if ip netns list | grep -Eq "^($ns_a|$ns_b)( |$)"; then
  echo "netns_mpi: FAIL: a namespace outlived the test"
  exit 1
fi
echo "netns_mpi: PASS: Open MPI across two hosts over exanet (tcp between hosts, shared memory within), $((SECONDS - start)) s"
