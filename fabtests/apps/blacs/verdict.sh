# SPDX-License-Identifier: BSD-2-Clause
# Sourced by fabtests/apps/scalapack_test.sh and fabtests/multinode/netns_mpi.sh.
# blacs_verdict OUTPUT: the BLACS tester's own verdict on its output (xFbtest with the input of
# this folder): it finished (DONE BLACS_GRIDEXIT; it then ends in its BLACS_ABORT test, exit
# status not 0 by design), printed at least 20 summaries, none with a failure, and no auxiliary
# test failed (each prints "PASSED", "SKIPPED" or "FAILED"; whether the repeatable-sum test runs
# depends on arrival order). Prints the number of summaries; otherwise says why on stderr and
# returns 1.
blacs_verdict() {
  local out=$1 summaries
  summaries=$(grep "TESTS:" "$out" | grep -vc "BEGIN")
  if ! grep -q "DONE BLACS_GRIDEXIT" "$out"; then
    echo "the BLACS tester did not finish" >&2
  elif ((summaries < 20)); then
    echo "only $summaries BLACS test summaries" >&2
  elif grep "TESTS:" "$out" | grep -v "BEGIN" | grep -v " 0 FAILED" >&2; then
    echo "BLACS tests failed" >&2
  elif grep -E "^ *FAILED " "$out" >&2; then
    echo "a BLACS auxiliary test failed" >&2
  else
    echo "$summaries"
    return 0
  fi
  return 1
}
