// Adafactor's kernels (framework/optim/adafactor.hpp) and the CPU-order sum of squares of its
// parameter RMS, bitwise the CPU's (shard_sum_updates.hpp says how):
//   sq_sums:        the rows met, 8 threads per row (the CPU's 8 accumulators), folded by the
//                   first; the columns, one thread per column over the rows in order;
//   factored_sumsq: one block per 16384-element chunk, 8 threads per row segment of the chunk,
//                   the segments' folds added in order by one thread; the chunks in order by one;
//   vector_sumsq:   one block per chunk, 8 threads; sum_squares_add: one block per 32768-element
//                   chunk, its tiles staged in shared memory for 8 threads (cpu::sum_squares'
//                   accumulators, tail and fold); the chunks in order by one thread;
//   ema, factors, apply_*: elementwise (factors: the mean of the row statistics by one thread).
// The sums are sequential where the CPU's are (an accumulator's chain), so they are slower than
// a tree would be: the price of the CPU's bits on both backends without changing the CPU's order.
#include "framework/backend/cuda/ops/common.cuh"
#include "framework/backend/cuda/ops/shard_sum_updates.hpp"

namespace strata::cuda_ops {
namespace {

constexpr unsigned kThreads = 256;
constexpr int kLanes = 8;
constexpr int kGroups = static_cast<int>(kThreads) / kLanes;  // runs per block
constexpr std::int64_t kMaxBlocks = 2048;

// Lane `lane` of the CPU's 8 interleaved accumulators over term(0 .. len-1): its elements of the
// full groups of 8 in order, then the tail: all on lane 0 (Adafactor's loops) or element
// full + l on lane l (kSpreadTail: cpu::sum_squares).
template <bool kSpreadTail, class F>
__device__ double lane_sum(std::int64_t len, int lane, F term) {
  double acc = 0.0;
  const std::int64_t full = len - len % kLanes;
  for (std::int64_t i = lane; i < full; i += kLanes) acc = ieee::dadd(acc, term(i));
  if (kSpreadTail) {
    if (full + lane < len) acc = ieee::dadd(acc, term(full + lane));
  } else if (lane == 0) {
    for (std::int64_t i = full; i < len; ++i) acc = ieee::dadd(acc, term(i));
  }
  return acc;
}

// adafactor.cpp's fold.
__device__ double fold_adafactor(const double* a) {
  using ieee::dadd;
  return dadd(dadd(dadd(a[0], a[1]), dadd(a[2], a[3])), dadd(dadd(a[4], a[5]), dadd(a[6], a[7])));
}
// cpu::sum_squares' fold (elementwise.cpp's chunk_sum_squares).
__device__ double fold_sum_squares(const double* a) {
  using ieee::dadd;
  return dadd(dadd(dadd(a[0], a[4]), dadd(a[2], a[6])), dadd(dadd(a[1], a[5]), dadd(a[3], a[7])));
}

// out[0] += the partials added in order (one thread).
__global__ void __launch_bounds__(32) add_partials_kernel(const double* partials, std::int64_t k,
                                                          double* out) {
  if (threadIdx.x != 0) return;
  double t = 0.0;
  for (std::int64_t c = 0; c < k; ++c) t = ieee::dadd(t, partials[c]);
  out[0] = ieee::dadd(out[0], t);
}

// ---- sum of squares in cpu::sum_squares' order ----
// One block per 32768-element chunk. Warps 1.. load the chunk's next 4096-element tile into shared
// memory (coalesced, many loads in flight) while 8 threads of warp 0 add the current tile's
// squares into the CPU's 8 interleaved accumulators (element i on lane i % 8, in order; the tail
// of the last partial group, element full + l, on lane l), so the chunk is read at the memory's
// speed while each accumulator stays one sequential chain. (The first version gave each
// accumulator a thread that read its own elements from global memory, one load in flight per
// thread: 362 us for 7.1M bf16 values on an H200, 15% of a GPT-2 124M step.)
constexpr int kSqTile = 4096;
static_assert(kSumSqChunk % kSqTile == 0 && kSqTile % kLanes == 0, "tiles of whole groups of 8");

template <DT kDt>
__global__ void __launch_bounds__(kThreads)
    sum_squares_add_kernel(const void* x, std::int64_t n, double* partials) {
  __shared__ float tile[2][kSqTile];
  __shared__ double acc[kLanes];
  const std::int64_t b = static_cast<std::int64_t>(blockIdx.x) * kSumSqChunk;
  const std::int64_t len = n - b < kSumSqChunk ? n - b : kSumSqChunk;
  const std::int64_t full = len - len % kLanes;
  const int tiles = static_cast<int>((len + kSqTile - 1) / kSqTile);
  const int t = static_cast<int>(threadIdx.x);
  constexpr int kLoaders = static_cast<int>(kThreads) - 32;
  auto fill = [&](int k) {  // warps 1..: tile k of the chunk into tile[k % 2]
    const std::int64_t at = static_cast<std::int64_t>(k) * kSqTile;
    const int m = static_cast<int>(len - at < kSqTile ? len - at : kSqTile);
    for (int i = t - 32; i < m; i += kLoaders) tile[k % 2][i] = load(x, kDt, b + at + i);
  };
  if (t >= 32) fill(0);
  __syncthreads();
  double a = 0.0;
  for (int k = 0; k < tiles; ++k) {
    if (t >= 32) {
      if (k + 1 < tiles) fill(k + 1);
    } else if (t < kLanes) {
      const std::int64_t at = static_cast<std::int64_t>(k) * kSqTile;
      const std::int64_t end = full - at < kSqTile ? full - at : kSqTile;  // whole groups here
      const float* v = tile[k % 2];
      for (std::int64_t i = t; i < end; i += kLanes) a = ieee::dadd(a, ieee::dsq(v[i]));
      if (full + t < len && full + t >= at && full + t < at + kSqTile)
        a = ieee::dadd(a, ieee::dsq(v[full + t - at]));
    }
    __syncthreads();
  }
  if (t < kLanes) acc[t] = a;
  __syncthreads();
  if (t == 0) partials[blockIdx.x] = fold_sum_squares(acc);
}

// ---- sq_sums ----
// Row k of the rows met (row r0 + k): its part [c_lo, c_hi) of the range, 8 threads.
__global__ void __launch_bounds__(kThreads)
    sq_rows_kernel(const float* grad, std::int64_t first, std::int64_t last, std::int64_t cols,
                   float gs, float eps1, double* row_sums) {
  __shared__ double acc[kThreads];
  const int lane = static_cast<int>(threadIdx.x) % kLanes;
  const std::int64_t r0 = first / cols, r1 = (last - 1) / cols;
  const std::int64_t r = r0 + static_cast<std::int64_t>(blockIdx.x) * kGroups + threadIdx.x / kLanes;
  double a = 0.0;
  if (r <= r1) {
    const std::int64_t c_lo = r == r0 ? first - r0 * cols : 0;
    const std::int64_t c_hi = r == r1 ? last - r1 * cols : cols;
    const float* row = grad + (r * cols - first) + c_lo;
    a = lane_sum<false>(c_hi - c_lo, lane, [&](std::int64_t i) {
      return static_cast<double>(af_sq_plus_eps(ieee::mul(row[i], gs), eps1));
    });
  }
  acc[threadIdx.x] = a;
  __syncthreads();
  if (lane == 0 && r <= r1) row_sums[r] = ieee::dadd(row_sums[r], fold_adafactor(acc + threadIdx.x));
}

// Column c: its terms of the rows met, in row order, added to col_sums[c] one by one.
__global__ void __launch_bounds__(kThreads)
    sq_cols_kernel(const float* grad, std::int64_t first, std::int64_t last, std::int64_t cols,
                   float gs, float eps1, double* col_sums) {
  const std::int64_t r0 = first / cols, r1 = (last - 1) / cols;
  STRATA_GRID_STRIDE(c, cols) {
    double s = col_sums[c];
    for (std::int64_t r = r0; r <= r1; ++r) {
      const std::int64_t at = r * cols + c;
      if (at < first || at >= last) continue;
      s = ieee::dadd(s, static_cast<double>(af_sq_plus_eps(ieee::mul(grad[at - first], gs), eps1)));
    }
    col_sums[c] = s;
  }
}

// ---- factored_sumsq: block = one chunk of the range ----
__global__ void __launch_bounds__(kThreads)
    factored_sumsq_kernel(const float* grad, std::int64_t first, std::int64_t n, std::int64_t cols,
                          float gs, const float* rf, const float* cf, double* partials) {
  __shared__ double acc[kThreads];
  const int lane = static_cast<int>(threadIdx.x) % kLanes, slot = static_cast<int>(threadIdx.x) / kLanes;
  const std::int64_t b = static_cast<std::int64_t>(blockIdx.x) * kAdafactorChunk;
  const std::int64_t count = n - b < kAdafactorChunk ? n - b : kAdafactorChunk;
  const std::int64_t start = first + b, end = start + count;  // matrix positions
  const std::int64_t rs = start / cols, nseg = (end - 1) / cols - rs + 1;
  double s = 0.0;  // thread 0's running sum of the segments, in order
  for (std::int64_t g0 = 0; g0 < nseg; g0 += kGroups) {
    const std::int64_t seg = g0 + slot;
    double a = 0.0;
    if (seg < nseg) {
      const std::int64_t r = rs + seg;
      const std::int64_t at = seg == 0 ? start : r * cols;           // first element
      const std::int64_t c0 = at - r * cols;
      const std::int64_t c1 = (r + 1) * cols < end ? cols : end - r * cols;
      const float* g = grad + (at - first);
      const float rfr = rf[r];
      a = lane_sum<false>(c1 - c0, lane, [&](std::int64_t i) {
        return ieee::dsq(ieee::mul(ieee::mul(rfr, cf[c0 + i]), ieee::mul(g[i], gs)));
      });
    }
    acc[threadIdx.x] = a;
    __syncthreads();
    if (threadIdx.x == 0) {
      const std::int64_t m = nseg - g0 < kGroups ? nseg - g0 : kGroups;
      for (std::int64_t k = 0; k < m; ++k) s = ieee::dadd(s, fold_adafactor(acc + k * kLanes));
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

// ---- vector_sumsq: block = one chunk, 8 threads ----
__global__ void __launch_bounds__(kLanes)
    vector_sumsq_kernel(const float* grad, const float* v, std::int64_t n, float gs, float eps1,
                        float b, float c, double* partials) {
  __shared__ double acc[kLanes];
  const std::int64_t b0 = static_cast<std::int64_t>(blockIdx.x) * kAdafactorChunk;
  const std::int64_t count = n - b0 < kAdafactorChunk ? n - b0 : kAdafactorChunk;
  acc[threadIdx.x] = lane_sum<false>(count, static_cast<int>(threadIdx.x), [&](std::int64_t i) {
    const float g = ieee::mul(grad[b0 + i], gs);
    const float vn = ieee::fma(af_sq_plus_eps(g, eps1), c, ieee::mul(v[b0 + i], b));
    return ieee::dsq(ieee::mul(ieee::div(1.0f, ieee::sqrt(vn)), g));
  });
  __syncthreads();
  if (threadIdx.x == 0) partials[blockIdx.x] = fold_adafactor(acc);
}

// ---- elementwise ----
__global__ void __launch_bounds__(kThreads)
    ema_kernel(float* stat, const double* sums, std::int64_t n, double count, float b, float c) {
  STRATA_GRID_STRIDE(i, n) {
    const float mean = static_cast<float>(sums[i] / count);
    stat[i] = ieee::fma(mean, c, ieee::mul(stat[i], b));
  }
}

// One block: thread 0 takes the rows' mean (in double, in order), then every thread the factors.
__global__ void __launch_bounds__(kThreads)
    factors_kernel(const float* row, std::int64_t rows, const float* col, std::int64_t cols,
                   float* rf, float* cf) {
  __shared__ float mean[1];
  if (threadIdx.x == 0) {
    double s = 0.0;
    for (std::int64_t r = 0; r < rows; ++r) s = ieee::dadd(s, static_cast<double>(row[r]));
    mean[0] = static_cast<float>(s / static_cast<double>(rows));
  }
  __syncthreads();
  const float mu = mean[0];
  for (std::int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    rf[r] = ieee::div(1.0f, ieee::sqrt(ieee::div(row[r], mu)));
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    cf[c] = ieee::div(1.0f, ieee::sqrt(col[c]));
}

__global__ void __launch_bounds__(kThreads)
    apply_factored_kernel(float* p, const float* grad, float* m, std::int64_t first,
                          std::int64_t n, std::int64_t cols, const float* rf, const float* cf,
                          optim::detail::AdafactorApplyConsts k, void* p16, DT hdt) {
  STRATA_GRID_STRIDE(i, n) {
    const std::int64_t at = first + i, r = at / cols, c = at - r * cols;
    float pi = p[i];
    af_finish(pi, ieee::mul(ieee::mul(rf[r], cf[c]), ieee::mul(grad[i], k.grad_scale)),
              m ? m + i : nullptr, k);
    p[i] = pi;
    if (p16) store(p16, hdt, i, pi);
  }
}

__global__ void __launch_bounds__(kThreads)
    apply_vector_kernel(float* p, const float* grad, float* v, float* m, std::int64_t n,
                        float eps1, float b2, float c2, optim::detail::AdafactorApplyConsts k,
                        void* p16, DT hdt) {
  STRATA_GRID_STRIDE(i, n) {
    const float g = ieee::mul(grad[i], k.grad_scale);
    const float vi = ieee::fma(af_sq_plus_eps(g, eps1), c2, ieee::mul(v[i], b2));
    v[i] = vi;
    float pi = p[i];
    af_finish(pi, ieee::mul(ieee::div(1.0f, ieee::sqrt(vi)), g), m ? m + i : nullptr, k);
    p[i] = pi;
    if (p16) store(p16, hdt, i, pi);
  }
}

std::int64_t chunks_of(std::int64_t n, std::int64_t chunk) {
  const std::int64_t c = (n + chunk - 1) / chunk;
  return c < 1 ? 1 : c;
}

}  // namespace


void launch_sum_squares_add(const void* x, DT dt, std::int64_t n, double* partials, double* out,
                            cudaStream_t s) {
  if (n <= 0) return;
  const std::int64_t chunks = chunks_of(n, kSumSqChunk);
  const auto blocks = static_cast<unsigned>(chunks);
  switch (dt) {
    case DT::bf16: sum_squares_add_kernel<DT::bf16><<<blocks, kThreads, 0, s>>>(x, n, partials); break;
    case DT::f16: sum_squares_add_kernel<DT::f16><<<blocks, kThreads, 0, s>>>(x, n, partials); break;
    default: sum_squares_add_kernel<DT::f32><<<blocks, kThreads, 0, s>>>(x, n, partials); break;
  }
  add_partials_kernel<<<1, 32, 0, s>>>(partials, chunks, out);
}

void launch_adafactor_sq_sums(const float* grad, std::int64_t first, std::int64_t n,
                              std::int64_t cols, float gs, float eps1, double* row_sums,
                              double* col_sums, cudaStream_t s) {
  if (n <= 0) return;
  const std::int64_t last = first + n;
  const std::int64_t nrows = (last - 1) / cols - first / cols + 1;
  const auto row_blocks = static_cast<unsigned>((nrows + kGroups - 1) / kGroups);
  sq_rows_kernel<<<row_blocks, kThreads, 0, s>>>(grad, first, last, cols, gs, eps1, row_sums);
  sq_cols_kernel<<<grid_for(cols, kThreads, kMaxBlocks), kThreads, 0, s>>>(grad, first, last, cols,
                                                                          gs, eps1, col_sums);
}

void launch_adafactor_ema(float* stat, const double* sums, std::int64_t n, double count,
                          double beta2, cudaStream_t s) {
  if (n <= 0) return;
  ema_kernel<<<grid_for(n, kThreads, kMaxBlocks), kThreads, 0, s>>>(
      stat, sums, n, count, static_cast<float>(beta2), static_cast<float>(1.0 - beta2));
}

void launch_adafactor_factors(const float* row, std::int64_t rows, const float* col,
                              std::int64_t cols, float* rf, float* cf, cudaStream_t s) {
  factors_kernel<<<1, kThreads, 0, s>>>(row, rows, col, cols, rf, cf);
}

void launch_adafactor_factored_sumsq(const float* grad, std::int64_t first, std::int64_t n,
                                     std::int64_t cols, float gs, const float* rf,
                                     const float* cf, double* partials, double* out,
                                     cudaStream_t s) {
  if (n <= 0) return;
  const std::int64_t chunks = chunks_of(n, kAdafactorChunk);
  factored_sumsq_kernel<<<static_cast<unsigned>(chunks), kThreads, 0, s>>>(grad, first, n, cols, gs,
                                                                         rf, cf, partials);
  add_partials_kernel<<<1, 32, 0, s>>>(partials, chunks, out);
}

void launch_adafactor_vector_sumsq(const float* grad, const float* v, std::int64_t n, float gs,
                                   float eps1, double beta2, double* partials, double* out,
                                   cudaStream_t s) {
  if (n <= 0) return;
  const std::int64_t chunks = chunks_of(n, kAdafactorChunk);
  vector_sumsq_kernel<<<static_cast<unsigned>(chunks), kLanes, 0, s>>>(
      grad, v, n, gs, eps1, static_cast<float>(beta2), static_cast<float>(1.0 - beta2), partials);
  add_partials_kernel<<<1, 32, 0, s>>>(partials, chunks, out);
}

void launch_adafactor_apply_factored(float* p, const float* grad, float* m, std::int64_t first,
                                     std::int64_t n, std::int64_t cols, const float* rf,
                                     const float* cf,
                                     const optim::detail::AdafactorApplyConsts& c, void* param16,
                                     DT hdt, cudaStream_t s) {
  if (n <= 0) return;
  apply_factored_kernel<<<grid_for(n, kThreads, kMaxBlocks), kThreads, 0, s>>>(
      p, grad, m, first, n, cols, rf, cf, c, param16, hdt);
}

void launch_adafactor_apply_vector(float* p, const float* grad, float* v, float* m,
                                   std::int64_t n, float eps1, float b2, float c2,
                                   const optim::detail::AdafactorApplyConsts& c, void* param16,
                                   DT hdt, cudaStream_t s) {
  if (n <= 0) return;
  apply_vector_kernel<<<grid_for(n, kThreads, kMaxBlocks), kThreads, 0, s>>>(
      p, grad, v, m, n, eps1, b2, c2, c, param16, hdt);
}

}  // namespace strata::cuda_ops
