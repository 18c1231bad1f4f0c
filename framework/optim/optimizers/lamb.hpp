// LAMB (framework/optim/lamb.hpp, as DeepSpeed's FusedLamb computes it) over a ParamStore whose
// units may be sharded (ZeRO: a rank owns any contiguous slice of each unit's flat buffer, which
// can cut a parameter anywhere): m and v per element. The trust ratio of a parameter needs the
// norms of the whole parameter and of its whole update, so:
//   pass 1 (state read, not written): each shard sums p² and u² of its part of every parameter;
//   ShardReductions::sum_vector adds the parts (two numbers per parameter, one collective);
//   pass 2 (state written): the owned slices are updated with their parameter's trust ratio.
#pragma once

#include "framework/optim/lamb.hpp"
#include "framework/optim/optimizers/optimizer.hpp"

namespace strata::optim {

class Lamb final : public Optimizer {
 public:
  explicit Lamb(const LambHyper& h = {});
  static std::shared_ptr<const Optimizer> from_config(const config::Optimizer& c);
  const LambHyper& hyper() const { return h_; }

  double lr() const override { return h_.lr; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<Lamb>(*this); }
  void to_config(config::Optimizer& out) const override;
  void bind(const nn::ParamStore& store, int ranks) override;
  double step(StepContext& ctx, const StepArgs& a) override;

  // Trust ratios of the last update, one per parameter in store order (reports and tests).
  const std::vector<double>& trust_ratios() const { return ratios_; }

 private:
  LambHyper h_;
  LambHyper h_nodecay_;  // parameters not declared `decay` (1-D by convention)
  std::size_t num_params_ = 0;
  std::vector<double> ratios_;
};

// Its entry in framework/optim/registry.def: Lamb::from_config.
std::shared_ptr<const Optimizer> make_lamb(const config::Optimizer& c);

}  // namespace strata::optim
