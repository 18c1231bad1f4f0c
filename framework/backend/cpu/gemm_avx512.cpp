// AVX-512 sgemm macro-kernel: C[rows, n] = alpha * op(A)[rows, kc] @ Bp + beta * C, with B packed
// in 32-column panels. Built with -mavx512f (this file only) and called only after isa.cpp has
// checked the CPU. Everything but the exported entry point has internal linkage.
#include "framework/backend/cpu/gemm_native.hpp"

#if defined(__AVX512F__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

namespace strata::cpu::detail {
namespace {

constexpr int kNR = kGemmPanel;  // 32 columns = 2 zmm
constexpr int kMR = 12;          // rows per micro-tile: 24 accumulators

inline __mmask16 cols_mask(int n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF)
                 : static_cast<__mmask16>((1u << (n > 0 ? n : 0)) - 1u);
}

// C tile [R, ncols] from A rows (op(A)(r, k)) and one packed panel Bp[kc][32].
template <int R, bool TransA>
inline void micro(const float* A, int lda, const float* Bp, int kc, float* C, int ldc, int ncols,
                  float alpha, float beta, const float* bias) {
  __m512 c0[R], c1[R];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) c0[r] = c1[r] = _mm512_setzero_ps();
  for (int k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_loadu_ps(Bp + static_cast<std::size_t>(k) * kNR);
    const __m512 b1 = _mm512_loadu_ps(Bp + static_cast<std::size_t>(k) * kNR + 16);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const float a = TransA ? A[static_cast<std::size_t>(k) * lda + r]
                             : A[static_cast<std::size_t>(r) * lda + k];
      const __m512 av = _mm512_set1_ps(a);
      c0[r] = _mm512_fmadd_ps(av, b0, c0[r]);
      c1[r] = _mm512_fmadd_ps(av, b1, c1[r]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  const __mmask16 m0 = cols_mask(ncols), m1 = cols_mask(ncols - 16);
  const __m512 bias0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
  const __m512 bias1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    float* c = C + static_cast<std::size_t>(r) * ldc;
    __m512 x0 = _mm512_mul_ps(va, c0[r]), x1 = _mm512_mul_ps(va, c1[r]);
    if (beta == 1.0f) {
      x0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, c), x0);
      x1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, c + 16), x1);
    } else if (beta != 0.0f) {
      x0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, c), x0);
      x1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, c + 16), x1);
    }
    if (bias) {
      x0 = _mm512_add_ps(x0, bias0);
      x1 = _mm512_add_ps(x1, bias1);
    }
    _mm512_mask_storeu_ps(c, m0, x0);
    _mm512_mask_storeu_ps(c + 16, m1, x1);
  }
}

template <bool TransA>
void block(const float* A, int lda, const float* Bp, int bstride, int kc, int rows, int n,
           float alpha, float beta, const float* bias, float* C, int ldc) {
  for (int i = 0; i < rows; i += kMR) {
    const int r = rows - i < kMR ? rows - i : kMR;
    const float* a = TransA ? A + i : A + static_cast<std::size_t>(i) * lda;
    float* c = C + static_cast<std::size_t>(i) * ldc;
    for (int j = 0; j < n; j += kNR) {
      const float* bp = Bp + static_cast<std::size_t>(j / kNR) * bstride;
      const int nc = n - j < kNR ? n - j : kNR;
      const float* bj = bias ? bias + j : nullptr;
      switch (r) {
        case 12:
          micro<12, TransA>(a, lda, bp, kc, c + j, ldc, nc, alpha, beta, bj);
          break;
        case 11:
          micro<11, TransA>(a, lda, bp, kc, c + j, ldc, nc, alpha, beta, bj);
          break;
        case 10:
          micro<10, TransA>(a, lda, bp, kc, c + j, ldc, nc, alpha, beta, bj);
          break;
        case 9:
          micro<9, TransA>(a, lda, bp, kc, c + j, ldc, nc, alpha, beta, bj);
          break;
        case 8:
          micro<8, TransA>(a, lda, bp, kc, c + j, ldc, nc, alpha, beta, bj);
          break;
        case 7:
          micro<7, TransA>(a, lda, bp, kc, c + j, ldc, nc, alpha, beta, bj);
          break;
        case 6:
          micro<6, TransA>(a, lda, bp, kc, c + j, ldc, nc, alpha, beta, bj);
          break;
        case 5:
          micro<5, TransA>(a, lda, bp, kc, c + j, ldc, nc, alpha, beta, bj);
          break;
        case 4:
          micro<4, TransA>(a, lda, bp, kc, c + j, ldc, nc, alpha, beta, bj);
          break;
        case 3:
          micro<3, TransA>(a, lda, bp, kc, c + j, ldc, nc, alpha, beta, bj);
          break;
        case 2:
          micro<2, TransA>(a, lda, bp, kc, c + j, ldc, nc, alpha, beta, bj);
          break;
        default:
          micro<1, TransA>(a, lda, bp, kc, c + j, ldc, nc, alpha, beta, bj);
          break;
      }
    }
  }
}

void gemm_block_impl(const float* A, int lda, bool trans_a, const float* Bp, int bstride, int kc,
                     int rows, int n, float alpha, float beta, const float* bias, float* C,
                     int ldc) {
  if (trans_a) {
    block<true>(A, lda, Bp, bstride, kc, rows, n, alpha, beta, bias, C, ldc);
  } else {
    block<false>(A, lda, Bp, bstride, kc, rows, n, alpha, beta, bias, C, ldc);
  }
}

}  // namespace

GemmBlockFn gemm_block_avx512() {
  return &gemm_block_impl;
}

}  // namespace strata::cpu::detail

#else

namespace strata::cpu::detail {
GemmBlockFn gemm_block_avx512() {
  return nullptr;
}
}  // namespace strata::cpu::detail

#endif
