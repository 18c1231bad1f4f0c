// LayerNorm on CUDA, the CPU's arithmetic (backend/cpu/row_kernels_body.hpp) in another summation
// order:
//   forward:        one warp per row (8 rows per 256-thread block): sum(x) -> mean, then
//                   sum((x - mean)^2) -> var, rstd = 1 / sqrt(var + eps), then y. Each lane takes
//                   the columns lane, lane + 32, ...; the warp combines by a fixed butterfly.
//   backward dx:    one warp per row likewise: sum(dxh) and sum(dxh * xh), then dx.
//   backward dw/db: blocks of 32 columns x 8 row lanes over a strip of rows: each thread sums
//                   its column over the rows ty, ty + 8, ... of the strip, the 8 row lanes are
//                   combined in order through shared memory into partial[strip][dw|db][C]; a
//                   second kernel (32 columns x 16 strip lanes a block) sums the strips in a
//                   fixed order and adds the total into dw/db once.
// Every sum has a fixed order that depends on N and C only: the results are the same bits run
// after run. No atomics.
#include "framework/backend/cuda/ops/common.cuh"
#include "framework/backend/cuda/ops/layernorm.hpp"

namespace strata::cuda_ops {
namespace {

constexpr int kRowWarps = 8;                     // rows per block in the row kernels
constexpr unsigned kRowThreads = 32 * kRowWarps;  // 256
constexpr int kColTile = 32;                     // columns per block of the dw/db partial kernel
constexpr int kRowLanes = 8;                     // row lanes per block of that kernel
constexpr int kFinalLanes = 16;                  // strip lanes per block of the final kernel

// Blocks for the warp-per-row kernels (they stride over the rest of the rows).
unsigned row_blocks(std::int64_t N) {
  const std::int64_t b = (N + kRowWarps - 1) / kRowWarps;
  return static_cast<unsigned>(b < 1 ? 1 : (b > (1LL << 20) ? (1LL << 20) : b));
}

// Rows per strip of the dw/db reduction and their count (workspace_sizes.hpp: the workspace
// they size is the plan's too).
std::int64_t strip_rows(std::int64_t N) { return layernorm_strip_rows(N); }
std::int64_t strip_count(std::int64_t N) { return layernorm_strip_count(N); }

__global__ void __launch_bounds__(kRowThreads)
    layernorm_forward_kernel(const void* x, DT xdt, const void* w, DT wdt, const void* b, DT bdt,
                             void* y, DT ydt, float* mean, float* rstd, std::int64_t N, int C,
                             float eps) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // The row loop is uniform across a warp (row depends on the warp only), so every lane takes
  // part in the shuffles of warp_sum.
  for (std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kRowWarps + warp; row < N;
       row += static_cast<std::int64_t>(gridDim.x) * kRowWarps) {
    const std::int64_t base = row * C;
    float s = 0.0f;
    for (int j = lane; j < C; j += 32) s += load(x, xdt, base + j);
    const float m = warp_sum(s) / static_cast<float>(C);
    float s2 = 0.0f;
    for (int j = lane; j < C; j += 32) {
      const float d = load(x, xdt, base + j) - m;
      s2 = fmaf(d, d, s2);
    }
    const float var = warp_sum(s2) / static_cast<float>(C);
    const float rs = 1.0f / sqrtf(var + eps);  // IEEE sqrt and division (no fast math)
    if (lane == 0) {
      mean[row] = m;
      rstd[row] = rs;
    }
    for (int j = lane; j < C; j += 32) {
      const float xh = (load(x, xdt, base + j) - m) * rs;
      const float wv = w ? load(w, wdt, j) : 1.0f;
      const float bv = b ? load(b, bdt, j) : 0.0f;
      store(y, ydt, base + j, fmaf(xh, wv, bv));
    }
  }
}

// dx only; dw/db come from the strip kernels. inv_c = 1.0f / C, computed on the host (the same
// IEEE quotient as the CPU's; a device division would add a slow-path call to this hot kernel).
// The second pass reads dy[row, j] and x[row, j] in the lane that then writes dx[row, j], and
// the first pass of a row finishes (warp_sum) before its second pass writes: dx may be dy or x.
__global__ void __launch_bounds__(kRowThreads)
    layernorm_backward_dx_kernel(const void* dy, DT dydt, const void* x, DT xdt, const void* w,
                                 DT wdt, const float* mean, const float* rstd, void* dx, DT dxdt,
                                 std::int64_t N, int C, float inv_c) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kRowWarps + warp; row < N;
       row += static_cast<std::int64_t>(gridDim.x) * kRowWarps) {
    const std::int64_t base = row * C;
    const float m = mean[row], rs = rstd[row];
    float s1 = 0.0f, s2 = 0.0f;
    for (int j = lane; j < C; j += 32) {
      const float g = load(dy, dydt, base + j);
      const float xh = (load(x, xdt, base + j) - m) * rs;
      const float dxh = w ? g * load(w, wdt, j) : g;
      s1 += dxh;
      s2 = fmaf(dxh, xh, s2);
    }
    const float m1 = warp_sum(s1) * inv_c, m2 = warp_sum(s2) * inv_c;
    for (int j = lane; j < C; j += 32) {
      const float g = load(dy, dydt, base + j);
      const float xh = (load(x, xdt, base + j) - m) * rs;
      const float dxh = w ? g * load(w, wdt, j) : g;
      const float t = (dxh - m1) - xh * m2;
      store(dx, dxdt, base + j, rs * t);
    }
  }
}

// Block (kColTile, kRowLanes), grid (column tiles, strips). partial[strip][0][c] = sum over the
// strip's rows of dy * xh, partial[strip][1][c] = sum of dy: thread (tx, ty) sums rows
// r0 + ty, r0 + ty + kRowLanes, ... in order, then row lane 0 adds the kRowLanes sums in order.
__global__ void __launch_bounds__(kColTile* kRowLanes)
    layernorm_dwdb_partial_kernel(const void* dy, DT dydt, const void* x, DT xdt,
                                  const float* mean, const float* rstd, std::int64_t N, int C,
                                  std::int64_t rows_per_strip, float* partial) {
  __shared__ float sh_w[kRowLanes][kColTile];
  __shared__ float sh_b[kRowLanes][kColTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kColTile + tx;
  const std::int64_t strip = blockIdx.y;
  const std::int64_t r0 = strip * rows_per_strip;
  const std::int64_t r1 = r0 + rows_per_strip < N ? r0 + rows_per_strip : N;
  float sw = 0.0f, sb = 0.0f;
  if (c < C) {  // a tail tile's extra columns read nothing but still reach __syncthreads
    for (std::int64_t r = r0 + ty; r < r1; r += kRowLanes) {
      const float g = load(dy, dydt, r * C + c);
      const float xh = (load(x, xdt, r * C + c) - mean[r]) * rstd[r];
      sw = fmaf(g, xh, sw);
      sb += g;
    }
  }
  sh_w[ty][tx] = sw;
  sh_b[ty][tx] = sb;
  __syncthreads();
  if (ty == 0 && c < C) {
    float tw = 0.0f, tb = 0.0f;
    for (int k = 0; k < kRowLanes; ++k) {
      tw += sh_w[k][tx];
      tb += sh_b[k][tx];
    }
    partial[(strip * 2) * C + c] = tw;
    partial[(strip * 2 + 1) * C + c] = tb;
  }
}

// Block (kColTile, kFinalLanes), a column tile per block (striding over the tiles): thread (tx, ty)
// sums strips ty, ty + kFinalLanes, ... of its column in order, row lane 0 adds the kFinalLanes
// sums in order, then dw[c] = round(dw[c] + total) (f32: exactly dw[c] += total). (One thread per
// column summing all strips left a 768-wide LayerNorm 3 blocks: 30 us a call on an H200.)
__global__ void __launch_bounds__(kColTile* kFinalLanes)
    layernorm_dwdb_final_kernel(const float* partial, std::int64_t strips, int C, void* dw,
                                DT dwdt, void* db, DT dbdt) {
  __shared__ float sh_w[kFinalLanes][kColTile];
  __shared__ float sh_b[kFinalLanes][kColTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const std::int64_t tiles = (static_cast<std::int64_t>(C) + kColTile - 1) / kColTile;
  for (std::int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {  // uniform per block
    const std::int64_t c = tile * kColTile + tx;
    float tw = 0.0f, tb = 0.0f;
    if (c < C) {
      for (std::int64_t k = ty; k < strips; k += kFinalLanes) {
        tw += partial[(k * 2) * C + c];
        tb += partial[(k * 2 + 1) * C + c];
      }
    }
    sh_w[ty][tx] = tw;
    sh_b[ty][tx] = tb;
    __syncthreads();
    if (ty == 0 && c < C) {
      float sw = 0.0f, sb = 0.0f;
      for (int k = 0; k < kFinalLanes; ++k) {
        sw += sh_w[k][tx];
        sb += sh_b[k][tx];
      }
      if (dw) store(dw, dwdt, c, __fadd_rn(load(dw, dwdt, c), sw));
      if (db) store(db, dbdt, c, __fadd_rn(load(db, dbdt, c), sb));
    }
    __syncthreads();  // the next tile writes sh_w/sh_b
  }
}

}  // namespace

void launch_layernorm_forward(const void* x, DT xdt, const void* w, DT wdt, const void* b, DT bdt,
                              void* y, DT ydt, float* mean, float* rstd, std::int64_t N, int C,
                              float eps, cudaStream_t s) {
  if (N <= 0 || C <= 0) return;
  layernorm_forward_kernel<<<row_blocks(N), kRowThreads, 0, s>>>(x, xdt, w, wdt, b, bdt, y, ydt,
                                                                 mean, rstd, N, C, eps);
}

void launch_layernorm_backward(const void* dy, DT dydt, const void* x, DT xdt, const void* w,
                               DT wdt, const float* mean, const float* rstd, void* dx, DT dxdt,
                               void* dw, DT dwdt, void* db, DT dbdt, std::int64_t N, int C,
                               float* partial, cudaStream_t s) {
  if (N <= 0 || C <= 0) return;
  const bool grads = dw != nullptr || db != nullptr;
  // The partial sums first: they read dy and x before the dx kernel may overwrite either.
  if (grads) {
    const std::int64_t strips = strip_count(N);  // <= 256: within gridDim.y's 65535
    const dim3 block(kColTile, kRowLanes);
    const dim3 grid(static_cast<unsigned>((C + kColTile - 1) / kColTile),
                    static_cast<unsigned>(strips));
    layernorm_dwdb_partial_kernel<<<grid, block, 0, s>>>(dy, dydt, x, xdt, mean, rstd, N, C,
                                                         strip_rows(N), partial);
  }
  layernorm_backward_dx_kernel<<<row_blocks(N), kRowThreads, 0, s>>>(dy, dydt, x, xdt, w, wdt,
                                                                     mean, rstd, dx, dxdt, N, C,
                                                                     1.0f / static_cast<float>(C));
  if (grads) {
    const std::int64_t tiles = (static_cast<std::int64_t>(C) + kColTile - 1) / kColTile;
    layernorm_dwdb_final_kernel<<<static_cast<unsigned>(tiles > 65535 ? 65535 : tiles),
                                  dim3(kColTile, kFinalLanes), 0, s>>>(partial, strip_count(N), C,
                                                                        dw, dwdt, db, dbdt);
  }
}

}  // namespace strata::cuda_ops
