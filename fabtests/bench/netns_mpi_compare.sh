#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Open MPI across two "hosts" (two network namespaces joined by a veth pair, each with a private
# /dev/shm: fabtests/multinode/netns_lib.sh), three ways side by side in one run, with our MPI
# benchmark (fabtests/bench/mpi_bench.c, build/fabtests/mpi/mpi_bench), one rank on each host:
#   exanet   pml cm + mtl ofi over exanet's network backend (FI_PROVIDER unset,
#            FI_EXANET_NETWORK=other_hosts: dev/net over libfabric's tcp between the hosts)
#   ob1_tcp  pml ob1 + btl tcp (Open MPI's own TCP transport)
#   ofi_tcp  pml cm + mtl ofi over libfabric's tcp provider (tcp;ofi_rxm) used directly
# All three over the same veth (FI_TCP_IFACE, btl_tcp_if_include), FI_TCP_NODELAY=1 for both
# libfabric paths (ob1's TCP BTL sets TCP_NODELAY itself). mpirun runs on host A and starts
# host B's daemon through its rsh launcher (fabtests/multinode/netns_rsh_agent.sh), as
# multinode.mpi_netns does. Rank 0 is pinned to cpu 0 and rank 1 to cpu 1 (taskset; Open MPI's
# --bind-to would put both on each "host's" first core, which is the same cpu here).
# Latency (ping-pong, one way) and streaming bandwidth (window 64), the paths taking turns at
# every size (lib.sh's bench_mpi_sweep), REPEAT runs each, a cell being the median. The receiver
# reads what it received (mpi_bench -r, TOUCH=1). A benchmark, not a test: nothing asserts on time.
#   fabtests/bench/netns_mpi_compare.sh [build-dir] [out-dir]      (root; exit 77 without)
# Environment: SIZES (default "8 1K 64K 1M"), BW_SIZES (default: SIZES), REPEAT (default 3),
# PATHS (default "exanet ob1_tcp ofi_tcp"), OFFSETS (default 0: placement is a shared-memory
# question), BLOCKS (2), TOUCH (1), PHASE/PHASE_WAIT (lib.sh; default wait here 5 s),
# BENCH_LOCK (lib.sh), RUN_TIMEOUT (seconds per mpirun, default 120).
# Output: $out/netns_mpi_lat.csv and $out/netns_mpi_bw.csv (.samples, .png), with the ratios
# exanet/ob1_tcp and exanet/ofi_tcp; the mpirun logs in $out/netns_mpi_raw/.
# Duration: 2 kinds x 4 sizes x 3 paths x 3 runs of a few seconds each, plus the waits for the
# near phase (up to PHASE_WAIT each) and for the benchmark lock: 26 minutes on 2026-11-25, when
# three other sessions' benchmarks held the lock in turn.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
# shellcheck source=../multinode/netns_lib.sh
source "$here/../multinode/netns_lib.sh"
netns_require netns_mpi_compare
REPEAT=${REPEAT:-3}
SIZES=${SIZES:-8 1K 64K 1M}
OFFSETS=${OFFSETS:-0}
bench_init - netns_mpi "$@"
prog=$build/fabtests/mpi/mpi_bench
[[ -x $prog ]] || { echo "build first: $prog is missing (it needs mpicc)" >&2; exit 1; }
mpirun=$(command -v mpirun) || { echo "mpirun missing: apt-get install openmpi-bin" >&2; exit 1; }
bench_mpi_options "exanet ob1_tcp ofi_tcp"
run_timeout=${RUN_TIMEOUT:-120}
mkdir -p "$out/netns_mpi_raw"

netns_up
# netns_up's trap removes the namespaces; ours also ends what mpirun left and bench_init's files.
trap 'netns_kill_all; netns_cleanup; rm -f "$raw" "$raw".*' EXIT
netns_one_iface exanet0
export EXANET_NETNS_HOSTS="$addr_a=$ns_a $addr_b=$ns_b"
printf '%s slots=1\n%s slots=1\n' "$addr_a" "$addr_b" >"$work/hostfile"
unset FI_PROVIDER
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export FI_TCP_NODELAY=1 FI_TCP_IFACE=$iface
echo "# hosts: $ns_a ($addr_a, mpirun, rank 0 on cpu 0) and $ns_b ($addr_b, rank 1 on cpu 1), over veth $iface; TCP congestion control: $(ip netns exec "$ns_a" sysctl -n net.ipv4.tcp_congestion_control)"

base=(--allow-run-as-root --hostfile "$work/hostfile" -np 2 --map-by node --bind-to none
      --mca plm_rsh_agent "$here/../multinode/netns_rsh_agent.sh" --mca plm_rsh_no_tree_spawn 1
      --mca oob_tcp_if_include "$iface" -x FI_TCP_NODELAY -x FI_TCP_IFACE)
declare -A mca
mca[exanet]="--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include exanet --mca btl self -x FI_PROVIDER_PATH=$build/lib -x FI_EXANET_NETWORK=other_hosts"
mca[ob1_tcp]="--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include $iface --mca mtl ^ofi"
mca[ofi_tcp]="--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include tcp --mca btl self -x FI_PROVIDER=tcp"
# Each rank pins itself to the cpu of its rank number.
pin=(bash -c 'exec taskset -c "$OMPI_COMM_WORLD_RANK" "$0" "$@"')

# One run of path $1, kind $2 (lat|bw), size $3: its placement samples into table $4 (NA and why
# when the run fails).
run() {
  local p=$1 kind=$2 size=$3 table=$4 rc=0
  local log=$out/netns_mpi_raw/${kind}_${size}_$p.log
  PHASE_WAIT=${PHASE_WAIT:-5} bench_wait_near "$kind $p $size"
  # In the background and waited for: a signal runs the trap at once, ending both hosts' processes.
  # shellcheck disable=SC2086  # mca[] is a list of options
  on_host "$ns_a" "${locker[@]}" timeout "$run_timeout" "$mpirun" "${base[@]}" ${mca[$p]} \
    "${pin[@]}" "$prog" -t "$kind" -m "$size" -M "$size" -p "$offsets" -b "$blocks" \
    "${touch[@]}" -v >"$log" 2>&1 &
  wait $! || rc=$?
  if [[ $rc -eq 0 ]] && grep -q "^place $kind $size " "$log"; then
    awk -v p="$p" -v k="$kind" '$1 == "place" && $2 == k { print p, $3, $5, $4 }' "$log" >"$raw.s"
    bench_table_add_file "$table" "$raw.s"
  else
    echo "$p $kind $size: no run (exit $rc: $(grep -m1 -E 'cannot be selected|No components|rror|FAIL' "$log" || tail -1 "$log"))" >&2
    bench_table_add "$table" "$p" "$size" NA
  fi
  netns_kill_all  # a daemon left on host B by a failed run must not hold the next one
}

start=$(date +%s)
bench_mpi_sweep netns_mpi "Open MPI across two network namespaces, 1 rank each:"
echo "# $(($(date +%s) - start)) s"
