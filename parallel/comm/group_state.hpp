// GroupState: what a Group value shares — its identity, sequence tracker, settings and the
// transports for CPU and device buffers (the device one created on first use).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>

#include "parallel/comm/comm_impl.hpp"

namespace strata::parallel {

struct GroupState {
  GroupInfo info;
  std::string desc;  // info.describe(), computed once
  std::shared_ptr<SeqTracker> tracker;
  std::shared_ptr<CommImpl> host;  // CPU buffers
  // Device buffers: the host transport itself (local), or NCCL created on first use.
  bool device_via_host = false;
  std::mutex device_mu;
  std::shared_ptr<CommImpl> device;
  int device_index = -1;
  std::atomic<std::int64_t> timeout_ms{300000};
  std::atomic<bool> validate{false};
  // The whole world's transport, kept alive by every group derived from it.
  std::shared_ptr<void> world_anchor;
};

}  // namespace strata::parallel
