#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The layering of prov/exanet/src (DESIGN.md §2, STYLE.md rule 1), checked on every #include and
# every name of the emulated backend; ctest runs it as lint.layers. Every layer compiles with
# src/ on its include path, so the compiler alone would accept an include that points the wrong
# way; this refuses it.
#
#   ci/check_layers.sh [src-dir]        exit 0: clean; 1: each violation printed as file:line
#
# Rules (a layer may always include itself):
#   core      includes no other layer
#   match     core
#   dev       core (the interface: dev/*.hpp); only the bridge, dev/backend.hpp, includes a backend
#   dev/emu   core, dev (the emulated backend)
#   dev/net   core, dev (the network backend), and <rdma/...>: a lower libfabric provider is its
#             transport, as shared memory is the emulation's; it never includes proto/ or fi/
#   dev/hybrid core, dev, dev/emu, dev/net: both backends side by side, a backend itself
#   proto     core, match, dev (never a backend, never fi)
#   fi        anything but a backend
#   core, match, dev and dev/emu never include <rdma/...> (they know nothing of libfabric)
#   no file outside a backend names its namespace (emu::, net::) except the bridge and dev/hybrid
#   the dev::device concept and interface_of<D> (dev/device.hpp) list the same operations, and
#   proto/ calls the device (dev_.) only through operations of that list
# Tests and tools (prov/exanet/test, fabtests) are outside src/ and may speak the emulated
# layout on purpose (the forger, the fuzz target, the device tests, mailbox_probe).
set -euo pipefail
src=$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/../prov/exanet/src}" && pwd)
bridge=dev/backend.hpp
violations=0

violation() {  # file:line, what
  echo "check_layers: $1: $2" >&2
  violations=$((violations + 1))
}

# The layer a path relative to src/ belongs to, or "" for a path outside every layer.
layer_of() {
  case $1 in
    dev/emu/*) echo dev/emu ;;
    dev/net/*) echo dev/net ;;
    dev/hybrid/*) echo dev/hybrid ;;
    core/* | match/* | dev/* | proto/* | fi/*) echo "${1%%/*}" ;;
    *) echo "" ;;
  esac
}

# May a file of layer $1 include a file of layer $2?
allowed() {
  local from=$1 to=$2
  [[ $from == "$to" ]] && return 0
  case $from in
    core) return 1 ;;
    match) [[ $to == core ]] ;;
    dev) [[ $to == core ]] ;;
    dev/emu | dev/net) [[ $to == core || $to == dev ]] ;;
    dev/hybrid) [[ $to == core || $to == dev || $to == dev/emu || $to == dev/net ]] ;;
    proto) [[ $to == core || $to == match || $to == dev ]] ;;
    fi) [[ $to != dev/emu && $to != dev/net && $to != dev/hybrid ]] ;;
    *) return 1 ;;
  esac
}

# Collapses a/./b and a/x/../b (a quoted include may be relative to its file's folder).
normalize() {
  local -a out=()
  local part
  IFS=/ read -ra parts <<<"$1"
  for part in "${parts[@]}"; do
    case $part in
      '' | .) ;;
      ..) if ((${#out[@]} > 0)); then unset 'out[${#out[@]}-1]'; else out+=(..); fi ;;
      *) out+=("$part") ;;
    esac
  done
  local IFS=/
  echo "${out[*]}"
}

include_re='^[[:space:]]*#[[:space:]]*include[[:space:]]*([<"])([^>"]+)[>"]'

cd "$src"
mapfile -t files < <(find core match dev proto fi -type f \( -name '*.hpp' -o -name '*.cpp' -o -name '*.h' -o -name '*.inl' \) | sort)
((${#files[@]} > 0)) || { echo "check_layers: no sources under $src" >&2; exit 2; }

for f in "${files[@]}"; do
  from=$(layer_of "$f")
  dir=$(dirname "$f")
  while IFS= read -r hit; do
    line=${hit%%:*}
    text=${hit#*:}
    [[ $text =~ $include_re ]] || continue
    form=${BASH_REMATCH[1]} path=${BASH_REMATCH[2]}
    if [[ $path == rdma/* ]]; then
      case $from in
        core | match | dev | dev/emu)
          violation "$f:$line" "$from/ includes <$path>: only proto/ and fi/ know libfabric" ;;
      esac
      continue
    fi
    # What the compiler opens: a quoted path relative to the file's folder first, then src/.
    target=""
    if [[ $form == '"' && -f $dir/$path ]]; then
      target=$(normalize "$dir/$path")
    elif [[ -f $path ]]; then
      target=$(normalize "$path")
    fi
    [[ -n $target ]] || continue  # a system or libfabric header
    to=$(layer_of "$target")
    [[ -n $to ]] || continue
    if [[ ($to == dev/emu || $to == dev/net || $to == dev/hybrid) && $from != "$to" ]]; then
      [[ $f == "$bridge" || $from == dev/hybrid ]] ||
        violation "$f:$line" "includes $target: only $bridge may include a backend header"
      continue
    fi
    allowed "$from" "$to" ||
      violation "$f:$line" "$from/ may not include $target ($to/): the layers are fi -> proto -> match, dev -> core"
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include' "$f" || true)

  for backend in emu net; do
    if [[ $from != dev/$backend && $from != dev/hybrid && $f != "$bridge" ]]; then
      while IFS= read -r hit; do
        violation "$f:${hit%%:*}" "names $backend:: (a backend): use the dev:: names; only $bridge chooses the backend"
      done < <(grep -nE "(^|[^a-z_])$backend::" "$f" || true)
    fi
  done
done

# The concept and the wrapper proto holds list the same operations; proto calls no other.
if [[ -f dev/device.hpp ]]; then
  concept_ops=$(sed -n '/^concept device =/,/^    };/p' dev/device.hpp |
                grep -oE '\{ c?d\.[a-z_]+\(' | sed -E 's/\{ c?d\.//; s/\($//' | sort -u || true)
  wrapper_ops=$(sed -n '/^class interface_of/,/^};/p' dev/device.hpp |
                grep -oE 'using D::[a-z_]+;' | sed -E 's/using D:://; s/;$//' | sort -u || true)
  [[ -n $concept_ops ]] || violation dev/device.hpp "found no operation in concept device"
  if [[ $concept_ops != "$wrapper_ops" ]]; then
    violation dev/device.hpp "concept device and interface_of differ: $(diff <(echo "$concept_ops") <(echo "$wrapper_ops") | grep '^[<>]' | tr '\n' ' ')"
  fi
  while IFS= read -r hit; do
    op=${hit##*dev_.}
    grep -qx "$op" <<<"$concept_ops" ||
      violation "${hit%:*}" "proto/ calls dev_.$op, which is not an operation of dev::device"
  done < <(grep -rnoE 'dev_\.[a-z_]+' proto | sort -u || true)
fi

if ((violations > 0)); then
  echo "check_layers: $violations violation(s) in $src" >&2
  exit 1
fi
echo "check_layers: ${#files[@]} files clean in $src"
