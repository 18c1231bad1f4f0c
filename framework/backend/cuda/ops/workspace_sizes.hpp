// The workspace the CUDA ops allocate, as pure host functions of the shapes and dtypes: the CUDA
// op layer (*_op.cpp, the launchers of the .cu files) sizes its workspaces with them, and the
// meta-CUDA op table (framework/backend/ops/meta_cuda_table.cpp), on which the memory planner
// runs a GPU job's step, charges the same sizes, so the two cannot drift. Plain C++: no CUDA
// header, no Tensor, no fmt (the .cu files include it, and so do builds without the toolkit).
// tests/cuda_emu/test_meta_cuda.cpp checks, op by op and dtype by dtype, that the meta-CUDA table
// charges what the op layer allocates (on the CPU emulator), and gemm_plan directly.
#pragma once

#include <cstddef>
#include <cstdint>

#include "framework/backend/cuda/ops/half_hd.hpp"

namespace strata::cuda_ops {

// ---- products (gemm_op.cpp) ----
// How product() runs C[M,N] = alpha op(A) op(B) + beta C (+ bias) for operands of dtypes a, b, c
// (bias: has_bias and its dtype). `bf16_products`: the device has bf16 kernels (compute
// capability 8.0 or later).
struct GemmPlan {
  bool direct = false;  // the 16-bit product runs on A and B as they are
  bool widen_a = false;  // A is widened into an f32 workspace (kept for the op's other products)
  bool widen_b = false;
  bool f32_d = false;  // D is an f32 workspace of C's shape (released after the product)
};
inline GemmPlan gemm_plan(DT a, DT b, DT c, float beta, bool has_bias, DT bias,
                          bool bf16_products) {
  GemmPlan p;
  p.direct = a == b && a != DT::f32 && (a == DT::f16 || bf16_products);
  const DT t = p.direct ? a : DT::f32;
  p.widen_a = !p.direct && a != DT::f32;
  p.widen_b = !p.direct && b != DT::f32;
  // C itself when cuBLASLt writes C's dtype from t operands, a bias can be added exactly in it and
  // a 16-bit C is not read (beta 0: see product()); else an f32 workspace.
  const bool c_is_d = c == DT::f32 || (c == t && beta == 0.0f && (!has_bias || bias == c));
  p.f32_d = !c_is_d;
  return p;
}

// How launch_column_sums (linear_backward's db) splits the rows: `strips` strips of
// `rows_per_strip` rows (the last one shorter). A function of the shape only, so that the order
// of the sums never changes. Its scratch: strips * cols floats.
struct ColumnSumPlan {
  std::int64_t strips = 0;
  std::int64_t rows_per_strip = 0;
};
inline ColumnSumPlan column_sum_plan(std::int64_t rows, std::int64_t cols) {
  ColumnSumPlan p;
  if (rows <= 0 || cols <= 0) return p;
  const std::int64_t col_blocks = (cols + 31) / 32;
  // About 1024 blocks in all, at most 1024 strips, at least 64 rows a strip.
  std::int64_t strips = 1024 / col_blocks;
  if (strips < 1) strips = 1;
  const std::int64_t max_strips = (rows + 63) / 64;
  if (strips > max_strips) strips = max_strips;
  p.rows_per_strip = (rows + strips - 1) / strips;
  p.strips = (rows + p.rows_per_strip - 1) / p.rows_per_strip;
  return p;
}

// ---- layernorm backward (layernorm.cu) ----
// Rows per strip of the dw/db reduction: at least 32, and at most 256 strips (as the CPU).
inline std::int64_t layernorm_strip_rows(std::int64_t N) {
  const std::int64_t r = (N + 255) / 256;
  return r < 32 ? 32 : r;
}
inline std::int64_t layernorm_strip_count(std::int64_t N) {
  return (N + layernorm_strip_rows(N) - 1) / layernorm_strip_rows(N);
}
// The f32 workspace launch_layernorm_backward needs for dw/db: this many floats (0 for N = 0).
inline std::int64_t layernorm_backward_partial_floats(std::int64_t N, std::int64_t C) {
  return N <= 0 || C <= 0 ? 0 : layernorm_strip_count(N) * 2 * C;
}

// ---- reductions (reduce.cu) ----
inline constexpr std::int64_t kSumSquaresThreads = 256;    // threads per block
inline constexpr std::int64_t kSumSquaresMaxBlocks = 1024;  // partials of the sum of squares
// Elements per 16-byte chunk of the sum of squares and the inf/NaN check.
inline constexpr int sum_squares_chunk_elems(DT dt) { return dt == DT::f32 ? 4 : 8; }
// How many doubles of device workspace launch_sum_squares needs for its block partials (its grid:
// a function of n and the dtype only; at least 1).
inline std::int64_t sum_squares_partials(std::int64_t n, DT dt) {
  const int per = sum_squares_chunk_elems(dt);
  const std::int64_t chunks = (n + per - 1) / per;
  const std::int64_t b = (chunks + kSumSquaresThreads - 1) / kSumSquaresThreads;
  return b < 1 ? 1 : (b > kSumSquaresMaxBlocks ? kSumSquaresMaxBlocks : b);
}

// ---- Adafactor's and LAMB's sums (adafactor.cu, lamb.cu) ----
inline constexpr std::int64_t kAdafactorChunk = 16384;  // optim::detail::kChunk
inline constexpr std::int64_t kSumSqChunk = 32768;      // backend/cpu/elementwise.cpp's kChunk
inline std::int64_t chunk_count(std::int64_t n, std::int64_t chunk) {
  const std::int64_t c = (n + chunk - 1) / chunk;
  return c < 1 ? 1 : c;
}
// Device workspace of the sums, in doubles (one partial per chunk; at least 1).
inline std::int64_t adafactor_partials(std::int64_t n) { return chunk_count(n, kAdafactorChunk); }
inline std::int64_t sum_squares_add_partials(std::int64_t n) { return chunk_count(n, kSumSqChunk); }
inline std::int64_t lamb_partials(std::int64_t n) { return 2 * chunk_count(n, kAdafactorChunk); }

// ---- the 8-bit optimizers (optimizer.cu) ----
// Up to this many decay runs travel by value among the kernel's arguments; more go through a
// workspace of 8 bytes a run.
inline constexpr int kQ8InlineRuns = 32;
inline std::int64_t q8_runs_workspace_bytes(std::int64_t runs) {
  return runs > kQ8InlineRuns ? runs * 8 : 0;
}

// ---- embedding backward (embedding.cu) ----
// The dwte scratch: keys in/out (u32) and positions in/out (i32), each n long and 256-byte
// aligned, then CUB's radix sort's temporary storage (`cub_bytes`, which only the CUDA runtime
// can tell: embedding_dwte_scratch_bytes asks CUB).
inline std::size_t align256(std::size_t b) { return (b + 255) / 256 * 256; }
inline std::size_t embedding_dwte_array_bytes(std::int64_t n) {
  return align256(static_cast<std::size_t>(n) * 4);
}
inline std::size_t embedding_dwte_scratch_total(std::int64_t n, std::size_t cub_bytes) {
  return 4 * embedding_dwte_array_bytes(n) + cub_bytes;
}
// An upper bound of CUB's temporary storage for the stable pair sort of n u32 keys and i32 values
// over `key_bits` bits, for the plan when no GPU can be asked (meta_cuda_table.cpp): CUB's
// DeviceRadixSort without a DoubleBuffer allocates alternate key and value arrays (n each,
// 256-byte aligned) and, for its one-sweep passes, per-pass digit bins and per-tile look-back
// counters; the bins and counters are bounded here by 8 bytes per digit (256 digits a pass, up to
// 4 passes of 8 bits) per 256 items (the smallest tile CUB's policies use) plus one tile, and 4
// KiB of alignment slack. Measured on a GPU it should be no smaller than CUB's own figure
// (tests/unit/gpu checks it when a GPU is there).
inline std::size_t embedding_dwte_cub_bound(std::int64_t n, int key_bits) {
  const std::size_t un = static_cast<std::size_t>(n < 0 ? 0 : n);
  const std::size_t passes = static_cast<std::size_t>((key_bits + 7) / 8 < 1 ? 1 : (key_bits + 7) / 8);
  const std::size_t tiles = (un + 255) / 256 + 1;
  return 2 * align256(un * 4) + passes * 256 * 8 * (tiles + 1) + 4096;
}
// The bits of the sort's keys for a table of vocab_rows rows (keys 0 .. vocab_rows, the last one
// for positions outside the slice): embedding.cu's key_bits.
inline int embedding_key_bits(std::int64_t vocab_rows) {
  int bits = 1;
  while (bits < 32 && (std::int64_t{1} << bits) <= vocab_rows) ++bits;
  return bits;
}

}  // namespace strata::cuda_ops
