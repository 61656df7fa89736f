// fi_cntr: success and error counts of the events bound to it. Reading or waiting progresses the
// endpoints bound to it (manual progress).
#pragma once
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include "fi/common.hpp"
#include "proto/completion.hpp"

namespace exanet::fi {

class cntr;

int cntr_open(fid_domain* domain, fi_cntr_attr* attr, fid_cntr** out, void* context) noexcept;
cntr* cntr_from(fid* f) noexcept;
proto::counter_sink cntr_sink(cntr& c) noexcept;
void cntr_attach(cntr& c, progress_source src);
void cntr_detach(cntr& c, progress_source src) noexcept;
int cntr_trywait(cntr& c) noexcept;

}  // namespace exanet::fi
