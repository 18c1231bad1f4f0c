// Device-side helpers shared by the CUDA kernels: the bitwise conversions and runtime-dtype loads
// and stores (half_hd.hpp), grid-stride loops, warp and block reductions in a fixed order (every
// kernel is deterministic: the same inputs give the same bits, run after run).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "framework/backend/cuda/ops/half_hd.hpp"

namespace strata::cuda_ops {

// for (i = global thread; i < n; i += all threads)
#define STRATA_GRID_STRIDE(i, n)                                                        \
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; \
       i < (n); i += static_cast<std::int64_t>(blockDim.x) * gridDim.x)

// Blocks of `threads` for a grid-stride loop over n elements: at least 1, at most max_blocks (the
// loop strides over the rest).
inline unsigned grid_for(std::int64_t n, unsigned threads, std::int64_t max_blocks = 65535LL * 16) {
  const std::int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > max_blocks ? max_blocks : b));
}

// Sum over a warp by a butterfly: every lane gets the same value, in the same order every run.
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over a block of blockDim.x threads (a multiple of 32, at most 1024); every thread gets the
// result. `scratch` holds 32 values of T in shared memory. Fixed order.
template <typename T>
__device__ __forceinline__ T block_sum(T v, T* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : T(0);
  return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -INFINITY;
  return warp_max(v);
}

// A run-time dtype as a type: with_dt(dt, [&](auto t) { f<decltype(t)::value>(...); }).
template <DT T>
struct DtTag {
  static constexpr DT value = T;
};

template <class F>
void with_dt(DT t, F&& f) {
  switch (t) {
    case DT::bf16: f(DtTag<DT::bf16>{}); break;
    case DT::f16: f(DtTag<DT::f16>{}); break;
    default: f(DtTag<DT::f32>{}); break;
  }
}

// The dynamic shared memory a kernel may use without opting in.
inline constexpr std::size_t kStaticSmemLimit = 48 * 1024;

// Raises Kernel's dynamic shared-memory limit to `bytes` (when above the 48 KB default), once per
// device (devices 0..63; others every time: the call is idempotent).
template <auto Kernel>
cudaError_t allow_smem(std::size_t bytes) {
  if (bytes <= kStaticSmemLimit) return cudaSuccess;
  static std::atomic<unsigned long long> done{0};
  int dev = 0;
  if (const cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  const unsigned long long bit = dev >= 0 && dev < 64 ? 1ull << dev : 0ull;
  if (bit != 0 && (done.load(std::memory_order_acquire) & bit) != 0) return cudaSuccess;
  const cudaError_t e = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(bytes));
  if (e == cudaSuccess && bit != 0) done.fetch_or(bit, std::memory_order_acq_rel);
  return e;
}

}  // namespace strata::cuda_ops
