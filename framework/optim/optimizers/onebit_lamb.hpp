// 1-bit LAMB (framework/optim/onebit_lamb.hpp, as DeepSpeed's OnebitLamb computes it) over a
// ParamStore whose units are whole (ZeRO stage 0; DeepSpeed's OnebitLamb needs whole tensors too).
// State: m, v and v_fresh per element; each parameter's scalars (coeff_freeze, last_factor,
// scaling: optim::OneBitLambScalars); this rank's compression errors of the one fused tensor of
// every parameter (on the first unit with parameters).
//   Warm-up (update <= freeze_step): LAMB without bias correction in two passes (sums of p² and
//   u² per parameter, then the update with its clamped trust ratio); the trust ratios' running
//   average is kept per parameter, and v is copied to v_fresh at update freeze_step.
//   Compressed (update > freeze_step): every unit's state stays acquired while this rank's
//   gradients go into the momenta (scaled by their fixed scaling), all momenta are averaged as one
//   fused tensor by ShardReductions::compressed_average, and each parameter is updated with
//   coeff_freeze × its factor.
#pragma once

#include "framework/optim/onebit_lamb.hpp"
#include "framework/optim/optimizers/optimizer.hpp"

namespace strata::optim {

class OneBitLamb final : public Optimizer {
 public:
  explicit OneBitLamb(const OneBitLambHyper& h = {});
  static std::shared_ptr<const Optimizer> from_config(const config::Optimizer& c);
  const OneBitLambHyper& hyper() const { return h_; }

  double lr() const override { return h_.lr; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<OneBitLamb>(*this); }
  void to_config(config::Optimizer& out) const override;
  void bind(const nn::ParamStore& store, int ranks) override;
  double step(StepContext& ctx, const StepArgs& a) override;
  bool local_gradients(std::int64_t step) const override { return h_.frozen(step); }

  // Elements of every parameter of the store together: the fused momentum exchanged.
  std::int64_t fused_numel() const { return fused_numel_; }
  // The LAMB coefficients of the last update, one per parameter in store order: the clamped
  // trust ratios in the warm-up, coeff_freeze × factor after it.
  const std::vector<double>& coeffs() const { return coeffs_; }

 private:
  void warmup(StepContext& ctx, std::int64_t step, double lr, float grad_scale);
  void compressed(StepContext& ctx, double lr, float grad_scale);

  OneBitLambHyper h_;
  std::size_t num_params_ = 0;
  std::int64_t fused_numel_ = 0;
  std::size_t errors_unit_ = 0;  // the first unit with parameters: it keeps the errors
  std::vector<double> coeffs_;
};

// Its entry in framework/optim/registry.def: OneBitLamb::from_config.
std::shared_ptr<const Optimizer> make_onebit_lamb(const config::Optimizer& c);

}  // namespace strata::optim
