#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# libfabric's own conformance suite (fabtests 1.17.0, from ../shared/upstream) against exanet.
#
#   ci/upstream_fabtests.sh build    PREFIX          builds and installs it under PREFIX (once)
#   ci/upstream_fabtests.sh quick    PREFIX PROVDIR  the quick set (unit + functional + short),
#                                                    no exclusions: 0 failures, and every test not
#                                                    run must be one exanet has no capability for
#   ci/upstream_fabtests.sh ubertest PREFIX PROVDIR  fi_ubertest with fabtests/upstream/
#                                                    exanet-verify.test: 0 failures
#                                                    (UBERTEST_FUNCS="FT_FUNC_X ...": only the
#                                                    tests of those class functions; with
#                                                    FI_EXANET_NETWORK=every_peer, over the
#                                                    network backend on this host)
#   ci/upstream_fabtests.sh standard PREFIX PROVDIR  the standard set (the benchmarks with their
#                                                    full iteration counts, -v checking data): 0
#                                                    failures, the not-run rule of quick
#   ci/upstream_fabtests.sh rdm_stress PREFIX PROVDIR
#                                                    fi_rdm_stress with each of upstream's
#                                                    test_configs/rdm_stress files: 16 clients
#                                                    run their whole script against one server
#   ci/upstream_fabtests.sh quick_netns PREFIX PROVDIR
#                                                    the quick set across two hosts (two network
#                                                    namespaces, fabtests/multinode/netns_lib.sh),
#                                                    every peer over the network backend: 0
#                                                    failures, the not-run rule of quick, and the
#                                                    exclusions of netns_excluded (each with why)
#   ci/upstream_fabtests.sh rma_netns PREFIX PROVDIR
#                                                    fi_rma_bw write (RUNS times), writedata, read
#                                                    and write -U across the two namespaces, and
#                                                    64 B inject writes (INLINE_RUNS times) of
#                                                    which each side sends at least half inline
#   ci/upstream_fabtests.sh named_netns PREFIX PROVDIR
#                                                    upstream programs across the two
#                                                    namespaces as users run them on a
#                                                    cluster: the client names the server by
#                                                    its IP address and fabtests' port (no
#                                                    out-of-band exchange), with
#                                                    FI_EXANET_NETWORK=other_hosts; and a
#                                                    client with no server there fails in
#                                                    bounded time
#   ci/upstream_fabtests.sh standard_netns PREFIX PROVDIR
#                                                    the standard set the same way (by hand: not
#                                                    in CI)
#
# PROVDIR holds libexanet-fi.so. runfabtests.sh kills every process named fi_* when it cleans
# up, so it runs in a PID namespace of its own (root, as CI is), from a directory without
# test_configs/ so that no upstream exclude file applies.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tarball=$root/../shared/upstream/fabtests-v1.17.0.tar.gz

# Each fabtests program sizes its buffers for the largest test size times its window (8 MiB x
# 64, both ways: 1 GiB) and clears them all before the first message, whatever sizes it runs.
# On the CI virtual machine that first touch of 262144 small pages is most of a test's time
# (fi_rdm_pingpong -I 5, over exanet or tcp alike: 3.6-3.9 s, of which 1 GiB of page faults
# about 2.5 s). glibc then asks for transparent huge pages (where the kernel offers them on
# request, its "madvise" setting): 2.0-2.5 s. The buffers' contents, the sizes sent and the
# checks are the same; only the page size under the programs' own allocations changes. Measured
# alone, far phase: ubertest 219 -> 70 s (CPU 6m45 -> 1m52), quick_netns 276 -> 211 s.
export GLIBC_TUNABLES=${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.malloc.hugetlb=1
cmd=${1:?usage: $0 build|quick|ubertest|standard|rdm_stress|quick_netns|standard_netns|rma_netns|named_netns PREFIX [PROVDIR]}
prefix=${2:?prefix}
# absolute, so that a relative PREFIX holds in the subshells that change directory
mkdir -p "$prefix" && prefix=$(cd "$prefix" && pwd)

build() {
  local stamp=$prefix/.built-from
  local sum
  sum=$(sha256sum "$tarball" | cut -d' ' -f1)
  if [[ -x $prefix/bin/fi_ubertest && -f $stamp && $(cat "$stamp") == "$sum" ]]; then
    echo "upstream fabtests: already built in $prefix"
    return
  fi
  local work=$prefix/src
  rm -rf "$work" && mkdir -p "$work/build"
  tar -xzf "$tarball" -C "$work"
  (cd "$work/fabtests-1.17.0/fabtests" && ./autogen.sh >/dev/null 2>&1)
  (cd "$work/build" &&
     "$work/fabtests-1.17.0/fabtests/configure" --with-libfabric=/usr --prefix="$prefix" >/dev/null &&
     make -j"$(nproc)" >/dev/null 2>&1 && make install >/dev/null)
  echo "$sum" >"$stamp"
  echo "upstream fabtests: built in $prefix"
}

# The tests "not run" may only be ones that need what exanet does not advertise: MSG and DGRAM
# endpoints (fi_cm_data, fi_msg*, -e msg, -e dgram; fi_dgram_waitset among them),
# triggered operations, scalable endpoints, shared contexts. Poll sets (fi_poll -t queue, -t
# counter) and shared AVs (fi_rdm_shared_av) must run and pass.
allowed_notrun='(-e msg|-e dgram|^fi_msg|^fi_dgram|^fi_cm_data|fi_rdm_rma_trigger|fi_scalable_ep|fi_shared_ctx)'

# The standard set adds the benchmarks' -k runs, which ask for FI_MSG_PREFIX mode: a mode is the
# application's offer, and exanet, like shm, needs no prefix and declines it (fi_getinfo(3)).
allowed_notrun_standard="$allowed_notrun|-k( |$)"

# Across two hosts (quick_netns), these more do not run, each for the reason given; everything
# else must pass as on one host. runfabtests.sh -e takes them (regular expressions on the test's
# command line).
netns_excluded=(
  # MSG endpoints, which exanet does not offer (not run on one host, by -FI_ENODATA on both
  # sides). With -b one side leaves with -FI_ENODATA before the out-of-band connection and the
  # other then fails on that connection, which runfabtests.sh counts as a failure.
  'fi_cm_data' 'fi_msg_sockets' 'fi_cq_data -e msg' 'fi_shared_ctx -e msg'
  # fabtests 1.17's fi_poll opens fabric and endpoint with code of its own that never makes the
  # out-of-band connection, so with -b it fails for every provider (shm too, on one host). Poll
  # sets run in the one-host quick set and in conformance.poll_wait_sets.
  'fi_poll'
  # With -b every client binds the default port (FI_SOURCE); this test forks two clients on one
  # host, and the second finds the port taken (-FI_EADDRINUSE) whatever the provider. Shared AVs
  # over the network backend: net.shared_av.
  'fi_rdm_shared_av'
  # Shared contexts, scalable endpoints and DGRAM wait sets, which exanet does not advertise:
  # these programs call fi_getinfo before the out-of-band connection, so with -b the server
  # leaves at once (-FI_ENODATA) and its client retries the connection for 16-19 s before it
  # leaves the same way; the eight of them cost 137 s of this set's 338 (2026-12-07). The
  # one-host quick set checks that exanet declines them.
  'fi_shared_ctx' 'fi_scalable_ep' 'fi_dgram_waitset'
  # The rest of what exanet declines, MSG and DGRAM endpoints and triggered operations: across
  # the namespaces each still started a server and a client to be told -FI_ENODATA, 2-3 s a
  # pair, 46 s of the set's 215 for twenty programs (2026-12-07). The one-host quick set checks
  # that exanet declines them.
  '-e msg' '-e dgram' '^fi_msg$' '^fi_msg_epoll' '^fi_msg_pingpong' '^fi_msg_bw'
  '^fi_dgram$' '^fi_dgram_pingpong' '^fi_rdm_rma_trigger'
)
# fi_rdm_rma_event posts one fi_write and fails on -FI_EAGAIN. exanet's network backend checks
# RMA access at the target, and said -FI_EAGAIN on the first use of a key until the target's
# answer came; an RMA is now accepted and waits for the answer itself (proto/rma.cpp, stage
# check), so the test runs here like every other.

# Reads runfabtests.sh's verbose log LOG; prints the counts under TITLE and each test that failed
# or did not run; fails on a failure, on none passing, or on a test not run that exanet could run
# (whose name ALLOWED, a regular expression, does not match).
summarize() {
  local log=$1 title=$2 allowed=$3
  local results=$log.results
  # one line per test: result and name
  awk '/^- name:/{sub(/^- name: */,""); name=$0} /^  result:/{print $2 "\t" name}' "$log" \
    | sed 's/ -p "exanet"//' >"$results"
  local pass fail notrun bad_notrun
  pass=$(grep -c '^Pass' "$results" || true)
  fail=$(grep -c '^Fail' "$results" || true)
  notrun=$(grep -c '^Notrun\|^Excluded' "$results" || true)
  echo "$title: $pass pass, $fail fail, $notrun not run"
  echo "not run (capabilities exanet does not advertise, or excluded with a reason):"
  grep '^Notrun\|^Excluded' "$results" | cut -f2 | sed 's/^/    /' || true
  bad_notrun=$(grep '^Notrun\|^Excluded' "$results" | cut -f2 | grep -Ev "$allowed" || true)
  if [[ $fail -gt 0 ]]; then
    echo "FAILED:"
    grep '^Fail' "$results" | cut -f2 | sed 's/^/    /'
    grep -B2 -A40 'result: Fail' "$log" | tail -80
  fi
  if [[ -n $bad_notrun ]]; then
    echo "not run, though exanet advertises what they need:"
    echo "$bad_notrun" | sed 's/^/    /'
  fi
  [[ $pass -gt 0 && $fail -eq 0 && -z $bad_notrun ]]
}

# runfabtests.sh's set SET on one host (in a PID namespace: see the top), judged by summarize;
# BOUND seconds for the whole set, PER_TEST for each test.
run_set() {
  local set=$1 provdir=$2 bound=$3 per_test=$4 title=$5 allowed=$6
  local log out
  out=$(mktemp -d)
  # shellcheck disable=SC2064  # expanded now: out is local
  trap "rm -rf '$out'" EXIT  # scratch: what a failure needs is printed
  log=$out/$set.log
  (cd "$out" && FI_PROVIDER_PATH=$provdir timeout -k 10 "$bound" unshare --pid --fork --kill-child --mount-proc \
     "$prefix/bin/runfabtests.sh" -v -t "$set" -T "$per_test" -p "$prefix/bin" -s 127.0.0.1 -c 127.0.0.1 \
     exanet >"$log" 2>&1) || true
  [[ -n ${UPSTREAM_LOG_DIR:-} ]] && cp "$log" "$UPSTREAM_LOG_DIR/"  # kept, for a reader
  summarize "$log" "$title" "$allowed"
}

quick() {
  run_set quick "${1:?provider dir}" 1500 60 "upstream fabtests quick set over exanet" "$allowed_notrun"
}

# The standard set: the benchmarks with their full iteration counts, -v checking data.
standard() {
  run_set standard "${1:?provider dir}" 900 120 "upstream fabtests standard set over exanet" \
    "$allowed_notrun_standard"
}

# fi_rdm_stress (not in runfabtests.sh's sets): one server, 16 forked clients, each running a
# script of messages, tagged messages, RMA reads and writes, some to clients that have left. Its
# server waits on its CQ's fd with fi_trywait and poll(2) and makes no other call while it
# blocks (before exanet's arrivals readied that fd, no client got past its first message). A
# script passes when every client said hello, ran to its last operation and the client process
# exited 0; errors the script provokes (a write to a client that exited) are its own business.
rdm_stress() {
  local provdir=${1:?provider dir}
  local configs=$prefix/src/fabtests-1.17.0/fabtests/test_configs/rdm_stress
  local out cfg failed=0 friends done server
  out=$(mktemp -d)
  # shellcheck disable=SC2064  # expanded now: out is local
  trap "rm -rf '$out'" EXIT  # scratch: what a failure needs is printed
  for cfg in "$configs"/*.json; do
    local name
    name=$(basename "$cfg" .json)
    (cd "$out" && FI_PROVIDER_PATH=$provdir exec timeout -k 5 150 "$prefix/bin/fi_rdm_stress" \
       -p exanet -s 127.0.0.1 >"$out/$name.server.log" 2>&1) &
    server=$!
    sleep 1
    local rc=0
    (cd "$out" && FI_PROVIDER_PATH=$provdir timeout -k 5 120 "$prefix/bin/fi_rdm_stress" \
       -p exanet -u "$cfg" 127.0.0.1 >"$out/$name.client.log" 2>&1) || rc=$?
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    friends=$(grep -c "we're friends now" "$out/$name.client.log" || true)
    done=$(grep -c 'rpc op exit' "$out/$name.client.log" || true)
    echo "fi_rdm_stress $name: client exit $rc, $friends of 16 clients said hello, $done ran to the end"
    if [[ $rc -ne 0 || $friends -ne 16 || $done -ne 16 ]]; then
      failed=1
      tail -n 20 "$out/$name.client.log" "$out/$name.server.log"
    fi
  done
  return $failed
}

# The quick set as on two hosts: the server of each test on host B, its client on host A, each a
# network namespace with a /dev/shm of its own, joined by a veth pair. runfabtests.sh reaches a
# named host through `ssh`, which here is netns_rsh_agent.sh (it runs the command in the host's
# namespace). Every peer goes over exanet's network backend (FI_EXANET_NETWORK=every_peer, over
# tcp on the veth), so the unit tests, which run on one host, take that path too.
quick_netns() { netns_set quick "${1:?provider dir}" 1200 60 "$allowed_notrun"; }

# The standard set the same way (not in CI, whose budget it would exceed: about 4 minutes more).
standard_netns() { netns_set standard "${1:?provider dir}" 1500 120 "$allowed_notrun_standard"; }

# Upstream programs across two hosts the way a cluster user starts them: the server with no
# address (it listens on fabtests' port 9228), the client given the server's IP address. exanet
# finds that endpoint by address and port alone: the server's network side listens on its
# chosen port, and its hello tells the client the rest of its name (fi_exanet(7) Addressing).
# Before, fi_getinfo refused another host's address (-FI_ENODATA), and CI's cross-host sets
# needed runfabtests.sh's out-of-band exchange (-b). FI_EXANET_NETWORK=other_hosts, the setting
# of a job across hosts. Then fi_rdm_stress with two of upstream's scripts (16 clients on host
# A, the server on B, named by address), and a client whose server is not there: it must fail
# (exit status not 0) before its 60 s bound, the peer lost after 3 s of silence.
named_netns() {
  local provdir=${1:?provider dir} failed=0 t rc src cfg
  source "$root/fabtests/multinode/netns_lib.sh"
  netns_require upstream_named_netns
  netns_up
  unset FI_PROVIDER
  export FI_PROVIDER_PATH=$provdir FI_EXANET_NETWORK=other_hosts FI_TCP_NODELAY=1
  local env_a=(FI_EXANET_NETWORK_NODE="$addr_a" FI_TCP_IFACE="${ns_a%a}va")
  local env_b=(FI_EXANET_NETWORK_NODE="$addr_b" FI_TCP_IFACE="${ns_a%a}vb")
  local -a progs=("fi_rdm_pingpong -v" "fi_rdm_tagged_pingpong" "fi_rdm_tagged_bw"
                  "fi_rma_bw -e rdm -o write" "fi_rma_bw -e rdm -o read")
  for t in "${progs[@]}"; do
    # shellcheck disable=SC2086  # t is a program and its options
    netns_start "$ns_b" env "${env_b[@]}" timeout -k 5 60 $prefix/bin/$t -p exanet >"$work/server.log" 2>&1
    sleep 1
    rc=0 src=0
    # shellcheck disable=SC2086
    on_host "$ns_a" env "${env_a[@]}" timeout -k 5 60 $prefix/bin/$t -p exanet "$addr_b" \
      >"$work/client.log" 2>&1 || rc=$?
    wait "${netns_pids[-1]}" || src=$?
    echo "$t: client exit $rc, server exit $src"
    if ((rc != 0 || src != 0)); then
      failed=1
      tail -n 5 "$work/client.log" "$work/server.log"
    fi
  done
  # stress-rd and stress-wr; not stress.json, whose 16 clients each write 10 MB and exit at
  # once: across the two namespaces a client then missed its 2 s deadline (rdm_stress's
  # rpc_timeout) now and then over tcp;ofi_rxm itself (2 of 6 runs, 2026-12-06), and over
  # exanet (5 of 13) while exanet chose 66560-byte rxm buffers; at 17408 it passed 10 of 10
  # and at 34816 (the choice since) 50 of 50, the reference 8 of 8 on a quiet machine
  # (2026-12-07), but the reference's misses beside other work keep it out of a test that
  # runs beside others.
  local configs=$prefix/src/fabtests-1.17.0/fabtests/test_configs/rdm_stress friends done
  for cfg in "$configs"/stress-rd.json "$configs"/stress-wr.json; do
    netns_start "$ns_b" env "${env_b[@]}" timeout -k 5 120 "$prefix/bin/fi_rdm_stress" -p exanet \
      -s "$addr_b" >"$work/server.log" 2>&1
    sleep 1
    rc=0
    (cd "$work" && on_host "$ns_a" env "${env_a[@]}" timeout -k 5 120 "$prefix/bin/fi_rdm_stress" \
       -p exanet -u "$cfg" "$addr_b" >"$work/client.log" 2>&1) || rc=$?
    # The server never ends by itself: end everything in its namespace (a kill of the job
    # would stop at `ip netns exec`).
    ip netns pids "$ns_b" | xargs -r kill 2>/dev/null || true
    wait "${netns_pids[-1]}" 2>/dev/null || true
    friends=$(grep -c "we're friends now" "$work/client.log" || true)
    done=$(grep -c 'rpc op exit' "$work/client.log" || true)
    echo "fi_rdm_stress $(basename "$cfg" .json) across hosts: client exit $rc, $friends of 16 clients said hello, $done ran to the end"
    if [[ $rc -ne 0 || $friends -ne 16 || $done -ne 16 ]]; then
      failed=1
      tail -n 10 "$work/client.log" "$work/server.log"
    fi
  done
  local start=$SECONDS
  rc=0
  on_host "$ns_a" env "${env_a[@]}" FI_EXANET_NETWORK_LOST_AFTER_MS=3000 timeout -k 5 60 \
    "$prefix/bin/fi_rdm_pingpong" -p exanet "$addr_b" >"$work/client.log" 2>&1 || rc=$?
  echo "fi_rdm_pingpong with no server at $addr_b: exit $rc after $((SECONDS - start)) s"
  if ((rc == 0 || rc == 124 || rc == 137)); then
    failed=1
    tail -n 5 "$work/client.log"
  fi
  return $failed
}

# Two hosts (netns_lib.sh) for test NAME, every peer over exanet's network backend with the
# provider in PROVDIR.
netns_hosts() {
  local name=$1 provdir=$2
  source "$root/fabtests/multinode/netns_lib.sh"
  netns_require "$name"
  netns_up
  netns_one_iface exanet0
  unset FI_PROVIDER  # it would hide tcp from exanet
  export FI_PROVIDER_PATH=$provdir FI_EXANET_NETWORK=every_peer FI_TCP_NODELAY=1 FI_TCP_IFACE=$iface
}

# runfabtests.sh's set SET across the two namespaces: BOUND seconds in all, PER_TEST each; ALLOWED
# names the tests that may not run on one host.
netns_set() {
  local set=$1 provdir=$2 bound=$3 per_test=$4 allowed_here=$5
  netns_hosts "upstream_${set}_netns" "$provdir"
  mkdir -p "$work/bin" "$work/run"
  printf '#!/bin/sh\nexec bash %q "$@"\n' "$root/fabtests/multinode/netns_rsh_agent.sh" >"$work/bin/ssh"
  chmod +x "$work/bin/ssh"
  export EXANET_NETNS_HOSTS="$addr_a=$ns_a $addr_b=$ns_b"
  echo "upstream ${set}_netns: servers on $ns_b ($addr_b), clients on $ns_a ($addr_a), FI_EXANET_NETWORK=every_peer"
  local log=$work/${set}_netns.log start=$SECONDS excludes
  excludes=$(IFS=,; echo "${netns_excluded[*]}")
  # -b: addresses are exchanged out of band (a socket to the server's host), as fi_pingpong does.
  # (Naming the server by IP address and port, fabtests' other way, is named_netns's test; it
  # needs FI_EXANET_NETWORK_NODE or a network side that listens where the client looks.)
  # -g 127.0.0.1: the unit tests run on one host, and fi_av_test inserts the "good" address and
  # the next IPs after it, which name endpoints of this host only on the loopback network.
  # The PID namespace confines runfabtests.sh's cleanup (it kills every fi_* process it sees) to
  # its own. unshare holds off SIGTERM: timeout -k kills it, and --kill-child then ends all in
  # the namespace. In the background and waited for, so that a signal to this script runs the
  # trap at once; the trap ends the run (timeout passes the signal on, and kills 5 s later)
  # before it removes the namespaces.
  cd "$work/run"
  PATH=$work/bin:$PATH timeout -k 5 "$bound" unshare --pid --fork --kill-child --mount-proc \
    "$prefix/bin/runfabtests.sh" -v -t "$set" -T "$per_test" -p "$prefix/bin" -b -g 127.0.0.1 \
    -e "$excludes" exanet "$addr_b" "$addr_a" >"$log" 2>&1 &
  run_job=$!
  trap 'kill $run_job 2>/dev/null || true; wait $run_job 2>/dev/null || true; netns_cleanup' EXIT
  wait "$run_job" || true
  cd /
  [[ -n ${UPSTREAM_LOG_DIR:-} ]] && cp "$log" "$UPSTREAM_LOG_DIR/"  # kept, for a reader
  local allowed
  allowed="$allowed_here|$(IFS='|'; echo "${netns_excluded[*]}")"
  summarize "$log" "upstream fabtests $set set across two hosts over exanet's network backend ($((SECONDS - start)) s)" "$allowed"
}

# fi_rma_bw across two hosts, each side writing to the other at once (the standard set's RMA
# benchmarks, with the data checked by -v where fabtests offers it): the bidirectional bursts
# in which ofi_rxm gave a multi-receive buffer back in a completion of its own, which exanet
# missed (the endpoint stopped receiving and both sides counted the other lost after 30 s:
# about 2 runs in 5 of the write test, 2026-12-06). The write test runs RUNS times (default 4),
# writedata, read and delivery-complete writes once each.
rma_netns() {
  local runs=${RUNS:-4} failed=0 i rc t w
  netns_hosts upstream_rma_netns "${1:?provider dir}"
  # the write test RUNS times (the one that stalled), the others once
  local tests=("fi_rma_bw -e rdm -o write" "fi_rma_bw -e rdm -o writedata" "fi_rma_bw -e rdm -o read"
               "fi_rma_bw -e rdm -o write -U")
  local times
  for t in "${tests[@]}"; do
    times=1
    [[ $t == "${tests[0]}" ]] && times=$runs
    for ((i = 1; i <= times; i++)); do
      # -E: addresses out of band, as runfabtests.sh -b passes them (quick_netns above)
      netns_start "$ns_b" timeout -k 5 60 $prefix/bin/$t -p exanet -E >"$work/server.log" 2>&1
      # the client connects once the server listens on fabtests' out-of-band port (3000)
      for ((w = 0; w < 200; w++)); do
        [[ -n $(ip netns exec "$ns_b" ss -Hltn 'sport = :3000' 2>/dev/null) ]] && break
        sleep 0.05
      done
      rc=0
      on_host "$ns_a" timeout -k 5 60 $prefix/bin/$t -p exanet -E "$addr_b" >"$work/client.log" 2>&1 ||
        rc=$?
      [[ $rc -ne 0 ]] && kill "${netns_pids[-1]}" 2>/dev/null
      wait "${netns_pids[-1]}" || rc=$((rc ? rc : $?))
      echo "$t (run $i): exit $rc, $(grep -c '^[0-9]' "$work/client.log") sizes"
      if [[ $rc -ne 0 ]]; then
        failed=1
        tail -n 5 "$work/client.log" "$work/server.log"
      fi
    done
  done
  rma_inline_share || failed=1
  return $failed
}

# Both sides stream 64 B fi_inject_write: each should go inline, one lower message, and wait
# (-FI_EAGAIN) for packet credit the peer is about to return (only a ring-credit wait over 1 ms
# sends writes by DMA, for 9 ms). A packet credit the peer's lower endpoint refused once was
# given back only with the next packet consumed, which a sender out of credit never sends, and
# a packet-credit wait ran out after 1 ms: from then on that side wrote by DMA (0-33 % inline
# on a side in 3 runs of 6, 2026-12-06; 7-51 % with a third process hogging a core). Each run
# must keep half inline on both sides (95-99 % since, also with the hog). The share, not the speed, is judged.
rma_inline_share() {
  local runs=${INLINE_RUNS:-3} i w rc bad=0 share
  for ((i = 1; i <= runs; i++)); do
    netns_start "$ns_b" env FI_EXANET_STATS=stderr timeout -k 5 60 $prefix/bin/fi_rma_bw -e rdm \
      -o write -S 64 -I 100000 -p exanet -E >"$work/server.log" 2>&1
    for ((w = 0; w < 200; w++)); do
      [[ -n $(ip netns exec "$ns_b" ss -Hltn 'sport = :3000' 2>/dev/null) ]] && break
      sleep 0.05
    done
    rc=0
    on_host "$ns_a" env FI_EXANET_STATS=stderr timeout -k 5 60 $prefix/bin/fi_rma_bw -e rdm \
      -o write -S 64 -I 100000 -p exanet -E "$addr_b" >"$work/client.log" 2>&1 || rc=$?
    [[ $rc -ne 0 ]] && kill "${netns_pids[-1]}" 2>/dev/null
    wait "${netns_pids[-1]}" || rc=$((rc ? rc : $?))
    # the lowest share of the two sides' exanet-stats lines, in percent; 0 if either is missing
    share=$(awk '/exanet-stats/ {
        for (k = 1; k <= NF; k++) { split($k, kv, "="); v[kv[1]] = kv[2] }
        s = v["rma_writes"] > 0 ? 100 * v["rma_inline_writes"] / v["rma_writes"] : 0
        if (n++ == 0 || s < low) low = s
      } END { printf "%d", n == 2 ? low : 0 }' "$work/server.log" "$work/client.log")
    echo "fi_rma_bw -S 64 inject writes (run $i): exit $rc, at least $share % inline on each side"
    if [[ $rc -ne 0 || $share -lt 50 ]]; then
      bad=1
      grep -v exanet-stats "$work/client.log" | tail -n 3
      grep -ho 'rma_writes=[0-9]* rma_inline_writes=[0-9]*' "$work/server.log" "$work/client.log"
    fi
  done
  return $bad
}

# fi_ubertest's server takes its config from the client over a socket of its own (port 2710 in
# fabtests 1.17, not the provider's).
ubertest_port=2710

# Waits until a process listens on TCP port PORT (at most 10 s), or process PID has ended: the
# client starts as soon as the server can take it, not after a fixed second (about 30 pieces).
wait_listening() {
  local port=$1 pid=$2 i
  for ((i = 0; i < 200; i++)); do
    [[ -n $(ss -Hltn "sport = :$port") ]] && return 0
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.05
  done
}

ubertest() {
  local provdir=${1:?provider dir}
  local config=$root/fabtests/upstream/exanet-verify.test
  local out
  out=$(mktemp -d)
  # shellcheck disable=SC2064  # expanded now: out is local
  trap "rm -rf '$out'" EXIT  # scratch: what a failure needs is printed
  # fabtests 1.17's iovec builder for the weighted and reversed layouts rounds each entry, so
  # with 5 or 6 entries the iovecs add up to a byte more or less than the message it means
  # (16 bytes in 6 entries: 1+2+2+3+4+5 = 17). Providers whose iov_limit is 4 (shm, tcp) never
  # meet it; exanet's is 8, so the unit tests run with FI_EXANET_IOV_LIMIT=4. Our own
  # conformance.iov_random covers 1 to 8 entries with layouts that add up.
  export FI_PROVIDER_PATH=$provdir FI_EXANET_IOV_LIMIT=4
  # fi_ubertest 1.17 keeps about 7 MB per test it ran, whatever the provider (shm too), in both
  # processes: the whole config in one run (1764 tests) grows each to about 12 GB. So the config
  # runs in pieces, one per block and class function (about 30 runs, at most some 150 tests).
  python3 - "$config" "$out" "${UBERTEST_FUNCS:-}" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
only = sys.argv[3].split()
blocks = re.findall(r"^\{.*?^\}", text, re.S | re.M)
n = 0
for b in blocks:
    m = re.search(r"(class_function:\s*\[)(.*?)(\],)", b, re.S)
    funcs = re.findall(r"FT_FUNC_\w+", m.group(2)) if m else [None]
    for f in funcs:
        if only and f not in only:
            continue
        piece = b if f is None else b[:m.start(2)] + "\n\t\t" + f + ",\n\t" + b[m.end(2):]
        n += 1
        open(f"{sys.argv[2]}/piece.{n:03d}.test", "w").write(piece + "\n")
PY
  local piece ok=0 eio=0 err=0 nodata=0 runs=0 v
  for piece in "$out"/piece.*.test; do
    # as runfabtests.sh runs it: the client drives the config, the server (-x) leaves with it
    (cd "$out" && timeout 300 "$prefix/bin/fi_ubertest" -x >server.log 2>&1) &
    local server=$!
    wait_listening "$ubertest_port" "$server"
    (cd "$out" && timeout 300 "$prefix/bin/fi_ubertest" -u "$piece" 127.0.0.1 >client.log 2>&1) ||
      kill -9 "$server" 2>/dev/null || true
    wait "$server" || true
    cat "$out/client.log" >>"$out/client.all.log"
    runs=$((runs + 1))
    v=$(awk -F: '/^Success/{print $2+0}' "$out/client.log"); ok=$((ok + ${v:-0}))
    v=$(awk -F: '/^EIO/{print $2+0}' "$out/client.log"); eio=$((eio + ${v:-1}))
    v=$(awk -F: '/^ERROR/{print $2+0}' "$out/client.log"); err=$((err + ${v:-1}))
    v=$(awk -F: '/^ENODATA/{print $2+0}' "$out/client.log"); nodata=$((nodata + ${v:-1}))
  done
  echo "fi_ubertest: $runs runs (exanet-verify.test by block and class function)"
  echo "fi_ubertest (exanet-verify.test): ${ok:-0} success, ${eio:-?} EIO, ${err:-?} errors, ${nodata:-?} ENODATA"
  if [[ $ok -eq 0 || $eio -ne 0 || $err -ne 0 || $nodata -ne 0 ]]; then
    grep -a -B3 'FAILED\|result: [^S]' "$out/client.all.log" | head -60
    return 1
  fi
}

case $cmd in
  build) build ;;
  quick) quick "${3:-}" ;;
  ubertest) ubertest "${3:-}" ;;
  standard) standard "${3:-}" ;;
  rdm_stress) rdm_stress "${3:-}" ;;
  quick_netns) quick_netns "${3:-}" ;;
  standard_netns) standard_netns "${3:-}" ;;
  rma_netns) rma_netns "${3:-}" ;;
  named_netns) named_netns "${3:-}" ;;
  *) echo "usage: $0 build|quick|ubertest|standard|rdm_stress|quick_netns|standard_netns|rma_netns|named_netns PREFIX [PROVDIR]" >&2; exit 2 ;;
esac
