// The kernels around the cuBLASLt products of gemm_op.cpp: a bias broadcast over the rows of an
// output (linear_forward, when the bias is not applied by the cuBLASLt epilogue) and the column
// sums of dy that linear_backward adds into db, in a fixed order (no atomics).
#include "framework/backend/cuda/ops/common.cuh"
#include "framework/backend/cuda/ops/gemm.hpp"

namespace strata::cuda_ops {
namespace {

constexpr unsigned kThreads = 256;

unsigned grid(std::int64_t n) { return grid_for(n, kThreads); }

__global__ void bias_rows_kernel(void* d, DT ddt, const void* bias, DT bdt, std::int64_t rows,
                                 std::int64_t cols) {
  STRATA_GRID_STRIDE(i, rows * cols) store(d, ddt, i, load(bias, bdt, i % cols));
}

// Column sums, pass 1. Block (kCols, kLanes): 32 consecutive columns (a warp reads 32 adjacent
// elements of a row) by 8 row lanes; blockIdx.y is the strip of rows [r0, r1). Lane y sums rows
// r0 + y, r0 + y + 8, ... in order; lane 0 then adds the 8 lane sums in order. Writes
// partials[strip * cols + c].
constexpr int kCols = 32;
constexpr int kLanes = 8;

__global__ void column_partials_kernel(const void* x, DT xdt, std::int64_t rows, std::int64_t cols,
                                       std::int64_t rows_per_strip, float* partials) {
  __shared__ float lane_sums[kLanes][kCols + 1];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kCols + tx;
  const std::int64_t strip = blockIdx.y;
  const std::int64_t r0 = strip * rows_per_strip;
  const std::int64_t r1 = r0 + rows_per_strip < rows ? r0 + rows_per_strip : rows;
  float s = 0.0f;
  if (c < cols)
    for (std::int64_t r = r0 + ty; r < r1; r += kLanes) s += load(x, xdt, r * cols + c);
  lane_sums[ty][tx] = s;
  __syncthreads();
  if (ty == 0 && c < cols) {
    float t = lane_sums[0][tx];
    for (int k = 1; k < kLanes; ++k) t += lane_sums[k][tx];
    partials[strip * cols + c] = t;
  }
}

// Column sums, pass 2: dst[c] = round(dst[c] + (strip 0 + strip 1 + ...)), strips in order.
__global__ void column_finish_kernel(void* dst, DT ddt, const float* partials, std::int64_t strips,
                                     std::int64_t cols) {
  STRATA_GRID_STRIDE(c, cols) {
    float s = 0.0f;
    for (std::int64_t j = 0; j < strips; ++j) s += partials[j * cols + c];
    store(dst, ddt, c, load(dst, ddt, c) + s);
  }
}

}  // namespace

void launch_bias_rows(void* d, DT ddt, const void* bias, DT bdt, std::int64_t rows,
                      std::int64_t cols, cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return;
  bias_rows_kernel<<<grid(rows * cols), kThreads, 0, s>>>(d, ddt, bias, bdt, rows, cols);
}

void launch_column_sums(void* dst, DT ddt, const void* x, DT xdt, std::int64_t rows,
                        std::int64_t cols, float* scratch, cudaStream_t s) {
  const ColumnSumPlan p = column_sum_plan(rows, cols);
  if (p.strips == 0) return;  // no rows or no columns: dst += 0
  // strips <= 1024 (column_sum_plan), within gridDim.y's 65535.
  const dim3 blocks(static_cast<unsigned>((cols + kCols - 1) / kCols),
                    static_cast<unsigned>(p.strips));
  column_partials_kernel<<<blocks, dim3(kCols, kLanes), 0, s>>>(x, xdt, rows, cols,
                                                                p.rows_per_strip, scratch);
  column_finish_kernel<<<grid(cols), kThreads, 0, s>>>(dst, ddt, scratch, p.strips, cols);
}

}  // namespace strata::cuda_ops
