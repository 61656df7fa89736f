// SPDX-License-Identifier: BSD-2-Clause
// Compiled by ctest, never linked (test/dev/CMakeLists.txt): proto/ holds its device as
// dev::selected_device, and this shows that only dev::device's operations are reachable through
// it. lint.device_interface_open compiles the calls the concept lists (a control: the file and
// its include path are sound); lint.device_interface_closed adds one call that the backend
// has but the interface does not, and must be refused as inaccessible.
#include "dev/backend.hpp"

namespace exanet::dev {

bool through_the_interface(selected_device& d, peer_id p) {
  mailbox_reservation r;
  if (!core::ok(d.mailbox_reserve(p, r))) return false;
  d.mailbox_publish(r);
  const bool lost = d.take_lost_peers(0, [](peer_id) {});
  return !lost && !d.peer_forgotten(p) && !d.capabilities().dma_read;
}

#ifdef CALL_OUTSIDE_THE_CONCEPT
bool around_the_interface(selected_device& d) {
  return d.local_side().peer_count() == 0;  // hybrid::device::local_side: a backend's own
}
#endif

}  // namespace exanet::dev
