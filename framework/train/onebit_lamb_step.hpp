// OneBitLambStep: the Trainer's 1-bit LAMB update (optim/onebit_lamb.hpp) over a ParamStore whose
// units are whole (ZeRO stage 0; DeepSpeed's OnebitLamb needs whole tensors too).
//   Warm-up (update <= freeze_step): LAMB without bias correction in two passes (sums of p² and
//   u² per parameter, then the update with its clamped trust ratio); the trust ratios' running
//   average is kept per parameter, and v is copied to v_fresh at update freeze_step.
//   Compressed (update > freeze_step): every unit's state stays acquired while this rank's
//   gradients go into the momenta (scaled by their fixed scaling), all momenta are averaged as one
//   fused tensor by ShardReductions::compressed_average (its errors live in unit 0's `errors`),
//   and each parameter is updated with coeff_freeze × its factor.
// Per-unit state: m, v over the unit; `factored` = v_fresh (the unit's elements) followed by
// optim::kOneBitLambScalars floats per parameter (optim::OneBitLambScalars).
#pragma once

#include <cstdint>
#include <vector>

#include "framework/nn/param_store.hpp"
#include "framework/optim/onebit_lamb.hpp"
#include "framework/train/state_store.hpp"

namespace strata::train {

struct ShardReductions;

class OneBitLambStep {
 public:
  OneBitLambStep(const nn::ParamStore& store, const optim::OneBitLambHyper& h);

  // Length of unit u's `factored` state: v_fresh over the owned slice, then the scalars.
  static std::int64_t factored_size(const nn::UnitLayout& l);
  // Offset of parameter i's scalars in its unit's `factored` state.
  static std::int64_t scalars_offset(const nn::UnitLayout& l, std::size_t i);
  // Elements of every parameter of the store together: the fused momentum exchanged.
  std::int64_t fused_numel() const { return fused_numel_; }
  // The unit whose `errors` state holds the fused tensor's compression errors (on its first
  // parameter's slot; Trainer::error_slots): the first unit with parameters.
  std::size_t errors_unit() const { return errors_unit_; }

  // One update (1-based step) at the scheduled rate lr; grad_scale multiplies every gradient.
  void run(nn::ParamStore& store, OptimizerStateStore& states, const ShardReductions& red,
           std::int64_t step, double lr, float grad_scale);

  // The LAMB coefficients of the last update, one per parameter in store order: the clamped
  // trust ratios in the warm-up, coeff_freeze × factor after it.
  const std::vector<double>& coeffs() const { return coeffs_; }

 private:
  void warmup(nn::ParamStore& store, OptimizerStateStore& states, const ShardReductions& red,
              std::int64_t step, double lr, float grad_scale);
  void compressed(nn::ParamStore& store, OptimizerStateStore& states, const ShardReductions& red,
                  double lr, float grad_scale);

  optim::OneBitLambHyper h_;
  std::size_t num_params_ = 0;
  std::int64_t fused_numel_ = 0;
  std::size_t errors_unit_ = 0;
  std::vector<double> coeffs_;
};

}  // namespace strata::train
