// Matrix products for the CPU kernels: Strata's AVX-512 sgemm (gemm_native.hpp) where the CPU has
// it, else single-threaded OpenBLAS calls on output tiles whose layout depends only on the shapes.
// Either way the kernel threads do the work (OpenBLAS never competes with OpenMP for cores) and
// results never depend on the thread count.
#pragma once

#include <cstdint>
#include <vector>

#include "framework/core/dtype.hpp"

namespace strata::cpu::detail {

// C[M,N] = alpha * op(A) @ op(B) + beta * C, row-major with explicit leading dimensions.
struct Gemm {
  bool trans_a = false, trans_b = false;
  int M = 0, N = 0, K = 0;
  float alpha = 1.0f;
  const float* A = nullptr;
  int lda = 0;
  const float* B = nullptr;
  // Instead of B: 16-bit values (b16_dtype bf16 or f16) with the same layout, widened exactly to
  // f32 where the product reads them (packing, or per BLAS tile): bitwise the product with an f32
  // copy of B, without making one.
  const std::uint16_t* B16 = nullptr;
  DType b16_dtype = DType::bf16;
  int ldb = 0;
  float beta = 0.0f;
  float* C = nullptr;
  int ldc = 0;
  const float* bias = nullptr;  // with beta == 0 only: C[i, j] += bias[j]; null = none
};

// The part C[m0:m1, n0:n1] of job `job` in a list of jobs.
struct GemmTile {
  int job, m0, m1, n0, n1;
};

// Computes one tile on the calling thread with BLAS (ignores g.bias). Call
// use_single_threaded_blas() once before spreading tiles over threads.
void gemm_tile(const Gemm& g, int m0, int m1, int n0, int n1);
// The whole product on the calling thread.
inline void gemm_serial(const Gemm& g) {
  gemm_tile(g, 0, g.M, 0, g.N);
}
// Appends the tiles of g (a function of its shape only) to `tiles`, tagged with `job`.
void plan_tiles(int job, const Gemm& g, std::vector<GemmTile>& tiles);
// The whole product (bias included) on the kernel threads: Strata's AVX-512 kernel where the CPU
// has it, else BLAS tiles.
void gemm(const Gemm& g);

}  // namespace strata::cpu::detail
