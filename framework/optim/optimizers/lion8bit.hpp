// Lion8bit (bitsandbytes' Lion8bit; framework/optim/lion.hpp): Lion whose momentum is kept as u8
// codes per element with an f32 absmax per 2048-element block of the unit's flat buffer (blocks
// never straddle two ranks: the ParamStore pads units to whole blocks per rank), as AdamW8bit keeps
// its first moment; each unit's update on its own.
#pragma once

#include "framework/optim/lion.hpp"
#include "framework/optim/optimizers/optimizer.hpp"

namespace strata::optim {

class Lion8bit final : public UnitStepOptimizer {
 public:
  explicit Lion8bit(const LionHyper& h = {});
  static std::shared_ptr<const Optimizer> from_config(const config::Optimizer& c);
  const LionHyper& hyper() const { return h_; }

  double lr() const override { return h_.lr; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<Lion8bit>(*this); }
  void to_config(config::Optimizer& out) const override;
  void bind(const nn::ParamStore& store, int ranks) override;
  void update_unit(UnitSlice& s, const StepArgs& a) override;

 private:
  LionHyper h_;
};

// Its entry in framework/optim/registry.def: Lion8bit::from_config.
std::shared_ptr<const Optimizer> make_lion8bit(const config::Optimizer& c);

}  // namespace strata::optim
