#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Installs everything exanet needs to build, test and benchmark on Debian bookworm (run as root).
# Idempotent: packages already present are left as they are.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
packages=(
  cmake g++ make pkg-config            # build
  libfabric-dev libfabric-bin          # the libfabric we plug into; fi_info, fi_pingpong
  googletest libgtest-dev              # unit tests
  openmpi-bin libopenmpi-dev           # Open MPI jobs over exanet (pml cm, mtl ofi)
  netpipe-openmpi lammps lammps-examples  # real applications over exanet (fabtests/apps)
  scalapack-mpi-test hpcc              # ScaLAPACK's BLACS tester and drivers, HPC Challenge (fabtests/apps)
  procps iproute2                      # process and socket checks in the test scripts
  gnuplot-nox                          # plots of the benchmarks in fabtests/bench
  spin                                 # the protocol models in shared/model
  autoconf automake libtool            # upstream fabtests, built from ../shared/upstream
  clang libclang-rt-14-dev             # libFuzzer targets (ci/fuzz.sh)
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
