# shellcheck shell=bash
# Kept for scripts written before lib.sh: the helper of the benchmark scripts is lib.sh now
# (bench_init keeps its interface there). New scripts source lib.sh.
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
