#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Issue 16: the measurements beside coll_model.py (this directory's README.md). One mpirun as
# run.sh part c does it (16 ranks, pml cm, mtl ofi, the link model at COLL_HOP_NS a hop,
# FI_EXANET_EAGER_MAX = MEDIUM_MAX = 36), holding the benchmark lock (lib.sh's, flock).
#   probe.sh BUILD FAMILY STATS-FILE PROGRAM ARGS...    (extra mca arguments in EXTRA_MCA)
set -u
build=$1 family=$2 stats=$3
shift 3
rm -f "$stats"
# shellcheck disable=SC2086  # EXTRA_MCA is a list of arguments
flock "${LOCK:-/tmp/exanet-bench.lock}" timeout 300 mpirun --allow-run-as-root --oversubscribe \
  -np "${NP:-16}" --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include exanet --mca btl ^ofi \
  --mca mpi_yield_when_idle 1 --mca coll_tuned_use_dynamic_rules 1 ${EXTRA_MCA:-} \
  -x FI_PROVIDER=exanet -x FI_PROVIDER_PATH="$build/lib" -x FI_EXANET_PROTOCOL="$family" \
  -x FI_EXANET_LINK_MODEL=1 -x FI_EXANET_LINK_HOP_NS="${COLL_HOP_NS:-1000000}" \
  -x FI_EXANET_MEDIUM_MAX=36 -x FI_EXANET_EAGER_MAX=36 -x FI_EXANET_STATS="$stats" \
  -x ITERS="${ITERS:-15}" "$@"
