#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# ctest package.deb: the Debian package, as a user meets it.
#   packaging/package_test.sh BUILD VERSION [MPIRUN MPI_PROGRAM]
# Builds libfabric-exanet_VERSION_*.deb from BUILD with cpack, installs it with dpkg, then with
# no FI_PROVIDER_PATH (nor any FI_ variable) checks that fi_info lists exanet at VERSION, runs a
# fi_pingpong and, given MPIRUN, an Open MPI job; removes the package with dpkg -r and checks
# that every file it installed is gone and that libfabric no longer finds exanet.
#
# Exit 77 (skipped) without root, dpkg, cpack or fi_pingpong, and when the package or any file it
# would install is already on the machine (an install by hand or by CI): the test must leave the
# machine as it found it, so it never overwrites or removes what it did not put there. Runs of
# several build trees on one machine take turns (flock).
set -euo pipefail
build=${1:?usage: $0 BUILD VERSION [MPIRUN MPI_PROGRAM]}
version=${2:?version}
mpirun=${3:-}
mpi_program=${4:-}
skip() { echo "SKIPPED: $*"; exit 77; }

[[ $(id -u) -eq 0 ]] || skip "needs root (dpkg -i)"
for tool in dpkg dpkg-deb cpack fi_info fi_pingpong flock; do
  command -v "$tool" >/dev/null || skip "$tool not found"
done

exec 9>/tmp/exanet-package-test.lock
flock -w 600 9 || { echo "FAIL: another package test held the lock for 10 minutes"; exit 1; }

if dpkg-query -W -f='${Status}' libfabric-exanet 2>/dev/null | grep -q 'install ok installed'; then
  skip "libfabric-exanet is already installed on this machine"
fi

work=$(mktemp -d /tmp/exanet-package.XXXXXX)
installed=0
cleanup() {
  if ((installed)); then dpkg -P libfabric-exanet >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# 1. the package
(cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/out" >cpack.log 2>&1) ||
  { cat "$work/cpack.log"; echo "FAIL: cpack"; exit 1; }
deb=$(ls "$work"/out/libfabric-exanet_"$version"_*.deb 2>/dev/null | head -1)
[[ -n $deb ]] || { ls -R "$work/out"; echo "FAIL: no libfabric-exanet_${version}_*.deb"; exit 1; }
echo "package: $(basename "$deb")"
dpkg-deb -f "$deb" Package Version Depends | sed 's/^/    /'
dpkg-deb -f "$deb" Depends | grep -q 'libfabric1 (>= ' ||
  { echo "FAIL: the package does not depend on libfabric1"; exit 1; }
mapfile -t files < <(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {sub(/^\./, "", $6); print $6}')
provdir=$(pkg-config --variable=libdir libfabric)/libfabric
printf '%s\n' "${files[@]}" | grep -qx "$provdir/libexanet-fi.so" ||
  { printf '    %s\n' "${files[@]}"; echo "FAIL: the module is not in $provdir"; exit 1; }
for f in "${files[@]}"; do
  [[ -e $f || -L $f ]] && skip "$f is already on this machine (installed by hand?); not touching it"
done

# 2. installed, used with no environment
env_clean=(env -u FI_PROVIDER_PATH -u FI_PROVIDER -u LD_PRELOAD -u FI_LOG_LEVEL)
dpkg -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; echo "FAIL: dpkg -i"; exit 1; }
installed=1
for f in "${files[@]}"; do
  [[ -e $f ]] || { echo "FAIL: $f not installed"; exit 1; }
done
listed=$("${env_clean[@]}" timeout 60 fi_info -l 2>&1 || true)
echo "$listed" | grep -A1 '^exanet:' | sed 's/^/    /' || true
want=$(echo "$version" | cut -d. -f1-2)
echo "$listed" | grep -A1 '^exanet:' | grep -q "version: $want\$" ||
  { echo "FAIL: fi_info -l does not list exanet at version $want"; exit 1; }
"${env_clean[@]}" timeout 60 fi_info -p exanet >"$work/info" 2>&1 ||
  { cat "$work/info"; echo "FAIL: fi_info -p exanet"; exit 1; }
grep -q 'provider: exanet' "$work/info" || { echo "FAIL: fi_info -p exanet lists no exanet"; exit 1; }
[[ $(pkg-config --modversion libfabric-exanet) == "$version" ]] ||
  { echo "FAIL: pkg-config libfabric-exanet is not $version"; exit 1; }

# The header, found through pkg-config and through CMake's find_package, says the same version.
mkdir -p "$work/consumer"
cat >"$work/consumer/main.c" <<'C'
#include <stdio.h>
#include <rdma/fi_ext_exanet.h>
int main(void) {
	printf("%d.%d.%d %s\n", FI_EXANET_VERSION_MAJOR, FI_EXANET_VERSION_MINOR,
	       FI_EXANET_VERSION_PATCH, FI_EXANET_PROV_NAME);
	return 0;
}
C
cat >"$work/consumer/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.22)
project(consumer C)
find_package(exanet REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE exanet::exanet)
CM
# shellcheck disable=SC2046
cc $(pkg-config --cflags libfabric-exanet) -o "$work/consumer/by_pkgconfig" "$work/consumer/main.c" ||
  { echo "FAIL: a program including <rdma/fi_ext_exanet.h> by pkg-config does not build"; exit 1; }
[[ $("$work/consumer/by_pkgconfig") == "$version exanet" ]] ||
  { echo "FAIL: the installed header's version is not $version"; exit 1; }
(cmake -S "$work/consumer" -B "$work/consumer/build" -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON &&
   cmake --build "$work/consumer/build") >"$work/consumer.log" 2>&1 ||
  { cat "$work/consumer.log"; echo "FAIL: find_package(exanet) and exanet::exanet"; exit 1; }
[[ $("$work/consumer/build/consumer") == "$version exanet" ]] ||
  { echo "FAIL: the CMake consumer's version is not $version"; exit 1; }
echo "pkg-config libfabric-exanet and find_package(exanet): the header builds, version $version"

port=$((20000 + RANDOM % 20000))
"${env_clean[@]}" timeout 120 fi_pingpong -p exanet -e rdm -I 100 -S 4096 -B "$port" \
  >"$work/server" 2>&1 &
server=$!
sleep 0.5
if ! "${env_clean[@]}" timeout 120 fi_pingpong -p exanet -e rdm -I 100 -S 4096 -P "$port" \
     127.0.0.1 >"$work/client" 2>&1; then
  kill "$server" 2>/dev/null || true
  cat "$work/client" "$work/server"; echo "FAIL: fi_pingpong client"; exit 1
fi
wait "$server" || { cat "$work/server"; echo "FAIL: fi_pingpong server"; exit 1; }
echo "fi_pingpong over the installed exanet:"
sed 's/^/    /' "$work/client"

if [[ -n $mpirun && -n $mpi_program ]]; then
  # Only exanet's name: no FI_PROVIDER_PATH, the module is where libfabric looks.
  "${env_clean[@]}" timeout 240 "$mpirun" --allow-run-as-root --oversubscribe -np 2 \
    --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include exanet --mca btl ^ofi \
    "$mpi_program" >"$work/mpi" 2>&1 || { cat "$work/mpi"; echo "FAIL: the MPI job"; exit 1; }
  grep -q 'PASS: ' "$work/mpi" || { cat "$work/mpi"; echo "FAIL: the MPI job did not pass"; exit 1; }
  echo "MPI job over the installed exanet: $(grep 'PASS: ' "$work/mpi")"
fi

# 3. removed, and nothing left
dpkg -r libfabric-exanet >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; echo "FAIL: dpkg -r"; exit 1; }
# dpkg keeps a "deinstall" record of a removed package; purging it leaves dpkg's database as it was.
dpkg -P libfabric-exanet >/dev/null 2>&1 || true
installed=0
left=0
for f in "${files[@]}"; do
  if [[ -e $f || -L $f ]]; then echo "left behind: $f"; left=1; fi
done
((left == 0)) || { echo "FAIL: dpkg -r left files"; exit 1; }
if "${env_clean[@]}" timeout 60 fi_info -l 2>/dev/null | grep -q '^exanet:'; then
  echo "FAIL: libfabric still finds exanet after dpkg -r"; exit 1
fi
echo "PASS: libfabric-exanet $version installed, used with no environment, removed cleanly (${#files[@]} files)"
