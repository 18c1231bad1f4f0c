// Strata's own sgemm for CPUs with AVX-512 (OpenBLAS elsewhere): B packed in 32-column panels,
// A read in place, output rows split over the kernel threads. The sum over k for every output
// runs in a fixed order (k blocks in order, k in order inside), whatever the thread count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "framework/core/dtype.hpp"

namespace strata::cpu::detail {

struct Gemm;

// Width of a packed B panel.
constexpr int kGemmPanel = 32;

// C[rows, n] = alpha * op(A)[rows, kc] @ Bp + beta * C (+ bias[j] on column j when bias is not
// null), where op(A)(i, k) = trans_a ? A[k*lda + i] : A[i*lda + k] and Bp holds ceil(n/32) panels
// of [kc][32] floats, panel p starting at Bp + p * bstride (bstride >= kc * 32).
using GemmBlockFn = void (*)(const float* A, int lda, bool trans_a, const float* Bp, int bstride,
                             int kc, int rows, int n, float alpha, float beta, const float* bias,
                             float* C, int ldc);

// Packs panel p (columns 32p ... 32p+31, zero-padded past n) of op(B)[0:kc, 0:n] as [kc][32] at
// Bp + p * bstride; op(B)(k, j) = trans_b ? B[j*ldb + k] : B[k*ldb + j].
void pack_b_panel(const float* B, int ldb, bool trans_b, int kc, int n, int p, float* Bp,
                  int bstride);
// The same from 16-bit values (bf16 or f16), widened exactly.
void pack_b_panel16(const std::uint16_t* B, DType dtype, int ldb, bool trans_b, int kc, int n,
                    int p, float* Bp, int bstride);
// All ceil(n/32) panels.
void pack_b(const float* B, int ldb, bool trans_b, int kc, int n, float* Bp, int bstride);

// The AVX-512 block kernel, or null when not compiled in (the caller checks the CPU).
GemmBlockFn gemm_block_avx512();
// pack_b_panel16 for bf16 values on AVX-512 (widened 16 at a time in registers, a transposed
// panel through 16 x 16 register transposes instead of one store per value): the same panel,
// bitwise. Null when not compiled in; for the native path only (which has checked the CPU).
using PackBf16Fn = void (*)(const std::uint16_t* B, int ldb, bool trans_b, int kc, int n, int p,
                            float* Bp, int bstride);
PackBf16Fn pack_bf16_avx512();

// The native block kernel to use on this CPU, or null (then use BLAS). STRATA_CPU_GEMM=blas in
// the environment turns it off.
GemmBlockFn native_gemm_kernel();

// g on the kernel threads with the native kernel (which must be non-null).
void gemm_native(const Gemm& g, GemmBlockFn kernel);

}  // namespace strata::cpu::detail
