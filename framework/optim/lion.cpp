// Lion and Lion8bit: plain loops (the library is built with -ffp-contract=off, so every operation
// rounds as written), chunked over OpenMP threads; Lion8bit per quantization block, in L1-sized
// scratch, as adamw8bit.cpp.
#include "framework/optim/lion.hpp"

#include <algorithm>
#include <cmath>

#include "framework/core/convert.hpp"
#include "framework/core/error.hpp"
#include "framework/optim/chunked.hpp"
#include "framework/optim/quantize.hpp"
#include "framework/optim/update_kernels.hpp"

namespace strata::optim {

namespace detail {

LionConsts lion_consts(const LionHyper& h, std::int64_t step, float grad_scale) {
  validate(h);
  STRATA_CHECK(step >= 1, "optim", "Lion step must be >= 1 (1-based), got {}", step);
  return {grad_scale,
          static_cast<float>(h.beta1),
          static_cast<float>(1.0 - h.beta1),
          static_cast<float>(h.beta2),
          static_cast<float>(1.0 - h.beta2),
          static_cast<float>(1.0 - h.lr * h.weight_decay),
          static_cast<float>(h.lr)};
}

}  // namespace detail

namespace {

using detail::LionConsts;
using detail::lion_consts;

inline float sign_of(float x) { return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x; }

// Elements [0, n) of these buffers.
void lion_elements(float* p, const float* grad, float* m, std::size_t n, const LionConsts& k) {
  for (std::size_t i = 0; i < n; ++i) {
    const float g = grad[i] * k.gs;
    const float c = k.b1 * m[i] + k.c1 * g;
    const float decayed = p[i] * k.decay;
    p[i] = decayed - k.lr * sign_of(c);
    m[i] = k.b2 * m[i] + k.c2 * g;
  }
}

void write16(const float* p, std::uint16_t* p16, std::size_t n, DType dt16) {
  if (dt16 == DType::bf16) f32_to_bf16(p, p16, n);
  else f32_to_f16(p, p16, n);
}

void check16(std::uint16_t* param16, DType dt16) {
  if (param16)
    STRATA_CHECK(dt16 == DType::bf16 || dt16 == DType::f16, "optim",
                 "the 16-bit parameter copy must be bf16 or f16, got {}", dtype_name(dt16));
}

static_assert(detail::kChunk % kQuantBlock == 0, "chunks must hold whole quantization blocks");

}  // namespace

void validate(const LionHyper& h) {
  auto nonneg = [](double x) { return std::isfinite(x) && x >= 0.0; };
  if (!nonneg(h.lr)) user_fail("optim", "Lion lr must be finite and >= 0, got {}", h.lr);
  if (!nonneg(h.weight_decay))
    user_fail("optim", "Lion weight_decay must be finite and >= 0, got {}", h.weight_decay);
  if (!(h.beta1 >= 0.0 && h.beta1 < 1.0))
    user_fail("optim", "Lion betas[0] must be in [0, 1), got {}", h.beta1);
  if (!(h.beta2 >= 0.0 && h.beta2 < 1.0))
    user_fail("optim", "Lion betas[1] must be in [0, 1), got {}", h.beta2);
}

void lion_step(float* param, const float* grad, float* m, std::size_t n, const LionHyper& h,
               std::int64_t step, float grad_scale, std::uint16_t* param16, DType dt16) {
  STRATA_CHECK(n == 0 || (param && grad && m), "optim", "Lion got a null buffer for {} elements", n);
  check16(param16, dt16);
  const LionConsts k = lion_consts(h, step, grad_scale);
  detail::for_each_chunk(n, [&](std::size_t b, std::size_t count) {
    lion_elements(param + b, grad + b, m + b, count, k);
    if (param16) write16(param + b, param16 + b, count, dt16);
  });
}

void lion8bit_step(float* param, const void* grad, std::uint8_t* m_codes, float* m_absmax,
                   std::size_t n, std::span<const DecayRun> runs, const LionHyper& h,
                   std::int64_t step, float grad_scale, std::uint16_t* param16, DType dt16,
                   DType grad_dtype, SimdPath path) {
  // Everything that can throw is checked here, before any thread starts.
  STRATA_CHECK(grad_dtype == DType::f32 || grad_dtype == DType::bf16 || grad_dtype == DType::f16,
               "optim", "Lion8bit gradients must be f32, bf16 or f16, got {}", dtype_name(grad_dtype));
  STRATA_CHECK(n == 0 || (param && grad && m_codes && m_absmax), "optim",
               "Lion8bit got a null buffer for {} elements", n);
  STRATA_CHECK(simd_path_supported(path), "optim", "this CPU does not support the {} path",
               simd_path_name(path));
  check16(param16, dt16);
  std::size_t at = 0;
  for (const DecayRun& r : runs) {
    STRATA_CHECK(r.begin == at && r.end > r.begin, "optim",
                 "Lion8bit decay runs must cover [0, {}) in order; run [{}, {}) after {}", n,
                 r.begin, r.end, at);
    at = r.end;
  }
  STRATA_CHECK(at == n, "optim", "Lion8bit decay runs cover [0, {}) of {} elements", at, n);
  const LionConsts k = lion_consts(h, step, grad_scale);
  LionConsts k0 = k;  // for the runs that are not decayed
  k0.decay = 1.0f;    // f(1 - lr * 0)
  (void)quant_values(QuantMap::signed_dynamic);  // the code built before the threads start
  detail::for_each_chunk(n, [&](std::size_t begin, std::size_t count) {
    alignas(64) float m[kQuantBlock];
    alignas(64) float g32[kQuantBlock];
    for (std::size_t b0 = begin; b0 < begin + count; b0 += kQuantBlock) {
      const std::size_t b1 = std::min(b0 + kQuantBlock, begin + count), len = b1 - b0;
      const std::size_t blk = b0 / kQuantBlock;
      const float* g = static_cast<const float*>(grad) + b0;
      if (grad_dtype != DType::f32) {
        convert(static_cast<const std::byte*>(grad) + b0 * dtype_size(grad_dtype), grad_dtype, g32,
                DType::f32, len);
        g = g32;
      }
      dequantize_block_on(path, QuantMap::signed_dynamic, m_codes + b0, len, m_absmax[blk], m);
      auto it = std::upper_bound(runs.begin(), runs.end(), b0,
                                 [](std::size_t x, const DecayRun& r) { return x < r.end; });
      for (; it != runs.end() && it->begin < b1; ++it) {
        const std::size_t a = std::max(it->begin, b0), e = std::min(it->end, b1);
        lion_elements(param + a, g + (a - b0), m + (a - b0), e - a, it->decay ? k : k0);
        if (param16) write16(param + a, param16 + a, e - a, dt16);
      }
      m_absmax[blk] = quantize_block_on(path, QuantMap::signed_dynamic, m, len, m_codes + b0);
    }
  });
}

}  // namespace strata::optim
