// LAMB's kernels (framework/optim/lamb.hpp), bitwise the CPU's (shard_sum_updates.hpp):
//   lamb_sums:  one thread per 16384-element chunk (the CPU sums a chunk one element after
//               another: p² and u² in double), the chunks' partials added in order by one thread;
//   lamb_apply: elementwise.
// The sums' sequential chains are the price of the CPU's bits (a tree would change the CPU's
// order, and with it every LAMB run's losses).
#include "framework/backend/cuda/ops/common.cuh"
#include "framework/backend/cuda/ops/shard_sum_updates.hpp"

namespace strata::cuda_ops {
namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kSumThreads = 64;
constexpr std::int64_t kMaxBlocks = 2048;

__global__ void __launch_bounds__(kSumThreads)
    lamb_sums_kernel(const float* p, const float* grad, const float* m, const float* v,
                     std::int64_t n, optim::detail::LambConsts k, double* partials) {
  const std::int64_t chunk = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t b = chunk * kAdafactorChunk;
  if (b >= n) return;
  const std::int64_t e = n - b < kAdafactorChunk ? n : b + kAdafactorChunk;
  double ps = 0.0, us = 0.0;
  for (std::int64_t i = b; i < e; ++i) {
    const LambElem el = lamb_element(p[i], grad[i], m[i], v[i], k);
    ps = ieee::dadd(ps, ieee::dsq(p[i]));
    us = ieee::dadd(us, ieee::dsq(el.u));
  }
  partials[2 * chunk] = ps;
  partials[2 * chunk + 1] = us;
}

// out[0..1] += the chunks' partials, in chunk order.
__global__ void __launch_bounds__(32) lamb_total_kernel(const double* partials, std::int64_t chunks,
                                                        double* out) {
  if (threadIdx.x >= 2) return;
  double t = 0.0;
  for (std::int64_t c = 0; c < chunks; ++c) t = ieee::dadd(t, partials[2 * c + threadIdx.x]);
  out[threadIdx.x] = ieee::dadd(out[threadIdx.x], t);
}

__global__ void __launch_bounds__(kThreads)
    lamb_apply_kernel(float* p, const float* grad, float* m, float* v, std::int64_t n,
                      optim::detail::LambConsts k, float rate, void* p16, DT hdt) {
  STRATA_GRID_STRIDE(i, n) {
    const LambElem e = lamb_element(p[i], grad[i], m[i], v[i], k);
    m[i] = e.m;
    v[i] = e.v;
    const float pi = ieee::sub(p[i], ieee::mul(rate, e.u));
    p[i] = pi;
    if (p16) store(p16, hdt, i, pi);
  }
}

}  // namespace

void launch_lamb_sums(const float* p, const float* grad, const float* m, const float* v,
                      std::int64_t n, const optim::detail::LambConsts& k, double* partials,
                      double* out, cudaStream_t s) {
  if (n <= 0) return;
  const std::int64_t chunks = (n + kAdafactorChunk - 1) / kAdafactorChunk;
  const auto blocks = static_cast<unsigned>((chunks + kSumThreads - 1) / kSumThreads);
  lamb_sums_kernel<<<blocks, kSumThreads, 0, s>>>(p, grad, m, v, n, k, partials);
  lamb_total_kernel<<<1, 32, 0, s>>>(partials, chunks, out);
}

void launch_lamb_apply(float* p, const float* grad, float* m, float* v, std::int64_t n,
                       const optim::detail::LambConsts& k, float rate, void* param16, DT hdt,
                       cudaStream_t s) {
  if (n <= 0) return;
  lamb_apply_kernel<<<grid_for(n, kThreads, kMaxBlocks), kThreads, 0, s>>>(p, grad, m, v, n, k,
                                                                         rate, param16, hdt);
}

}  // namespace strata::cuda_ops
