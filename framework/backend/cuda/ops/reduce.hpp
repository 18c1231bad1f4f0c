// Launchers of reduce.cu (whole-tensor reductions: the sum of squares of global-norm clipping and
// the inf/NaN check of loss scaling) over raw pointers, queued on a stream, and read_back, the
// host helper with which an op that returns a host value fetches it (reduce_op.cpp defines it;
// cross_entropy_op.cpp uses it too). No Tensor here (nvcc cannot compile fmt 9 in C++20).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "framework/backend/cuda/ops/half_hd.hpp"
#include "framework/backend/cuda/ops/workspace_sizes.hpp"

namespace strata::cuda_ops {

// How many doubles of device workspace launch_sum_squares needs for its block partials:
// sum_squares_partials(n, dt) (workspace_sizes.hpp; a function of n and the dtype only).

// *result = sum over i < n of double(x[i])^2 (16-bit values widened exactly; each square is
// exact in double), in a fixed order: a fixed grid (sum_squares_partials(n, dt) blocks, chosen
// from n alone) in which thread g sums the 16-byte chunks g, g + threads, ... in double, the
// chunks' elements in index order (a vector load when x is 16-byte aligned, scalar loads
// otherwise: the same order either way); block_sum per block into partials[b]; then one block
// sums the partials in a fixed order. result: one device double. n may be 0 (result 0).
void launch_sum_squares(const void* x, DT dt, std::int64_t n, double* partials, double* result,
                        cudaStream_t s);

// Sets *flag = 1 when some x[i], i < n, is ±inf or NaN (an all-ones exponent in x's own dtype);
// leaves it alone otherwise. The caller zeroes the flag first (on the same stream).
void launch_has_inf_or_nan(const void* x, DT dt, std::int64_t n, int* flag, cudaStream_t s);

// Copies `bytes` of device memory at src to host dst on stream s and waits for s (only): through
// a small pinned buffer kept per host thread (allocated once), or straight into dst when that
// buffer is unavailable or too small. Throws strata::Error naming `what` on a CUDA error (an
// earlier kernel's fault on s surfaces here).
void read_back(void* dst, const void* src, std::size_t bytes, cudaStream_t s, const char* what);

}  // namespace strata::cuda_ops
