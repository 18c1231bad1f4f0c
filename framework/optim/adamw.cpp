// AdamW: the scalars of a step, checks, and the dispatch to the update kernels of the chosen SIMD
// path (update_body.hpp: one body for every path, bitwise equal), chunked over OpenMP threads.
#include "framework/optim/adamw.hpp"

#include <cmath>

#include "framework/core/error.hpp"
#include "framework/optim/update_kernels.hpp"

namespace strata::optim {

namespace {

using detail::AdamWConsts;

AdamWConsts make_consts(const AdamWHyper& h, std::int64_t step, float grad_scale) {
  validate(h);
  STRATA_CHECK(step >= 1, "optim", "AdamW step must be >= 1 (1-based), got {}", step);
  const float w = static_cast<float>(1.0 - h.beta1);
  const double t = static_cast<double>(step);
  const double bc1 = h.bias_correction ? 1.0 - std::pow(h.beta1, t) : 1.0;
  const double bc2 = h.bias_correction ? 1.0 - std::pow(h.beta2, t) : 1.0;
  return {.grad_scale = grad_scale,
          .decay = static_cast<float>(1.0 - h.lr * h.weight_decay),
          .w = w,
          .w_minus_1 = w - 1.0f,
          .small_w = std::fabs(w) < 0.5f,
          .b2 = static_cast<float>(h.beta2),
          .c2 = static_cast<float>(1.0 - h.beta2),
          .bc2_sqrt = static_cast<float>(std::sqrt(bc2)),
          .eps = static_cast<float>(h.eps),
          .neg_step = static_cast<float>(-(h.lr / bc1))};
}

void check_buffers(const float* param, const float* grad, const float* m, const float* v,
                   std::size_t n) {
  STRATA_CHECK(n == 0 || (param && grad && m && v), "optim",
               "AdamW got a null buffer for {} elements", n);
}

}  // namespace

AdamWConsts detail::adamw_consts(const AdamWHyper& h, std::int64_t step, float grad_scale) {
  return make_consts(h, step, grad_scale);
}

void validate(const AdamWHyper& h) {
  auto nonneg = [](double x) { return std::isfinite(x) && x >= 0.0; };
  if (!nonneg(h.lr)) user_fail("optim", "AdamW lr must be finite and >= 0, got {}", h.lr);
  if (!nonneg(h.eps)) user_fail("optim", "AdamW eps must be finite and >= 0, got {}", h.eps);
  if (!nonneg(h.weight_decay))
    user_fail("optim", "AdamW weight_decay must be finite and >= 0, got {}", h.weight_decay);
  if (!(h.beta1 >= 0.0 && h.beta1 < 1.0))
    user_fail("optim", "AdamW betas[0] must be in [0, 1), got {}", h.beta1);
  if (!(h.beta2 >= 0.0 && h.beta2 < 1.0))
    user_fail("optim", "AdamW betas[1] must be in [0, 1), got {}", h.beta2);
}

void adamw_step_on(SimdPath path, float* param, const float* grad, float* m, float* v,
                   std::size_t n, const AdamWHyper& h, std::int64_t step, float grad_scale,
                   std::uint16_t* param16, DType dt16) {
  check_buffers(param, grad, m, v, n);
  const AdamWConsts c = make_consts(h, step, grad_scale);
  const auto kernel = detail::update_kernels(path).adamw;
  detail::update_in_chunks(n, param, param16, dt16, [&](std::size_t b, std::size_t count) {
    kernel(param + b, grad + b, m + b, v + b, count, c);
  });
}

void adamw_step(float* param, const float* grad, float* m, float* v, std::size_t n,
                const AdamWHyper& h, std::int64_t step, float grad_scale) {
  adamw_step_on(best_simd_path(), param, grad, m, v, n, h, step, grad_scale);
}

void adamw_step_out16(float* param, const float* grad, float* m, float* v, std::size_t n,
                      const AdamWHyper& h, std::int64_t step, float grad_scale,
                      std::uint16_t* param16, DType dt16) {
  STRATA_CHECK(n == 0 || param16, "optim", "adamw_step_out16 got a null 16-bit buffer");
  adamw_step_on(best_simd_path(), param, grad, m, v, n, h, step, grad_scale, param16, dt16);
}

void adamw_step_reference(float* param, const float* grad, float* m, float* v, std::size_t n,
                          const AdamWHyper& h, std::int64_t step, float grad_scale) {
  check_buffers(param, grad, m, v, n);
  detail::update_kernels(SimdPath::scalar).adamw(param, grad, m, v, n, make_consts(h, step, grad_scale));
}

}  // namespace strata::optim
