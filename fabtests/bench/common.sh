# Sourced by the comparison scripts after they set `here` (their own directory):
#   bench_init PROGRAM CSV-NAME [build-dir] [out-dir]
# sets root, build (default build/), out (default build/bench), repeat (REPEAT, default 3),
# bench (the program under build/fabtests, which must exist), csv (out/CSV-NAME.csv) and raw (a
# scratch file; it and raw.* are removed at exit).
bench_init() {
  local program=$1 name=$2
  shift 2
  root=$(cd "$here/../.." && pwd)
  build=${1:-$root/build}
  out=${2:-$build/bench}
  repeat=${REPEAT:-3}
  bench=$build/fabtests/$program
  [[ -x $bench ]] || { echo "build first: $bench is missing" >&2; exit 1; }
  mkdir -p "$out"
  csv=$out/$name.csv
  raw=$(mktemp)
  trap 'rm -f "$raw" "$raw".*' EXIT
}

# Prints the CSV as a table and says where it is.
bench_table() {
  column -s, -t <"$csv"
  echo "CSV: $csv"
}
