// 8-bit AdamW (framework/optim/adamw8bit.hpp): m and v as u8 codes per element with an f32 absmax
// per 2048-element block of the unit's flat buffer (blocks never straddle two ranks: the
// ParamStore pads units to whole blocks per rank), each unit's update on its own.
#pragma once

#include "framework/optim/adamw.hpp"
#include "framework/optim/optimizers/optimizer.hpp"

namespace strata::optim {

class AdamW8bit final : public UnitStepOptimizer {
 public:
  explicit AdamW8bit(const AdamWHyper& h = {});
  static std::shared_ptr<const Optimizer> from_config(const config::Optimizer& c);
  const AdamWHyper& hyper() const { return h_; }

  double lr() const override { return h_.lr; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<AdamW8bit>(*this); }
  void to_config(config::Optimizer& out) const override;
  void bind(const nn::ParamStore& store, int ranks) override;
  void update_unit(UnitSlice& s, const StepArgs& a) override;

 private:
  AdamWHyper h_;
};

// Its entry in framework/optim/registry.def: AdamW8bit::from_config.
std::shared_ptr<const Optimizer> make_adamw8bit(const config::Optimizer& c);

}  // namespace strata::optim
