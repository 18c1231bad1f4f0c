// LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning") as DeepSpeed's FusedLamb
// computes it: Adam moments, an update m/(sqrt(v)+eps) + weight_decay·p, and a per-parameter
// trust ratio ||p|| / ||update|| clamped to [min_coeff, max_coeff]. Split into a read-only pass
// that sums p² and update² over a flat range and an apply pass, so that a caller owning only a
// slice of a parameter (ZeRO) can add the partial sums of every shard before any update
// (framework/optim/optimizers/lamb.hpp orchestrates).
#pragma once

#include <cstddef>
#include <cstdint>

#include "framework/core/dtype.hpp"

namespace strata::optim {

// DeepSpeed FusedLamb's arguments, same names and defaults.
struct LambHyper {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool bias_correction = true;   // step size lr·sqrt(1 - b2^t) / (1 - b1^t), else lr
  double max_coeff = 10.0;       // trust ratio clamp
  double min_coeff = 0.01;
  bool eps_inside_sqrt = false;  // denominator sqrt(v + eps) instead of sqrt(v) + eps
};

// Throws UserError("[optim] ...") naming the bad value: lr, eps, weight_decay finite and >= 0,
// betas in [0, 1), 0 <= min_coeff <= max_coeff, both finite.
void validate(const LambHyper& h);

// The step size of update t (1-based): lr·sqrt(1 - b2^t) / (1 - b1^t) with bias correction
// (FusedLamb applies it to the step, not inside the update whose norm is taken), else lr.
double lamb_step_size(const LambHyper& h, std::int64_t step, double lr);

// The trust ratio of a parameter from its sums of squares: 1 when either norm is 0, else
// ||p|| / ||u|| clamped to [min_coeff, max_coeff].
double lamb_trust_ratio(const LambHyper& h, double param_sq, double update_sq);

struct LambSums {
  double param_sq = 0;   // sum p² (before the update)
  double update_sq = 0;  // sum u², u = m'/(sqrt(v')+eps) + wd·p
};

// Per element, in float32 (scalars rounded from double, f(x) = float(x)); m and v are read only:
//   g  = grad · grad_scale
//   m' = f(b1)·m + f(1-b1)·g
//   v' = f(b2)·v + (f(1-b2)·g)·g
//   u  = m' / (sqrt(v') + f(eps)) + f(wd)·p      (eps_inside_sqrt: sqrt(v' + f(eps)))
// and the sums of p² and u² in double, one element after another.
LambSums lamb_sums(const float* param, const float* grad, const float* m, const float* v,
                   std::size_t n, const LambHyper& h, float grad_scale);

namespace detail {
// The f32 scalars of lamb_sums / lamb_apply (validates h), computed once on the host; the CUDA
// kernels take them by value.
struct LambConsts {
  float gs, b1, c1, b2, c2, eps, wd;
  bool inside;
};
LambConsts lamb_consts(const LambHyper& h, float grad_scale);
}  // namespace detail

// The update of the range: m = m', v = v', p = p - f(step_size·trust_ratio)·u (the same u as
// lamb_sums); the 16-bit copy written when param16 is given.
void lamb_apply(float* param, const float* grad, float* m, float* v, std::size_t n,
                const LambHyper& h, float grad_scale, double step_size, double trust_ratio,
                std::uint16_t* param16 = nullptr, DType dt16 = DType::bf16);

}  // namespace strata::optim
