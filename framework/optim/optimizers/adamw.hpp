// AdamW (also the config's "Adam", whose decoupled weight decay Strata implements): m and v per
// element, each unit's update on its own through ops::adamw_step (framework/optim/adamw.hpp:
// bitwise PyTorch), weight decay only on parameters declared `decay`.
#pragma once

#include "framework/optim/adamw.hpp"
#include "framework/optim/optimizers/optimizer.hpp"

namespace strata::optim {

class AdamW final : public UnitStepOptimizer {
 public:
  explicit AdamW(const AdamWHyper& h = {});
  static std::shared_ptr<const Optimizer> from_config(const config::Optimizer& c);
  const AdamWHyper& hyper() const { return h_; }

  double lr() const override { return h_.lr; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<AdamW>(*this); }
  void to_config(config::Optimizer& out) const override;
  void bind(const nn::ParamStore& store, int ranks) override;
  void update_unit(UnitSlice& s, const StepArgs& a) override;

 private:
  AdamWHyper h_;
};

// The fields every Adam-style optimizer reads from the config's optimizer block the same way, and
// writes back.
template <typename Hyper>
void adam_family_from_config(Hyper& h, const config::Optimizer& c) {
  h.lr = c.params.number("lr");
  h.beta1 = c.params.pair("betas")[0];
  h.beta2 = c.params.pair("betas")[1];
  h.eps = c.params.number("eps");
  h.weight_decay = c.params.number("weight_decay");
}
template <typename Hyper>
void adam_family_to_config(const Hyper& h, config::Optimizer& c) {
  c.params.set("lr", h.lr);
  c.params.set("betas", optim::HPair{h.beta1, h.beta2});
  c.params.set("eps", h.eps);
  c.params.set("weight_decay", h.weight_decay);
}

// Its entry in framework/optim/registry.def: AdamW::from_config.
std::shared_ptr<const Optimizer> make_adamw(const config::Optimizer& c);

}  // namespace strata::optim
