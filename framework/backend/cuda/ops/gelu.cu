// GELU (tanh approximation) on CUDA: the CPU's formula (backend/cpu/row_kernels_body.hpp)
// element by element. 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), is computed as
// x * s with s = 1 / (1 + exp(-2u)): the same function without the cancellation of 1 + tanh(u)
// for negative x, and the same constants and operation order as the CPU (expf on the device
// differs from the CPU's exp by an ulp or so, well within the harness's 1e-5).
// Memory-bound: one pass through map8.cuh (dtypes as template arguments, 16-byte accesses), each
// element read and written by one thread (so dx may be dy, and y may be x). Deterministic: no
// reductions.
#include "framework/backend/cuda/ops/map8.cuh"
#include "framework/backend/cuda/ops/gelu.hpp"

namespace strata::cuda_ops {
namespace {

constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluA = 0.044715f;

// s = 1 / (1 + exp(-2u)) for x (x2 = x * x), as the CPU: -2u = x * (c3 x^2 + c1).
__device__ __forceinline__ float gelu_sigmoid(float v, float v2) {
  const float c1 = -2.0f * kGeluK, c3 = -2.0f * kGeluK * kGeluA;
  const float m2u = v * fmaf(c3, v2, c1);
  return 1.0f / (1.0f + expf(m2u));
}

struct GeluForward {
  __device__ float operator()(float v) const { return v * gelu_sigmoid(v, v * v); }
};

// d/dx = s + 2 x s (1 - s) k (1 + 3 a x^2) = s (1 + x (1 - s) (2k + 6ka x^2)).
struct GeluBackward {
  __device__ float operator()(float v, float g) const {
    const float d1 = 2.0f * kGeluK, d3 = 6.0f * kGeluK * kGeluA;
    const float v2 = v * v;
    const float s = gelu_sigmoid(v, v2);
    const float inner = (v * (1.0f - s)) * fmaf(d3, v2, d1);
    return g * (s * (1.0f + inner));
  }
};

}  // namespace

void launch_gelu_forward(const void* x, DT xdt, void* y, DT ydt, std::int64_t n, cudaStream_t s) {
  with_dt(xdt, [&](auto X) {
    with_dt(ydt, [&](auto Y) {
      launch_map<decltype(Y)::value>(GeluForward{}, y, n, s, In<decltype(X)::value>{x});
    });
  });
}

void launch_gelu_backward(const void* x, DT xdt, const void* dy, DT dydt, void* dx, DT dxdt,
                          std::int64_t n, cudaStream_t s) {
  with_dt(xdt, [&](auto X) {
    with_dt(dydt, [&](auto G) {
      with_dt(dxdt, [&](auto D) {
        launch_map<decltype(D)::value>(GeluBackward{}, dx, n, s, In<decltype(X)::value>{x},
                                       In<decltype(G)::value>{dy});
      });
    });
  });
}

}  // namespace strata::cuda_ops
