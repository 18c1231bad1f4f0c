// Launchers of gelu.cu: GELU, tanh approximation (PyTorch approximate='tanh'), forward and
// backward over flat arrays of any float dtype mix (raw pointers, the stream to queue on; no
// host synchronisation). No Tensor here: nvcc cannot compile fmt 9 in C++20 (gelu_op.cpp has the
// ops over tensors).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "framework/backend/cuda/ops/half_hd.hpp"

namespace strata::cuda_ops {

// y[i] = gelu(x[i]), n elements; y rounded once to ydt. y may be x (same dtype).
void launch_gelu_forward(const void* x, DT xdt, void* y, DT ydt, std::int64_t n, cudaStream_t s);
// dx[i] = gelu'(x[i]) * dy[i], n elements; dx rounded once to dxdt. dx may be dy (in-place: each
// element is read before it is written, by the same thread).
void launch_gelu_backward(const void* x, DT xdt, const void* dy, DT dydt, void* dx, DT dxdt,
                          std::int64_t n, cudaStream_t s);

}  // namespace strata::cuda_ops
