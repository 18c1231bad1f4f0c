// GELU (tanh approximation) on CUDA: the CPU's formula (backend/cpu/row_kernels_body.hpp)
// element by element. 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), is computed as
// x * s with s = 1 / (1 + exp(-2u)): the same function without the cancellation of 1 + tanh(u)
// for negative x, and the same constants and operation order as the CPU (expf on the device
// differs from the CPU's exp by an ulp or so, well within the harness's 1e-5).
// Memory-bound: one grid-stride pass, each element read and written by one thread (so dx may be
// dy, and y may be x). Deterministic: no reductions.
#include "framework/backend/cuda/ops/common.cuh"
#include "framework/backend/cuda/ops/gelu.hpp"

namespace strata::cuda_ops {
namespace {

constexpr unsigned kThreads = 256;
constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluA = 0.044715f;

unsigned grid(std::int64_t n) { return grid_for(n, kThreads); }

// s = 1 / (1 + exp(-2u)) for x (x2 = x * x), as the CPU: -2u = x * (c3 x^2 + c1).
__device__ __forceinline__ float gelu_sigmoid(float v, float v2) {
  const float c1 = -2.0f * kGeluK, c3 = -2.0f * kGeluK * kGeluA;
  const float m2u = v * fmaf(c3, v2, c1);
  return 1.0f / (1.0f + expf(m2u));
}

__global__ void gelu_forward_kernel(const void* x, DT xdt, void* y, DT ydt, std::int64_t n) {
  STRATA_GRID_STRIDE(i, n) {
    const float v = load(x, xdt, i);
    const float s = gelu_sigmoid(v, v * v);
    store(y, ydt, i, v * s);
  }
}

// d/dx = s + 2 x s (1 - s) k (1 + 3 a x^2) = s (1 + x (1 - s) (2k + 6ka x^2)).
__global__ void gelu_backward_kernel(const void* x, DT xdt, const void* dy, DT dydt, void* dx,
                                     DT dxdt, std::int64_t n) {
  const float d1 = 2.0f * kGeluK, d3 = 6.0f * kGeluK * kGeluA;
  STRATA_GRID_STRIDE(i, n) {
    const float v = load(x, xdt, i);
    const float g = load(dy, dydt, i);  // read before dx[i] (possibly the same memory) is written
    const float v2 = v * v;
    const float s = gelu_sigmoid(v, v2);
    const float inner = (v * (1.0f - s)) * fmaf(d3, v2, d1);
    store(dx, dxdt, i, g * (s * (1.0f + inner)));
  }
}

}  // namespace

void launch_gelu_forward(const void* x, DT xdt, void* y, DT ydt, std::int64_t n, cudaStream_t s) {
  if (n > 0) gelu_forward_kernel<<<grid(n), kThreads, 0, s>>>(x, xdt, y, ydt, n);
}

void launch_gelu_backward(const void* x, DT xdt, const void* dy, DT dydt, void* dx, DT dxdt,
                          std::int64_t n, cudaStream_t s) {
  if (n > 0) gelu_backward_kernel<<<grid(n), kThreads, 0, s>>>(x, xdt, dy, dydt, dx, dxdt, n);
}

}  // namespace strata::cuda_ops
