// SGD: the scalars of a step, checks, and the dispatch to the update kernels of the chosen SIMD
// path (update_body.hpp: one body for every path, bitwise equal), chunked over OpenMP threads.
#include "framework/optim/sgd.hpp"

#include <cmath>

#include "framework/core/error.hpp"
#include "framework/optim/update_kernels.hpp"

namespace strata::optim {

namespace {

using detail::SgdConsts;

SgdConsts make_consts(const SGDHyper& h, std::int64_t step, float grad_scale) {
  validate(h);
  STRATA_CHECK(step >= 1, "optim", "SGD step must be >= 1 (1-based), got {}", step);
  return {.grad_scale = grad_scale,
          .decay = h.weight_decay != 0.0,
          .wd = static_cast<float>(h.weight_decay),
          .momentum = h.momentum != 0.0,
          .first = step == 1,
          .nesterov = h.nesterov,
          .mom = static_cast<float>(h.momentum),
          .damp1 = static_cast<float>(1.0 - h.dampening),
          .neg_lr = static_cast<float>(-h.lr)};
}

void check_buffers(const float* param, const float* grad, const float* buf, std::size_t n,
                   const SGDHyper& h) {
  STRATA_CHECK(n == 0 || (param && grad), "optim", "SGD got a null buffer for {} elements", n);
  STRATA_CHECK(n == 0 || h.momentum == 0.0 || buf, "optim",
               "SGD with momentum {} needs a momentum buffer", h.momentum);
}

}  // namespace

SgdConsts detail::sgd_consts(const SGDHyper& h, std::int64_t step, float grad_scale) {
  return make_consts(h, step, grad_scale);
}

void validate(const SGDHyper& h) {
  auto nonneg = [](double x) { return std::isfinite(x) && x >= 0.0; };
  if (!nonneg(h.lr)) user_fail("optim", "SGD lr must be finite and >= 0, got {}", h.lr);
  if (!nonneg(h.momentum))
    user_fail("optim", "SGD momentum must be finite and >= 0, got {}", h.momentum);
  if (!std::isfinite(h.dampening))
    user_fail("optim", "SGD dampening must be finite, got {}", h.dampening);
  if (!nonneg(h.weight_decay))
    user_fail("optim", "SGD weight_decay must be finite and >= 0, got {}", h.weight_decay);
  if (h.nesterov && (h.momentum <= 0.0 || h.dampening != 0.0))
    user_fail("optim", "SGD nesterov needs momentum > 0 and dampening = 0 (got momentum {}, "
              "dampening {})", h.momentum, h.dampening);
}

void sgd_step_on(SimdPath path, float* param, const float* grad, float* momentum_buf,
                 std::size_t n, const SGDHyper& h, std::int64_t step, float grad_scale,
                 std::uint16_t* param16, DType dt16) {
  check_buffers(param, grad, momentum_buf, n, h);
  const SgdConsts c = make_consts(h, step, grad_scale);
  const auto kernel = detail::update_kernels(path).sgd;
  detail::update_in_chunks(n, param, param16, dt16, [&](std::size_t b, std::size_t count) {
    kernel(param + b, grad + b, c.momentum ? momentum_buf + b : nullptr, count, c);
  });
}

void sgd_step(float* param, const float* grad, float* momentum_buf, std::size_t n,
              const SGDHyper& h, std::int64_t step, float grad_scale) {
  sgd_step_on(best_simd_path(), param, grad, momentum_buf, n, h, step, grad_scale);
}

void sgd_step_out16(float* param, const float* grad, float* momentum_buf, std::size_t n,
                    const SGDHyper& h, std::int64_t step, float grad_scale,
                    std::uint16_t* param16, DType dt16) {
  STRATA_CHECK(n == 0 || param16, "optim", "sgd_step_out16 got a null 16-bit buffer");
  sgd_step_on(best_simd_path(), param, grad, momentum_buf, n, h, step, grad_scale, param16,
              dt16);
}

void sgd_step_reference(float* param, const float* grad, float* momentum_buf, std::size_t n,
                        const SGDHyper& h, std::int64_t step, float grad_scale) {
  check_buffers(param, grad, momentum_buf, n, h);
  const SgdConsts c = make_consts(h, step, grad_scale);
  detail::update_kernels(SimdPath::scalar).sgd(param, grad, c.momentum ? momentum_buf : nullptr, n, c);
}

}  // namespace strata::optim
