#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# ofi_rxm's buffer size as exanet leaves it (fi_exanet(7), OTHER HOSTS): with the network on over
# a lower provider that libfabric layers under ofi_rxm, and FI_OFI_RXM_BUFFER_SIZE unset, exanet
# sets 34816 when libfabric loads it, which is before libfabric initialises rxm, and
# FI_OFI_RXM_MSG_RX_SIZE 512 unless the process set that; a buffer size the user set is kept,
# and then the receive count is not touched; with the network off, or over `net` (no rxm),
# nothing is set. The judge is rxm's own log of what it read ("read long var buffer_size=..."
# or "variable buffer_size=<not set>"), so the test fails if exanet sets a variable after rxm
# has read it.
set -u
unset FI_PROVIDER FI_OFI_RXM_BUFFER_SIZE FI_OFI_RXM_MSG_RX_SIZE
fail=0

# What ofi_rxm read for its buffer size and its receive count, in a process that loads exanet
# with the given settings: "buffer_size=... msg_rx_size=...".
rxm_read() {
  local log
  log=$(env "$@" FI_LOG_LEVEL=info FI_LOG_PROV=ofi_rxm timeout 60 fi_info -p exanet 2>&1 >/dev/null)
  echo "$(grep -o '[^_]buffer_size=[^ ]*' <<<"$log" | head -1 | cut -c2-)" \
    "$(grep -o 'msg_rx_size=[^ ]*' <<<"$log" | head -1)"
}

expect() {
  local want=$1 got
  shift
  got=$(rxm_read "$@")
  if [[ $got == "$want" ]]; then
    echo "ok: $* -> rxm $got"
  else
    echo "FAIL: $* -> rxm read '$got', want '$want'"
    fail=1
  fi
}

expect 'buffer_size=34816 msg_rx_size=512' FI_EXANET_NETWORK=every_peer
expect 'buffer_size=34816 msg_rx_size=512' FI_EXANET_NETWORK=other_hosts
expect 'buffer_size=34816 msg_rx_size=512' FI_EXANET_NETWORK=other_hosts FI_EXANET_NETWORK_PROVIDER=verbs
expect 'buffer_size=34816 msg_rx_size=4096' FI_EXANET_NETWORK=every_peer FI_OFI_RXM_MSG_RX_SIZE=4096
expect 'buffer_size=16384 msg_rx_size=<not' FI_EXANET_NETWORK=other_hosts FI_OFI_RXM_BUFFER_SIZE=16384
expect 'buffer_size=17408 msg_rx_size=<not' FI_EXANET_NETWORK=every_peer FI_OFI_RXM_BUFFER_SIZE=17408
expect 'buffer_size=66560 msg_rx_size=512' FI_EXANET_NETWORK=other_hosts FI_OFI_RXM_BUFFER_SIZE=66560 \
  FI_OFI_RXM_MSG_RX_SIZE=512
expect 'buffer_size=<not msg_rx_size=<not' FI_EXANET_NETWORK=off
expect 'buffer_size=<not msg_rx_size=<not' FI_EXANET_NETWORK=every_peer FI_EXANET_NETWORK_PROVIDER=net
exit $fail
