#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Instructions exanet executes inside one libfabric call per message, counted by callgrind on
# both processes of xfer_bench: by default fi_trecv (exanet's tagged_recv), so a change to
# posting a receive, with the message waiting (tagged_unexp) or not (tagged_lat), is judged by
# its count, which a shared machine's wall clock cannot resolve. Collection is on only inside
# the call (--toggle-collect), and two runs (SHORT and LONG iterations) are differenced, so
# start-up, the probe and the warm-up cancel.
#   fabtests/bench/post_instructions.sh [build-dir] [mode] [size]
# mode: an xfer_bench message mode (tagged_lat, tagged_unexp, msg_lat, msg_unexp; default
# tagged_unexp), size in bytes (default 8). Environment: CALL (the symbol pattern, default
# '*tagged_recv*'; '*msg_recv*' for fi_recv, '*tagged_send(*' for fi_tsend; it must match one
# function on the path only, as callgrind toggles collection at every match), SHORT (1000),
# LONG (5000), FI_PROVIDER_PATH (default build-dir/lib: another build's lib directory compares
# builds). A benchmark, not a test: nothing is judged. Needs valgrind.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
mode=${2:-tagged_unexp} size=${3:-8}
short=${SHORT:-1000} long=${LONG:-5000} call=${CALL:-*tagged_recv*}
lib=${FI_PROVIDER_PATH:-$build/lib}
command -v valgrind >/dev/null || { echo "valgrind missing" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
declare -A ir
for n in "$short" "$long"; do
  mkdir "$work/$n"
  # -t 0 -n N: exactly N timed iterations (plus a tenth as warm-up and the probe's, the same
  # in both runs but for the tenth, which the count below includes).
  (cd "$work/$n" && FI_PROVIDER=exanet FI_PROVIDER_PATH="$lib" valgrind --tool=callgrind \
    --trace-children=yes --collect-atstart=no --toggle-collect="$call" \
    --callgrind-out-file="$work/$n/cg.%p" "$build/fabtests/xfer_bench" -m "$mode" -P 0:0 -t 0 \
    -n "$n" "$size" >out.txt 2>err.txt) || { echo "xfer_bench failed: $(tail -3 "$work/$n/err.txt")" >&2; exit 1; }
  ir[$n]=$(awk '/^summary:/ { s += $2 } END { print s + 0 }' "$work/$n"/cg.*)
done
# Both processes make the call once per iteration, warm-up (a tenth) included.
per=$(( 2 * (long - short) * 11 / 10 ))
awk -v a="${ir[$short]}" -v b="${ir[$long]}" -v n="$per" -v c="$call" -v m="$mode" -v s="$size" \
  'BEGIN { printf "%s %s B: %.1f instructions per call of %s (%d calls differenced)\n", m, s, (b - a) / n, c, n }'
