// 1-bit Adam (framework/optim/onebit_adam.hpp, as DeepSpeed's OnebitAdam computes it) over a
// ParamStore whose units are whole (ZeRO stage 0; DeepSpeed refuses ZeRO with it too): m and v per
// element and this rank's compression errors of each parameter. Up to freeze_step each unit is
// updated on its own with AdamW's kernel (no bias correction); after it each rank folds its own
// gradients into its momenta, every parameter's momentum is averaged by the compressed exchange
// (ShardReductions::compressed_average, one call for all), and the update uses the frozen v.
#pragma once

#include "framework/optim/onebit_adam.hpp"
#include "framework/optim/optimizers/optimizer.hpp"

namespace strata::optim {

class OneBitAdam final : public Optimizer {
 public:
  explicit OneBitAdam(const OneBitAdamHyper& h = {});
  static std::shared_ptr<const Optimizer> from_config(const config::Optimizer& c);
  const OneBitAdamHyper& hyper() const { return h_; }

  double lr() const override { return h_.lr; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<OneBitAdam>(*this); }
  void to_config(config::Optimizer& out) const override;
  void bind(const nn::ParamStore& store, int ranks) override;
  double step(StepContext& ctx, const StepArgs& a) override;
  bool local_gradients(std::int64_t step) const override { return h_.frozen(step); }

 private:
  void frozen_step(StepContext& ctx, double lr, float grad_scale);

  OneBitAdamHyper h_;
  std::vector<std::vector<ErrorSlot>> slots_;  // per unit, per parameter
};

// Its entry in framework/optim/registry.def: OneBitAdam::from_config.
std::shared_ptr<const Optimizer> make_onebit_adam(const config::Optimizer& c);

}  // namespace strata::optim
