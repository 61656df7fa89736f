#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The remote shell of the two-host tests: mpirun's rsh launcher (netns_mpi.sh) and upstream
# fabtests' runfabtests.sh (ci/upstream_fabtests.sh quick_netns, as `ssh` on PATH) call
#   netns_rsh_agent.sh [OPTIONS] HOST COMMAND...
# as they would call ssh, and this runs COMMAND (Open MPI's orted) on HOST, a "host" of
# netns_lib.sh: in the network namespace EXANET_NETNS_HOSTS maps it to ("ADDRESS=NAMESPACE ..."),
# with a /dev/shm of its own that the ranks started there share, as on_host does. Like ssh, it
# hands the words of COMMAND to a shell as one line.
set -eu
# ssh options a launcher may add: -x, -n (no input), and -o OPTION, -p PORT, ...
while [[ $# -gt 0 && $1 == -* ]]; do
  case $1 in
    -n) exec </dev/null; shift ;;
    -[bcDEeFIiJLlmOopQRSWw]) shift 2 ;;
    *) shift ;;
  esac
done
[[ $# -ge 2 ]] || { echo "netns_rsh_agent: usage: $0 HOST COMMAND..." >&2; exit 2; }
host=$1
shift
ns=
for entry in ${EXANET_NETNS_HOSTS:-}; do
  [[ ${entry%%=*} == "$host" ]] && ns=${entry#*=}
done
[[ -n $ns ]] || { echo "netns_rsh_agent: $host is none of EXANET_NETNS_HOSTS (${EXANET_NETNS_HOSTS:-unset})" >&2; exit 2; }
# runfabtests.sh starts a test's server through us, sleeps a second and starts its client: on
# a loaded machine the server (a namespace, a mount and a shell away) may not listen yet, and the
# client's out-of-band connect (-E SERVER, fabtests' port 3000) is refused, a failure of the
# harness. So a client waits, at most 10 s, until its server's host listens there (ss, which
# takes no connection from the server's one accept).
read -r -a words <<<"$*"
for ((i = 0; i + 1 < ${#words[@]}; i++)); do
  [[ ${words[i]} == -E ]] || continue
  for entry in ${EXANET_NETNS_HOSTS:-}; do
    [[ ${entry%%=*} == "${words[i + 1]}" ]] || continue
    for ((tries = 0; tries < 200; tries++)); do
      [[ -n $(ip netns exec "${entry#*=}" ss -Hltn 'sport = :3000' 2>/dev/null) ]] && break
      sleep 0.05
    done
  done
done
exec ip netns exec "$ns" unshare --mount --propagation private \
  sh -c "mount -t tmpfs -o size=64m tmpfs /dev/shm && $*"
