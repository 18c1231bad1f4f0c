// SGD kernels: scalar reference, AVX2+FMA and AVX-512 paths, chunked over OpenMP threads.
// Compiled with -ffp-contract=off: the only fused multiply-adds are the explicit ones.
#include "framework/optim/sgd.hpp"

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

struct Consts {
  float grad_scale;
  bool decay;       // wd != 0
  float wd;         // f(wd)
  bool momentum;    // momentum != 0
  bool first;       // step == 1: the buffer starts as the gradient
  bool nesterov;
  float mom;        // f(momentum)
  float damp1;      // f(1 - dampening)
  float neg_lr;     // f(-lr)
};

Consts make_consts(const SGDHyper& h, std::int64_t step, float grad_scale) {
  validate(h);
  STRATA_CHECK(step >= 1, "optim", "SGD step must be >= 1 (1-based), got {}", step);
  Consts c{};
  c.grad_scale = grad_scale;
  c.decay = h.weight_decay != 0.0;
  c.wd = static_cast<float>(h.weight_decay);
  c.momentum = h.momentum != 0.0;
  c.first = step == 1;
  c.nesterov = h.nesterov;
  c.mom = static_cast<float>(h.momentum);
  c.damp1 = static_cast<float>(1.0 - h.dampening);
  c.neg_lr = static_cast<float>(-h.lr);
  return c;
}

inline void sgd_elem(float& p, float grad, float* buf, const Consts& c) {
  float g = grad * c.grad_scale;
  if (c.decay) g = std::fma(p, c.wd, g);
  if (c.momentum) {
    const float b = c.first ? g : std::fma(g, c.damp1, *buf * c.mom);
    *buf = b;
    g = c.nesterov ? std::fma(b, c.mom, g) : b;
  }
  p = std::fma(g, c.neg_lr, p);
}

void kernel_scalar(float* p, const float* g, float* buf, std::size_t n, const Consts& c) {
  for (std::size_t i = 0; i < n; ++i) sgd_elem(p[i], g[i], c.momentum ? buf + i : nullptr, c);
}

#ifdef STRATA_OPTIM_X86

#define STRATA_AVX2 __attribute__((target("avx2,fma")))
#define STRATA_AVX512 __attribute__((target("avx512f,avx2,fma")))

STRATA_AVX2 void kernel_avx2(float* p, const float* g, float* buf, std::size_t n,
                             const Consts& c) {
  const __m256 gs = _mm256_set1_ps(c.grad_scale), wd = _mm256_set1_ps(c.wd);
  const __m256 mom = _mm256_set1_ps(c.mom), damp1 = _mm256_set1_ps(c.damp1);
  const __m256 neg_lr = _mm256_set1_ps(c.neg_lr);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 pi = _mm256_loadu_ps(p + i);
    __m256 gi = _mm256_mul_ps(_mm256_loadu_ps(g + i), gs);
    if (c.decay) gi = _mm256_fmadd_ps(pi, wd, gi);
    if (c.momentum) {
      const __m256 b =
          c.first ? gi
                  : _mm256_fmadd_ps(gi, damp1, _mm256_mul_ps(_mm256_loadu_ps(buf + i), mom));
      _mm256_storeu_ps(buf + i, b);
      gi = c.nesterov ? _mm256_fmadd_ps(b, mom, gi) : b;
    }
    _mm256_storeu_ps(p + i, _mm256_fmadd_ps(gi, neg_lr, pi));
  }
  for (; i < n; ++i) sgd_elem(p[i], g[i], c.momentum ? buf + i : nullptr, c);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

STRATA_AVX512 void kernel_avx512(float* p, const float* g, float* buf, std::size_t n,
                                 const Consts& c) {
  const __m512 gs = _mm512_set1_ps(c.grad_scale), wd = _mm512_set1_ps(c.wd);
  const __m512 mom = _mm512_set1_ps(c.mom), damp1 = _mm512_set1_ps(c.damp1);
  const __m512 neg_lr = _mm512_set1_ps(c.neg_lr);
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 pi = _mm512_loadu_ps(p + i);
    __m512 gi = _mm512_mul_ps(_mm512_loadu_ps(g + i), gs);
    if (c.decay) gi = _mm512_fmadd_ps(pi, wd, gi);
    if (c.momentum) {
      const __m512 b =
          c.first ? gi
                  : _mm512_fmadd_ps(gi, damp1, _mm512_mul_ps(_mm512_loadu_ps(buf + i), mom));
      _mm512_storeu_ps(buf + i, b);
      gi = c.nesterov ? _mm512_fmadd_ps(b, mom, gi) : b;
    }
    _mm512_storeu_ps(p + i, _mm512_fmadd_ps(gi, neg_lr, pi));
  }
  for (; i < n; ++i) sgd_elem(p[i], g[i], c.momentum ? buf + i : nullptr, c);
}

#pragma GCC diagnostic pop

#endif  // STRATA_OPTIM_X86

using Kernel = void (*)(float*, const float*, float*, std::size_t, const Consts&);

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

void check_buffers(const float* param, const float* grad, const float* buf, std::size_t n,
                   const SGDHyper& h) {
  STRATA_CHECK(n == 0 || (param && grad), "optim", "SGD got a null buffer for {} elements", n);
  STRATA_CHECK(n == 0 || h.momentum == 0.0 || buf, "optim",
               "SGD with momentum {} needs a momentum buffer", h.momentum);
}

}  // namespace

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
  if (param16) {
    STRATA_CHECK(dt16 == DType::bf16 || dt16 == DType::f16, "optim",
                 "the 16-bit parameter copy must be bf16 or f16, got {}", dtype_name(dt16));
  }
  const Consts c = make_consts(h, step, grad_scale);
  const Kernel kernel = kernel_for(path);
  detail::for_each_chunk(n, [&](std::size_t b, std::size_t count) {
    kernel(param + b, grad + b, c.momentum ? momentum_buf + b : nullptr, count, c);
    if (param16) {
      if (dt16 == DType::bf16) {
        f32_to_bf16(param + b, param16 + b, count);
      } else {
        f32_to_f16(param + b, param16 + b, count);
      }
    }
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
  kernel_scalar(param, grad, momentum_buf, n, make_consts(h, step, grad_scale));
}

}  // namespace strata::optim
