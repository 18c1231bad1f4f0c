// LAMB kernels: plain loops (the library is built with -ffp-contract=off, so every operation
// rounds as written), chunked over OpenMP threads; the sums add per-chunk partials in chunk order,
// so they do not depend on the thread count.
#include "framework/optim/lamb.hpp"

#include <cmath>
#include <vector>

#include "framework/core/convert.hpp"
#include "framework/core/error.hpp"
#include "framework/optim/chunked.hpp"

namespace strata::optim {

namespace {

using Consts = detail::LambConsts;
Consts consts(const LambHyper& h, float grad_scale) { return detail::lamb_consts(h, grad_scale); }

}  // namespace

detail::LambConsts detail::lamb_consts(const LambHyper& h, float grad_scale) {
  validate(h);
  return {grad_scale,
          static_cast<float>(h.beta1),
          static_cast<float>(1.0 - h.beta1),
          static_cast<float>(h.beta2),
          static_cast<float>(1.0 - h.beta2),
          static_cast<float>(h.eps),
          static_cast<float>(h.weight_decay),
          h.eps_inside_sqrt};
}

namespace {

// The new moments and the update of one element (what both passes compute identically).
struct Elem {
  float m, v, u;
};
inline Elem element(float p, float grad, float m, float v, const Consts& k) {
  const float g = grad * k.gs;
  Elem e;
  e.m = k.b1 * m + k.c1 * g;
  e.v = k.b2 * v + (k.c2 * g) * g;
  const float denom = k.inside ? std::sqrt(e.v + k.eps) : std::sqrt(e.v) + k.eps;
  e.u = e.m / denom + k.wd * p;
  return e;
}

void check(const void* param, const void* grad, const void* m, const void* v, std::size_t n) {
  STRATA_CHECK(n == 0 || (param && grad && m && v), "optim", "LAMB got a null buffer for {} elements", n);
}

}  // namespace

void validate(const LambHyper& h) {
  auto nonneg = [](double x) { return std::isfinite(x) && x >= 0.0; };
  if (!nonneg(h.lr)) user_fail("optim", "Lamb lr must be finite and >= 0, got {}", h.lr);
  if (!nonneg(h.eps)) user_fail("optim", "Lamb eps must be finite and >= 0, got {}", h.eps);
  if (!nonneg(h.weight_decay))
    user_fail("optim", "Lamb weight_decay must be finite and >= 0, got {}", h.weight_decay);
  if (!(h.beta1 >= 0.0 && h.beta1 < 1.0))
    user_fail("optim", "Lamb betas[0] must be in [0, 1), got {}", h.beta1);
  if (!(h.beta2 >= 0.0 && h.beta2 < 1.0))
    user_fail("optim", "Lamb betas[1] must be in [0, 1), got {}", h.beta2);
  if (!nonneg(h.min_coeff) || !nonneg(h.max_coeff) || h.min_coeff > h.max_coeff)
    user_fail("optim", "Lamb needs 0 <= min_coeff <= max_coeff (both finite), got min_coeff {} "
              "and max_coeff {}", h.min_coeff, h.max_coeff);
}

double lamb_step_size(const LambHyper& h, std::int64_t step, double lr) {
  STRATA_CHECK(step >= 1, "optim", "Lamb step must be >= 1 (1-based), got {}", step);
  if (!h.bias_correction) return lr;
  const double t = static_cast<double>(step);
  return lr * std::sqrt(1.0 - std::pow(h.beta2, t)) / (1.0 - std::pow(h.beta1, t));
}

double lamb_trust_ratio(const LambHyper& h, double param_sq, double update_sq) {
  const double w = std::sqrt(param_sq), u = std::sqrt(update_sq);
  if (w == 0.0 || u == 0.0) return 1.0;
  return std::min(std::max(w / u, h.min_coeff), h.max_coeff);
}

LambSums lamb_sums(const float* param, const float* grad, const float* m, const float* v,
                   std::size_t n, const LambHyper& h, float grad_scale) {
  check(param, grad, m, v, n);
  const Consts k = consts(h, grad_scale);
  const std::size_t chunks = (n + detail::kChunk - 1) / detail::kChunk;
  std::vector<LambSums> part(chunks);
  detail::for_each_chunk(n, [&](std::size_t b, std::size_t count) {
    LambSums s;
    for (std::size_t i = b; i < b + count; ++i) {
      const Elem e = element(param[i], grad[i], m[i], v[i], k);
      s.param_sq += static_cast<double>(param[i]) * param[i];
      s.update_sq += static_cast<double>(e.u) * e.u;
    }
    part[b / detail::kChunk] = s;
  });
  LambSums out;
  for (const LambSums& s : part) {
    out.param_sq += s.param_sq;
    out.update_sq += s.update_sq;
  }
  return out;
}

void lamb_apply(float* param, const float* grad, float* m, float* v, std::size_t n,
                const LambHyper& h, float grad_scale, double step_size, double trust_ratio,
                std::uint16_t* param16, DType dt16) {
  check(param, grad, m, v, n);
  if (param16)
    STRATA_CHECK(dt16 == DType::bf16 || dt16 == DType::f16, "optim",
                 "the 16-bit parameter copy must be bf16 or f16, got {}", dtype_name(dt16));
  const Consts k = consts(h, grad_scale);
  const float rate = static_cast<float>(step_size * trust_ratio);
  detail::for_each_chunk(n, [&](std::size_t b, std::size_t count) {
    for (std::size_t i = b; i < b + count; ++i) {
      const Elem e = element(param[i], grad[i], m[i], v[i], k);
      m[i] = e.m;
      v[i] = e.v;
      param[i] = param[i] - rate * e.u;
    }
    if (param16) {
      if (dt16 == DType::bf16) f32_to_bf16(param + b, param16 + b, count);
      else f32_to_f16(param + b, param16 + b, count);
    }
  });
}

}  // namespace strata::optim
