// NvmeStateStore: offload_optimizer.device = "nvme" — every unit's optimizer state lives in this
// rank's swap file under nvme_path; buffer_count host buffers hold the units being updated. While
// the Trainer updates unit u, the units after it in the step's order (0..n-1, or expect_order's)
// are read ahead as far as buffers allow, and unit u's predecessor is written back; reads for the
// next step start as soon as this step's last units are released, and the last write-backs
// complete during the next step's forward (end_step does not wait for them).
#pragma once

#include <memory>
#include <vector>

#include "framework/train/state_store.hpp"
#include "offload/state_layout.hpp"
#include "offload/swapper.hpp"

namespace strata::offload {

class NvmeStateStore final : public train::OptimizerStateStore {
 public:
  // opts.what / category are set here ("optimizer", Category::optimizer).
  explicit NvmeStateStore(SwapperOptions opts);

  void create(std::size_t u, const train::StateLayout& layout, const Tensor& values) override;
  void begin_step() override;
  void expect_order(std::vector<std::size_t> order) override;
  train::UnitOptimizerState& acquire(std::size_t u) override;
  void release(std::size_t u, bool dirty) override;
  void end_step() override;
  std::size_t num_units() const override { return layouts_.size(); }
  Tier tier() const override { return Tier::host; }
  double io_wait_seconds() const override {
    return swapper_.stats().read_wait_s + swapper_.stats().write_wait_s;
  }

  const Swapper& swapper() const { return swapper_; }
  Swapper& swapper() { return swapper_; }

 private:
  // The buffer_count units from position `pos` of order_ on, wrapping into the next step.
  std::vector<std::size_t> upcoming(std::size_t pos) const;
  std::size_t position(std::size_t u) const;  // of unit u in order_
  Device device() const { return swapper_.file().meta() ? Device::meta() : Device::cpu(); }

  Swapper swapper_;
  std::vector<PackedStateLayout> layouts_;
  std::vector<train::UnitOptimizerState> views_;
  std::vector<std::size_t> order_;  // empty: 0..n-1
  std::vector<std::size_t> pos_;    // of each unit in order_
};

}  // namespace strata::offload
