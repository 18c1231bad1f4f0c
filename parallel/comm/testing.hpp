// Test hooks of the communication layer: a group whose transport behaves like another one, so that
// the device paths' logic runs on machines without a GPU. Each returns a group of g's ranks that
// shares g's sequence numbers and communicators: use one or the other for a given exchange, the
// same on every rank. Made locally (nothing is communicated).
#pragma once

#include "parallel/comm/group.hpp"

namespace strata::parallel::testing {

// CPU buffers go through the host-staged transport (staged::init_for_cpu_buffers): each call's
// input copied into a staging buffer, the host call run on the staging buffers, the result copied
// into the caller's buffer when the host call has completed, before the Work completes — the path
// device buffers take when ranks share a GPU, with memcpy for the copies.
Group staged_cpu_buffers(const Group& g);

// send/recv are matched by posting order alone, as NCCL matches them: every tag is replaced by 0
// below Group (MPI then pairs the n-th send from A to B with the n-th receive on B from A).
Group tags_ignored(const Group& g);

}  // namespace strata::parallel::testing
