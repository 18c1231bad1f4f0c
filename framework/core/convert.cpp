// Bulk dtype conversion. f32 ↔ bf16/f16 are vectorised (AVX-512, AVX2+F16C) with runtime
// dispatch, bitwise identical to the scalar reference in half.hpp; other pairs go element-wise.
#include "framework/core/convert.hpp"

#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string_view>
#include <type_traits>

#include "framework/core/error.hpp"
#include "framework/core/half.hpp"

#if defined(__x86_64__) || defined(__i386__)
#define STRATA_CONVERT_X86 1
#include <immintrin.h>
#endif

namespace strata {

namespace {

// ---- scalar reference --------------------------------------------------------------------------

void f32_to_bf16_scalar(const float* s, std::uint16_t* d, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = f32_to_bf16(s[i]);
}
void bf16_to_f32_scalar(const std::uint16_t* s, float* d, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = bf16_to_f32(s[i]);
}
void f32_to_f16_scalar(const float* s, std::uint16_t* d, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = f32_to_f16(s[i]);
}
void f16_to_f32_scalar(const std::uint16_t* s, float* d, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = f16_to_f32(s[i]);
}

#ifdef STRATA_CONVERT_X86

// ---- AVX-512 (F + BW): 16 lanes, masked tails ---------------------------------------------------

#define STRATA_AVX512 __attribute__((target("avx512f,avx512bw")))
// GCC 12's avx512fintrin.h initialises its "undefined" vectors from themselves, which
// -Wmaybe-uninitialized reports at every inlined intrinsic; the warning is spurious here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// RNE of the f32 bits to bf16 bits in the low 16 bits of each lane; NaN → (bits >> 16) | 0x40.
STRATA_AVX512 inline __m512i bf16_round_512(__m512i u) {
  const __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(abs, _mm512_set1_epi32(0x7f800000));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  const __m512i q = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_mask_blend_epi32(nan, _mm512_srli_epi32(r, 16), q);
}

STRATA_AVX512 void f32_to_bf16_avx512(const float* s, std::uint16_t* d, std::size_t n) {
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i a = bf16_round_512(_mm512_castps_si512(_mm512_loadu_ps(s + i)));
    const __m512i b = bf16_round_512(_mm512_castps_si512(_mm512_loadu_ps(s + i + 16)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm512_cvtepi32_epi16(a));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i + 16), _mm512_cvtepi32_epi16(b));
  }
  for (; i < n; i += 16) {
    const std::size_t k = n - i < 16 ? n - i : 16;
    const __mmask16 m = static_cast<__mmask16>((1u << k) - 1u);
    const __m512i a = bf16_round_512(_mm512_castps_si512(_mm512_maskz_loadu_ps(m, s + i)));
    _mm512_mask_cvtepi32_storeu_epi16(d + i, m, a);
  }
}

STRATA_AVX512 void bf16_to_f32_avx512(const std::uint16_t* s, float* d, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    _mm512_storeu_si512(d + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  if (i < n) {
    const std::size_t k = n - i;
    const __mmask16 m = static_cast<__mmask16>((1u << k) - 1u);
    const __m256i h = _mm512_castsi512_si256(_mm512_maskz_loadu_epi16(m, s + i));
    _mm512_mask_storeu_ps(d + i, m,
                          _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
  }
}

STRATA_AVX512 void f32_to_f16_avx512(const float* s, std::uint16_t* d, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), h);
  }
  if (i < n) {
    const std::size_t k = n - i;
    const __mmask16 m = static_cast<__mmask16>((1u << k) - 1u);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, s + i), _MM_FROUND_TO_NEAREST_INT);
    _mm512_mask_storeu_epi16(d + i, static_cast<__mmask32>(m), _mm512_castsi256_si512(h));
  }
}

// vcvtph2ps quiets signalling NaNs (sets f32 bit 22); the scalar reference keeps the payload
// as is, so clear that bit again in lanes whose input was a signalling NaN.
STRATA_AVX512 inline __m512 f16_to_f32_16(__m256i h) {
  const __m512i w = _mm512_cvtepu16_epi32(h);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(w, _mm512_set1_epi32(0x7fff)),
                                                _mm512_set1_epi32(0x7c00));
  const __mmask16 snan = nan & _mm512_testn_epi32_mask(w, _mm512_set1_epi32(0x200));
  const __m512i r = _mm512_castps_si512(_mm512_cvtph_ps(h));
  return _mm512_castsi512_ps(_mm512_mask_and_epi32(r, snan, r, _mm512_set1_epi32(~0x400000)));
}

STRATA_AVX512 void f16_to_f32_avx512(const std::uint16_t* s, float* d, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    _mm512_storeu_ps(d + i, f16_to_f32_16(h));
  }
  if (i < n) {
    const std::size_t k = n - i;
    const __mmask16 m = static_cast<__mmask16>((1u << k) - 1u);
    const __m256i h = _mm512_castsi512_si256(_mm512_maskz_loadu_epi16(m, s + i));
    _mm512_mask_storeu_ps(d + i, m, f16_to_f32_16(h));
  }
}

#pragma GCC diagnostic pop
#undef STRATA_AVX512

// ---- AVX2 + F16C: 8 lanes, scalar tails ---------------------------------------------------------

#define STRATA_AVX2 __attribute__((target("avx2,f16c")))

STRATA_AVX2 inline __m256i bf16_round_256(__m256i u) {
  // Both sides are non-negative as int32, so the signed compare is the unsigned one.
  const __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
  const __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  return _mm256_blendv_epi8(_mm256_srli_epi32(r, 16), q, nan);
}

STRATA_AVX2 void f32_to_bf16_avx2(const float* s, std::uint16_t* d, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i a = bf16_round_256(_mm256_castps_si256(_mm256_loadu_ps(s + i)));
    const __m256i b = bf16_round_256(_mm256_castps_si256(_mm256_loadu_ps(s + i + 8)));
    // packus works per 128-bit lane: [a0-3 b0-3 a4-7 b4-7]; restore order with a permute.
    const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), p);
  }
  f32_to_bf16_scalar(s + i, d + i, n - i);
}

STRATA_AVX2 void bf16_to_f32_avx2(const std::uint16_t* s, float* d, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), w);
  }
  bf16_to_f32_scalar(s + i, d + i, n - i);
}

STRATA_AVX2 void f32_to_f16_avx2(const float* s, std::uint16_t* d, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), h);
  }
  f32_to_f16_scalar(s + i, d + i, n - i);
}

STRATA_AVX2 void f16_to_f32_avx2(const std::uint16_t* s, float* d, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    // Undo vcvtph2ps's quieting of signalling NaNs (see f16_to_f32_16).
    const __m256i w = _mm256_cvtepu16_epi32(h);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x7fff)),
                                           _mm256_set1_epi32(0x7c00));
    const __m256i sig =
        _mm256_cmpeq_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x200)), _mm256_setzero_si256());
    const __m256i clear = _mm256_and_si256(_mm256_and_si256(nan, sig), _mm256_set1_epi32(0x400000));
    const __m256i r = _mm256_andnot_si256(clear, _mm256_castps_si256(_mm256_cvtph_ps(h)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), r);
  }
  f16_to_f32_scalar(s + i, d + i, n - i);
}

#undef STRATA_AVX2

#endif  // STRATA_CONVERT_X86

// ---- dispatch ----------------------------------------------------------------------------------

struct Kernels {
  const char* name;
  void (*f32_to_bf16)(const float*, std::uint16_t*, std::size_t);
  void (*bf16_to_f32)(const std::uint16_t*, float*, std::size_t);
  void (*f32_to_f16)(const float*, std::uint16_t*, std::size_t);
  void (*f16_to_f32)(const std::uint16_t*, float*, std::size_t);
};

constexpr Kernels kScalar{"scalar", f32_to_bf16_scalar, bf16_to_f32_scalar, f32_to_f16_scalar,
                          f16_to_f32_scalar};
#ifdef STRATA_CONVERT_X86
constexpr Kernels kAvx2{"avx2+f16c", f32_to_bf16_avx2, bf16_to_f32_avx2, f32_to_f16_avx2,
                        f16_to_f32_avx2};
constexpr Kernels kAvx512{"avx512", f32_to_bf16_avx512, bf16_to_f32_avx512, f32_to_f16_avx512,
                          f16_to_f32_avx512};
#endif

bool cpu_has(std::string_view path) {
  if (path == "scalar") return true;
#ifdef STRATA_CONVERT_X86
  __builtin_cpu_init();
  if (path == "avx2+f16c") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  if (path == "avx512")
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
#endif
  return false;
}

const Kernels* kernels_for(std::string_view path) {
#ifdef STRATA_CONVERT_X86
  if (path == "avx512") return &kAvx512;
  if (path == "avx2+f16c") return &kAvx2;
#endif
  if (path == "scalar") return &kScalar;
  return nullptr;
}

const Kernels* best_kernels() {
  for (const char* p : {"avx512", "avx2+f16c"})
    if (cpu_has(p)) return kernels_for(p);
  return &kScalar;
}

std::atomic<const Kernels*>& active_slot() {
  static std::atomic<const Kernels*> slot{best_kernels()};
  return slot;
}

const Kernels& active() {
  return *active_slot().load(std::memory_order_relaxed);
}

// ---- generic element-wise path -----------------------------------------------------------------

// f64 → f32 rounding to odd: a later RNE to bf16/f16 (≥ 2 fewer significand bits) then rounds
// exactly as a direct f64 → bf16/f16 RNE would, with no double-rounding error.
float f64_to_f32_round_odd(double v) {
  const float f = static_cast<float>(v);
  if (std::isnan(v) || static_cast<double>(f) == v) return f;
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 1u) == 0) u += std::fabs(static_cast<double>(f)) > std::fabs(v) ? -1u : 1u;
  return std::bit_cast<float>(u);
}

// Float → integer: truncate toward zero, saturate at the type's range, NaN → 0 (a C cast would
// be undefined behaviour outside the range).
template <typename I>
I float_to_int(double v) {
  if (std::isnan(v)) return 0;
  constexpr double lo = static_cast<double>(std::numeric_limits<I>::min());
  // 2^bits exactly: the first value above the range (max() itself may not be representable).
  constexpr double hi_excl =
      std::is_signed_v<I> ? -lo
                          : 2.0 * (static_cast<double>(std::numeric_limits<I>::max() / 2) + 1.0);
  if (v <= lo) return std::numeric_limits<I>::min();
  if (v >= hi_excl) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

// One element held as the widest exact form of its kind.
struct Value {
  bool is_int;
  double f;
  std::int64_t i;  // integers, two's complement (u64 does not exist)
};

Value load_any(const void* p, DType t, std::size_t k) {
  auto ld = [&](auto tag) { return static_cast<const decltype(tag)*>(p)[k]; };
  switch (t) {
    case DType::f32:
      return {false, ld(float{}), 0};
    case DType::f64:
      return {false, ld(double{}), 0};
    case DType::bf16:
      return {false, bf16_to_f32(ld(std::uint16_t{})), 0};
    case DType::f16:
      return {false, f16_to_f32(ld(std::uint16_t{})), 0};
    case DType::i8:
      return {true, 0, ld(std::int8_t{})};
    case DType::u8:
      return {true, 0, ld(std::uint8_t{})};
    case DType::i16:
      return {true, 0, ld(std::int16_t{})};
    case DType::u16:
      return {true, 0, ld(std::uint16_t{})};
    case DType::i32:
      return {true, 0, ld(std::int32_t{})};
    case DType::u32:
      return {true, 0, ld(std::uint32_t{})};
    case DType::i64:
      return {true, 0, ld(std::int64_t{})};
  }
  fail("core", "invalid dtype {}", static_cast<int>(t));
}

template <typename I>
I to_int(const Value& v) {
  return v.is_int ? static_cast<I>(v.i) : float_to_int<I>(v.f);  // int → int wraps like C++
}

void store_any(void* p, DType t, std::size_t k, const Value& v) {
  auto st = [&](auto x) { static_cast<decltype(x)*>(p)[k] = x; };
  switch (t) {
    case DType::f32:
      return st(v.is_int ? static_cast<float>(v.i) : static_cast<float>(v.f));
    case DType::f64:
      return st(v.is_int ? static_cast<double>(v.i) : v.f);
    case DType::bf16:
      return st(f32_to_bf16(v.is_int ? f64_to_f32_round_odd(static_cast<double>(v.i))
                                     : f64_to_f32_round_odd(v.f)));
    case DType::f16:
      return st(f32_to_f16(v.is_int ? f64_to_f32_round_odd(static_cast<double>(v.i))
                                    : f64_to_f32_round_odd(v.f)));
    case DType::i8:
      return st(to_int<std::int8_t>(v));
    case DType::u8:
      return st(to_int<std::uint8_t>(v));
    case DType::i16:
      return st(to_int<std::int16_t>(v));
    case DType::u16:
      return st(to_int<std::uint16_t>(v));
    case DType::i32:
      return st(to_int<std::int32_t>(v));
    case DType::u32:
      return st(to_int<std::uint32_t>(v));
    case DType::i64:
      return st(to_int<std::int64_t>(v));
  }
  fail("core", "invalid dtype {}", static_cast<int>(t));
}

}  // namespace

void f32_to_bf16(const float* s, std::uint16_t* d, std::size_t n) {
  active().f32_to_bf16(s, d, n);
}
void bf16_to_f32(const std::uint16_t* s, float* d, std::size_t n) {
  active().bf16_to_f32(s, d, n);
}
void f32_to_f16(const float* s, std::uint16_t* d, std::size_t n) {
  active().f32_to_f16(s, d, n);
}
void f16_to_f32(const std::uint16_t* s, float* d, std::size_t n) {
  active().f16_to_f32(s, d, n);
}

void convert(const void* src, DType st, void* dst, DType dt, std::size_t n) {
  if (n == 0) return;
  if (st == dt) {
    std::memcpy(dst, src, n * dtype_size(st));
    return;
  }
  if (st == DType::f32 && dt == DType::bf16)
    return f32_to_bf16(static_cast<const float*>(src), static_cast<std::uint16_t*>(dst), n);
  if (st == DType::bf16 && dt == DType::f32)
    return bf16_to_f32(static_cast<const std::uint16_t*>(src), static_cast<float*>(dst), n);
  if (st == DType::f32 && dt == DType::f16)
    return f32_to_f16(static_cast<const float*>(src), static_cast<std::uint16_t*>(dst), n);
  if (st == DType::f16 && dt == DType::f32)
    return f16_to_f32(static_cast<const std::uint16_t*>(src), static_cast<float*>(dst), n);
  for (std::size_t i = 0; i < n; ++i) store_any(dst, dt, i, load_any(src, st, i));
}

const char* convert_simd_path() {
  return active().name;
}

namespace detail {

// Test hook (not in convert.hpp): makes the bulk conversions use `path` ("avx512",
// "avx2+f16c", "scalar"; "best" restores the default) and returns the previous path's name.
// Throws if this CPU cannot run it. Not thread-safe with concurrent conversions' choice of path.
const char* set_convert_simd_path(const char* path) {
  const std::string_view p = path;
  const Kernels* k = p == "best" ? best_kernels() : kernels_for(p);
  STRATA_CHECK(k != nullptr, "core", "unknown conversion path '{}'", p);
  STRATA_CHECK(cpu_has(k->name), "core", "this CPU cannot run the '{}' conversion path", p);
  return active_slot().exchange(k)->name;
}

// True when this CPU can run the conversion path (for tests that try every path).
bool convert_simd_path_supported(const char* path) {
  return kernels_for(path) != nullptr && cpu_has(path);
}

}  // namespace detail

}  // namespace strata
