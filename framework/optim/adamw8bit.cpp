// 8-bit AdamW: per block, dequantize -> adamw_step_on (the f32 AdamW kernels) -> requantize, in
// L1-sized scratch, over OpenMP threads by chunks of whole blocks.
#include "framework/optim/adamw8bit.hpp"

#include <algorithm>

#include "framework/core/convert.hpp"
#include "framework/core/error.hpp"
#include "framework/optim/chunked.hpp"

namespace strata::optim {

namespace {

static_assert(detail::kChunk % kQuantBlock == 0, "chunks must hold whole quantization blocks");

void check_args(const float* param, const void* grad, const Quant8Moments& s, std::size_t n,
                std::span<const DecayRun> runs, std::uint16_t* param16, DType dt16,
                DType grad_dtype) {
  STRATA_CHECK(grad_dtype == DType::f32 || grad_dtype == DType::bf16 || grad_dtype == DType::f16,
               "optim", "8-bit AdamW gradients must be f32, bf16 or f16, got {}",
               dtype_name(grad_dtype));
  STRATA_CHECK(n == 0 || (param && grad && s.m_codes && s.v_codes && s.m_absmax && s.v_absmax),
               "optim", "8-bit AdamW got a null buffer for {} elements", n);
  if (param16)
    STRATA_CHECK(dt16 == DType::bf16 || dt16 == DType::f16, "optim",
                 "the 16-bit parameter copy must be bf16 or f16, got {}", dtype_name(dt16));
  std::size_t at = 0;
  for (const DecayRun& r : runs) {
    STRATA_CHECK(r.begin == at && r.end > r.begin, "optim",
                 "8-bit AdamW decay runs must cover [0, {}) in order; run [{}, {}) after {}", n,
                 r.begin, r.end, at);
    at = r.end;
  }
  STRATA_CHECK(at == n, "optim", "8-bit AdamW decay runs cover [0, {}) of {} elements", at, n);
}

// One block [b0, b1) of the buffers.
void block_step(SimdPath path, float* p, const void* grad, DType grad_dtype, const Quant8Moments& s,
                std::size_t b0, std::size_t b1, std::span<const DecayRun> runs,
                const AdamWHyper& h, const AdamWHyper& h_nodecay, std::int64_t step,
                float grad_scale, std::uint16_t* p16, DType dt16) {
  alignas(64) float m[kQuantBlock];
  alignas(64) float v[kQuantBlock];
  alignas(64) float g32[kQuantBlock];
  const std::size_t len = b1 - b0, blk = b0 / kQuantBlock;
  // The block's gradients as f32: the input itself, or widened into g32.
  const float* g = static_cast<const float*>(grad) + b0;
  if (grad_dtype != DType::f32) {
    convert(static_cast<const std::byte*>(grad) + b0 * dtype_size(grad_dtype), grad_dtype, g32,
            DType::f32, len);
    g = g32;
  }
  dequantize_block_on(path, QuantMap::signed_dynamic, s.m_codes + b0, len, s.m_absmax[blk], m);
  dequantize_block_on(path, QuantMap::unsigned_dynamic, s.v_codes + b0, len, s.v_absmax[blk], v);
  // The runs meeting this block (runs are few: one per parameter).
  auto it = std::upper_bound(runs.begin(), runs.end(), b0,
                             [](std::size_t x, const DecayRun& r) { return x < r.end; });
  for (; it != runs.end() && it->begin < b1; ++it) {
    const std::size_t a = std::max(it->begin, b0), e = std::min(it->end, b1);
    const AdamWHyper& hh = it->decay ? h : h_nodecay;
    adamw_step_on(path, p + a, g + (a - b0), m + (a - b0), v + (a - b0), e - a, hh, step, grad_scale,
                  p16 ? p16 + a : nullptr, dt16);
  }
  s.m_absmax[blk] = quantize_block_on(path, QuantMap::signed_dynamic, m, len, s.m_codes + b0);
  s.v_absmax[blk] = quantize_block_on(path, QuantMap::unsigned_dynamic, v, len, s.v_codes + b0);
}

}  // namespace

void adamw8bit_step_on(SimdPath path, float* param, const void* grad, const Quant8Moments& s,
                       std::size_t n, std::span<const DecayRun> runs, const AdamWHyper& h,
                       std::int64_t step, float grad_scale, std::uint16_t* param16, DType dt16,
                       DType grad_dtype) {
  // Everything that can throw is checked here, before any thread starts.
  validate(h);
  STRATA_CHECK(step >= 1, "optim", "AdamW step must be >= 1 (1-based), got {}", step);
  STRATA_CHECK(simd_path_supported(path), "optim", "this CPU does not support the {} path",
               simd_path_name(path));
  check_args(param, grad, s, n, runs, param16, dt16, grad_dtype);
  AdamWHyper h_nodecay = h;
  h_nodecay.weight_decay = 0;
  (void)quant_values(QuantMap::signed_dynamic);  // codes built before the threads start
  (void)quant_values(QuantMap::unsigned_dynamic);
  detail::for_each_chunk(n, [&](std::size_t begin, std::size_t count) {
    for (std::size_t b = begin; b < begin + count; b += kQuantBlock)
      block_step(path, param, grad, grad_dtype, s, b, std::min(b + kQuantBlock, begin + count),
                 runs, h, h_nodecay, step, grad_scale, param16, dt16);
  });
}

void adamw8bit_step(float* param, const void* grad, const Quant8Moments& s, std::size_t n,
                    std::span<const DecayRun> runs, const AdamWHyper& h, std::int64_t step,
                    float grad_scale, std::uint16_t* param16, DType dt16, DType grad_dtype) {
  adamw8bit_step_on(best_simd_path(), param, grad, s, n, runs, h, step, grad_scale, param16, dt16,
                    grad_dtype);
}

}  // namespace strata::optim
