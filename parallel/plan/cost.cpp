#include "parallel/plan/cost.hpp"

namespace strata::parallel::plan {

double recompute_factor(config::Recompute r, const CostModel& m) {
  switch (r) {
    case config::Recompute::none:
      return 1.0;
    case config::Recompute::selective:
      return 1.0 + m.selective_overhead;
    case config::Recompute::full:
      return 4.0 / 3.0;
  }
  return 1.0;
}

StepCost estimate(const MemoryPlan& p, const CostModel& m) {
  StepCost c;
  const double per_micro = static_cast<double>(p.micro_batch) * static_cast<double>(p.tokens_per_sample);
  const double tokens = per_micro * p.accumulation;
  const double efficiency = per_micro / (per_micro + m.half_tokens);
  c.compute = 6.0 * static_cast<double>(p.parameters) * tokens * recompute_factor(p.recompute, m) /
              (m.flops * efficiency);
  c.comm = p.comm.ring_bytes_sent(p.ranks) / m.network;
  c.host = static_cast<double>(p.host_transfer) / m.pcie;
  c.nvme = static_cast<double>(p.nvme_read + p.nvme_written) / m.nvme;
  return c;
}

}  // namespace strata::parallel::plan
