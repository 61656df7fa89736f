#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The protection domain (PDID) a process gets from its launcher's environment: one per launch,
# shared by a job and the jobs it spawns, different between launches (fi_exanet(7) PROTECTION).
# Read from what Debian's fi_info prints as the source address (fi_exanet://HOST:PORT/PDID).
# Open MPI gave a spawned job a PMIx namespace of its own, and exanet derived the PDID from it:
# parents and children could not talk (mpi.spawn_np2 runs that job).
#   pdid_launchers_test.sh      (FI_PROVIDER_PATH names the build's module)
set -u
fail() { echo "FAIL: $*"; exit 1; }
launch_vars=(OMPI_MCA_orte_precondition_transports PMIX_NAMESPACE OMPI_MCA_ess_base_jobid
             SLURM_JOB_ID SLURM_STEP_ID PMI_KVSNAME I_MPI_JOB_ID FI_EXANET_PDID)
unset_args=()
for v in "${launch_vars[@]}"; do unset_args+=(-u "$v"); done

# pdid NAME=value...: the PDID fi_info shows with exactly these launcher variables set.
pdid() {
  local out p
  out=$(env "${unset_args[@]}" "$@" timeout 60 fi_info -p exanet -a FI_ADDR_STR -v 2>&1) ||
    { echo "$out" | tail -5 >&2; echo "FAIL: fi_info with $*" >&2; return 1; }
  p=$(sed -n 's|.*src_addr: fi_exanet://[^/]*/\([0-9][0-9]*\).*|\1|p' <<<"$out" | head -1)
  [[ -n $p ]] || { echo "FAIL: no PDID in fi_info's source address with $*" >&2; return 1; }
  echo "$p"
}
# two_pdids WHAT NAME=value... -- NAME=value...: pa and pb, the PDIDs of the two environments.
two_pdids() {
  local what=$1 a=()
  shift
  while [[ $1 != -- ]]; do a+=("$1"); shift; done
  shift
  pa=$(pdid "${a[@]}") || exit 1
  pb=$(pdid "$@") || exit 1
  echo "  $what: $pa, $pb"
}
expect_same() {
  two_pdids "$@"
  [[ $pa == "$pb" ]] || fail "$1: the PDIDs differ"
  [[ $pa != 1 ]] || fail "$1: the default PDID 1, not one of the launch"
}
expect_differ() {
  two_pdids "$@"
  [[ $pa != "$pb" ]] || fail "$1: the same PDID for two launches"
}

echo "same launch (must be equal):"
# Open MPI 4's mpirun: a job and the job it spawned (what Open MPI's own environment shows).
expect_same "Open MPI job and its spawned job" \
  OMPI_MCA_orte_precondition_transports=1e7f31ad879a6459-38d268981ef11e09 \
  PMIX_NAMESPACE=106496001 OMPI_MCA_ess_base_jobid=106496001 -- \
  OMPI_MCA_orte_precondition_transports=1e7f31ad879a6459-38d268981ef11e09 \
  PMIX_NAMESPACE=106496002 OMPI_MCA_ess_base_jobid=106496002
expect_same "PRRTE job and its spawned job" \
  PMIX_NAMESPACE=prterun-node1-4242@1 -- PMIX_NAMESPACE=prterun-node1-4242@2
expect_same "two ranks of one Slurm step" \
  SLURM_JOB_ID=881 SLURM_STEP_ID=0 -- SLURM_JOB_ID=881 SLURM_STEP_ID=0

echo "separate launches (must differ):"
expect_differ "two mpiruns" \
  OMPI_MCA_orte_precondition_transports=1e7f31ad879a6459-38d268981ef11e09 \
  PMIX_NAMESPACE=106496001 -- \
  OMPI_MCA_orte_precondition_transports=77aa0c2e01f3b5d4-90e1d2c3b4a59687 \
  PMIX_NAMESPACE=106496001
expect_differ "two prterun launches" \
  PMIX_NAMESPACE=prterun-node1-4242@1 -- PMIX_NAMESPACE=prterun-node1-4243@1
expect_differ "two PMIx jobs without a launch key" PMIX_NAMESPACE=5001 -- PMIX_NAMESPACE=5002
expect_differ "two Slurm steps" \
  SLURM_JOB_ID=881 SLURM_STEP_ID=0 -- SLURM_JOB_ID=881 SLURM_STEP_ID=1

echo "explicit and default:"
p=$(pdid FI_EXANET_PDID=77 PMIX_NAMESPACE=prterun-node1-4242@1) || exit 1
[[ $p == 77 ]] || fail "FI_EXANET_PDID=77 gave $p"
echo "  FI_EXANET_PDID=77 under a launcher: $p"
p=$(pdid) || exit 1
[[ $p == 1 ]] || fail "no launcher gave $p, not 1"
echo "  no launcher: $p"
echo "PASS: pdid_launchers"
