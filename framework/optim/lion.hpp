// Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms") on raw flat float32
// buffers, as DeepSpeed's Lion and lion-pytorch compute it: one state tensor, the momentum m; the
// update is the sign of an interpolation of m and the gradient, with decoupled weight decay. And
// Lion8bit (bitsandbytes' Lion8bit): m kept block-wise quantized as AdamW8bit keeps its first
// moment (framework/optim/quantize.hpp: signed dynamic code, one f32 absmax per kQuantBlock
// elements), updated one block at a time in f32 with exactly lion_step's arithmetic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "framework/core/dtype.hpp"
#include "framework/optim/adamw8bit.hpp"
#include "framework/optim/simd.hpp"

namespace strata::optim {

// DeepSpeed's Lion arguments, same names and defaults. As with AdamW, which parameters are
// decayed (by convention those with >= 2 dims) is the caller's decision: it passes
// weight_decay = 0 for the others.
struct LionHyper {
  double lr = 1e-3;
  double beta1 = 0.9;   // interpolation of m and the gradient for the update's sign
  double beta2 = 0.999;  // m's decay
  double weight_decay = 0.0;
};

// Throws UserError("[optim] ...") naming the bad value: lr, weight_decay finite and >= 0, betas
// in [0, 1).
void validate(const LionHyper& h);

// One Lion update of n elements, in place. Per element, in float32, with the scalars rounded from
// double (f(x) = float(x)), every operation rounded as written (no fused multiply-add):
//   g = grad * grad_scale
//   c = f(b1) * m + f(1 - b1) * g
//   p = p * f(1 - lr * wd)
//   p = p - f(lr) * sign(c)                sign(0) = 0, as torch.sign
//   m = f(b2) * m + f(1 - b2) * g
// `step` (1-based) is checked only: Lion has no bias correction. Multi-threaded with OpenMP for
// large n; the result does not depend on the thread count.
void lion_step(float* param, const float* grad, float* m, std::size_t n, const LionHyper& h,
               std::int64_t step, float grad_scale = 1.0f, std::uint16_t* param16 = nullptr,
               DType dt16 = DType::bf16);

// One Lion8bit update of n elements in place (the runs and blocks as adamw8bit_step's): per block,
// m = dequantize(codes, absmax); lion_step on each run's part (weight_decay 0 where !decay),
// writing param16 too when given; absmax, codes = quantize(m). `grad` holds grad_dtype values (f32,
// bf16 or f16), widened one block at a time. Every SIMD path and thread count gives bitwise the
// scalar quantizer's result.
void lion8bit_step(float* param, const void* grad, std::uint8_t* m_codes, float* m_absmax,
                   std::size_t n, std::span<const DecayRun> runs, const LionHyper& h,
                   std::int64_t step, float grad_scale = 1.0f, std::uint16_t* param16 = nullptr,
                   DType dt16 = DType::bf16, DType grad_dtype = DType::f32,
                   SimdPath path = best_simd_path());

}  // namespace strata::optim
