// 1-bit Adam's frozen-phase kernels: plain loops (-ffp-contract=off: every operation rounds as
// written), chunked over OpenMP threads; elements are independent.
#include "framework/optim/onebit_adam.hpp"

#include <cmath>
#include <numeric>

#include "framework/core/convert.hpp"
#include "framework/core/error.hpp"
#include "framework/optim/chunked.hpp"

namespace strata::optim {

void validate(const OneBitAdamHyper& h) {
  validate(onebit_warmup_hyper(h));
  if (h.freeze_step < 0)
    user_fail("optim", "OneBitAdam freeze_step must be >= 0, got {}", h.freeze_step);
}

AdamWHyper onebit_warmup_hyper(const OneBitAdamHyper& h) {
  return {.lr = h.lr, .beta1 = h.beta1, .beta2 = h.beta2, .eps = h.eps,
          .weight_decay = h.weight_decay, .bias_correction = false};
}

void onebit_momentum(float* m, const float* grad, std::size_t n, const OneBitAdamHyper& h,
                     float grad_scale) {
  STRATA_CHECK(n == 0 || (m && grad), "optim", "OneBitAdam got a null buffer");
  const float b1 = static_cast<float>(h.beta1), c1 = static_cast<float>(1.0 - h.beta1);
  detail::for_each_chunk(n, [&](std::size_t b, std::size_t count) {
    for (std::size_t i = b; i < b + count; ++i) m[i] = b1 * m[i] + c1 * (grad[i] * grad_scale);
  });
}

void onebit_apply(float* param, const float* m, const float* v, std::size_t n,
                  const OneBitAdamHyper& h, double lr, std::uint16_t* param16, DType dt16) {
  STRATA_CHECK(n == 0 || (param && m && v), "optim", "OneBitAdam got a null buffer");
  if (param16)
    STRATA_CHECK(dt16 == DType::bf16 || dt16 == DType::f16, "optim",
                 "the 16-bit parameter copy must be bf16 or f16, got {}", dtype_name(dt16));
  const float decay = static_cast<float>(1.0 - lr * h.weight_decay);
  const float neg_lr = static_cast<float>(-lr), eps = static_cast<float>(h.eps);
  detail::for_each_chunk(n, [&](std::size_t b, std::size_t count) {
    for (std::size_t i = b; i < b + count; ++i)
      param[i] = param[i] * decay + (neg_lr * m[i]) / (std::sqrt(v[i]) + eps);
    if (param16) {
      if (dt16 == DType::bf16) f32_to_bf16(param + b, param16 + b, count);
      else f32_to_f16(param + b, param16 + b, count);
    }
  });
}

}  // namespace strata::optim
