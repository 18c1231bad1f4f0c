// The optimizer updates of the CUDA backend (optimizer.cu), bitwise the CPU's (framework/optim:
// update_body.hpp is the arithmetic, adamw.hpp / sgd.hpp its contract).
//
// The per-element update is written ONCE here, as STRATA_HD functions (adamw_at, sgd_at): the
// kernels of optimizer.cu call exactly these for each element, and the CPU-only test
// tests/unit/optim/test_cuda_update_arithmetic.cpp runs their host instantiation against
// optim::adamw_step_reference / sgd_step_reference bit for bit. The only difference between the
// two instantiations is the primitive of each operation (namespace ieee below): on the device
// the correctly rounded intrinsics (__fmul_rn, ...: never contracted into an fma by nvcc), on
// the host the IEEE operations of <cmath>, each rounded to float on its own. Every operation is
// one IEEE binary32 operation rounded to nearest even, so both give the same bits as the CPU's
// update_body.hpp, which is built with -ffp-contract=off (only its explicit V::fma fuse).
// Subnormals are kept as the CPU keeps them only while optimizer.cu is compiled without -ftz=true
// or --use_fast_math (nvcc's defaults): those flags flush them even in the _rn intrinsics.
// NaN payloads are the one thing not reproduced (a GPU makes the canonical NaN): a NaN result is
// NaN on both, but its bits (and those of its 16-bit copy) may differ.
//
// The float32 scalars of a step (AdamWConsts / SgdConsts) are computed on the host by the CPU's
// own code (optim::detail::adamw_consts / sgd_consts) and passed to the kernels by value.
//
// Like every <concern>.hpp here: no Tensor, no fmt (nvcc cannot compile fmt 9 in C++20).
#pragma once

// The launchers take a cudaStream_t. The CPU-only test includes this header in builds whose
// include path lacks the CUDA toolkit's headers: then the runtime's typedef is repeated here
// (<driver_types.h> declares exactly this; C++ allows repeating a typedef of the same type).
#if defined(__CUDACC__) || __has_include(<cuda_runtime.h>)
#include <cuda_runtime.h>
#else
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;
#endif

#include <cmath>
#include <cstdint>

#include "framework/backend/cuda/ops/half_hd.hpp"
#include "framework/optim/update_kernels.hpp"

namespace strata::cuda_ops {

// ---- one IEEE binary32 operation each, rounded to nearest even, never fused ----
namespace ieee {

#if !defined(__CUDA_ARCH__)
// Host: the value through a volatile, so that no compiler (whatever its -ffp-contract default,
// e.g. g++'s "fast" in C++ on a target with FMA) can fuse a product into a following sum: every
// result is a float that was rounded on its own. Only the CPU-only test runs this path.
inline float rounded(float x) {
  volatile float r = x;
  return r;
}
#endif

STRATA_HD float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return rounded(a * b);
#endif
}

STRATA_HD float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return rounded(a + b);
#endif
}

// a - b
STRATA_HD float sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return rounded(a - b);
#endif
}

// a / b, correctly rounded (IEEE division, not the approximate one of fast math).
STRATA_HD float div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return rounded(a / b);
#endif
}

// sqrt(a), correctly rounded.
STRATA_HD float sqrt(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return rounded(std::sqrt(a));
#endif
}

// a * b + c with one rounding: the explicit V::fma of update_body.hpp.
STRATA_HD float fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return rounded(std::fma(a, b, c));
#endif
}

}  // namespace ieee

// ---- the per-element updates (update_body.hpp's bodies, operation for operation) ----

// AdamW on one element: g is the gradient as stored (widened to f32), p/m/v are updated in place.
// kSmallW: lerp's form (c.small_w).
template <bool kSmallW>
STRATA_HD void adamw_update(float& p, float g, float& m, float& v,
                            const optim::detail::AdamWConsts& c) {
  const float gi = ieee::mul(g, c.grad_scale);
  const float pd = ieee::mul(p, c.decay);
  const float d = ieee::sub(gi, m);
  // torch lerp_: m + w*(g - m) when |w| < 0.5, else g + (w - 1)*(g - m); one fma either way.
  m = kSmallW ? ieee::fma(c.w, d, m) : ieee::fma(c.w_minus_1, d, gi);
  v = ieee::fma(ieee::mul(c.c2, gi), gi, ieee::mul(v, c.b2));
  const float denom = ieee::add(ieee::div(ieee::sqrt(v), c.bc2_sqrt), c.eps);
  p = ieee::add(pd, ieee::div(ieee::mul(c.neg_step, m), denom));
}

// SGD on one element: g is the gradient as stored (widened to f32); p is updated in place, and
// buf (the momentum buffer's element) when c.momentum. buf is read only when c.momentum and not
// c.first (step 1 sets it to the gradient, as PyTorch does).
STRATA_HD void sgd_update(float& p, float g, float& buf, const optim::detail::SgdConsts& c) {
  float gi = ieee::mul(g, c.grad_scale);
  if (c.decay) gi = ieee::fma(p, c.wd, gi);
  if (c.momentum) {
    const float b = c.first ? gi : ieee::fma(gi, c.damp1, ieee::mul(buf, c.mom));
    buf = b;
    gi = c.nesterov ? ieee::fma(b, c.mom, gi) : b;
  }
  p = ieee::fma(gi, c.neg_lr, p);
}

// ---- one element of a step over the buffers: the whole body of the kernels' loops ----

// Element i of adamw_step: master p, m, v are f32; the gradient g has dtype gdt (f32, bf16, f16;
// widened exactly); with p16 non-null, the updated master rounded to nearest even into it (hdt:
// bf16 or f16), as the CPU's round_to_16.
STRATA_HD void adamw_at(std::int64_t i, float* p, const void* g, DT gdt, float* m, float* v,
                        void* p16, DT hdt, const optim::detail::AdamWConsts& c) {
  float pi = p[i], mi = m[i], vi = v[i];
  const float gi = load(g, gdt, i);
  if (c.small_w) {  // the same for every element of a step: a uniform branch in the kernel
    adamw_update<true>(pi, gi, mi, vi, c);
  } else {
    adamw_update<false>(pi, gi, mi, vi, c);
  }
  m[i] = mi;
  v[i] = vi;
  p[i] = pi;
  if (p16) store(p16, hdt, i, pi);
}

// Element i of sgd_step: buf (f32) is null when !c.momentum (never touched then).
STRATA_HD void sgd_at(std::int64_t i, float* p, const void* g, DT gdt, float* buf, void* p16,
                      DT hdt, const optim::detail::SgdConsts& c) {
  float pi = p[i];
  float b = 0.0f;
  if (c.momentum && !c.first) b = buf[i];
  sgd_update(pi, load(g, gdt, i), b, c);
  if (c.momentum) buf[i] = b;
  p[i] = pi;
  if (p16) store(p16, hdt, i, pi);
}

// ---- launchers (optimizer.cu): queued on `s`, n elements, no host synchronisation ----
// param16 may be null (then hdt is ignored); otherwise hdt is bf16 or f16.
void launch_adamw_step(float* master, const void* grad, DT gdt, float* m, float* v,
                       std::int64_t n, const optim::detail::AdamWConsts& c, void* param16,
                       DT hdt, cudaStream_t s);
// momentum_buf may be null when !c.momentum.
void launch_sgd_step(float* master, const void* grad, DT gdt, float* momentum_buf,
                     std::int64_t n, const optim::detail::SgdConsts& c, void* param16, DT hdt,
                     cudaStream_t s);

}  // namespace strata::cuda_ops
