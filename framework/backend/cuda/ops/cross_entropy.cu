// Cross-entropy kernels (cross_entropy.hpp): one block per row of logits [N, V] (rows are long:
// V up to ~50k), each thread reading columns threadIdx.x, threadIdx.x + kRowThreads, ... (coalesced
// across the block) through half_hd.hpp's load()/store() with the dtypes as template arguments. Reductions over a
// row are per-thread partials in that fixed column order followed by common.cuh's fixed-order
// block_max/block_sum; the forward's total is one block summing per-row losses in double. No
// atomics on floats: every output is the same bits run after run.
//
// When V is a multiple of 8 and the logits (and dlogits) are 16-byte aligned, the forward's rows and
// the backward take 8 consecutive columns per thread in one 16-byte access (map8.cuh's load8 and
// store8): thread k has columns 8k .. 8k + 7, 8(k + 256) .., its partials in that order. The
// scalar kernels read 2 bytes per thread per load: GPT-2 124M's 8192 x 50304 bf16 logits took
// 1.28 ms forward and 1.25 ms backward on an H200, 4 to 6 times the memory's time.
//
// Arithmetic follows the CPU (framework/backend/cpu/cross_entropy.cpp, row_kernels_body.hpp):
// lse = max + logf(f32 sum of expf(x - max)); loss_row = double(lse) - double(x[target]), summed
// in double; dlogits = expf(x - lse) * scale, minus scale at the target. Products and differences
// use __fmul_rn/__fsub_rn so nvcc does not contract them into FMAs the CPU does not do.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "framework/backend/cuda/ops/common.cuh"
#include "framework/backend/cuda/ops/cross_entropy.hpp"
#include "framework/backend/cuda/ops/map8.cuh"

namespace strata::cuda_ops {
namespace {

constexpr unsigned kRowThreads = 256;                 // threads per row block (a multiple of 32)
constexpr unsigned kTotalThreads = 256;               // the forward's single summing block
constexpr std::int64_t kMaxRowBlocks = 65535LL * 16;  // blocks loop over rows beyond this

unsigned row_blocks(std::int64_t N) {
  return static_cast<unsigned>(N < kMaxRowBlocks ? (N < 1 ? 1 : N) : kMaxRowBlocks);
}

// The target's column in the slice [start, start + V), or -1 when the row is ignored (t < 0) or
// the target lies elsewhere (the CPU's local_target).
__device__ __forceinline__ std::int64_t local_target(std::int32_t t, std::int64_t start,
                                                     std::int64_t V) {
  const std::int64_t t64 = t;
  return (t64 < 0 || t64 < start || t64 >= start + V) ? -1 : t64 - start;
}

// max_j x[base + j] over the block (every thread gets it). Uniform: all threads must call.
template <DT T>
__device__ __forceinline__ float row_max_of(const void* x, std::int64_t base, std::int64_t V,
                                            float* scratch) {
  float m = -INFINITY;
  for (std::int64_t j = threadIdx.x; j < V; j += blockDim.x) m = fmaxf(m, load(x, T, base + j));
  return block_max(m, scratch);
}

// ---- forward: lse and per-row losses ------------------------------------------------------
// kVec8: V % 8 == 0 and logits 16-byte aligned (the row's chunks of 8 are chunks of the tensor).
template <DT ldt, bool kVec8>
__global__ void __launch_bounds__(kRowThreads)
    ce_forward_rows_kernel(const void* logits, const std::int32_t* targets, float* lse,
                           double* row_loss, std::int64_t N, std::int64_t V) {
  __shared__ float scratch[32];
  // The loop bound is the same for every thread of the block, so the block reductions inside
  // (which hold __syncthreads) are reached by all of them.
  for (std::int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const std::int64_t base = r * V;
    float m, s = 0.0f;
    if constexpr (kVec8) {
      const std::int64_t c0 = base / 8, chunks = V / 8;
      m = -INFINITY;
      for (std::int64_t k = threadIdx.x; k < chunks; k += blockDim.x) {
        const Chunk8<ldt> x = load8<ldt>(logits, c0 + k);
#pragma unroll
        for (int e = 0; e < 8; ++e) m = fmaxf(m, x.v[e]);
      }
      m = block_max(m, scratch);
      for (std::int64_t k = threadIdx.x; k < chunks; k += blockDim.x) {
        const Chunk8<ldt> x = load8<ldt>(logits, c0 + k);
#pragma unroll
        for (int e = 0; e < 8; ++e) s = __fadd_rn(s, expf(__fsub_rn(x.v[e], m)));
      }
    } else {
      m = row_max_of<ldt>(logits, base, V, scratch);
      for (std::int64_t j = threadIdx.x; j < V; j += blockDim.x)
        s = __fadd_rn(s, expf(__fsub_rn(load(logits, ldt, base + j), m)));
    }
    s = block_sum(s, scratch);
    const float l = __fadd_rn(m, logf(s));
    if (threadIdx.x == 0) {
      lse[r] = l;
      const std::int64_t t = targets[r];
      double loss = 0.0;  // ignored rows and out-of-range targets add nothing
      if (t >= 0 && t < V)
        loss = static_cast<double>(l) - static_cast<double>(load(logits, ldt, base + t));
      row_loss[r] = loss;
    }
  }
}

// ---- forward: the total over rows, in double, in a fixed order (one block) ----------------
// Thread k sums rows k, k + kTotalThreads, ... in order; block_sum combines the partials in a
// fixed tree. A row whose target is >= V (the CPU throws for it) makes the sum NaN: the host,
// which does not wait for this kernel, learns of it when it reads the sum.
__global__ void __launch_bounds__(kTotalThreads)
    ce_total_kernel(const double* row_loss, const std::int32_t* targets, std::int64_t N,
                    std::int64_t V, double* sum) {
  __shared__ double scratch[32];
  __shared__ unsigned long long first_bad;
  if (threadIdx.x == 0) first_bad = ~0ull;
  double s = 0.0;
  unsigned long long bad = ~0ull;
  for (std::int64_t r = threadIdx.x; r < N; r += blockDim.x) {
    s += row_loss[r];
    if (bad == ~0ull && static_cast<std::int64_t>(targets[r]) >= V)
      bad = static_cast<unsigned long long>(r);
  }
  s = block_sum(s, scratch);  // holds __syncthreads: first_bad's initial value is visible after it
  if (bad != ~0ull) atomicMin(&first_bad, bad);  // integer min: the same result in any order
  __syncthreads();
  if (threadIdx.x == 0) sum[0] = first_bad == ~0ull ? s : static_cast<double>(NAN);
}

// ---- backward (whole vocabulary: vocab_start = 0; or a slice) ------------------------------
// Purely elementwise given lse[r] and the target: each thread reads x[r, j] and then writes
// dlogits[r, j] for its own columns only, so dlogits may alias logits. No block reductions (and
// so no __syncthreads): the early `continue` of an ignored row is safe.
// kVec8: V % 8 == 0 and logits and dlogits 16-byte aligned; each thread reads its 8 columns before
// it writes them, so aliasing stays safe.
template <DT ldt, DT ddt, bool kVec8>
__global__ void __launch_bounds__(kRowThreads)
    ce_backward_kernel(const void* logits, const float* lse, const std::int32_t* targets,
                       std::int64_t vocab_start, float scale, void* dlogits, std::int64_t N,
                       std::int64_t V) {
  for (std::int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const std::int64_t base = r * V;
    const std::int32_t t = targets[r];
    if constexpr (kVec8) {
      const std::int64_t c0 = base / 8, chunks = V / 8;
      const float l = lse[r];
      const std::int64_t jt = t < 0 ? -1 : local_target(t, vocab_start, V);
      for (std::int64_t k = threadIdx.x; k < chunks; k += blockDim.x) {
        float d[8];
        if (t < 0) {
#pragma unroll
          for (int e = 0; e < 8; ++e) d[e] = 0.0f;
        } else {
          const Chunk8<ldt> x = load8<ldt>(logits, c0 + k);
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            d[e] = __fmul_rn(expf(__fsub_rn(x.v[e], l)), scale);
            if (8 * k + e == jt) d[e] = __fsub_rn(d[e], scale);
          }
        }
        store8<ddt>(dlogits, c0 + k, d);
      }
      continue;
    }
    if (t < 0) {
      for (std::int64_t j = threadIdx.x; j < V; j += blockDim.x)
        store(dlogits, ddt, base + j, 0.0f);
      continue;
    }
    const float l = lse[r];
    const std::int64_t jt = local_target(t, vocab_start, V);
    for (std::int64_t j = threadIdx.x; j < V; j += blockDim.x) {
      const float x = load(logits, ldt, base + j);  // read before the (possibly aliased) write
      float d = __fmul_rn(expf(__fsub_rn(x, l)), scale);
      if (j == jt) d = __fsub_rn(d, scale);
      store(dlogits, ddt, base + j, d);
    }
  }
}

// ---- vocabulary-parallel pieces -------------------------------------------------------------
template <DT ldt>
__global__ void __launch_bounds__(kRowThreads)
    row_max_kernel(const void* logits, float* out, std::int64_t N, std::int64_t V) {
  __shared__ float scratch[32];
  for (std::int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const float m = row_max_of<ldt>(logits, r * V, V, scratch);
    if (threadIdx.x == 0) out[r] = m;
  }
}

// The CPU sums exp(double(x) - max) in double; here the exponentials are f32 (expf, within 2 ulp)
// and their sum is double, rounded once to f32.
__global__ void __launch_bounds__(kRowThreads)
    row_sum_exp_kernel(const void* logits, DT ldt, const float* max, float* out, std::int64_t N,
                       std::int64_t V) {
  __shared__ double scratch[32];
  for (std::int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const std::int64_t base = r * V;
    const float m = max[r];
    double s = 0.0;
    for (std::int64_t j = threadIdx.x; j < V; j += blockDim.x)
      s += static_cast<double>(expf(__fsub_rn(load(logits, ldt, base + j), m)));
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) out[r] = static_cast<float>(s);
  }
}

// One thread per row.
__global__ void target_logit_kernel(const void* logits, DT ldt, const std::int32_t* targets,
                                    std::int64_t vocab_start, float* out, std::int64_t N,
                                    std::int64_t V) {
  STRATA_GRID_STRIDE(r, N) {
    const std::int64_t j = local_target(targets[r], vocab_start, V);
    out[r] = j >= 0 ? load(logits, ldt, r * V + j) : 0.0f;
  }
}

// ---- the vocabulary-parallel last step: one thread per row --------------------------------
__global__ void combine_rows_kernel(const float* max, const float* sum_exp, const float* target,
                                    const std::int32_t* targets, float* lse, double* row_loss,
                                    std::int64_t N) {
  for (std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; r < N;
       r += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float l = __fadd_rn(max[r], logf(sum_exp[r]));
    lse[r] = l;
    row_loss[r] = targets[r] >= 0 ? static_cast<double>(l) - static_cast<double>(target[r]) : 0.0;
  }
}

}  // namespace

void launch_cross_entropy_forward(const void* logits, DT ldt, const std::int32_t* targets,
                                  float* lse, double* row_loss, double* sum, std::int64_t N,
                                  std::int64_t V, cudaStream_t s) {
  if (N <= 0) return;
  const bool vec8 = V % 8 == 0 && aligned16(logits);
  with_dt(ldt, [&](auto L) {
    if (vec8)
      ce_forward_rows_kernel<decltype(L)::value, true><<<row_blocks(N), kRowThreads, 0, s>>>(
          logits, targets, lse, row_loss, N, V);
    else
      ce_forward_rows_kernel<decltype(L)::value, false><<<row_blocks(N), kRowThreads, 0, s>>>(
          logits, targets, lse, row_loss, N, V);
  });
  ce_total_kernel<<<1, kTotalThreads, 0, s>>>(row_loss, targets, N, V, sum);
}

void launch_cross_entropy_backward(const void* logits, DT ldt, const float* lse,
                                   const std::int32_t* targets, std::int64_t vocab_start,
                                   float scale, void* dlogits, DT ddt, std::int64_t N,
                                   std::int64_t V, cudaStream_t s) {
  if (N <= 0 || V <= 0) return;
  const bool vec8 = V % 8 == 0 && aligned16(logits) && aligned16(dlogits);
  with_dt(ldt, [&](auto L) {
    with_dt(ddt, [&](auto D) {
      constexpr DT kL = decltype(L)::value, kD = decltype(D)::value;
      if (vec8)
        ce_backward_kernel<kL, kD, true><<<row_blocks(N), kRowThreads, 0, s>>>(
            logits, lse, targets, vocab_start, scale, dlogits, N, V);
      else
        ce_backward_kernel<kL, kD, false><<<row_blocks(N), kRowThreads, 0, s>>>(
            logits, lse, targets, vocab_start, scale, dlogits, N, V);
    });
  });
}

void launch_row_max(const void* logits, DT ldt, float* out, std::int64_t N, std::int64_t V,
                    cudaStream_t s) {
  if (N <= 0) return;
  with_dt(ldt, [&](auto L) {
    row_max_kernel<decltype(L)::value><<<row_blocks(N), kRowThreads, 0, s>>>(logits, out, N, V);
  });
}

void launch_row_sum_exp(const void* logits, DT ldt, const float* max, float* out, std::int64_t N,
                        std::int64_t V, cudaStream_t s) {
  if (N <= 0) return;
  row_sum_exp_kernel<<<row_blocks(N), kRowThreads, 0, s>>>(logits, ldt, max, out, N, V);
}

void launch_target_logit(const void* logits, DT ldt, const std::int32_t* targets,
                         std::int64_t vocab_start, float* out, std::int64_t N, std::int64_t V,
                         cudaStream_t s) {
  if (N <= 0) return;
  constexpr unsigned kThreads = 256;
  const std::int64_t b = (N + kThreads - 1) / kThreads;
  target_logit_kernel<<<static_cast<unsigned>(b < kMaxRowBlocks ? b : kMaxRowBlocks), kThreads, 0,
                        s>>>(logits, ldt, targets, vocab_start, out, N, V);
}

void launch_combine_cross_entropy(const float* max, const float* sum_exp, const float* target,
                                  const std::int32_t* targets, float* lse, double* row_loss,
                                  double* sum, std::int64_t N, cudaStream_t s) {
  if (N <= 0) return;
  constexpr unsigned kThreads = 256;
  const std::int64_t b = (N + kThreads - 1) / kThreads;
  combine_rows_kernel<<<static_cast<unsigned>(b < kMaxRowBlocks ? b : kMaxRowBlocks), kThreads, 0,
                        s>>>(max, sum_exp, target, targets, lse, row_loss, N);
  // No vocabulary bound here: every target passes the summing block's range check.
  ce_total_kernel<<<1, kTotalThreads, 0, s>>>(row_loss, targets, N,
                                              std::numeric_limits<std::int64_t>::max(), sum);
}

}  // namespace strata::cuda_ops
