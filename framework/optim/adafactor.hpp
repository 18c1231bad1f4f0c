// Adafactor (Shazeer & Stern 2018) as transformers' `Adafactor` computes it: a factored second
// moment for parameters with >= 2 dims (row and column means of grad² + eps1), a full one for
// vectors, update clipping by its RMS, optional first moment, relative step size and parameter
// scaling. Split into kernels over flat ranges so that a caller owning only a slice of a
// parameter (ZeRO) can sum partial statistics, reduce them across shards, and then update its
// slice: the caller orchestrates (framework/optim/optimizers/adafactor.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "framework/core/dtype.hpp"

namespace strata::optim {

// transformers.optimization.Adafactor's arguments, same names and defaults. lr is the base rate
// (unused when relative_step); beta1 < 0 means no first moment (transformers' beta1=None).
struct AdafactorHyper {
  double lr = 1e-3;
  double eps1 = 1e-30;  // eps[0]: added to grad² before its means
  double eps2 = 1e-3;   // eps[1]: lower bound of the parameter scale
  double clip_threshold = 1.0;
  double decay_rate = -0.8;  // beta2 at step t = 1 - t^decay_rate
  double beta1 = -1.0;       // < 0: off
  double weight_decay = 0.0;
  bool scale_parameter = true;  // step size × max(eps2, RMS(parameter))
  bool relative_step = true;    // step size min(1e-2, 1/sqrt(t)) instead of lr
  bool warmup_init = false;     // relative step min(1e-6·t, 1/sqrt(t)) (needs relative_step)
  bool has_beta1() const { return beta1 >= 0.0; }
};

// Throws UserError("[optim] ...") naming the bad value: eps1, eps2, clip_threshold, lr,
// weight_decay finite and > 0 (>= 0 for lr and weight_decay), decay_rate in [-1, 0), beta1 in
// [0, 1) when set, warmup_init only with relative_step.
void validate(const AdafactorHyper& h);

// beta2 of step t (1-based): 1 - t^decay_rate.
double adafactor_beta2(const AdafactorHyper& h, std::int64_t step);
// The relative step size: min(1e-2, 1/sqrt(t)) (warmup_init: min(1e-6·t, 1/sqrt(t))) when
// relative_step, else `lr` (the scheduled rate).
double adafactor_step_size(const AdafactorHyper& h, std::int64_t step, double lr);
// The rate applied to a parameter: step_size × max(eps2, rms_param) with scale_parameter.
double adafactor_lr(const AdafactorHyper& h, double step_size, double rms_param);
// max(1, rms_update / clip_threshold): what the update is divided by.
double adafactor_clip_divisor(const AdafactorHyper& h, double rms_update);

// ---- factored (matrix) parameters: a flat range [first, first + n) of a rows x cols matrix ----

// Adds sum(g² + eps1) of each row / column met to row_sums[r] / col_sums[c] (in double, in a
// fixed order whatever the thread count), g = grad · grad_scale and g² + eps1 in f32.
void adafactor_sq_sums(const float* grad, std::int64_t first, std::size_t n, std::int64_t cols,
                       float grad_scale, float eps1, double* row_sums, double* col_sums);
// stat[i] = stat[i]·f(beta2) + f(sums[i] / count)·f(1 - beta2) (fused, as torch's
// mul_(beta2).add_(mean, alpha=1-beta2)), for the row or column statistics.
void adafactor_ema(float* stat, const double* sums, std::size_t n, double count, double beta2);
// Row factor 1/sqrt(row / mean(row)) and column factor 1/sqrt(col) of transformers'
// _approx_sq_grad (mean in double, rounded to f32).
void adafactor_factors(const float* row, std::int64_t rows, const float* col, std::int64_t cols,
                       float* row_factor, float* col_factor);
// Sum of u² over the range, u = (row_factor[r]·col_factor[c])·g (the unclipped update).
double adafactor_factored_sumsq(const float* grad, std::int64_t first, std::size_t n,
                                std::int64_t cols, float grad_scale, const float* row_factor,
                                const float* col_factor);

// ---- vector parameters: second moment v over the range ----

// Sum of u² with u = g / sqrt(v'), v' = v·f(beta2) + (g² + eps1)·f(1 - beta2); v is not written.
double adafactor_vector_sumsq(const float* grad, const float* v, std::size_t n, float grad_scale,
                              float eps1, double beta2);

// ---- the update of a range, once the parameter's scalars are known ----

struct AdafactorScalars {
  float grad_scale = 1.0f;
  double beta2 = 0.0;         // of this step (vector second moments)
  double clip_divisor = 1.0;  // adafactor_clip_divisor of the whole parameter
  double lr = 0.0;            // adafactor_lr of the whole parameter
};

namespace detail {
// The f32 scalars of an update, as torch applies python floats to f32 tensors (computed once on
// the host; the CUDA kernels take them by value, so both backends round them alike).
struct AdafactorApplyConsts {
  float grad_scale, clip, lr, b1, c1, wd;
  bool beta1, decay;
};
AdafactorApplyConsts adafactor_apply_consts(const AdafactorHyper& h, const AdafactorScalars& s);
}  // namespace detail

// u = ((rf·cf)·g) / f(clip_divisor) · f(lr); with beta1: m = m·f(b1) + u·f(1-b1), u = m; then
// p = p + p·f(-weight_decay·lr) (fused) and p = p - u; the 16-bit copy written when param16.
// m may be null without beta1.
void adafactor_apply_factored(float* param, const float* grad, float* m, std::int64_t first,
                              std::size_t n, std::int64_t cols, const float* row_factor,
                              const float* col_factor, const AdafactorHyper& h,
                              const AdafactorScalars& s, std::uint16_t* param16 = nullptr,
                              DType dt16 = DType::bf16);
// As above for a vector: v = v' (stored), u = (1/sqrt(v))·g, then the same.
void adafactor_apply_vector(float* param, const float* grad, float* v, float* m, std::size_t n,
                            const AdafactorHyper& h, const AdafactorScalars& s,
                            std::uint16_t* param16 = nullptr, DType dt16 = DType::bf16);

}  // namespace strata::optim
