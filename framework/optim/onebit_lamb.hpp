// 1-bit LAMB (Li et al. 2021, "1-bit LAMB") as DeepSpeed's OnebitLamb computes it.
//   Warm-up (updates 1..freeze_step, gradients averaged over the data-parallel ranks): LAMB
//   without bias correction (DeepSpeed's OnebitLamb never corrects and never puts eps inside the
//   square root), each parameter's trust ratio ||p|| / ||u|| clamped to [min_coeff, max_coeff];
//   every ratio other than exactly 1 moves an exponential average
//   coeff_freeze = coeff_beta·coeff_freeze + (1 - coeff_beta)·ratio. At update freeze_step a
//   copy of v, v_fresh, is taken.
//   Compressed (updates after freeze_step): v is frozen. At the first such update each
//   parameter's momentum gets a fixed scaling = mean over parameters of RMS(m) / RMS(m) (so all
//   momenta have one RMS and one 1-bit scale serves them); each rank folds its own gradient into
//   m, multiplies by scaling, the momenta of all parameters are averaged as one fused tensor by
//   the 1-bit compressed all-reduce with error feedback, divided by scaling again; the gradient
//   they imply, (m - beta1·m_last) / (1 - beta1), updates v_fresh; the update
//   u = m / (sqrt(v) + eps) + wd·p is applied with coeff_freeze × factor, where factor is
//   max(denominator with v / denominator with v_fresh) blended towards 1 by the share of the
//   weight decay in ||u||, clamped to [factor_min, factor_max] and to last_factor × (1 ±
//   factor_threshold).
// Here: the hyperparameters, the per-parameter scalars and the element-wise kernels of the
// compressed phase (the warm-up is optim/lamb.hpp's kernels with onebit_lamb_warmup_hyper).
#pragma once

#include <cstddef>
#include <cstdint>

#include "framework/core/dtype.hpp"
#include "framework/optim/lamb.hpp"

namespace strata::optim {

// DeepSpeed OnebitLamb's arguments that act, same names and defaults.
struct OneBitLambHyper {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double max_coeff = 10.0;  // warm-up trust ratio clamp
  double min_coeff = 0.01;
  std::int64_t freeze_step = 100000;  // LAMB steps before the variance freezes
  double coeff_beta = 0.9;            // decay of the trust ratios' running average
  double factor_max = 4.0;            // bounds of the compressed phase's scaling factor
  double factor_min = 0.5;
  double factor_threshold = 0.1;  // most the factor moves from one update to the next (relative)
  // Update t (1-based) is compressed when t > freeze_step.
  bool frozen(std::int64_t step) const { return step > freeze_step; }
};

// Throws UserError("[optim] ...") naming the bad value: LAMB's rules, freeze_step >= 1,
// coeff_beta in [0, 1), 0 < factor_min <= factor_max finite, factor_threshold in [0, 1).
void validate(const OneBitLambHyper& h);

// The warm-up's LAMB: no bias correction, eps outside the square root (step size lr).
LambHyper onebit_lamb_warmup_hyper(const OneBitLambHyper& h);

// A parameter's scalars, kept with the optimizer state (checkpointed): the running average of
// its warm-up trust ratios, the factor of its last compressed update (0 = none yet, read as 1)
// and the fixed scaling of its momentum (0 = not fixed yet).
struct OneBitLambScalars {
  float coeff_freeze = 0, last_factor = 0, scaling = 0;
};
inline constexpr std::size_t kOneBitLambScalars = 3;  // floats per parameter, in that order

// Warm-up: the running average after a trust ratio (unchanged when the ratio is exactly 1).
double onebit_lamb_coeff_average(const OneBitLambHyper& h, double coeff_freeze, double ratio);

// Sum of m² over n elements, one element after another in f64 (the first compressed update's
// RMS of each momentum, which fixes its scaling).
double onebit_lamb_sumsq(const float* m, std::size_t n);

// Compressed phase, before the exchange: m_last = m; m = (f(b1)·m + f(1-b1)·(grad·grad_scale))
// · f(scaling).
void onebit_lamb_momentum(float* m, float* m_last, const float* grad, std::size_t n,
                          const OneBitLambHyper& h, float grad_scale, double scaling);

struct OneBitLambSums {
  double prelim_sq = 0;    // sum (m / (sqrt(v) + eps))²
  double update_sq = 0;    // sum u², u = m / (sqrt(v) + eps) + wd·p
  double denom_ratio = 0;  // max over elements of (sqrt(v) + eps) / (sqrt(v_fresh) + eps)
};

// Compressed phase, after the exchange: m = m / f(scaling); v_fresh = f(b2)·v_fresh +
// (f(1-b2)·r)·r with r = (m - m_last·f(b1)) / f(1-b1); and the sums of the update (v frozen).
OneBitLambSums onebit_lamb_after_exchange(float* m, const float* m_last, const float* v,
                                          float* v_fresh, const float* param, std::size_t n,
                                          const OneBitLambHyper& h, double weight_decay,
                                          double scaling);

// The factor of a compressed update from the parameter's sums and its last factor (0: none).
double onebit_lamb_factor(const OneBitLambHyper& h, double weight_decay, const OneBitLambSums& s,
                          double last_factor);

// p = p - f(lr·coeff)·(m / (sqrt(v) + f(eps)) + f(wd)·p); the 16-bit copy written when given.
void onebit_lamb_apply(float* param, const float* m, const float* v, std::size_t n,
                       const OneBitLambHyper& h, double weight_decay, double rate,
                       std::uint16_t* param16 = nullptr, DType dt16 = DType::bf16);

}  // namespace strata::optim
