// AVX-512 sgemm macro-kernel: C[rows, n] = alpha * op(A)[rows, kc] @ Bp + beta * C, with B packed
// in 32-column panels. Built with -mavx512f (this file only) and called only after isa.cpp has
// checked the CPU. Everything but the exported entry point has internal linkage.
#include "framework/backend/cpu/gemm_native.hpp"

#if defined(__AVX512F__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "framework/core/half.hpp"

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

// 16 bf16 values widened exactly (the top half of an f32).
inline __m512 widen16(const std::uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// r[i] holds row i (16 floats); afterwards r[j] holds column j.
inline void transpose16(__m512 r[16]) {
  __m512 t[16], u[16], v[16];
  for (int p = 0; p < 8; ++p) {
    t[2 * p] = _mm512_unpacklo_ps(r[2 * p], r[2 * p + 1]);
    t[2 * p + 1] = _mm512_unpackhi_ps(r[2 * p], r[2 * p + 1]);
  }
  auto pd = [](__m512 x) { return _mm512_castps_pd(x); };
  for (int g = 0; g < 4; ++g) {
    const int b = 4 * g;
    u[b] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(t[b]), pd(t[b + 2])));
    u[b + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(t[b]), pd(t[b + 2])));
    u[b + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(t[b + 1]), pd(t[b + 3])));
    u[b + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(t[b + 1]), pd(t[b + 3])));
  }
  for (int j = 0; j < 4; ++j) {
    v[j] = _mm512_shuffle_f32x4(u[j], u[j + 4], 0x88);
    v[j + 4] = _mm512_shuffle_f32x4(u[j], u[j + 4], 0xdd);
    v[j + 8] = _mm512_shuffle_f32x4(u[j + 8], u[j + 12], 0x88);
    v[j + 12] = _mm512_shuffle_f32x4(u[j + 8], u[j + 12], 0xdd);
  }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(v[j], v[j + 8], 0x88);
    r[j + 8] = _mm512_shuffle_f32x4(v[j], v[j + 8], 0xdd);
  }
}

// Panel p of op(B)[0:kc, 0:n] as [kc][32] floats (zero past n), B bf16; see pack_b_panel16.
void pack_bf16_panel(const std::uint16_t* B, int ldb, bool trans_b, int kc, int n, int p, float* Bp,
                     int bstride) {
  float* dst = Bp + static_cast<std::size_t>(p) * bstride;
  const int j0 = p * kNR;
  const int w = std::min(kNR, n - j0);
  if (!trans_b) {  // B(k, j) = B[k*ldb + j]: each panel row is 32 consecutive values
    for (int k = 0; k < kc; ++k) {
      const std::uint16_t* s = B + static_cast<std::size_t>(k) * ldb + j0;
      float* d = dst + static_cast<std::size_t>(k) * kNR;
      if (w == kNR) {
        _mm512_storeu_ps(d, widen16(s));
        _mm512_storeu_ps(d + 16, widen16(s + 16));
      } else {
        for (int j = 0; j < kNR; ++j) d[j] = j < w ? bf16_to_f32(s[j]) : 0.0f;
      }
    }
    return;
  }
  // B(k, j) = B[j*ldb + k]: 16 columns by 16 values of k at a time, transposed in registers.
  const int k16 = kc / 16 * 16;
  for (int h = 0; h < kNR; h += 16) {
    const int rows = std::max(0, std::min(16, w - h));  // columns h.. of this half that exist
    for (int k = 0; k < k16; k += 16) {
      __m512 r[16];
      for (int i = 0; i < 16; ++i) {
        const std::uint16_t* col = B + static_cast<std::size_t>(j0 + h + i) * ldb + k;
        r[i] = i < rows ? widen16(col) : _mm512_setzero_ps();
      }
      transpose16(r);
      for (int i = 0; i < 16; ++i)
        _mm512_storeu_ps(dst + static_cast<std::size_t>(k + i) * kNR + h, r[i]);
    }
    for (int k = k16; k < kc; ++k)
      for (int i = 0; i < 16; ++i)
        dst[static_cast<std::size_t>(k) * kNR + h + i] =
            i < rows ? bf16_to_f32(B[static_cast<std::size_t>(j0 + h + i) * ldb + k]) : 0.0f;
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

PackBf16Fn pack_bf16_avx512() { return &pack_bf16_panel; }

}  // namespace strata::cpu::detail

#else

namespace strata::cpu::detail {
GemmBlockFn gemm_block_avx512() {
  return nullptr;
}
PackBf16Fn pack_bf16_avx512() { return nullptr; }
}  // namespace strata::cpu::detail

#endif
