// SGD with momentum, dampening, Nesterov and (coupled, L2) weight decay on raw flat float32
// buffers, bitwise identical to PyTorch's single-tensor torch.optim.SGD on an AVX2 CPU.
#pragma once

#include <cstddef>
#include <cstdint>

#include "framework/core/dtype.hpp"
#include "framework/optim/simd.hpp"

namespace strata::optim {

// As with AdamW, which parameters are decayed (by convention those with >= 2 dims) is the
// caller's decision: it passes weight_decay = 0 for the others.
struct SGDHyper {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

// Throws UserError("[optim] ...") for negative/non-finite values, or Nesterov without momentum
// or with dampening (as PyTorch refuses).
void validate(const SGDHyper& h);

// One SGD update of n elements, in place; `step` is 1-based (step 1 initialises the momentum
// buffer with the gradient, as PyTorch does when the buffer is None). momentum_buf may be null
// when momentum == 0. Per element, in float32 (f(x) = float(x), fma as PyTorch's vectorised
// add(alpha=) computes it):
//   g = grad * grad_scale
//   if wd != 0:        g = fma(p, f(wd), g)
//   if momentum != 0:  buf = (step == 1) ? g : fma(g, f(1 - dampening), buf * f(momentum))
//                      g = nesterov ? fma(buf, f(momentum), g) : buf
//   p = fma(g, f(-lr), p)
void sgd_step(float* param, const float* grad, float* momentum_buf, std::size_t n,
              const SGDHyper& h, std::int64_t step, float grad_scale = 1.0f);

// As sgd_step, and also writes the updated parameter rounded to nearest-even into param16
// (dt16 = DType::bf16 or DType::f16).
void sgd_step_out16(float* param, const float* grad, float* momentum_buf, std::size_t n,
                    const SGDHyper& h, std::int64_t step, float grad_scale,
                    std::uint16_t* param16, DType dt16);

// The definition of the arithmetic: one element at a time, single thread, no SIMD.
void sgd_step_reference(float* param, const float* grad, float* momentum_buf, std::size_t n,
                        const SGDHyper& h, std::int64_t step, float grad_scale = 1.0f);

// sgd_step on a chosen path (tests and benchmarks); param16 may be null.
void sgd_step_on(SimdPath path, float* param, const float* grad, float* momentum_buf,
                 std::size_t n, const SGDHyper& h, std::int64_t step, float grad_scale,
                 std::uint16_t* param16 = nullptr, DType dt16 = DType::bf16);

}  // namespace strata::optim
