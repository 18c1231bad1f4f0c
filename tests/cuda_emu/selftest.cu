// Kernels for test_emulator.cpp, which checks the emulator itself: the warp shuffles' lanes, the
// built-in indices of 3-D grids and blocks, dynamic shared memory and its opt-in, launch bounds,
// and that the mistakes it exists to find are found (a missing barrier, an unwritten shared
// element, a divergent barrier or shuffle, an exit before a barrier, a shared overrun, a host
// pointer passed to a kernel). Compiled like the framework's kernels: through cuda_emu_rewrite.
#include <cuda_runtime.h>

#include <cstdint>

#include "framework/backend/cuda/ops/mma.cuh"

namespace cuda_emu_selftest {
namespace {

// One m16n8k16 product of mma.cuh per warp: a (16 x 16 row-major), b (16 x 8 row-major, k x n)
// and c (16 x 8 row-major, f32) in memory; each lane gathers its fragments by the documented
// layout, multiplies, and writes its four results back into c.
template <strata::cuda_ops::Mma16 T>
__global__ void mma_kernel(const std::uint16_t* a, const std::uint16_t* b, float* c) {
  const int lane = static_cast<int>(threadIdx.x & 31), g = lane >> 2, t = lane & 3;
  auto two = [](const std::uint16_t* p0, const std::uint16_t* p1) {
    return static_cast<std::uint32_t>(*p0) | (static_cast<std::uint32_t>(*p1) << 16);
  };
  const std::uint32_t af[4] = {two(a + g * 16 + 2 * t, a + g * 16 + 2 * t + 1),
                               two(a + (g + 8) * 16 + 2 * t, a + (g + 8) * 16 + 2 * t + 1),
                               two(a + g * 16 + 2 * t + 8, a + g * 16 + 2 * t + 9),
                               two(a + (g + 8) * 16 + 2 * t + 8, a + (g + 8) * 16 + 2 * t + 9)};
  const std::uint32_t bf[2] = {two(b + (2 * t) * 8 + g, b + (2 * t + 1) * 8 + g),
                               two(b + (2 * t + 8) * 8 + g, b + (2 * t + 9) * 8 + g)};
  float cf[4] = {c[g * 8 + 2 * t], c[g * 8 + 2 * t + 1], c[(g + 8) * 8 + 2 * t],
                 c[(g + 8) * 8 + 2 * t + 1]};
  strata::cuda_ops::mma_16816<T>(cf, af, bf);
  c[g * 8 + 2 * t] = cf[0];
  c[g * 8 + 2 * t + 1] = cf[1];
  c[(g + 8) * 8 + 2 * t] = cf[2];
  c[(g + 8) * 8 + 2 * t + 1] = cf[3];
}

__global__ void shuffles_kernel(int* out) {
  const int t = static_cast<int>(threadIdx.x);
  out[t * 5 + 0] = __shfl_xor_sync(0xffffffffu, t, 5);
  out[t * 5 + 1] = __shfl_down_sync(0xffffffffu, t, 3);
  out[t * 5 + 2] = __shfl_up_sync(0xffffffffu, t, 2);
  out[t * 5 + 3] = __shfl_sync(0xffffffffu, t, 7, 16);
  out[t * 5 + 4] = static_cast<int>(__ballot_sync(0xffffffffu, t % 3 == 0));
}

__global__ void indices_kernel(int* out) {
  const int block = static_cast<int>(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
  const int thread =
      static_cast<int>(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
  const int per_block = static_cast<int>(blockDim.x * blockDim.y * blockDim.z);
  out[block * per_block + thread] += 1 + thread;
}

// Reads another thread's element without a barrier: the value depends on the order.
__global__ void racy_kernel(float* out) {
  __shared__ float s[64];
  s[threadIdx.x] = static_cast<float>(threadIdx.x);
  out[threadIdx.x] = s[63 - threadIdx.x];
}

// Half the elements are never written: they read as NaN.
__global__ void unwritten_shared_kernel(float* out) {
  __shared__ float s[64];
  if (threadIdx.x < 32) s[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = s[threadIdx.x];
}

__global__ void divergent_barrier_kernel(float* out) {
  if (threadIdx.x < 32) __syncthreads();
  out[threadIdx.x] = 1.0f;
}

__global__ void two_barriers_kernel(float* out) {
  if (threadIdx.x < 32) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1.0f;
}

__global__ void exit_before_barrier_kernel(float* out) {
  if (threadIdx.x == 5) return;
  __syncthreads();
  out[threadIdx.x] = 1.0f;
}

__global__ void divergent_shuffle_kernel(float* out) {
  float v = static_cast<float>(threadIdx.x);
  if (threadIdx.x & 1) v = __shfl_xor_sync(0xffffffffu, v, 1);
  out[threadIdx.x] = v;
}

__global__ void shared_overrun_kernel(float* out) {
  __shared__ float s[32];
  s[threadIdx.x] = 1.0f;  // launched with 64 threads
  __syncthreads();
  out[threadIdx.x] = s[threadIdx.x % 32];
}

__global__ void __launch_bounds__(128) bounded_kernel(float* out) { out[threadIdx.x] = 1.0f; }

__global__ void dynamic_kernel(float* out) {
  extern __shared__ float dyn[];
  dyn[threadIdx.x] = static_cast<float>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = dyn[(threadIdx.x + 1) % blockDim.x];
}

}  // namespace

void shuffles(int* out) { shuffles_kernel<<<1, 64>>>(out); }
void mma16816(bool bf16, const std::uint16_t* a, const std::uint16_t* b, float* c) {
  if (bf16)
    mma_kernel<strata::cuda_ops::Mma16::bf16><<<1, 32>>>(a, b, c);
  else
    mma_kernel<strata::cuda_ops::Mma16::f16><<<1, 32>>>(a, b, c);
}
void indices(int* out, dim3 grid, dim3 block) { indices_kernel<<<grid, block>>>(out); }
void racy(float* out) { racy_kernel<<<1, 64>>>(out); }
void unwritten_shared(float* out) { unwritten_shared_kernel<<<1, 64>>>(out); }
void divergent_barrier(float* out) { divergent_barrier_kernel<<<1, 64>>>(out); }
void two_barriers(float* out) { two_barriers_kernel<<<1, 64>>>(out); }
void exit_before_barrier(float* out) { exit_before_barrier_kernel<<<1, 64>>>(out); }
void divergent_shuffle(float* out) { divergent_shuffle_kernel<<<1, 64>>>(out); }
void shared_overrun(float* out) { shared_overrun_kernel<<<1, 64>>>(out); }
void bounded(float* out, unsigned threads) { bounded_kernel<<<1, threads>>>(out); }
void dynamic(float* out, unsigned threads, std::size_t bytes) {
  dynamic_kernel<<<1, threads, bytes>>>(out);
}
cudaError_t allow_dynamic(int bytes) {
  return cudaFuncSetAttribute(dynamic_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

}  // namespace cuda_emu_selftest
