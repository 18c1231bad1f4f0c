#include "parallel/plan/cost.hpp"

namespace strata::parallel::plan {

StepCost estimate(const MemoryPlan& p, const CostModel& m) {
  StepCost c;
  const double per_micro = static_cast<double>(p.micro_batch) * static_cast<double>(p.tokens_per_sample);
  const double tokens = per_micro * p.accumulation;
  const double efficiency = per_micro / (per_micro + m.half_tokens);
  c.compute = 6.0 * static_cast<double>(p.parameters) * tokens * (p.checkpointing ? 4.0 / 3.0 : 1.0) /
              (m.flops * efficiency);
  c.comm = p.comm.ring_bytes_sent(p.ranks) / m.network;
  c.host = static_cast<double>(p.host_transfer) / m.pcie;
  c.nvme = static_cast<double>(p.nvme_read + p.nvme_written) / m.nvme;
  return c;
}

}  // namespace strata::parallel::plan
