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
#include "framework/backend/cuda/ops/workspace_sizes.hpp"
#include "framework/optim/quantize.hpp"
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

// Lion on one element (lion.cpp's lion_elements, operation for operation; sign(0) = 0 and a NaN
// stays NaN, as its sign_of). k.decay is f(1 - lr*wd), or 1 for Lion8bit's undecayed elements.
STRATA_HD float lion_sign(float x) { return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x; }

STRATA_HD void lion_update(float& p, float g, float& m, const optim::detail::LionConsts& k) {
  const float gi = ieee::mul(g, k.gs);
  const float c = ieee::add(ieee::mul(k.b1, m), ieee::mul(k.c1, gi));
  const float decayed = ieee::mul(p, k.decay);
  p = ieee::sub(decayed, ieee::mul(k.lr, lion_sign(c)));
  m = ieee::add(ieee::mul(k.b2, m), ieee::mul(k.c2, gi));
}

// ---- block-wise dynamic 8-bit quantization (framework/optim/quantize.hpp), bitwise the CPU's ----

// Elements per quantization block (optim::kQuantBlock).
inline constexpr int kQ8Block = 2048;
static_assert(kQ8Block == static_cast<int>(optim::kQuantBlock));

// One code as the kernels read it (resident on each device: ensure_q8_codes): the value of each
// stored byte, and the k thresholds between its magnitudes (quant_thresholds) as f32 bit patterns.
struct Q8Code {
  float values[256];
  std::uint32_t thresholds[255];
  int k;          // 128 (signed) or 255 (unsigned)
  int is_signed;  // 1 for the signed code (m), 0 for the unsigned one (v)
};

// The code of `map`, built on the host from the CPU quantizer's own tables.
inline Q8Code q8_code(optim::QuantMap map) {
  Q8Code c{};
  const auto& v = optim::quant_values(map);
  for (int i = 0; i < 256; ++i) c.values[i] = v[static_cast<std::size_t>(i)];
  const std::vector<float> t = optim::quant_thresholds(map);
  c.k = static_cast<int>(t.size());
  for (int j = 0; j < c.k; ++j) c.thresholds[j] = f32_bits(t[static_cast<std::size_t>(j)]);
  c.is_signed = map == optim::QuantMap::signed_dynamic ? 1 : 0;
  return c;
}

// The stored byte of one normalized value y = x / absmax (quantize.cpp's quantize_one): mi = the
// number of thresholds below |y|, found by a binary search of their bit patterns (|y| and the
// thresholds are non-negative floats, ordered as their bits; a NaN |y| lies above them all, as
// the CPU's cell table puts it); then the signed code's byte from y's sign bit.
STRATA_HD std::uint8_t q8_byte(const std::uint32_t* thresholds, int k, bool is_signed, float y) {
  const std::uint32_t bits = f32_bits(y), mbits = bits & 0x7fffffffu;
  int lo = 0, hi = k;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (thresholds[mid] < mbits) lo = mid + 1;
    else hi = mid;
  }
  if (!is_signed) return static_cast<std::uint8_t>(lo);
  const int s = (bits >> 31) ? (127 - lo > 0 ? 127 - lo : 0) : 127 + lo;
  return static_cast<std::uint8_t>(s ^ 127);
}

// A block's absmax as the CPU's scalar quantizer accumulates it: max(a, |x|), a NaN skipped.
STRATA_HD float q8_absmax_step(float a, float x) {
  const float ax = fabsf(x);
  return a < ax ? ax : a;
}

// A quantization block's decay runs: runs[r] = end << 1 | decayed, ends increasing, the last one
// n. The run holding element i (the first whose end lies above it).
STRATA_HD int q8_run_of(const std::int64_t* runs, int nruns, std::int64_t i) {
  int lo = 0, hi = nruns - 1;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if ((runs[mid] >> 1) <= i) lo = mid + 1;
    else hi = mid;
  }
  return lo;
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

// Element i of lion_step: master p and m f32, the gradient of dtype gdt.
STRATA_HD void lion_at(std::int64_t i, float* p, const void* g, DT gdt, float* m, void* p16,
                       DT hdt, const optim::detail::LionConsts& c) {
  float pi = p[i], mi = m[i];
  lion_update(pi, load(g, gdt, i), mi, c);
  m[i] = mi;
  p[i] = pi;
  if (p16) store(p16, hdt, i, pi);
}

// A unit's decay runs as the 8-bit kernels take them, each run one word end << 1 | decayed (ends
// increasing, the last one n). Up to kQ8InlineRuns words travel by value among the kernel's
// parameters (each block copies them to shared memory): a step then uploads nothing. A unit with
// more runs (a model alternating decayed and undecayed parameters more often than that) gives
// them in device memory instead (`device`, copied by the op before the launch).
// kQ8InlineRuns: workspace_sizes.hpp (the workspace of more runs is the plan's too).
struct Q8Runs {
  std::int64_t words[kQ8InlineRuns] = {};
  const std::int64_t* device = nullptr;  // the n words when n > kQ8InlineRuns
  int n = 0;
  STRATA_HD bool is_inline() const { return n <= kQ8InlineRuns; }
};
// `words`: the n run words in host memory; `device`: a device copy of them, read only when
// n > kQ8InlineRuns (may be null otherwise).
inline Q8Runs q8_runs(const std::int64_t* words, int n, const std::int64_t* device) {
  Q8Runs q;
  q.n = n;
  if (q.is_inline())
    for (int r = 0; r < n; ++r) q.words[r] = words[r];
  else
    q.device = device;
  return q;
}

// The two codes (signed: m; unsigned: AdamW8bit's v) live in device memory of their own on each
// device (a __device__ array of optimizer.cu, 4 KB): the first call on a device copies them there
// (q8_code of the CPU quantizer's tables; a synchronous copy, once per device and process), later
// calls return at once. Thread-safe. The 8-bit launchers read them; the op calls this first.
cudaError_t ensure_q8_codes();

// ---- launchers (optimizer.cu): queued on `s`, n elements, no host synchronisation ----
// param16 may be null (then hdt is ignored); otherwise hdt is bf16 or f16.
void launch_adamw_step(float* master, const void* grad, DT gdt, float* m, float* v,
                       std::int64_t n, const optim::detail::AdamWConsts& c, void* param16,
                       DT hdt, cudaStream_t s);
// momentum_buf may be null when !c.momentum.
void launch_sgd_step(float* master, const void* grad, DT gdt, float* momentum_buf,
                     std::int64_t n, const optim::detail::SgdConsts& c, void* param16, DT hdt,
                     cudaStream_t s);
void launch_lion_step(float* master, const void* grad, DT gdt, float* m, std::int64_t n,
                      const optim::detail::LionConsts& c, void* param16, DT hdt, cudaStream_t s);
// The 8-bit updates: one thread block per quantization block of kQ8Block elements (dequantize,
// update each element with the constants of its run — `decayed` or `undecayed` — take the new
// absmax, requantize). `runs`: the decay runs covering [0, n) in order (Q8Runs). The codes are
// the resident ones (ensure_q8_codes must have succeeded on the current device).
void launch_adamw8bit_step(float* master, const void* grad, DT gdt, std::uint8_t* m_codes,
                           std::uint8_t* v_codes, float* m_absmax, float* v_absmax,
                           std::int64_t n, const Q8Runs& runs,
                           const optim::detail::AdamWConsts& decayed,
                           const optim::detail::AdamWConsts& undecayed, void* param16, DT hdt,
                           cudaStream_t s);
void launch_lion8bit_step(float* master, const void* grad, DT gdt, std::uint8_t* m_codes,
                          float* m_absmax, std::int64_t n, const Q8Runs& runs,
                          const optim::detail::LionConsts& decayed,
                          const optim::detail::LionConsts& undecayed, void* param16, DT hdt,
                          cudaStream_t s);

}  // namespace strata::cuda_ops
