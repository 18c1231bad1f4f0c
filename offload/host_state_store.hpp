// HostStateStore: offload_optimizer.device = "cpu" — every unit's optimizer state (f32 master,
// m, v) resident in host memory (page-locked when pin_memory and CUDA can pin), charged to the
// host tier, so the device holds only parameters, gradients and activations. meta: the planner's
// store, charged the same, holding nothing.
#pragma once

#include <memory>
#include <vector>

#include "framework/train/state_store.hpp"
#include "offload/host_buffer.hpp"
#include "offload/state_layout.hpp"

namespace strata::offload {

class HostStateStore final : public train::OptimizerStateStore {
 public:
  HostStateStore(bool pin_memory, MemoryLedger* ledger, bool meta = false);

  void create(std::size_t u, const train::StateLayout& layout, const Tensor& values) override;
  train::UnitOptimizerState& acquire(std::size_t u) override { return units_.at(u).views; }
  void release(std::size_t, bool) override {}
  std::size_t num_units() const override { return units_.size(); }
  Tier tier() const override { return Tier::host; }

 private:
  struct Unit {
    HostBuffer buf;
    train::UnitOptimizerState views;
  };
  bool pin_;
  bool meta_;
  MemoryLedger& ledger_;
  std::vector<Unit> units_;
};

}  // namespace strata::offload
