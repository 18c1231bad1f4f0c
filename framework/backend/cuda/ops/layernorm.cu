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
// The row kernels and the partial kernel have a second form, taken when the row tensors share one
// dtype, w and b another, C is a multiple of 8 and at most 2048, and every pointer is 16-byte
// aligned (layernorm_vectorized; GPT-2's widths 768-2048 in bf16 or f32): the dtypes are template
// arguments instead of a switch per element, every access moves 8 consecutive elements at once
// (map8.cuh's load8/store8), and the row kernels keep a lane's part of the row in registers
// (forward: x, read once instead of three times; backward: dy and x, read once instead of twice).
// In the row kernels a lane takes the 8-element chunks lane, lane + 32, ... of its row, so the
// row sums run in another (still fixed) order than the scalar form's; the partial kernel's thread
// takes 8 columns and sums each over the same rows in the same order as the scalar form, so its
// sums are the same bits.
// Every sum has a fixed order that depends on N and C (and the path, fixed by the operands) only:
// the results are the same bits run after run. No atomics.
#include <type_traits>

#include "framework/backend/cuda/ops/common.cuh"
#include "framework/backend/cuda/ops/layernorm.hpp"
#include "framework/backend/cuda/ops/map8.cuh"

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

// ---- the vectorized form (layernorm_vectorized) ----
// T: x, y, dy, dx; P: w and b (f32 when neither is given); K: the most 8-element chunks a lane
// takes (C <= 8 * 32 * K).

template <DT T, DT P, int K>
__global__ void __launch_bounds__(kRowThreads)
    layernorm_forward_vec_kernel(const void* x, const void* w, const void* b, void* y, float* mean,
                                 float* rstd, std::int64_t N, int C, float eps) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int chunks = C >> 3;
  for (std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kRowWarps + warp; row < N;
       row += static_cast<std::int64_t>(gridDim.x) * kRowWarps) {
    const std::int64_t rc = row * chunks;  // the row's first chunk
    float v[K][8];
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (lane + 32 * k >= chunks) continue;
      const Chunk8<T> ch = load8<T>(x, rc + lane + 32 * k);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        v[k][e] = ch.v[e];
        s += ch.v[e];
      }
    }
    const float m = warp_sum(s) / static_cast<float>(C);
    float s2 = 0.0f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (lane + 32 * k >= chunks) continue;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float d = v[k][e] - m;
        s2 = fmaf(d, d, s2);
      }
    }
    const float var = warp_sum(s2) / static_cast<float>(C);
    const float rs = 1.0f / sqrtf(var + eps);
    if (lane == 0) {
      mean[row] = m;
      rstd[row] = rs;
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int c = lane + 32 * k;
      if (c >= chunks) continue;
      float o[8];
      if (w && b) {
        const Chunk8<P> wv = load8<P>(w, c), bv = load8<P>(b, c);
#pragma unroll
        for (int e = 0; e < 8; ++e) o[e] = fmaf((v[k][e] - m) * rs, wv.v[e], bv.v[e]);
      } else if (w) {
        const Chunk8<P> wv = load8<P>(w, c);
#pragma unroll
        for (int e = 0; e < 8; ++e) o[e] = fmaf((v[k][e] - m) * rs, wv.v[e], 0.0f);
      } else if (b) {
        const Chunk8<P> bv = load8<P>(b, c);
#pragma unroll
        for (int e = 0; e < 8; ++e) o[e] = fmaf((v[k][e] - m) * rs, 1.0f, bv.v[e]);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) o[e] = fmaf((v[k][e] - m) * rs, 1.0f, 0.0f);
      }
      store8<T>(y, rc + c, o);
    }
  }
}

// A lane reads all of its chunks of dy and x before the warp's sums, and writes dx after them, to
// the same chunks: dx may be dy or x.
template <DT T, DT P, int K>
__global__ void __launch_bounds__(kRowThreads)
    layernorm_backward_dx_vec_kernel(const void* dy, const void* x, const void* w,
                                     const float* mean, const float* rstd, void* dx,
                                     std::int64_t N, int C, float inv_c) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int chunks = C >> 3;
  for (std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kRowWarps + warp; row < N;
       row += static_cast<std::int64_t>(gridDim.x) * kRowWarps) {
    const std::int64_t rc = row * chunks;
    const float m = mean[row], rs = rstd[row];
    float g[K][8], xh[K][8];
    float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int c = lane + 32 * k;
      if (c >= chunks) continue;
      const Chunk8<T> gy = load8<T>(dy, rc + c), xx = load8<T>(x, rc + c);
      float wv[8];
      if (w) {
        const Chunk8<P> wc = load8<P>(w, c);
#pragma unroll
        for (int e = 0; e < 8; ++e) wv[e] = wc.v[e];
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        xh[k][e] = (xx.v[e] - m) * rs;
        const float dxh = w ? gy.v[e] * wv[e] : gy.v[e];
        g[k][e] = dxh;
        s1 += dxh;
        s2 = fmaf(dxh, xh[k][e], s2);
      }
    }
    const float m1 = warp_sum(s1) * inv_c, m2 = warp_sum(s2) * inv_c;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int c = lane + 32 * k;
      if (c >= chunks) continue;
      float o[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) o[e] = rs * ((g[k][e] - m1) - xh[k][e] * m2);
      store8<T>(dx, rc + c, o);
    }
  }
}

// Block (kColTile, kRowLanes), grid (tiles of kColTile chunks, strips): thread (tx, ty) takes the 8
// columns of chunk blockIdx.x * kColTile + tx and sums each over rows r0 + ty, r0 + ty + kRowLanes,
// ... in order; row lane 0 adds the kRowLanes sums in order: layernorm_dwdb_partial_kernel's sums.
template <DT T>
__global__ void __launch_bounds__(kColTile* kRowLanes)
    layernorm_dwdb_partial_vec_kernel(const void* dy, const void* x, const float* mean,
                                      const float* rstd, std::int64_t N, int C,
                                      std::int64_t rows_per_strip, float* partial) {
  __shared__ float sh_w[kRowLanes][kColTile * 8];
  __shared__ float sh_b[kRowLanes][kColTile * 8];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int chunks = C >> 3;
  const int cc = static_cast<int>(blockIdx.x) * kColTile + tx;  // this thread's chunk
  const std::int64_t strip = blockIdx.y;
  const std::int64_t r0 = strip * rows_per_strip;
  const std::int64_t r1 = r0 + rows_per_strip < N ? r0 + rows_per_strip : N;
  float sw[8], sb[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) sw[e] = sb[e] = 0.0f;
  if (cc < chunks) {  // a tail tile's extra threads read nothing but still reach __syncthreads
    for (std::int64_t r = r0 + ty; r < r1; r += kRowLanes) {
      const Chunk8<T> gy = load8<T>(dy, r * chunks + cc), xx = load8<T>(x, r * chunks + cc);
      const float m = mean[r], rs = rstd[r];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float xh = (xx.v[e] - m) * rs;
        sw[e] = fmaf(gy.v[e], xh, sw[e]);
        sb[e] += gy.v[e];
      }
    }
  }
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    sh_w[ty][tx * 8 + e] = sw[e];
    sh_b[ty][tx * 8 + e] = sb[e];
  }
  __syncthreads();
  if (ty == 0 && cc < chunks) {
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      float tw = 0.0f, tb = 0.0f;
      for (int k = 0; k < kRowLanes; ++k) {
        tw += sh_w[k][tx * 8 + e];
        tb += sh_b[k][tx * 8 + e];
      }
      const std::int64_t c = static_cast<std::int64_t>(cc) * 8 + e;
      partial[(strip * 2) * C + c] = tw;
      partial[(strip * 2 + 1) * C + c] = tb;
    }
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

namespace {
// f(std::integral_constant<int, K>) with K the vectorized kernels' chunks per lane for C: 4 up to
// C 1024, else 8 (up to kLayerNormVecMaxC).
template <class F>
void with_lane_chunks(int C, F&& f) {
  if (C <= 8 * 32 * 4) f(std::integral_constant<int, 4>{});
  else f(std::integral_constant<int, 8>{});
}

// The dtype of w and b when they share one (f32 when neither is given); false when they differ.
bool param_dt(const void* w, DT wdt, const void* b, DT bdt, DT& out) {
  if (w && b && wdt != bdt) return false;
  out = w ? wdt : b ? bdt : DT::f32;
  return true;
}
}  // namespace

bool layernorm_vectorized(const void* w, DT wdt, const void* b, DT bdt, int C,
                          std::initializer_list<const void*> rows) {
  DT p;
  if (!param_dt(w, wdt, b, bdt, p) || C <= 0 || C % 8 != 0 || C > kLayerNormVecMaxC) return false;
  if ((w && !aligned16(w)) || (b && !aligned16(b))) return false;
  for (const void* r : rows)
    if (!aligned16(r)) return false;
  return true;
}

void launch_layernorm_forward(const void* x, DT xdt, const void* w, DT wdt, const void* b, DT bdt,
                              void* y, DT ydt, float* mean, float* rstd, std::int64_t N, int C,
                              float eps, cudaStream_t s) {
  if (N <= 0 || C <= 0) return;
  if (xdt == ydt && layernorm_vectorized(w, wdt, b, bdt, C, {x, y})) {
    DT p;
    param_dt(w, wdt, b, bdt, p);
    with_dt(xdt, [&](auto t) {
      with_dt(p, [&](auto pt) {
        with_lane_chunks(C, [&](auto k) {
          constexpr DT T = decltype(t)::value, P = decltype(pt)::value;
          constexpr int K = decltype(k)::value;
          layernorm_forward_vec_kernel<T, P, K><<<row_blocks(N), kRowThreads, 0, s>>>(
              x, w, b, y, mean, rstd, N, C, eps);
        });
      });
    });
    return;
  }
  layernorm_forward_kernel<<<row_blocks(N), kRowThreads, 0, s>>>(x, xdt, w, wdt, b, bdt, y, ydt,
                                                                 mean, rstd, N, C, eps);
}

void launch_layernorm_backward(const void* dy, DT dydt, const void* x, DT xdt, const void* w,
                               DT wdt, const float* mean, const float* rstd, void* dx, DT dxdt,
                               void* dw, DT dwdt, void* db, DT dbdt, std::int64_t N, int C,
                               float* partial, cudaStream_t s) {
  if (N <= 0 || C <= 0) return;
  const bool grads = dw != nullptr || db != nullptr;
  const bool vec = dydt == xdt && dxdt == xdt &&
                   layernorm_vectorized(w, wdt, nullptr, DT::f32, C, {dy, x, dx});
  // The partial sums first: they read dy and x before the dx kernel may overwrite either.
  if (grads && vec) {
    const std::int64_t strips = strip_count(N);
    const int chunks = C / 8;
    const dim3 block(kColTile, kRowLanes);
    const dim3 grid(static_cast<unsigned>((chunks + kColTile - 1) / kColTile),
                    static_cast<unsigned>(strips));
    with_dt(xdt, [&](auto t) {
      layernorm_dwdb_partial_vec_kernel<decltype(t)::value><<<grid, block, 0, s>>>(
          dy, x, mean, rstd, N, C, strip_rows(N), partial);
    });
  } else if (grads) {
    const std::int64_t strips = strip_count(N);  // <= 256: within gridDim.y's 65535
    const dim3 block(kColTile, kRowLanes);
    const dim3 grid(static_cast<unsigned>((C + kColTile - 1) / kColTile),
                    static_cast<unsigned>(strips));
    layernorm_dwdb_partial_kernel<<<grid, block, 0, s>>>(dy, dydt, x, xdt, mean, rstd, N, C,
                                                         strip_rows(N), partial);
  }
  const float inv_c = 1.0f / static_cast<float>(C);
  if (vec) {
    with_dt(xdt, [&](auto t) {
      with_dt(w ? wdt : DT::f32, [&](auto pt) {
        with_lane_chunks(C, [&](auto k) {
          constexpr DT T = decltype(t)::value, P = decltype(pt)::value;
          constexpr int K = decltype(k)::value;
          layernorm_backward_dx_vec_kernel<T, P, K><<<row_blocks(N), kRowThreads, 0, s>>>(
              dy, x, w, mean, rstd, dx, N, C, inv_c);
        });
      });
    });
  } else {
    layernorm_backward_dx_kernel<<<row_blocks(N), kRowThreads, 0, s>>>(
        dy, dydt, x, xdt, w, wdt, mean, rstd, dx, dxdt, N, C, inv_c);
  }
  if (grads) {
    const std::int64_t tiles = (static_cast<std::int64_t>(C) + kColTile - 1) / kColTile;
    layernorm_dwdb_final_kernel<<<static_cast<unsigned>(tiles > 65535 ? 65535 : tiles),
                                  dim3(kColTile, kFinalLanes), 0, s>>>(partial, strip_count(N), C,
                                                                        dw, dwdt, db, dbdt);
  }
}

}  // namespace strata::cuda_ops
