#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# ctest bench.model_quick: model_run.sh in QUICK=1 mode (the link model at 1 hop, an eager, a
# medium and a rendezvous size, about 10 s) end to end. Fails when FI_EXANET_PROFILE leaves a
# part out (a phase never stamped, receives not matching sends) or when the parts do not add up
# to about the ping-pong measured in the same run (model.py check: 0.6 to 1.2 times the half
# round trip), or when the fit prints no crossover line. Then the check must catch a profile
# that lost a phase and a sum far from the measurement, and refuse a run that put two sizes in
# one profile size class. No absolute time is judged.
#   model_quick_test.sh BUILD-DIR
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: model_quick_test.sh BUILD-DIR}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
QUICK=1 timeout 120 bash "$here/model_run.sh" "$build" "$out" >"$out/run.out" 2>&1
rc=$?
cat "$out/run.out"
[[ $rc == 0 ]] || { echo "FAIL: model_run.sh exited $rc"; exit 1; }
grep -q '^1 hops: crossover predicted' "$out/run.out" || { echo "FAIL: no crossover line"; exit 1; }
for kind in fast slow; do
  n=$(grep -c '^ok ' <(python3 "$here/model.py" check "$out/1.profile.$kind" "$out/1.profile.$kind.lat"))
  [[ $n -ge 3 ]] || { echo "FAIL: $kind: $n sizes checked, expected 3"; exit 1; }
done
# The check must be able to fail: a phase never stamped, and a measurement three times the sum.
sed 's/ n_match=[0-9]*/ n_match=0/' "$out/1.profile.fast" >"$out/lost"
if python3 "$here/model.py" check "$out/lost" "$out/1.profile.fast.lat" >/dev/null; then
  echo "FAIL: a profile without match stamps passed"
  exit 1
fi
awk '{ $4 = $4 * 3; print }' "$out/1.profile.fast.lat" >"$out/slow.lat"
if python3 "$here/model.py" check "$out/1.profile.fast" "$out/slow.lat" >/dev/null; then
  echo "FAIL: parts summing to a third of the measurement passed"
  exit 1
fi
# Sizes that share a profile size class: model_run.sh profiles the first only, and a check of a
# run that mixed two fails, naming them.
kept=$(python3 "$here/model.py" distinct 98304 106496 114688 122880 2>/dev/null)
[[ $kept == "98304 114688" ]] || { echo "FAIL: model.py distinct kept '$kept'"; exit 1; }
awk '$2 == 64 { print; $2 = 72 } { print }' "$out/1.profile.fast.lat" >"$out/mixed.lat"
if python3 "$here/model.py" check "$out/1.profile.fast" "$out/mixed.lat" | grep -q 'sizes 64 and 72 share'; then
  :
else
  echo "FAIL: a run with 64 and 72 B (one profile class) was not refused"
  exit 1
fi
echo "PASS: every part profiled, parts add up to the measured ping-pong, one size per profile class"
