#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The main job (README, first line): installs what is needed, builds, and runs Debian's
# fi_pingpong over exanet for every message size, printing its latency table.
#   ci/latency.sh [iterations]        (default 1000; tagged with PINGPONG_MODE=tagged)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/ci/install-deps.sh"
bash "$root/ci/build.sh" "$root/build"
export FI_PROVIDER_PATH=$root/build/lib FI_PROVIDER=exanet
iters=${1:-1000}
mode=${PINGPONG_MODE:-msg}
port=$((20000 + RANDOM % 20000))
timeout 300 fi_pingpong -p exanet -e rdm -m "$mode" -S all -I "$iters" -B "$port" >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
sleep 0.5
timeout 300 fi_pingpong -p exanet -e rdm -m "$mode" -S all -I "$iters" -P "$port" 127.0.0.1
wait "$server"
