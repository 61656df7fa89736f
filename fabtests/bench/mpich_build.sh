#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Builds MPICH 4.0.2 with the ch4:ofi device against the system libfabric (Debian bookworm's 1.17,
# not MPICH's embedded copy), the way a user who wants MPICH over a libfabric provider builds it,
# for fabtests/bench/mpich_compare.sh. Debian's own mpich package is built with ch3, so it cannot
# serve. Not run in CI: the build takes tens of minutes on a 2-core machine, and no test depends
# on it (the conformance program fabtests/conformance/mpich_usage.c replays MPICH's libfabric calls
# without MPICH).
#
# The source is Debian's (the .orig tarball of mpich_4.0.2-3, checked against the sha256 that
# its .dsc lists). Everything (download, source, build, installation) lives OUTSIDE the
# repository, in one cache directory; nothing of MPICH is ever committed.
#   fabtests/bench/mpich_build.sh            builds if needed, then prints the installation prefix
# Environment:
#   MPICH_CACHE  the cache directory (default ${XDG_CACHE_HOME:-$HOME/.cache}/exanet/mpich-4.0.2);
#                the installation is $MPICH_CACHE/install (bin/mpicc, bin/mpiexec)
#   MPICH_JOBS   make's parallelism (default 2)
#   MPICH_FETCH_ONLY=1  only download and check the source tarball, then print its path (for
#                fabtests/mpi/mpi_testsuite.sh, which needs MPICH's test suite, not MPICH)
# Idempotent: once $MPICH_CACHE/install/.built holds the same configure options, it does nothing.
# configure and make run under `nice -n 19`, so a build does not disturb measurements of others on
# the machine (it then takes longer when they are busy).
#
# Options beyond the device, chosen to keep the build short without touching the point-to-point
# path that the benchmark measures (contiguous MPI_BYTE buffers):
#   --disable-fortran --disable-cxx --disable-romio   no Fortran, C++ or MPI-IO
#   --with-hwloc=/usr                                 Debian's hwloc, not the embedded one
#   --with-datatype-engine=dataloop                   MPICH's older datatype engine instead of yaksa,
#                                                     whose ~450 generated pack/unpack files are most
#                                                     of the build; contiguous buffers never use either
#   --without-ucx                                     ch4:ofi only
# Build dependencies (gcc, make, pkg-config, libfabric-dev, libhwloc-dev, curl, xz-utils) are installed
# through apt when missing, as ci/install-deps.sh does (needs root).
set -euo pipefail
version=4.0.2
tarball=mpich_$version.orig.tar.xz
url=http://deb.debian.org/debian/pool/main/m/mpich/$tarball
sha256=b27039f964afeb6b8a3e009c56b441cbe368c26d6d6476ad3bb7190996875860
cache=${MPICH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/exanet/mpich-$version}
jobs=${MPICH_JOBS:-2}
prefix=$cache/install
options=(--prefix="$prefix" --with-device=ch4:ofi --with-libfabric=/usr --without-ucx
  --with-hwloc=/usr --with-datatype-engine=dataloop
  --disable-fortran --disable-cxx --disable-romio)

fetch() {
  mkdir -p "$cache"
  if ! (cd "$cache" && echo "$sha256  $tarball" | sha256sum -c --status 2>/dev/null); then
    echo "downloading $url" >&2
    curl -sSfL -o "$cache/$tarball.part" "$url"
    (cd "$cache" && echo "$sha256  $tarball.part" | sha256sum -c --status) ||
      { echo "checksum mismatch for $url (expected $sha256)" >&2; rm -f "$cache/$tarball.part"; exit 1; }
    mv "$cache/$tarball.part" "$cache/$tarball"
  fi
}
if [[ ${MPICH_FETCH_ONLY:-0} == 1 ]]; then
  command -v curl >/dev/null || { echo "curl missing (apt-get install curl)" >&2; exit 1; }
  fetch
  echo "$cache/$tarball"
  exit 0
fi

if [[ -x $prefix/bin/mpicc && -x $prefix/bin/mpiexec && -f $prefix/.built &&
  "$(cat "$prefix/.built")" == "${options[*]}" ]]; then
  echo "$prefix"
  exit 0
fi

packages=(gcc make pkg-config libfabric-dev libhwloc-dev curl xz-utils)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing build dependencies: ${missing[*]}" >&2
  sudo=()
  ((EUID == 0)) || sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

fetch
cd "$cache"

src=$cache/mpich-$version
rm -rf "$src" "$prefix"
tar -xf "$tarball"
cd "$src"
log=$cache/build.log
# MPICH's configure adds `pkg-config --static --libs libfabric` to every link, and Debian's
# libfabric.pc lists in Libs.private the libraries of providers (psm, psm2, rdmacm) whose
# development links are not installed, so libmpi would not link. A copy of the .pc file without
# Libs.private, found first through PKG_CONFIG_PATH, gives the shared link a user needs.
mkdir -p "$cache/pkgconfig"
grep -v '^Libs.private' "$(pkg-config --variable=pcfiledir libfabric)/libfabric.pc" >"$cache/pkgconfig/libfabric.pc"
export PKG_CONFIG_PATH=$cache/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
start=$(date +%s)
echo "building MPICH $version (ch4:ofi) in $src, log $log" >&2
if ! {
  echo "== $(date -u) configure ${options[*]}" &&
    nice -n 19 ./configure "${options[@]}" &&
    echo "== $(date -u) make -j$jobs" &&
    nice -n 19 make -j"$jobs" &&
    nice -n 19 make install &&
    echo "== $(date -u) done"
} >"$log" 2>&1; then
  echo "MPICH build failed; the end of $log:" >&2
  tail -30 "$log" >&2
  exit 1
fi
echo "${options[*]}" >"$prefix/.built"
echo "MPICH built in $(($(date +%s) - start)) s" >&2
echo "$prefix"
