// AdamW on raw flat float32 buffers (a rank's shard of a unit's parameters, gradients and
// state), bitwise identical to PyTorch >= 2.0's single-tensor torch.optim.AdamW (the lerp_
// form) running on its AVX2/AVX-512 CPU kernels.
#pragma once

#include <cstddef>
#include <cstdint>

#include "framework/core/dtype.hpp"
#include "framework/optim/simd.hpp"

namespace strata::optim {

// Hyperparameters, held in double like the Python floats PyTorch and DeepSpeed use, so that
// the scalars derived from them (1 - lr*wd, lr / (1 - beta1^t), ...) round exactly as theirs.
//
// Weight decay is applied to every element of the buffer it is given. By convention (GPT-2,
// nanoGPT, DeepSpeed recipes) only parameters with >= 2 dims (weight matrices, embeddings) are
// decayed: that decision is the CALLER's, which passes weight_decay = 0 for biases, LayerNorm
// gains and other 1-D parameters (keep them in a separate flat buffer or call per range).
struct AdamWHyper {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  // false: no bias correction (DeepSpeed's bias_correction=false, as its FusedAdam and
  // CPUAdam do): the step is lr * m / (sqrt(v) + eps), i.e. 1 - b1^t and 1 - b2^t taken as 1.
  bool bias_correction = true;
};

// Throws UserError("[optim] ...") naming the bad value: lr, eps, weight_decay must be >= 0 and
// finite; betas in [0, 1).
void validate(const AdamWHyper& h);

// One AdamW update of n elements, in place. `step` is the 1-based count of updates including
// this one (bias correction). `grad` is read, never written; it is multiplied by grad_scale
// first (loss-scale unscaling times the clipping coefficient, fused).
//
// Per element, in float32, with the scalars rounded from double as PyTorch does
// (f(x) = float(x)):
//   g  = grad * grad_scale
//   p  = p * f(1 - lr*wd)
//   m  = fma(f(1-b1), g - m, m)            torch lerp_(g, 1-b1); fma(f(1-b1) - 1, g - m, g)
//                                          when 1-b1 >= 0.5, as lerp switches form there
//   v  = fma(f(1-b2) * g, g, v * f(b2))    torch mul_(b2).addcmul_(g, g, value=1-b2)
//   denom = sqrt(v) / f(sqrt(1 - b2^t)) + f(eps)
//   p  = p + (f(-lr / (1 - b1^t)) * m) / denom          torch addcdiv_(m, denom, value=-step)
// Without bias correction (h.bias_correction false) 1 - b1^t and 1 - b2^t are 1: the same
// kernels run with f(sqrt(1)) = 1 (an exact division) and f(-lr).
// The two fused multiply-adds are what PyTorch's vectorised CPU kernels (and nvcc) compute;
// tests/unit/optim/test_adamw.cpp checks bitwise equality with numbers from PyTorch.
// Vectorised (AVX-512 / AVX2+FMA, chosen at run time) and multi-threaded with OpenMP for large
// n; every path is bitwise identical to adamw_step_reference.
void adamw_step(float* param, const float* grad, float* m, float* v, std::size_t n,
                const AdamWHyper& h, std::int64_t step, float grad_scale = 1.0f);

// As adamw_step, and also writes the updated parameter rounded to nearest-even into param16
// (dt16 = DType::bf16 or DType::f16): the low-precision copy that mixed-precision forward and
// backward passes read. param stays the float32 master copy.
void adamw_step_out16(float* param, const float* grad, float* m, float* v, std::size_t n,
                      const AdamWHyper& h, std::int64_t step, float grad_scale,
                      std::uint16_t* param16, DType dt16);

// The definition of the arithmetic: one element at a time, single thread, no SIMD.
void adamw_step_reference(float* param, const float* grad, float* m, float* v, std::size_t n,
                          const AdamWHyper& h, std::int64_t step, float grad_scale = 1.0f);

// adamw_step on a chosen path (tests and benchmarks). param16 may be null (no 16-bit copy).
// Throws if the CPU does not support `path`.
void adamw_step_on(SimdPath path, float* param, const float* grad, float* m, float* v,
                   std::size_t n, const AdamWHyper& h, std::int64_t step, float grad_scale,
                   std::uint16_t* param16 = nullptr, DType dt16 = DType::bf16);

}  // namespace strata::optim
