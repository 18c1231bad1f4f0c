// 1-bit LAMB's compressed-phase kernels: plain loops (-ffp-contract=off: every operation rounds
// as written), chunked over OpenMP threads; sums and maxima are combined per chunk in chunk
// order, so they do not depend on the thread count.
#include "framework/optim/onebit_lamb.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "framework/core/convert.hpp"
#include "framework/core/error.hpp"
#include "framework/optim/chunked.hpp"

namespace strata::optim {

void validate(const OneBitLambHyper& h) {
  validate(onebit_lamb_warmup_hyper(h));
  if (h.freeze_step < 1)
    user_fail("optim",
              "OneBitLamb freeze_step must be >= 1 (its compressed phase needs the "
              "warm-up's trust ratios), got {}",
              h.freeze_step);
  if (!(h.coeff_beta >= 0.0 && h.coeff_beta < 1.0))
    user_fail("optim", "OneBitLamb coeff_beta must be in [0, 1), got {}", h.coeff_beta);
  if (!(std::isfinite(h.factor_max) && h.factor_min > 0.0 && h.factor_min <= h.factor_max))
    user_fail("optim",
              "OneBitLamb needs 0 < factor_min <= factor_max (both finite), got "
              "factor_min {} and factor_max {}",
              h.factor_min, h.factor_max);
  if (!(h.factor_threshold >= 0.0 && h.factor_threshold < 1.0))
    user_fail("optim", "OneBitLamb factor_threshold must be in [0, 1), got {}", h.factor_threshold);
}

LambHyper onebit_lamb_warmup_hyper(const OneBitLambHyper& h) {
  return {.lr = h.lr,
          .beta1 = h.beta1,
          .beta2 = h.beta2,
          .eps = h.eps,
          .weight_decay = h.weight_decay,
          .bias_correction = false,
          .max_coeff = h.max_coeff,
          .min_coeff = h.min_coeff,
          .eps_inside_sqrt = false};
}

double onebit_lamb_coeff_average(const OneBitLambHyper& h, double coeff_freeze, double ratio) {
  if (ratio == 1.0) return coeff_freeze;
  return h.coeff_beta * coeff_freeze + (1.0 - h.coeff_beta) * ratio;
}

double onebit_lamb_sumsq(const float* m, std::size_t n) {
  STRATA_CHECK(n == 0 || m, "optim", "OneBitLamb got a null buffer");
  double ss = 0;
  for (std::size_t e = 0; e < n; ++e) ss += static_cast<double>(m[e]) * m[e];
  return ss;
}

void onebit_lamb_momentum(float* m, float* m_last, const float* grad, std::size_t n,
                          const OneBitLambHyper& h, float grad_scale, double scaling) {
  STRATA_CHECK(n == 0 || (m && m_last && grad), "optim", "OneBitLamb got a null buffer");
  const float b1 = static_cast<float>(h.beta1), c1 = static_cast<float>(1.0 - h.beta1);
  const float s = static_cast<float>(scaling);
  detail::for_each_chunk(n, [&](std::size_t b, std::size_t count) {
    for (std::size_t i = b; i < b + count; ++i) {
      m_last[i] = m[i];
      m[i] = (b1 * m[i] + c1 * (grad[i] * grad_scale)) * s;
    }
  });
}

OneBitLambSums onebit_lamb_after_exchange(float* m, const float* m_last, const float* v,
                                          float* v_fresh, const float* param, std::size_t n,
                                          const OneBitLambHyper& h, double weight_decay,
                                          double scaling) {
  STRATA_CHECK(n == 0 || (m && m_last && v && v_fresh && param), "optim",
               "OneBitLamb got a null buffer");
  const float s = static_cast<float>(scaling), b1 = static_cast<float>(h.beta1);
  const float c1 = static_cast<float>(1.0 - h.beta1), b2 = static_cast<float>(h.beta2);
  const float c2 = static_cast<float>(1.0 - h.beta2), eps = static_cast<float>(h.eps);
  const float wd = static_cast<float>(weight_decay);
  const std::size_t chunks = (n + detail::kChunk - 1) / detail::kChunk;
  std::vector<OneBitLambSums> part(chunks);
  detail::for_each_chunk(n, [&](std::size_t b, std::size_t count) {
    OneBitLambSums p;
    for (std::size_t i = b; i < b + count; ++i) {
      const float mi = m[i] / s;
      m[i] = mi;
      const float r = (mi - m_last[i] * b1) / c1;
      const float vf = b2 * v_fresh[i] + (c2 * r) * r;
      v_fresh[i] = vf;
      const float denom = std::sqrt(v[i]) + eps;
      const float prelim = mi / denom;
      const float u = weight_decay > 0.0 ? prelim + wd * param[i] : prelim;
      p.prelim_sq += static_cast<double>(prelim) * prelim;
      p.update_sq += static_cast<double>(u) * u;
      p.denom_ratio = std::max(p.denom_ratio, static_cast<double>(denom / (std::sqrt(vf) + eps)));
    }
    part[b / detail::kChunk] = p;
  });
  OneBitLambSums out;
  for (const OneBitLambSums& p : part) {
    out.prelim_sq += p.prelim_sq;
    out.update_sq += p.update_sq;
    out.denom_ratio = std::max(out.denom_ratio, p.denom_ratio);
  }
  return out;
}

double onebit_lamb_factor(const OneBitLambHyper& h, double weight_decay, const OneBitLambSums& s,
                          double last_factor) {
  double factor = s.denom_ratio;
  if (weight_decay > 0.0) {
    // min(1, ||prelim|| / ||u||); a zero update norm gives 1, as Python's min(1.0, inf or nan).
    const double un = std::sqrt(s.update_sq);
    const double ratio = un > 0.0 ? std::min(1.0, std::sqrt(s.prelim_sq) / un) : 1.0;
    factor = factor * ratio + (1.0 - ratio);
  }
  factor = std::clamp(factor, h.factor_min, h.factor_max);
  const double last = last_factor == 0.0 ? 1.0 : last_factor;
  if (factor > last * (1.0 + h.factor_threshold)) factor = last * (1.0 + h.factor_threshold);
  if (factor < last * (1.0 - h.factor_threshold)) factor = last * (1.0 - h.factor_threshold);
  return factor;
}

void onebit_lamb_apply(float* param, const float* m, const float* v, std::size_t n,
                       const OneBitLambHyper& h, double weight_decay, double rate,
                       std::uint16_t* param16, DType dt16) {
  STRATA_CHECK(n == 0 || (param && m && v), "optim", "OneBitLamb got a null buffer");
  if (param16)
    STRATA_CHECK(dt16 == DType::bf16 || dt16 == DType::f16, "optim",
                 "the 16-bit parameter copy must be bf16 or f16, got {}", dtype_name(dt16));
  const float eps = static_cast<float>(h.eps), wd = static_cast<float>(weight_decay);
  const float r = static_cast<float>(rate);
  detail::for_each_chunk(n, [&](std::size_t b, std::size_t count) {
    for (std::size_t i = b; i < b + count; ++i) {
      const float prelim = m[i] / (std::sqrt(v[i]) + eps);
      const float u = weight_decay > 0.0 ? prelim + wd * param[i] : prelim;
      param[i] = param[i] - r * u;
    }
    if (param16) {
      if (dt16 == DType::bf16)
        f32_to_bf16(param + b, param16 + b, count);
      else
        f32_to_f16(param + b, param16 + b, count);
    }
  });
}

}  // namespace strata::optim
