// AVX2 + FMA build of the row kernels (this file alone is compiled with -mavx2 -mfma; isa.cpp only
// calls it after checking the CPU). Everything here has internal linkage, so no AVX2 code can leak
// into the rest of the program through shared inline functions.
#include "framework/backend/cpu/row_kernels.hpp"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

namespace strata::cpu::detail {
namespace {

using vf = __m256;
constexpr std::size_t W = 8;
constexpr const char* kIsaName = "avx2";

inline __m256i tail_mask(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline vf vload(const float* p) {
  return _mm256_loadu_ps(p);
}
inline vf vloadn(const float* p, int n) {
  return _mm256_maskload_ps(p, tail_mask(n));
}
inline vf vloadn_fill(const float* p, int n, float fill) {
  const __m256i m = tail_mask(n);
  return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}
inline vf vkeep(vf v, int n) {
  return _mm256_and_ps(v, _mm256_castsi256_ps(tail_mask(n)));
}
inline void vstore(float* p, vf v) {
  _mm256_storeu_ps(p, v);
}
inline void vstoren(float* p, vf v, int n) {
  _mm256_maskstore_ps(p, tail_mask(n), v);
}
inline vf vset1(float x) {
  return _mm256_set1_ps(x);
}
inline vf vadd(vf a, vf b) {
  return _mm256_add_ps(a, b);
}
inline vf vsub(vf a, vf b) {
  return _mm256_sub_ps(a, b);
}
inline vf vmul(vf a, vf b) {
  return _mm256_mul_ps(a, b);
}
inline vf vdiv(vf a, vf b) {
  return _mm256_div_ps(a, b);
}
inline vf vfma(vf a, vf b, vf c) {
  return _mm256_fmadd_ps(a, b, c);
}
inline vf vmax(vf a, vf b) {
  return _mm256_max_ps(a, b);
}
inline vf vmin(vf a, vf b) {
  return _mm256_min_ps(a, b);
}
inline float vhsum(vf v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float vhmax(vf v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline vf vround(vf v) {
  return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
inline vf vpow2n(vf n) {
  const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
  return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
}
inline float s_sqrt(float x) {
  return __builtin_sqrtf(x);
}
inline float s_log(float x) {
  return __builtin_logf(x);
}

#include "framework/backend/cpu/row_kernels_impl.inc"

}  // namespace

const RowKernels* row_kernels_avx2() {
  return &kTable;
}

}  // namespace strata::cpu::detail

#else

namespace strata::cpu::detail {
const RowKernels* row_kernels_avx2() {
  return nullptr;
}
}  // namespace strata::cpu::detail

#endif
