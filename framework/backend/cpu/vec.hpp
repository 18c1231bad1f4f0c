// Vector traits the CPU kernels are written against (row kernels, optimizer updates): one struct
// per instruction set with the same static functions, so each kernel body is written once, as a
// template over the traits, and instantiated by a file compiled for that instruction set.
// Include it only from such files (isa_*.cpp): the AVX2 traits exist when the file is built with
// -mavx2 -mfma, the AVX-512 ones with -mavx512f (and -mavx2 -mfma; their reductions -mavx512dq). Everything here has internal linkage,
// so no code built for one instruction set can be picked by the linker for another's caller; for
// the same reason the scalar maths are compiler builtins, not the <cmath> inline functions.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace strata::cpu::simd {
namespace {

// Members of every traits struct V (vf = V::vf, W = V::W lanes):
//   load, loadn (lanes >= n zero), loadn_fill (lanes >= n = fill), keep (zero lanes >= n),
//   store, storen (lanes < n only), set1, add, sub, mul, div, sqrt, max, min,
//   fma (fused a*b+c, one rounding), madd (a*b+c, fused where the instruction set has FMA),
//   hsum, hmax (lane reductions in a fixed order), round (to nearest even), pow2n (2^n for
//   integral n), and name.

// The members whose only difference between AVX2 and AVX-512 is the intrinsics' prefix.
#define STRATA_VEC_COMMON(P, VF)                                \
  static VF load(const float* p) { return P##_loadu_ps(p); }  \
  static void store(float* p, VF v) { P##_storeu_ps(p, v); }  \
  static VF set1(float x) { return P##_set1_ps(x); }          \
  static VF add(VF a, VF b) { return P##_add_ps(a, b); }      \
  static VF sub(VF a, VF b) { return P##_sub_ps(a, b); }      \
  static VF mul(VF a, VF b) { return P##_mul_ps(a, b); }      \
  static VF div(VF a, VF b) { return P##_div_ps(a, b); }      \
  static VF sqrt(VF a) { return P##_sqrt_ps(a); }             \
  static VF max(VF a, VF b) { return P##_max_ps(a, b); }      \
  static VF min(VF a, VF b) { return P##_min_ps(a, b); }      \
  static VF fma(VF a, VF b, VF c) { return P##_fmadd_ps(a, b, c); } \
  static VF madd(VF a, VF b, VF c) { return fma(a, b, c); }

// One lane: the portable fallback, and the reference the vector paths are checked against.
struct Scalar {
  using vf = float;
  static constexpr std::size_t W = 1;
  static constexpr const char* name = "generic";
  static vf load(const float* p) { return *p; }
  static vf loadn(const float* p, int n) { return n > 0 ? *p : 0.0f; }
  static vf loadn_fill(const float* p, int n, float fill) { return n > 0 ? *p : fill; }
  static vf keep(vf v, int n) { return n > 0 ? v : 0.0f; }
  static void store(float* p, vf v) { *p = v; }
  static void storen(float* p, vf v, int n) {
    if (n > 0) *p = v;
  }
  static vf set1(float x) { return x; }
  static vf add(vf a, vf b) { return a + b; }
  static vf sub(vf a, vf b) { return a - b; }
  static vf mul(vf a, vf b) { return a * b; }
  static vf div(vf a, vf b) { return a / b; }
  static vf sqrt(vf a) { return __builtin_sqrtf(a); }
  static vf max(vf a, vf b) { return a > b ? a : b; }
  static vf min(vf a, vf b) { return a < b ? a : b; }
  static vf fma(vf a, vf b, vf c) { return __builtin_fmaf(a, b, c); }
  static vf madd(vf a, vf b, vf c) { return a * b + c; }  // no FMA unit assumed: two roundings
  static float hsum(vf v) { return v; }
  static float hmax(vf v) { return v; }
  static vf round(vf v) { return __builtin_nearbyintf(v); }
  static vf pow2n(vf n) {
    const auto e = static_cast<std::uint32_t>(static_cast<std::int32_t>(n) + 127);
    return __builtin_bit_cast(float, e << 23);
  }
};

#if defined(__AVX2__) && defined(__FMA__)
// 8 lanes; tails through AVX2's masked loads and stores.
struct Avx2 {
  using vf = __m256;
  static constexpr std::size_t W = 8;
  static constexpr const char* name = "avx2";
  STRATA_VEC_COMMON(_mm256, __m256)
  static __m256i tail_mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static vf loadn(const float* p, int n) { return _mm256_maskload_ps(p, tail_mask(n)); }
  static vf loadn_fill(const float* p, int n, float fill) {
    const __m256i m = tail_mask(n);
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m),
                            _mm256_castsi256_ps(m));
  }
  static vf keep(vf v, int n) { return _mm256_and_ps(v, _mm256_castsi256_ps(tail_mask(n))); }
  static void storen(float* p, vf v, int n) { _mm256_maskstore_ps(p, tail_mask(n), v); }
  // Halves, then pairs, then the last two: (0+4 + 2+6) + (1+5 + 3+7).
  static float hsum(vf v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float hmax(vf v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static vf round(vf v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static vf pow2n(vf n) {
    const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  }
};
#endif

#if defined(__AVX512F__)
// 16 lanes; tails through mask registers. The reductions (AVX512DQ) fold to 8 lanes and finish as
// AVX2 does.
struct Avx512 {
  using vf = __m512;
  static constexpr std::size_t W = 16;
  static constexpr const char* name = "avx512";
  STRATA_VEC_COMMON(_mm512, __m512)
  static __mmask16 tail_mask(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static vf loadn(const float* p, int n) { return _mm512_maskz_loadu_ps(tail_mask(n), p); }
  static vf loadn_fill(const float* p, int n, float fill) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), tail_mask(n), p);
  }
  static vf keep(vf v, int n) { return _mm512_maskz_mov_ps(tail_mask(n), v); }
  static void storen(float* p, vf v, int n) { _mm512_mask_storeu_ps(p, tail_mask(n), v); }
#if defined(__AVX512DQ__)
  static float hsum(vf v) {
    return Avx2::hsum(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
  }
  static float hmax(vf v) {
    return Avx2::hmax(_mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
  }
#endif
  static vf round(vf v) {
    return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static vf pow2n(vf n) {
    const __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
  }
};
#endif

#undef STRATA_VEC_COMMON

}  // namespace
}  // namespace strata::cpu::simd
