// Lion (framework/optim/lion.hpp, as DeepSpeed's Lion computes it): one state tensor, the momentum
// m per element; each unit's update on its own (the sign of an interpolation of m and the
// gradient), decoupled weight decay only on parameters declared `decay`.
#pragma once

#include "framework/optim/lion.hpp"
#include "framework/optim/optimizers/optimizer.hpp"

namespace strata::optim {

class Lion final : public UnitStepOptimizer {
 public:
  explicit Lion(const LionHyper& h = {});
  static std::shared_ptr<const Optimizer> from_config(const config::Optimizer& c);
  const LionHyper& hyper() const { return h_; }

  double lr() const override { return h_.lr; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<Lion>(*this); }
  void to_config(config::Optimizer& out) const override;
  void bind(const nn::ParamStore& store, int ranks) override;
  void update_unit(UnitSlice& s, const StepArgs& a) override;

 private:
  LionHyper h_;
};

// Lion's hyperparameters from a config's optimizer block (lr, betas, weight_decay), and back
// (Lion8bit reads and writes the same).
LionHyper lion_from_config(const config::Optimizer& c);
void lion_to_config(const LionHyper& h, config::Optimizer& out);

// Its entry in framework/optim/registry.def: Lion::from_config.
std::shared_ptr<const Optimizer> make_lion(const config::Optimizer& c);

}  // namespace strata::optim
