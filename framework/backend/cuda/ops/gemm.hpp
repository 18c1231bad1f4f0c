// The dense-algebra ops on CUDA (matmul, linear_forward, linear_backward): the products run on
// cuBLASLt (gemm_op.cpp), with f32 accumulation; this header has the process-wide TF32 switch and
// the launchers of the few kernels around the products (gemm.cu): a bias broadcast over rows and
// a deterministic column sum (linear's db). Raw pointers, DT codes and the stream to queue on; no
// Tensor (nvcc cannot compile fmt 9 in C++20), no host synchronisation.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "framework/backend/cuda/ops/half_hd.hpp"
#include "framework/backend/cuda/ops/workspace_sizes.hpp"

namespace strata::cuda_ops {

// TF32 (strata::allow_tf32(), framework/backend/math_mode.hpp: strata.allow_tf32) applies to the
// products whose operands are f32 (f32 tensors, or 16-bit ones of a mix widened to f32):
// CUBLAS_COMPUTE_32F_FAST_TF32 when on, CUBLAS_COMPUTE_32F (exact f32 products) when off. Devices
// before sm_80 have no TF32 and ignore it.

// d[r, c] = bias[c] for r < rows, c < cols (d row-major [rows, cols] of dtype ddt, bias of dtype
// bdt, rounded once to ddt). Exact when ddt is f32 or bdt itself.
void launch_bias_rows(void* d, DT ddt, const void* bias, DT bdt, std::int64_t rows,
                      std::int64_t cols, cudaStream_t s);

// How launch_column_sums splits the rows: column_sum_plan (workspace_sizes.hpp).

// dst[c] = round(dst[c] + sum over r of x[r, c]) for x row-major [rows, cols] (dst of dtype ddt,
// x of dtype xdt; the sum in f32, added to dst and rounded once: the accumulation of linear's
// db). `scratch` holds column_sum_plan(rows, cols).strips * cols floats. Deterministic: each strip
// of rows is summed in a fixed order by one block, then the strips are added in order.
void launch_column_sums(void* dst, DT ddt, const void* x, DT xdt, std::int64_t rows,
                        std::int64_t cols, float* scratch, cudaStream_t s);

}  // namespace strata::cuda_ops
