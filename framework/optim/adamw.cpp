// AdamW kernels: scalar reference, AVX2+FMA and AVX-512 paths, chunked over OpenMP threads.
// This library is compiled with -ffp-contract=off so that the only fused multiply-adds are
// the explicit ones; every path performs the same IEEE operations per element.
#include "framework/optim/adamw.hpp"

#include <cmath>

#include "framework/core/convert.hpp"
#include "framework/core/error.hpp"
#include "framework/optim/chunked.hpp"

#if defined(__x86_64__) || defined(__i386__)
#define STRATA_OPTIM_X86 1
#include <immintrin.h>
#endif

namespace strata::optim {

namespace {

// The float32 scalars of one step, rounded from double exactly as PyTorch rounds them.
struct Consts {
  float grad_scale;
  float decay;      // f(1 - lr*wd)
  float w;          // lerp weight f(1 - b1)
  float w_minus_1;  // w - 1 (lerp's form for w >= 0.5)
  bool small_w;     // |w| < 0.5
  float b2;         // f(b2)
  float c2;         // f(1 - b2)
  float bc2_sqrt;   // f(sqrt(1 - b2^t))
  float eps;        // f(eps)
  float neg_step;   // f(-lr / (1 - b1^t))
};

Consts make_consts(const AdamWHyper& h, std::int64_t step, float grad_scale) {
  validate(h);
  STRATA_CHECK(step >= 1, "optim", "AdamW step must be >= 1 (1-based), got {}", step);
  Consts c{};
  c.grad_scale = grad_scale;
  c.decay = static_cast<float>(1.0 - h.lr * h.weight_decay);
  c.w = static_cast<float>(1.0 - h.beta1);
  c.small_w = std::fabs(c.w) < 0.5f;
  c.w_minus_1 = c.w - 1.0f;
  c.b2 = static_cast<float>(h.beta2);
  c.c2 = static_cast<float>(1.0 - h.beta2);
  const double t = static_cast<double>(step);
  const double bc1 = 1.0 - std::pow(h.beta1, t);
  const double bc2 = 1.0 - std::pow(h.beta2, t);
  c.bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  c.eps = static_cast<float>(h.eps);
  c.neg_step = static_cast<float>(-(h.lr / bc1));
  return c;
}

// One element; the definition every vector path reproduces.
inline void adamw_elem(float& p, float grad, float& m, float& v, const Consts& c) {
  const float g = grad * c.grad_scale;
  const float pd = p * c.decay;
  const float d = g - m;
  m = c.small_w ? std::fma(c.w, d, m) : std::fma(c.w_minus_1, d, g);
  v = std::fma(c.c2 * g, g, v * c.b2);
  const float denom = std::sqrt(v) / c.bc2_sqrt + c.eps;
  p = pd + (c.neg_step * m) / denom;
}

void kernel_scalar(float* p, const float* g, float* m, float* v, std::size_t n, const Consts& c) {
  for (std::size_t i = 0; i < n; ++i) adamw_elem(p[i], g[i], m[i], v[i], c);
}

#ifdef STRATA_OPTIM_X86

#define STRATA_AVX2 __attribute__((target("avx2,fma")))
#define STRATA_AVX512 __attribute__((target("avx512f,avx2,fma")))

template <bool kSmallW>
STRATA_AVX2 void kernel_avx2_impl(float* p, const float* g, float* m, float* v, std::size_t n,
                                  const Consts& c) {
  const __m256 gs = _mm256_set1_ps(c.grad_scale), decay = _mm256_set1_ps(c.decay);
  const __m256 w = _mm256_set1_ps(kSmallW ? c.w : c.w_minus_1);
  const __m256 b2 = _mm256_set1_ps(c.b2), c2 = _mm256_set1_ps(c.c2);
  const __m256 bc2s = _mm256_set1_ps(c.bc2_sqrt), eps = _mm256_set1_ps(c.eps);
  const __m256 ns = _mm256_set1_ps(c.neg_step);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gi = _mm256_mul_ps(_mm256_loadu_ps(g + i), gs);
    const __m256 pd = _mm256_mul_ps(_mm256_loadu_ps(p + i), decay);
    __m256 mi = _mm256_loadu_ps(m + i);
    const __m256 d = _mm256_sub_ps(gi, mi);
    mi = _mm256_fmadd_ps(w, d, kSmallW ? mi : gi);
    const __m256 vi =
        _mm256_fmadd_ps(_mm256_mul_ps(c2, gi), gi, _mm256_mul_ps(_mm256_loadu_ps(v + i), b2));
    const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), bc2s), eps);
    const __m256 pi = _mm256_add_ps(pd, _mm256_div_ps(_mm256_mul_ps(ns, mi), denom));
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    _mm256_storeu_ps(p + i, pi);
  }
  for (; i < n; ++i) adamw_elem(p[i], g[i], m[i], v[i], c);
}

STRATA_AVX2 void kernel_avx2(float* p, const float* g, float* m, float* v, std::size_t n,
                             const Consts& c) {
  if (c.small_w) {
    kernel_avx2_impl<true>(p, g, m, v, n, c);
  } else {
    kernel_avx2_impl<false>(p, g, m, v, n, c);
  }
}

// GCC 12's avx512fintrin.h initialises its "undefined" vectors from themselves, which
// -Wmaybe-uninitialized reports at inlined intrinsics; the warning is spurious.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

template <bool kSmallW>
STRATA_AVX512 void kernel_avx512_impl(float* p, const float* g, float* m, float* v,
                                      std::size_t n, const Consts& c) {
  const __m512 gs = _mm512_set1_ps(c.grad_scale), decay = _mm512_set1_ps(c.decay);
  const __m512 w = _mm512_set1_ps(kSmallW ? c.w : c.w_minus_1);
  const __m512 b2 = _mm512_set1_ps(c.b2), c2 = _mm512_set1_ps(c.c2);
  const __m512 bc2s = _mm512_set1_ps(c.bc2_sqrt), eps = _mm512_set1_ps(c.eps);
  const __m512 ns = _mm512_set1_ps(c.neg_step);
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 gi = _mm512_mul_ps(_mm512_loadu_ps(g + i), gs);
    const __m512 pd = _mm512_mul_ps(_mm512_loadu_ps(p + i), decay);
    __m512 mi = _mm512_loadu_ps(m + i);
    const __m512 d = _mm512_sub_ps(gi, mi);
    mi = _mm512_fmadd_ps(w, d, kSmallW ? mi : gi);
    const __m512 vi =
        _mm512_fmadd_ps(_mm512_mul_ps(c2, gi), gi, _mm512_mul_ps(_mm512_loadu_ps(v + i), b2));
    const __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vi), bc2s), eps);
    const __m512 pi = _mm512_add_ps(pd, _mm512_div_ps(_mm512_mul_ps(ns, mi), denom));
    _mm512_storeu_ps(m + i, mi);
    _mm512_storeu_ps(v + i, vi);
    _mm512_storeu_ps(p + i, pi);
  }
  for (; i < n; ++i) adamw_elem(p[i], g[i], m[i], v[i], c);
}

STRATA_AVX512 void kernel_avx512(float* p, const float* g, float* m, float* v, std::size_t n,
                                 const Consts& c) {
  if (c.small_w) {
    kernel_avx512_impl<true>(p, g, m, v, n, c);
  } else {
    kernel_avx512_impl<false>(p, g, m, v, n, c);
  }
}

#pragma GCC diagnostic pop

#endif  // STRATA_OPTIM_X86

using Kernel = void (*)(float*, const float*, float*, float*, std::size_t, const Consts&);

Kernel kernel_for(SimdPath path) {
  STRATA_CHECK(simd_path_supported(path), "optim", "this CPU does not support the {} path",
               simd_path_name(path));
  switch (path) {
#ifdef STRATA_OPTIM_X86
    case SimdPath::avx512: return kernel_avx512;
    case SimdPath::avx2: return kernel_avx2;
#endif
    default: return kernel_scalar;
  }
}

void check_buffers(const float* param, const float* grad, const float* m, const float* v,
                   std::size_t n) {
  STRATA_CHECK(n == 0 || (param && grad && m && v), "optim",
               "AdamW got a null buffer for {} elements", n);
}

void round_to_16(const float* src, std::uint16_t* dst, std::size_t n, DType dt16) {
  if (dt16 == DType::bf16) {
    f32_to_bf16(src, dst, n);
  } else {
    f32_to_f16(src, dst, n);
  }
}

}  // namespace

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
  if (param16) {
    STRATA_CHECK(dt16 == DType::bf16 || dt16 == DType::f16, "optim",
                 "the 16-bit parameter copy must be bf16 or f16, got {}", dtype_name(dt16));
  }
  const Consts c = make_consts(h, step, grad_scale);
  const Kernel kernel = kernel_for(path);
  detail::for_each_chunk(n, [&](std::size_t b, std::size_t count) {
    kernel(param + b, grad + b, m + b, v + b, count, c);
    if (param16) round_to_16(param + b, param16 + b, count, dt16);
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
  const Consts c = make_consts(h, step, grad_scale);
  kernel_scalar(param, grad, m, v, n, c);
}

}  // namespace strata::optim
