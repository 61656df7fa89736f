#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Runs the class-sum model with the relative tickets exanet implements (REL=1, see the header of
# classsum.pml and README.md here) and the original absolute form, and the model of the
# optimistic variant (optimistic.pml), and prints one line per run.
#   ./check.sh          the runs of README.md's table (about 15 minutes, up to 6 GB)
#   ./check.sh quick    3 sends x 3 receives only (under a minute)
# Needs spin and gcc (ci/install-deps.sh installs both). Exits non-zero on any error.
set -u
here=$(cd "$(dirname "$0")" && pwd)
mode=${1:-all}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/classsum.pml" "$here/optimistic.pml" "$work/" && cd "$work" || exit 1
model=classsum.pml
fail=0
printf '%-48s %-9s %14s %8s\n' run result states time
run() {  # run NAME EXPECT(ok|fail) SPIN-FLAGS...
	local name=$1 expect=$2; shift 2
	if ! spin -a "$@" "$model" > spin.out 2>&1 || ! gcc -O2 -w -DCOLLAPSE -o pan pan.c; then
		printf '%-48s %s\n' "$name" BUILD; fail=1; return
	fi
	local t0=$(date +%s)
	./pan -m300000 -w26 > pan.out 2>&1
	local errors states got
	errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.out | tail -1)
	states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.out | tail -1)
	if grep -q 'max search depth too small\|out of memory' pan.out; then got=INCOMPLETE
	elif [ "${errors:-x}" = 0 ]; then got=ok; elif [ -n "${errors:-}" ]; then got=fail; else got=ERROR; fi
	[ "$got" = "$expect" ] || fail=1
	printf '%-48s %-9s %14s %7ss\n' "$name" "$got" "${states:-?}" "$(( $(date +%s) - t0 ))"
	[ "$got" = fail ] && sed -n 's/^pan:[0-9]*: \(.*\) (at depth.*/      \1/p' pan.out | head -1
}
run "relative 3x3, unbounded log"              ok -DREL=1
run "relative 3x3, log 1"                      ok -DREL=1 -DLOGLEN=1
run "relative 3x3, log 2"                      ok -DREL=1 -DLOGLEN=2
run "relative 3x3, log 1, lazy lift"           ok -DREL=1 -DLOGLEN=1 -DLAZY=1
run "relative 3x3 without C1 (must fail)"      fail -DREL=1 -DFIX1=0
run "relative 3x3 without C2 (must fail)"      fail -DREL=1 -DFIX2=0
run "absolute 3x3, log 1 (the shared model)"   ok -DLOGLEN=1
model=optimistic.pml  # the optimistic variant: matching at the sender, no tickets
run "optimistic 3x3, one cancel"               ok
run "optimistic 3x3, serving the newest RTR (must fail)" fail -DNEWEST=1
model=classsum.pml
if [ "$mode" != quick ]; then
run "relative 3x3, tags {0,1,2}, log 1"        ok -DREL=1 -DNTAGS=3 -DLOGLEN=1
run "relative 4 sends x 3 receives, log 1"     ok -DREL=1 -DNS=4 -DLOGLEN=1
run "relative 3 sends x 4 receives, log 1"     ok -DREL=1 -DNR=4 -DLOGLEN=1
model=optimistic.pml
run "optimistic 4 sends x 3 receives"          ok -DNS=4
run "optimistic 3 sends x 4 receives"          ok -DNR=4
fi
exit $fail
