// Whole-tensor reductions (reduce.hpp): the sum of squares in double with a fixed order, and the
// inf/NaN check. Both walk x in 16-byte chunks (4 f32 or 8 bf16/f16 values): chunk c is handled by
// global thread c mod (grid threads), read with one 16-byte vector load when x is 16-byte aligned
// and the chunk is whole, else element by element; the elements of a chunk are taken in index
// order either way, so the result never depends on x's alignment. The grid is a function of n and
// the dtype only (never of timing or occupancy): per-thread double partials, a fixed-order
// block_sum per block, then one block sums the block partials in order.
#include <cuda_runtime.h>

#include <cstdint>

#include "framework/backend/cuda/ops/common.cuh"
#include "framework/backend/cuda/ops/reduce.hpp"

namespace strata::cuda_ops {
namespace {

constexpr unsigned kThreads = 256;         // threads per block (a multiple of 32)
constexpr std::int64_t kMaxBlocks = 1024;  // partials of the sum of squares
constexpr unsigned kFinalThreads = 256;    // the single block summing the partials

// Elements per 16-byte chunk.
__host__ __device__ constexpr int per_chunk(DT dt) {
  return dt == DT::f32 ? 4 : 8;
}

// The grid: sum_squares_partials (workspace_sizes.hpp), the workspace the op layer and the plan
// size with it.
static_assert(kThreads == kSumSquaresThreads && kMaxBlocks == kSumSquaresMaxBlocks &&
                  per_chunk(DT::f32) == sum_squares_chunk_elems(DT::f32) &&
                  per_chunk(DT::bf16) == sum_squares_chunk_elems(DT::bf16) &&
                  per_chunk(DT::f16) == sum_squares_chunk_elems(DT::f16),
              "the sum of squares' grid is workspace_sizes.hpp's");
unsigned grid_for(std::int64_t n, DT dt) {
  return static_cast<unsigned>(sum_squares_partials(n, dt));
}

bool aligned16(const void* p) {
  return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0;
}

// A 16-bit value of dtype kT widened exactly to f32.
template <DT kT>
__device__ __forceinline__ float widen16(std::uint32_t h) {
  return kT == DT::bf16 ? bf16_to_f32(static_cast<std::uint16_t>(h))
                        : f16_to_f32(static_cast<std::uint16_t>(h));
}

// acc += f^2 in double. f^2 is exact in double (24-bit significands; no over/underflow), so a
// contraction into an FMA gives the same bits.
__device__ __forceinline__ void add_square(double& acc, float f) {
  const double d = static_cast<double>(f);
  acc += d * d;
}

// ---- sum of squares ---------------------------------------------------------------------------
// Block b writes partials[b] = the sum of its threads' partials (block_sum's fixed tree).
template <DT kT>
__global__ void __launch_bounds__(kThreads)
    sum_squares_kernel(const void* x, std::int64_t n, bool vec, double* partials) {
  __shared__ double scratch[32];
  constexpr int kPer = per_chunk(kT);
  const std::int64_t chunks = (n + kPer - 1) / kPer;
  double acc = 0.0;
  STRATA_GRID_STRIDE(c, chunks) {
    const std::int64_t i0 = c * kPer;
    if (vec && i0 + kPer <= n) {
      // x is 16-byte aligned, so chunk c is the c-th uint4. Words in memory order; for 16-bit
      // values the low half of a word is the lower index (little-endian).
      const uint4 w = static_cast<const uint4*>(x)[c];
      const std::uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        if constexpr (kT == DT::f32) {
          add_square(acc, bits_f32(words[k]));
        } else {
          add_square(acc, widen16<kT>(words[k] & 0xffffu));
          add_square(acc, widen16<kT>(words[k] >> 16));
        }
      }
    } else {
      for (int k = 0; k < kPer; ++k)
        if (i0 + k < n) add_square(acc, load(x, kT, i0 + k));
    }
  }
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// *result = the sum of partials[0, count): thread k sums k, k + kFinalThreads, ... in order, then
// block_sum's fixed tree.
__global__ void __launch_bounds__(kFinalThreads)
    sum_partials_kernel(const double* partials, std::int64_t count, double* result) {
  __shared__ double scratch[32];
  double acc = 0.0;
  for (std::int64_t i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) *result = acc;
}

// ---- inf / NaN ----------------------------------------------------------------------------------
// True when the exponent field of a value is all ones (±inf or NaN), checked on the stored bits.
template <DT kT>
__device__ __forceinline__ bool nonfinite16(std::uint32_t h) {
  constexpr std::uint32_t kMask = kT == DT::f16 ? 0x7c00u : 0x7f80u;
  return (h & kMask) == kMask;
}
__device__ __forceinline__ bool nonfinite32(std::uint32_t u) {
  return (u & 0x7f800000u) == 0x7f800000u;
}

template <DT kT>
__global__ void __launch_bounds__(kThreads)
    has_inf_or_nan_kernel(const void* x, std::int64_t n, bool vec, int* flag) {
  constexpr int kPer = per_chunk(kT);
  const std::int64_t chunks = (n + kPer - 1) / kPer;
  bool found = false;
  STRATA_GRID_STRIDE(c, chunks) {
    const std::int64_t i0 = c * kPer;
    if (vec && i0 + kPer <= n) {
      const uint4 w = static_cast<const uint4*>(x)[c];
      const std::uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        if constexpr (kT == DT::f32)
          found |= nonfinite32(words[k]);
        else
          found |= nonfinite16<kT>(words[k] & 0xffffu) || nonfinite16<kT>(words[k] >> 16);
      }
    } else {
      for (int k = 0; k < kPer; ++k) {
        if (i0 + k >= n) break;
        if constexpr (kT == DT::f32)
          found |= nonfinite32(static_cast<const std::uint32_t*>(x)[i0 + k]);
        else
          found |= nonfinite16<kT>(static_cast<const std::uint16_t*>(x)[i0 + k]);
      }
    }
  }
  // Every writer stores the same 1: the result does not depend on which or how many.
  if (found) *flag = 1;
}

}  // namespace

void launch_sum_squares(const void* x, DT dt, std::int64_t n, double* partials, double* result,
                        cudaStream_t s) {
  if (n < 0) n = 0;
  const unsigned blocks = grid_for(n, dt);  // n == 0: one block writing a 0 partial
  const bool vec = aligned16(x);
  switch (dt) {
    case DT::bf16:
      sum_squares_kernel<DT::bf16><<<blocks, kThreads, 0, s>>>(x, n, vec, partials);
      break;
    case DT::f16:
      sum_squares_kernel<DT::f16><<<blocks, kThreads, 0, s>>>(x, n, vec, partials);
      break;
    default:
      sum_squares_kernel<DT::f32><<<blocks, kThreads, 0, s>>>(x, n, vec, partials);
      break;
  }
  sum_partials_kernel<<<1, kFinalThreads, 0, s>>>(partials, blocks, result);
}

void launch_has_inf_or_nan(const void* x, DT dt, std::int64_t n, int* flag, cudaStream_t s) {
  if (n <= 0) return;
  const unsigned blocks = grid_for(n, dt);
  const bool vec = aligned16(x);
  switch (dt) {
    case DT::bf16:
      has_inf_or_nan_kernel<DT::bf16><<<blocks, kThreads, 0, s>>>(x, n, vec, flag);
      break;
    case DT::f16:
      has_inf_or_nan_kernel<DT::f16><<<blocks, kThreads, 0, s>>>(x, n, vec, flag);
      break;
    default:
      has_inf_or_nan_kernel<DT::f32><<<blocks, kThreads, 0, s>>>(x, n, vec, flag);
      break;
  }
}

}  // namespace strata::cuda_ops
