// The relative cost of a training step under a configuration, for choosing among those that fit:
// a simple, documented estimate (docs/plan.md), not a measurement. Per rank and step:
//   compute = 6 · parameters · tokens · r / (flops · efficiency), r = 1 without recomputation,
//             1 + selective_overhead with selective recomputation (no product with a weight is
//             redone: the attention core's forward and three elementwise passes again), 4/3 with
//             full recomputation (forward runs twice); efficiency = t / (t + half_tokens) for t
//             tokens per micro-batch (small micro-batches leave a device idle);
//   comm    = bytes sent by ring collectives (the planned step's ZeroHooks volume) / network;
//   host    = optimizer state and parameter slices crossing device↔host / pcie;
//   nvme    = swap-file bytes read and written / nvme.
// Added up without overlap (an upper bound).
#pragma once

#include "parallel/plan/planner.hpp"

namespace strata::parallel::plan {

struct CostModel {
  double flops = 100e12;      // device FLOP/s on large micro-batches
  double half_tokens = 1024;  // tokens per micro-batch at which a device reaches half of that
  double network = 12.5e9;    // bytes/s each rank sends (100 Gb/s)
  double pcie = 16e9;         // host <-> device bytes/s
  double nvme = 3e9;          // swap-file bytes/s
  // Selective recomputation's extra compute, as a share of a step without it (docs/plan.md).
  double selective_overhead = 0.05;
};

// The factor r above for a recomputation mode.
double recompute_factor(config::Recompute r, const CostModel& model = {});

struct StepCost {
  double compute = 0, comm = 0, host = 0, nvme = 0;  // seconds
  double total() const { return compute + comm + host + nvme; }
};

StepCost estimate(const MemoryPlan& plan, const CostModel& model = {});

}  // namespace strata::parallel::plan
