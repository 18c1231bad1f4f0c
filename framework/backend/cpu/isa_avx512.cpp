// AVX-512 build of the row kernels (this file alone is compiled with -mavx512f; isa.cpp only
// calls it after checking the CPU). Everything here has internal linkage, so no AVX-512 code can
// leak into the rest of the program through shared inline functions.
#include "framework/backend/cpu/row_kernels.hpp"

#if defined(__AVX512F__)
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _mm512_undefined_* helpers.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

namespace strata::cpu::detail {
namespace {

using vf = __m512;
constexpr std::size_t W = 16;
constexpr const char* kIsaName = "avx512";

inline __mmask16 tail_mask(int n) {
  return static_cast<__mmask16>((1u << n) - 1u);
}
inline vf vload(const float* p) {
  return _mm512_loadu_ps(p);
}
inline vf vloadn(const float* p, int n) {
  return _mm512_maskz_loadu_ps(tail_mask(n), p);
}
inline vf vloadn_fill(const float* p, int n, float fill) {
  return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), tail_mask(n), p);
}
inline vf vkeep(vf v, int n) {
  return _mm512_maskz_mov_ps(tail_mask(n), v);
}
inline void vstore(float* p, vf v) {
  _mm512_storeu_ps(p, v);
}
inline void vstoren(float* p, vf v, int n) {
  _mm512_mask_storeu_ps(p, tail_mask(n), v);
}
inline vf vset1(float x) {
  return _mm512_set1_ps(x);
}
inline vf vadd(vf a, vf b) {
  return _mm512_add_ps(a, b);
}
inline vf vsub(vf a, vf b) {
  return _mm512_sub_ps(a, b);
}
inline vf vmul(vf a, vf b) {
  return _mm512_mul_ps(a, b);
}
inline vf vdiv(vf a, vf b) {
  return _mm512_div_ps(a, b);
}
inline vf vfma(vf a, vf b, vf c) {
  return _mm512_fmadd_ps(a, b, c);
}
inline vf vmax(vf a, vf b) {
  return _mm512_max_ps(a, b);
}
inline vf vmin(vf a, vf b) {
  return _mm512_min_ps(a, b);
}
inline float vhsum(vf v) {
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float vhmax(vf v) {
  const __m256 h = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline vf vround(vf v) {
  return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
inline vf vpow2n(vf n) {
  const __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
  return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
}
inline float s_sqrt(float x) {
  return __builtin_sqrtf(x);
}
inline float s_log(float x) {
  return __builtin_logf(x);
}

#include "framework/backend/cpu/row_kernels_impl.inc"

}  // namespace

const RowKernels* row_kernels_avx512() {
  return &kTable;
}

}  // namespace strata::cpu::detail

#else

namespace strata::cpu::detail {
const RowKernels* row_kernels_avx512() {
  return nullptr;
}
}  // namespace strata::cpu::detail

#endif
