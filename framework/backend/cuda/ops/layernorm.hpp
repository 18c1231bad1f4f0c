// Launchers of layernorm.cu: LayerNorm over the last dim of x [N, C], forward and backward, every
// float operand in its own dtype (raw pointers, the stream to queue on; no host synchronisation).
// No Tensor here: nvcc cannot compile fmt 9 in C++20 (layernorm_op.cpp has the ops over tensors).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "framework/backend/cuda/ops/half_hd.hpp"
#include "framework/backend/cuda/ops/workspace_sizes.hpp"

namespace strata::cuda_ops {

// The widest row the vectorized kernels take (layernorm.cu).
inline constexpr int kLayerNormVecMaxC = 2048;

// Whether the kernels take their vectorized form for these operands, given that the row tensors
// share one dtype (the launchers check that: x and y; dy, x and dx): w and b (either may be null)
// of one dtype, C a multiple of 8 and at most kLayerNormVecMaxC, w, b and every row tensor
// (`rows`) 16-byte aligned. Both forms compute the same function; only the order of the row sums
// differs.
bool layernorm_vectorized(const void* w, DT wdt, const void* b, DT bdt, int C,
                          std::initializer_list<const void*> rows);

// y = (x - mean) * rstd * w + b per row, with mean = sum(x) / C, var = sum((x - mean)^2) / C,
// rstd = 1 / sqrt(var + eps) (the CPU's two-pass definition); mean[N], rstd[N] f32. w or b null:
// 1 and 0. y is rounded once to ydt. N >= 0, C > 0.
void launch_layernorm_forward(const void* x, DT xdt, const void* w, DT wdt, const void* b, DT bdt,
                              void* y, DT ydt, float* mean, float* rstd, std::int64_t N, int C,
                              float eps, cudaStream_t s);

// The f32 workspace launch_layernorm_backward needs for dw/db: layernorm_backward_partial_floats
// (workspace_sizes.hpp).

// dx = rstd * (dxh - mean(dxh) - xh * mean(dxh * xh)), dxh = dy * w, xh = (x - mean) * rstd:
// dx [N, C] overwritten (rounded once to dxdt; dx may be dy or x). dw += sum over rows of
// dy * xh, db += sum over rows of dy (either null: skipped), in a fixed order: per strip of rows
// into `partial` (layernorm_backward_partial_floats(N, C) floats of device memory), then the
// strips in order, added into dw/db once (a 16-bit dw/db: the f32 sum of its old value and the
// total, rounded once). w null: 1.
void launch_layernorm_backward(const void* dy, DT dydt, const void* x, DT xdt, const void* w,
                               DT wdt, const float* mean, const float* rstd, void* dx, DT dxdt,
                               void* dw, DT dwdt, void* db, DT dbdt, std::int64_t N, int C,
                               float* partial, cudaStream_t s);

}  // namespace strata::cuda_ops
