// 8-bit AdamW (Dettmers et al. 2021): AdamW whose moments m and v are kept block-wise quantized
// (framework/optim/quantize.hpp: signed dynamic code for m, unsigned for v, one f32 absmax per
// block of kQuantBlock elements) while the parameters stay f32 masters. One pass per block:
// dequantize m and v, AdamW-update the block in f32 with exactly adamw_step's arithmetic, take
// the new absmax, requantize.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "framework/core/dtype.hpp"
#include "framework/optim/adamw.hpp"
#include "framework/optim/quantize.hpp"

namespace strata::optim {

// The quantized moments of a buffer of n elements: codes[n] each, absmax[quant_blocks(n)] each.
struct Quant8Moments {
  std::uint8_t* m_codes = nullptr;
  std::uint8_t* v_codes = nullptr;
  float* m_absmax = nullptr;
  float* v_absmax = nullptr;
};

// Elements [begin, end) of the buffer, and whether weight decay applies to them (a block may
// hold several parameters: by convention only those with >= 2 dims are decayed).
struct DecayRun {
  std::size_t begin = 0, end = 0;
  bool decay = true;
};

// One 8-bit AdamW update of n elements in place; block b is elements [b·kQuantBlock,
// (b+1)·kQuantBlock) of these buffers (so a caller whose buffers start mid-way must start them
// at a block boundary). `runs` cover [0, n) in order. Per block: m, v = dequantize(codes,
// absmax); adamw_step_on(path, ...) on each run's part (weight_decay 0 where !decay), writing
// param16 too when given; absmax, codes = quantize(m), quantize(v). With a lossless code this
// would equal adamw_step bitwise. Vectorised (AVX-512 / AVX2 chosen at run time) and
// multi-threaded over blocks; every path and thread count gives bitwise the scalar reference.
// `grad` holds grad_dtype values (f32, bf16 or f16): 16-bit gradients are widened one block at a
// time in scratch (exactly, so the result is bitwise that of an f32 copy, without making one).
void adamw8bit_step(float* param, const void* grad, const Quant8Moments& s, std::size_t n,
                    std::span<const DecayRun> runs, const AdamWHyper& h, std::int64_t step,
                    float grad_scale = 1.0f, std::uint16_t* param16 = nullptr,
                    DType dt16 = DType::bf16, DType grad_dtype = DType::f32);

// The same on a chosen path (tests and benchmarks); SimdPath::scalar is the reference
// definition: adamw_step_reference and the scalar quantizer, one block at a time.
void adamw8bit_step_on(SimdPath path, float* param, const void* grad, const Quant8Moments& s,
                       std::size_t n, std::span<const DecayRun> runs, const AdamWHyper& h,
                       std::int64_t step, float grad_scale = 1.0f,
                       std::uint16_t* param16 = nullptr, DType dt16 = DType::bf16,
                       DType grad_dtype = DType::f32);

}  // namespace strata::optim
