// Where a training step's time went (wall_clock_breakdown): wall seconds on this rank, each
// counted once so that the parts add up to the step — forward and backward compute, waiting for
// collectives, the optimizer update, and waiting for offloaded state (NVMe reads, write-backs).
#pragma once

#include <string>

namespace strata::parallel {

struct StepTimes {
  double forward = 0, backward = 0, comm_wait = 0, optimizer = 0, offload_wait = 0, total = 0;
  // What the parts above do not cover (data loading, bookkeeping).
  double other() const { return total - forward - backward - comm_wait - optimizer - offload_wait; }
};

// "time: forward 120.1 ms, backward 240.3 ms, comm wait 5.0 ms, optimizer 30.2 ms, offload wait
// 0.0 ms, other 1.1 ms (step 396.7 ms)".
std::string describe(const StepTimes& t);

}  // namespace strata::parallel
