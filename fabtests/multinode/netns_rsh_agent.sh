#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Open MPI's remote shell for the two-host test (netns_mpi.sh): mpirun's rsh launcher calls
#   netns_rsh_agent.sh [OPTIONS] HOST COMMAND...
# as it would call ssh, and this runs COMMAND (Open MPI's orted) on HOST, a "host" of
# netns_lib.sh: in the network namespace EXANET_NETNS_HOSTS maps it to ("ADDRESS=NAMESPACE ..."),
# with a /dev/shm of its own that the ranks started there share, as on_host does. Like ssh, it
# hands the words of COMMAND to a shell as one line.
set -eu
while [[ $# -gt 0 && $1 == -* ]]; do shift; done  # ssh options a launcher may add (-x)
[[ $# -ge 2 ]] || { echo "netns_rsh_agent: usage: $0 HOST COMMAND..." >&2; exit 2; }
host=$1
shift
ns=
for entry in ${EXANET_NETNS_HOSTS:-}; do
  [[ ${entry%%=*} == "$host" ]] && ns=${entry#*=}
done
[[ -n $ns ]] || { echo "netns_rsh_agent: $host is none of EXANET_NETNS_HOSTS (${EXANET_NETNS_HOSTS:-unset})" >&2; exit 2; }
exec ip netns exec "$ns" unshare --mount --propagation private \
  sh -c "mount -t tmpfs -o size=64m tmpfs /dev/shm && $*"
