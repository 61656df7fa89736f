# SPDX-License-Identifier: BSD-2-Clause
# Sourced by the tests that kill a job on purpose (live_stats_test.sh, top_mpi_test.sh):
#   remove_job_files EXANET_STATS PID...
# removes what the killed processes left in /dev/shm: their live counter files, and the segments
# `exanet-stats segments` lists as theirs (by owner pid), nothing of any other job.
remove_job_files() {
  local stats=$1 uid f pid
  shift
  uid=$(id -u)
  for pid in "$@"; do
    for f in /dev/shm/exanet.$uid.* /dev/shm/exanet-stats.$uid.$pid.*; do
      [ -e "$f" ] || continue
      case $f in
        */exanet-stats.*) rm -f "$f" ;;
        *) "$stats" segments | awk -v p="$pid" -v f="$f" '$3 == p && $4 == f {found=1} END {exit !found}' &&
             rm -f "$f" ;;
      esac
    done
  done
}
