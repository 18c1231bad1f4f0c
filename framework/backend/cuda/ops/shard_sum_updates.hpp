// Adafactor's and LAMB's kernels on the GPU (adafactor.cu, lamb.cu), bitwise the CPU's
// (framework/optim/adafactor.cpp, lamb.cpp, and cpu::sum_squares for the parameter's RMS).
//
// The per-element arithmetic is written once here as STRATA_HD functions, one IEEE operation
// each through optimizer.hpp's ieee:: primitives (never contracted), so it rounds as the CPU's
// -ffp-contract=off loops. The sums are the CPU's sums in the CPU's order, not a faster tree:
//   - a "lane sum" is the CPU's 8 interleaved double accumulators over a contiguous run, each
//     accumulator one thread (its additions in index order), folded in the CPU's fixed tree;
//   - the runs are the CPU's: Adafactor's row segments and 16384-element chunks
//     (optim/chunked.hpp), the sum of squares' 32768-element chunks (backend/cpu/elementwise.cpp),
//     LAMB's chunks (one element after another: one thread per chunk);
//   - chunk partials are added in chunk order by one thread, then added to the f64 output.
// Double products and sums go through __dmul_rn / __dadd_rn (nvcc would fuse them into an fma).
// Nothing here synchronizes the host: the outputs stay in device memory.
//
// Like every <concern>.hpp here: no Tensor, no fmt.
#pragma once

#include <cstdint>

#include "framework/backend/cuda/ops/optimizer.hpp"
#include "framework/backend/cuda/ops/workspace_sizes.hpp"
#include "framework/optim/adafactor.hpp"
#include "framework/optim/lamb.hpp"

namespace strata::cuda_ops {

namespace ieee {
STRATA_HD double dadd(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  volatile double r = a + b;
  return r;
#endif
}
// double(x)², the CPU's static_cast<double>(x) * x.
STRATA_HD double dsq(float x) {
  const double d = static_cast<double>(x);
#if defined(__CUDA_ARCH__)
  return __dmul_rn(d, d);
#else
  volatile double r = d * d;
  return r;
#endif
}
}  // namespace ieee

// The CPU's run lengths, kAdafactorChunk and kSumSqChunk (workspace_sizes.hpp; static_asserts in
// the .cu files tie them to the CPU's constants).

// g² + eps1 in f32 (adafactor.cpp's sq_plus_eps).
STRATA_HD float af_sq_plus_eps(float g, float eps1) { return ieee::add(ieee::mul(g, g), eps1); }

// The common tail of both Adafactor updates for one element whose raw update is u.
STRATA_HD void af_finish(float& p, float u, float* m, const optim::detail::AdafactorApplyConsts& c) {
  u = ieee::div(u, c.clip);
  u = ieee::mul(u, c.lr);
  if (c.beta1) {
    *m = ieee::fma(u, c.c1, ieee::mul(*m, c.b1));
    u = *m;
  }
  if (c.decay) p = ieee::fma(p, c.wd, p);
  p = ieee::sub(p, u);
}

// LAMB's new moments and update of one element (lamb.cpp's element()).
struct LambElem {
  float m, v, u;
};
STRATA_HD LambElem lamb_element(float p, float grad, float m, float v,
                                const optim::detail::LambConsts& k) {
  const float g = ieee::mul(grad, k.gs);
  LambElem e;
  e.m = ieee::add(ieee::mul(k.b1, m), ieee::mul(k.c1, g));
  e.v = ieee::add(ieee::mul(k.b2, v), ieee::mul(ieee::mul(k.c2, g), g));
  const float denom =
      k.inside ? ieee::sqrt(ieee::add(e.v, k.eps)) : ieee::add(ieee::sqrt(e.v), k.eps);
  e.u = ieee::add(ieee::div(e.m, denom), ieee::mul(k.wd, p));
  return e;
}

// ---- launchers: queued on `s`, no host synchronisation; n elements of the range ----
// Device workspace of the sums below, in doubles: adafactor_partials (factored_sumsq,
// vector_sumsq), sum_squares_add_partials, lamb_partials (two per chunk), in workspace_sizes.hpp.

// out[0] += cpu::sum_squares(x) (x of dtype dt, widened exactly).
void launch_sum_squares_add(const void* x, DT dt, std::int64_t n, double* partials, double* out,
                            cudaStream_t s);
// The rows [first/cols, (first+n-1)/cols] of row_sums and every column of col_sums touched.
void launch_adafactor_sq_sums(const float* grad, std::int64_t first, std::int64_t n,
                              std::int64_t cols, float gs, float eps1, double* row_sums,
                              double* col_sums, cudaStream_t s);
void launch_adafactor_ema(float* stat, const double* sums, std::int64_t n, double count,
                          double beta2, cudaStream_t s);
void launch_adafactor_factors(const float* row, std::int64_t rows, const float* col,
                              std::int64_t cols, float* rf, float* cf, cudaStream_t s);
void launch_adafactor_factored_sumsq(const float* grad, std::int64_t first, std::int64_t n,
                                     std::int64_t cols, float gs, const float* rf,
                                     const float* cf, double* partials, double* out,
                                     cudaStream_t s);
void launch_adafactor_vector_sumsq(const float* grad, const float* v, std::int64_t n, float gs,
                                   float eps1, double beta2, double* partials, double* out,
                                   cudaStream_t s);
// m null without beta1; param16 null or of dtype hdt.
void launch_adafactor_apply_factored(float* p, const float* grad, float* m, std::int64_t first,
                                     std::int64_t n, std::int64_t cols, const float* rf,
                                     const float* cf,
                                     const optim::detail::AdafactorApplyConsts& c, void* param16,
                                     DT hdt, cudaStream_t s);
void launch_adafactor_apply_vector(float* p, const float* grad, float* v, float* m,
                                   std::int64_t n, float eps1, float b2, float c2,
                                   const optim::detail::AdafactorApplyConsts& c, void* param16,
                                   DT hdt, cudaStream_t s);
// out[0] += sum p², out[1] += sum u² (lamb.cu).
void launch_lamb_sums(const float* p, const float* grad, const float* m, const float* v,
                      std::int64_t n, const optim::detail::LambConsts& k, double* partials,
                      double* out, cudaStream_t s);
void launch_lamb_apply(float* p, const float* grad, float* m, float* v, std::int64_t n,
                       const optim::detail::LambConsts& k, float rate, void* param16, DT hdt,
                       cudaStream_t s);

}  // namespace strata::cuda_ops
