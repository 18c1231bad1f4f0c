// Dynamic 8-bit codes and their block quantizers: scalar, AVX2 and AVX-512 paths.
//
// Finding the nearest code fast: a value's magnitude a = |x| / absmax in [0, 1] is placed among
// the code's positive magnitudes P[0] = 0 < P[1] < ... < P[K] = 1 by counting the thresholds
// T[j] (the midpoint of P[j] and P[j+1], rounded down to f32 so that "a > T[j]" holds exactly
// when a is nearer to P[j+1], ties staying at P[j]) that lie below a. The top 16 bits of a's f32
// pattern (exponent and 7 mantissa bits) pick a cell of a small table holding how many
// thresholds lie below the cell; no cell holds more than one threshold (checked when the table
// is built), so one comparison with the next threshold finishes the count. A threshold inside
// the cell shares a's top 16 bits, so comparing the low 16 bits decides it: each cell's entry
// packs the count (8 bits) with those low bits (or 0x1ffff, above any, when the next threshold
// lies beyond the cell). One table lookup (one gather on the vector paths) per element, no
// search loop.
#include "framework/optim/quantize.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "framework/core/error.hpp"
#include "framework/optim/chunked.hpp"

#if defined(__x86_64__) || defined(__i386__)
#define STRATA_QUANT_X86 1
#include <immintrin.h>
#endif

namespace strata::optim {

namespace {

// Cells: floats in [2^-23, 1] by (exponent, top 7 mantissa bits); smaller magnitudes share cell 0
// (every threshold lies above 2^-22.6).
constexpr int kCellBits = 7;
constexpr std::uint32_t kCellShift = 23 - kCellBits;
constexpr std::int32_t kCellBase = (127 - 23) << kCellBits;  // cell of 2^-23
constexpr std::int32_t kCellMax = 23 << kCellBits;           // cell of 1.0
// Sorted index of 0 in the signed code; stored byte = sorted index ^ kSignedZero, so 0 -> byte 0.
constexpr int kSignedZero = 127;

struct Code {
  std::array<float, 256> by_byte{};  // value of each stored byte
  std::vector<float> sorted;         // the 256 values, increasing
  std::vector<float> thresholds;     // T[j] between magnitudes j and j+1; last = +inf
  // per cell: the number of thresholds below the cell's lowest float | (the low 16 bits of the
  // next threshold when it lies in the cell, else 0x1ffff) << 8
  std::vector<std::int32_t> entry;
  bool is_signed = false;
};

inline std::int32_t cell_of(std::uint32_t bits) {
  const std::int32_t c = static_cast<std::int32_t>(bits >> kCellShift) - kCellBase;
  return std::clamp(c, 0, kCellMax);
}

// The decade values of create_dynamic_map (7 exponent bits, 8 bits in all), positive half.
std::vector<double> decade_values(bool is_signed) {
  std::vector<double> v;
  for (int i = 0; i < 7; ++i) {
    const int n = is_signed ? (1 << i) : (1 << (i + 1));
    for (int k = 0; k < n; ++k) v.push_back(std::pow(10.0, i - 6) * (0.1 + (k + 0.5) * 0.9 / n));
  }
  return v;
}

float largest_float_at_most(double x) {
  float f = static_cast<float>(x);
  if (static_cast<double>(f) > x) f = std::nextafter(f, 0.0f);
  return f;
}

Code build(bool is_signed) {
  Code c;
  c.is_signed = is_signed;
  std::vector<float> pos;  // positive values, as f32
  for (double d : decade_values(is_signed)) pos.push_back(static_cast<float>(d));
  pos.push_back(1.0f);
  std::sort(pos.begin(), pos.end());
  std::vector<float> mags{0.0f};  // P: 0 and the positive values
  mags.insert(mags.end(), pos.begin(), pos.end());
  if (is_signed) {
    for (auto it = pos.rbegin(); it != pos.rend(); ++it)
      if (*it != 1.0f) c.sorted.push_back(-*it);
  }
  c.sorted.insert(c.sorted.end(), mags.begin(), mags.end());
  STRATA_CHECK(c.sorted.size() == 256 && std::is_sorted(c.sorted.begin(), c.sorted.end()) &&
                   std::adjacent_find(c.sorted.begin(), c.sorted.end()) == c.sorted.end(),
               "optim", "the dynamic code has {} values, not 256 distinct ones", c.sorted.size());
  for (int s = 0; s < 256; ++s)
    c.by_byte[static_cast<std::size_t>(is_signed ? s ^ kSignedZero : s)] = c.sorted[static_cast<std::size_t>(s)];
  for (std::size_t j = 0; j + 1 < mags.size(); ++j)
    c.thresholds.push_back(
        largest_float_at_most((static_cast<double>(mags[j]) + static_cast<double>(mags[j + 1])) / 2));
  c.thresholds.push_back(std::numeric_limits<float>::infinity());
  c.entry.resize(kCellMax + 1);
  for (std::int32_t cell = 0; cell <= kCellMax; ++cell) {
    const float low = cell == 0 ? 0.0f
                                : std::bit_cast<float>(static_cast<std::uint32_t>(cell + kCellBase) << kCellShift);
    const auto n = std::lower_bound(c.thresholds.begin(), c.thresholds.end(), low) - c.thresholds.begin();
    if (cell < kCellMax) {
      const float high = std::bit_cast<float>(static_cast<std::uint32_t>(cell + 1 + kCellBase) << kCellShift);
      STRATA_CHECK(c.thresholds[static_cast<std::size_t>(n) + 1] >= high, "optim",
                   "quantization cell {} holds two thresholds", cell);
    }
    // The next threshold, when it lies in this cell, has the cell's top 16 bits (cell 0 also
    // holds the magnitudes clamped into it, so no threshold may lie there).
    const float t = c.thresholds[static_cast<std::size_t>(n)];
    const bool inside =
        cell < kCellMax && t < std::bit_cast<float>(static_cast<std::uint32_t>(cell + 1 + kCellBase) << kCellShift);
    STRATA_CHECK(!inside || (cell > 0 && cell_of(std::bit_cast<std::uint32_t>(t)) == cell), "optim",
                 "quantization cell {}: its threshold does not share the cell's bits", cell);
    const std::int32_t tlow = inside ? static_cast<std::int32_t>(std::bit_cast<std::uint32_t>(t) & 0xffffu) : 0x1ffff;
    c.entry[static_cast<std::size_t>(cell)] = static_cast<std::int32_t>(n) | (tlow << 8);
  }
  return c;
}

const Code& code(QuantMap map) {
  static const Code s = build(true), u = build(false);
  return map == QuantMap::signed_dynamic ? s : u;
}

// The stored byte for one normalized value y (the definition every path reproduces).
inline std::uint8_t quantize_one(const Code& c, float y) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(y);
  const std::uint32_t mbits = bits & 0x7fffffffu;
  const std::int32_t e = c.entry[static_cast<std::size_t>(cell_of(mbits))];
  const std::int32_t mi = (e & 0xff) + (static_cast<std::int32_t>(mbits & 0xffffu) > (e >> 8) ? 1 : 0);
  if (!c.is_signed) return static_cast<std::uint8_t>(mi);
  const std::int32_t s = (bits >> 31) ? std::max(kSignedZero - mi, 0) : kSignedZero + mi;
  return static_cast<std::uint8_t>(s ^ kSignedZero);
}

float absmax_scalar(const float* x, std::size_t n) {
  float a = 0.0f;
  for (std::size_t i = 0; i < n; ++i) a = std::max(a, std::fabs(x[i]));
  return a;
}

float quantize_scalar(const Code& c, const float* x, std::size_t n, std::uint8_t* q) {
  const float a = absmax_scalar(x, n);
  if (!(a > 0.0f)) {
    std::fill(q, q + n, std::uint8_t{0});
    return a;
  }
  for (std::size_t i = 0; i < n; ++i) q[i] = quantize_one(c, x[i] / a);
  return a;
}

void dequantize_scalar(const Code& c, const std::uint8_t* q, std::size_t n, float a, float* out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = c.by_byte[q[i]] * a;
}

#ifdef STRATA_QUANT_X86

#define STRATA_AVX2 __attribute__((target("avx2,fma")))
#define STRATA_AVX512 __attribute__((target("avx512f,avx2,fma")))

STRATA_AVX2 float absmax_avx2(const float* x, std::size_t n) {
  const __m256 mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 acc = _mm256_setzero_ps();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_max_ps(acc, _mm256_and_ps(_mm256_loadu_ps(x + i), mask));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  float a = 0.0f;
  for (float l : lanes) a = std::max(a, l);
  for (; i < n; ++i) a = std::max(a, std::fabs(x[i]));
  return a;
}

// Eight bytes for eight normalized values (the vector form of quantize_one).
STRATA_AVX2 __m128i quantize8_avx2(const Code& c, __m256 y) {
  const __m256i bits = _mm256_castps_si256(y);
  const __m256i mbits = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
  __m256i cell = _mm256_sub_epi32(_mm256_srli_epi32(mbits, kCellShift), _mm256_set1_epi32(kCellBase));
  cell = _mm256_min_epi32(_mm256_max_epi32(cell, _mm256_setzero_si256()), _mm256_set1_epi32(kCellMax));
  // Table lookups by scalar loads: on AMD Zen an 8-lane gather costs more than 8 loads.
  alignas(32) std::int32_t ci[8], ev[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(ci), cell);
  for (int k = 0; k < 8; ++k) ev[k] = c.entry[static_cast<std::size_t>(ci[k])];
  const __m256i e = _mm256_load_si256(reinterpret_cast<const __m256i*>(ev));
  __m256i mi = _mm256_and_si256(e, _mm256_set1_epi32(0xff));
  // a > t (same cell: compare the low 16 bits): +1 (the compare mask is -1 where true).
  const __m256i low = _mm256_and_si256(mbits, _mm256_set1_epi32(0xffff));
  mi = _mm256_sub_epi32(mi, _mm256_cmpgt_epi32(low, _mm256_srai_epi32(e, 8)));
  __m256i s = mi;
  if (c.is_signed) {
    const __m256i zero = _mm256_set1_epi32(kSignedZero);
    const __m256i neg = _mm256_srai_epi32(bits, 31);  // -1 where the sign bit is set
    const __m256i down = _mm256_max_epi32(_mm256_sub_epi32(zero, mi), _mm256_setzero_si256());
    const __m256i up = _mm256_add_epi32(zero, mi);
    s = _mm256_xor_si256(_mm256_blendv_epi8(up, down, neg), zero);
  }
  // 8 x i32 in [0, 255] -> 8 bytes.
  const __m128i lo = _mm256_castsi256_si128(s), hi = _mm256_extracti128_si256(s, 1);
  const __m128i w = _mm_packus_epi32(lo, hi);
  return _mm_packus_epi16(w, w);
}

STRATA_AVX2 float quantize_avx2(const Code& c, const float* x, std::size_t n, std::uint8_t* q) {
  const float a = absmax_avx2(x, n);
  if (!(a > 0.0f)) {
    std::fill(q, q + n, std::uint8_t{0});
    return a;
  }
  const __m256 av = _mm256_set1_ps(a);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i b = quantize8_avx2(c, _mm256_div_ps(_mm256_loadu_ps(x + i), av));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q + i), b);
  }
  for (; i < n; ++i) q[i] = quantize_one(c, x[i] / a);
  return a;
}

STRATA_AVX2 void dequantize_avx2(const Code& c, const std::uint8_t* q, std::size_t n, float a,
                                 float* out) {
  const __m256 av = _mm256_set1_ps(a);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float* t = c.by_byte.data();
    const __m256 vals = _mm256_setr_ps(t[q[i]], t[q[i + 1]], t[q[i + 2]], t[q[i + 3]], t[q[i + 4]],
                                       t[q[i + 5]], t[q[i + 6]], t[q[i + 7]]);
    _mm256_storeu_ps(out + i, _mm256_mul_ps(vals, av));
  }
  for (; i < n; ++i) out[i] = c.by_byte[q[i]] * a;
}

// GCC 12's avx512fintrin.h initialises its "undefined" vectors from themselves, which
// -Wmaybe-uninitialized reports at inlined intrinsics; the warning is spurious.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

STRATA_AVX512 float absmax_avx512(const float* x, std::size_t n) {
  __m512 acc = _mm512_setzero_ps();
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) acc = _mm512_max_ps(acc, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, acc);
  float a = 0.0f;
  for (float l : lanes) a = std::max(a, l);
  for (; i < n; ++i) a = std::max(a, std::fabs(x[i]));
  return a;
}

STRATA_AVX512 float quantize_avx512(const Code& c, const float* x, std::size_t n, std::uint8_t* q) {
  const float a = absmax_avx512(x, n);
  if (!(a > 0.0f)) {
    std::fill(q, q + n, std::uint8_t{0});
    return a;
  }
  const __m512 av = _mm512_set1_ps(a);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i base = _mm512_set1_epi32(kCellBase), top = _mm512_set1_epi32(kCellMax);
  const __m512i zero = _mm512_set1_epi32(kSignedZero), one = _mm512_set1_epi32(1);
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i bits = _mm512_castps_si512(_mm512_div_ps(_mm512_loadu_ps(x + i), av));
    const __m512i mbits = _mm512_and_si512(bits, abs_mask);
    __m512i cell = _mm512_sub_epi32(_mm512_srli_epi32(mbits, kCellShift), base);
    cell = _mm512_min_epi32(_mm512_max_epi32(cell, _mm512_setzero_si512()), top);
    const __m512i e = _mm512_i32gather_epi32(cell, c.entry.data(), 4);
    __m512i mi = _mm512_and_si512(e, _mm512_set1_epi32(0xff));
    // a > t (same cell: compare the low 16 bits).
    const __m512i low = _mm512_and_si512(mbits, _mm512_set1_epi32(0xffff));
    mi = _mm512_mask_add_epi32(mi, _mm512_cmpgt_epi32_mask(low, _mm512_srai_epi32(e, 8)), mi, one);
    __m512i s = mi;
    if (c.is_signed) {
      const __mmask16 neg = _mm512_cmplt_epi32_mask(bits, _mm512_setzero_si512());
      const __m512i down = _mm512_max_epi32(_mm512_sub_epi32(zero, mi), _mm512_setzero_si512());
      s = _mm512_xor_si512(_mm512_mask_blend_epi32(neg, _mm512_add_epi32(zero, mi), down), zero);
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtepi32_epi8(s));
  }
  for (; i < n; ++i) q[i] = quantize_one(c, x[i] / a);
  return a;
}

STRATA_AVX512 void dequantize_avx512(const Code& c, const std::uint8_t* q, std::size_t n, float a,
                                     float* out) {
  const __m512 av = _mm512_set1_ps(a);
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i idx = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i)));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_i32gather_ps(idx, c.by_byte.data(), 4), av));
  }
  for (; i < n; ++i) out[i] = c.by_byte[q[i]] * a;
}

#pragma GCC diagnostic pop

#endif  // STRATA_QUANT_X86

void check_path(SimdPath path) {
  STRATA_CHECK(simd_path_supported(path), "optim", "this CPU does not support the {} path",
               simd_path_name(path));
}

}  // namespace

const std::array<float, 256>& quant_values(QuantMap map) { return code(map).by_byte; }

std::vector<float> quant_sorted_values(QuantMap map) { return code(map).sorted; }

std::vector<float> quant_thresholds(QuantMap map) {
  const std::vector<float>& t = code(map).thresholds;
  return {t.begin(), t.end() - 1};  // without the +inf sentinel
}

float quantize_block_on(SimdPath path, QuantMap map, const float* x, std::size_t n,
                        std::uint8_t* codes) {
  check_path(path);
  STRATA_CHECK(n <= kQuantBlock, "optim", "a quantization block holds at most {} values, got {}",
               kQuantBlock, n);
  const Code& c = code(map);
  switch (path) {
#ifdef STRATA_QUANT_X86
    case SimdPath::avx512: return quantize_avx512(c, x, n, codes);
    case SimdPath::avx2: return quantize_avx2(c, x, n, codes);
#endif
    default: return quantize_scalar(c, x, n, codes);
  }
}

void dequantize_block_on(SimdPath path, QuantMap map, const std::uint8_t* codes, std::size_t n,
                         float absmax, float* out) {
  check_path(path);
  const Code& c = code(map);
  switch (path) {
#ifdef STRATA_QUANT_X86
    case SimdPath::avx512: dequantize_avx512(c, codes, n, absmax, out); return;
    case SimdPath::avx2: dequantize_avx2(c, codes, n, absmax, out); return;
#endif
    default: dequantize_scalar(c, codes, n, absmax, out);
  }
}

float quantize_block(QuantMap map, const float* x, std::size_t n, std::uint8_t* codes) {
  return quantize_block_on(best_simd_path(), map, x, n, codes);
}

void dequantize_block(QuantMap map, const std::uint8_t* codes, std::size_t n, float absmax,
                      float* out) {
  dequantize_block_on(best_simd_path(), map, codes, n, absmax, out);
}

void quantize_blockwise(QuantMap map, const float* x, std::size_t n, std::uint8_t* codes,
                        float* absmax) {
  const SimdPath path = best_simd_path();
  (void)code(map);  // built before the threads start
  detail::for_each_chunk(n, [&](std::size_t begin, std::size_t count) {
    for (std::size_t b = begin; b < begin + count; b += kQuantBlock) {
      const std::size_t len = std::min(kQuantBlock, begin + count - b);
      absmax[b / kQuantBlock] = quantize_block_on(path, map, x + b, len, codes + b);
    }
  });
}

void dequantize_blockwise(QuantMap map, const std::uint8_t* codes, const float* absmax,
                          std::size_t n, float* out) {
  const SimdPath path = best_simd_path();
  (void)code(map);
  detail::for_each_chunk(n, [&](std::size_t begin, std::size_t count) {
    for (std::size_t b = begin; b < begin + count; b += kQuantBlock) {
      const std::size_t len = std::min(kQuantBlock, begin + count - b);
      dequantize_block_on(path, map, codes + b, len, absmax[b / kQuantBlock], out + b);
    }
  });
}

std::uint8_t quantize_reference(QuantMap map, float y) {
  const Code& c = code(map);
  const double v = c.is_signed ? static_cast<double>(y) : std::fabs(static_cast<double>(y));
  int best = 0;
  double best_d = std::numeric_limits<double>::infinity();
  for (int s = 0; s < 256; ++s) {
    const double cv = c.sorted[static_cast<std::size_t>(s)];
    const double d = std::fabs(v - cv);
    const bool smaller_mag = std::fabs(cv) < std::fabs(static_cast<double>(c.sorted[static_cast<std::size_t>(best)]));
    if (d < best_d || (d == best_d && smaller_mag)) {
      best = s;
      best_d = d;
    }
  }
  return static_cast<std::uint8_t>(c.is_signed ? best ^ kSignedZero : best);
}

}  // namespace strata::optim
