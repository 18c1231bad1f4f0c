// SGD with momentum, Nesterov and coupled weight decay: one momentum buffer per element, each
// unit's update on its own through ops::sgd_step (framework/optim/sgd.hpp: bitwise PyTorch).
#pragma once

#include "framework/optim/optimizers/optimizer.hpp"
#include "framework/optim/sgd.hpp"

namespace strata::optim {

class SGD final : public UnitStepOptimizer {
 public:
  explicit SGD(const SGDHyper& h = {});
  static std::shared_ptr<const Optimizer> from_config(const config::Optimizer& c);
  const SGDHyper& hyper() const { return h_; }

  double lr() const override { return h_.lr; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<SGD>(*this); }
  void to_config(config::Optimizer& out) const override;
  void bind(const nn::ParamStore& store, int ranks) override;
  void update_unit(UnitSlice& s, const StepArgs& a) override;

 private:
  SGDHyper h_;
};

// Its entry in framework/optim/registry.def: SGD::from_config.
std::shared_ptr<const Optimizer> make_sgd(const config::Optimizer& c);

}  // namespace strata::optim
