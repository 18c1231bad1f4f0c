// dtype names and conversions: scalar f32 ↔ bf16/f16 rounding on special values, exhaustive
// round trips, every SIMD path against the scalar reference, and the generic converter.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "framework/core/convert.hpp"
#include "framework/core/dtype.hpp"
#include "framework/core/error.hpp"
#include "framework/core/half.hpp"

// Test hooks defined in framework/core/convert.cpp (deliberately not in the public header).
namespace strata::detail {
const char* set_convert_simd_path(const char* path);
bool convert_simd_path_supported(const char* path);
}  // namespace strata::detail

using namespace strata;

namespace {

float f(std::uint32_t bits) {
  return std::bit_cast<float>(bits);
}
std::uint32_t bits(float x) {
  return std::bit_cast<std::uint32_t>(x);
}
std::uint16_t bf(float x) {
  return strata::f32_to_bf16(x);
}
std::uint16_t h(float x) {
  return strata::f32_to_f16(x);
}
bool f16_is_nan(std::uint16_t v) {
  return (v & 0x7c00u) == 0x7c00u && (v & 0x3ffu) != 0;
}
bool bf16_is_nan(std::uint16_t v) {
  return (v & 0x7f80u) == 0x7f80u && (v & 0x7fu) != 0;
}

const char* const kPaths[] = {"scalar", "avx2+f16c", "avx512"};

// Selects a conversion path for the scope, restoring the default after.
class PathGuard {
 public:
  explicit PathGuard(const char* p) { detail::set_convert_simd_path(p); }
  ~PathGuard() { detail::set_convert_simd_path("best"); }
};

}  // namespace

// ---- names --------------------------------------------------------------------------------------

TEST(DType, SizesNamesAndParsing) {
  EXPECT_EQ(dtype_size(DType::f32), 4u);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::f16), 2u);
  EXPECT_EQ(dtype_size(DType::i64), 8u);
  EXPECT_EQ(dtype_size(DType::u8), 1u);
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i8, DType::u8, DType::i16,
                  DType::u16, DType::i32, DType::u32, DType::i64})
    EXPECT_EQ(parse_dtype(dtype_name(t)), t) << dtype_name(t);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(parse_dtype("fp16"), DType::f16);
  EXPECT_EQ(parse_dtype("float32"), DType::f32);
  EXPECT_THROW(parse_dtype("float8"), UserError);
  EXPECT_TRUE(is_floating(DType::bf16));
  EXPECT_FALSE(is_floating(DType::i32));
}

// ---- scalar bf16 --------------------------------------------------------------------------------

TEST(Bf16, SpecialValues) {
  EXPECT_EQ(bf(0.0f), 0x0000);
  EXPECT_EQ(bf(-0.0f), 0x8000);
  EXPECT_EQ(bf(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(bf(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(bf(1.0f), 0x3f80);
  EXPECT_EQ(bf(-2.0f), 0xc000);
  // NaN stays a quiet NaN with its sign and top payload bits, including signalling NaNs.
  EXPECT_EQ(bf(f(0x7fc00000u)), 0x7fc0);
  EXPECT_EQ(bf(f(0xffc00000u)), 0xffc0);
  EXPECT_EQ(bf(f(0x7f800001u)), 0x7fc0);  // sNaN whose payload is all in the dropped bits
  EXPECT_EQ(bf(f(0xff800001u)), 0xffc0);
  EXPECT_EQ(bf(f(0x7fffffffu)), 0x7fff);  // would carry into the sign if rounded as a number
  EXPECT_EQ(bf(f(0x7f812345u)), 0x7fc1);
  EXPECT_TRUE(std::isnan(bf16_to_f32(bf(std::nanf("")))));
  // Largest finite values and overflow.
  EXPECT_EQ(bf(f(0x7f7f7fffu)), 0x7f7f);  // just below the tie: largest finite bf16
  EXPECT_EQ(bf(f(0x7f7f8000u)), 0x7f80);  // tie with odd 0x7f7f → rounds up to inf
  EXPECT_EQ(bf(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(bf(-std::numeric_limits<float>::max()), 0xff80);
  // f32 subnormals keep their (rounded) value.
  EXPECT_EQ(bf(f(0x00010000u)), 0x0001);
  EXPECT_EQ(bf(f(0x00008000u)), 0x0000);  // tie → even 0
  EXPECT_EQ(bf(f(0x00018000u)), 0x0002);  // tie → even 2
  EXPECT_EQ(bf(f(0x80008001u)), 0x8001);
}

TEST(Bf16, TiesRoundToEven) {
  EXPECT_EQ(bf(f(0x3f808000u)), 0x3f80);  // 1 + 2^-8: halfway 0x3f80/0x3f81 → even 0x3f80
  EXPECT_EQ(bf(f(0x3f818000u)), 0x3f82);  // halfway 0x3f81/0x3f82 → even 0x3f82
  EXPECT_EQ(bf(f(0x3f808001u)), 0x3f81);  // just above the tie
  EXPECT_EQ(bf(f(0x3f817fffu)), 0x3f81);  // just below the tie
  EXPECT_EQ(bf(f(0xbf808000u)), 0xbf80);  // negative ties too
  EXPECT_EQ(bf(f(0xbf818000u)), 0xbf82);
  EXPECT_EQ(bf(f(0x3f7fffffu)), 0x3f80);  // carry into the exponent
}

TEST(Bf16, ExhaustiveRoundTrip) {
  for (std::uint32_t v = 0; v < 65536; ++v) {
    const auto b = static_cast<std::uint16_t>(v);
    const float x = bf16_to_f32(b);
    ASSERT_EQ(bits(x), v << 16);
    const std::uint16_t back = bf(x);
    if (bf16_is_nan(b)) {
      ASSERT_TRUE(bf16_is_nan(back)) << std::hex << v;
      ASSERT_EQ(back & 0x8000, b & 0x8000) << std::hex << v;
    } else {
      ASSERT_EQ(back, b) << std::hex << v;
    }
  }
}

// ---- scalar f16 ---------------------------------------------------------------------------------

TEST(F16, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(h(0.0f), 0x0000);
  EXPECT_EQ(h(-0.0f), 0x8000);
  EXPECT_EQ(h(inf), 0x7c00);
  EXPECT_EQ(h(-inf), 0xfc00);
  EXPECT_EQ(h(1.0f), 0x3c00);
  EXPECT_EQ(h(-2.0f), 0xc000);
  EXPECT_EQ(h(0.5f), 0x3800);
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x7c00), inf);
  EXPECT_EQ(f16_to_f32(0xfc00), -inf);
  EXPECT_EQ(bits(f16_to_f32(0x8000)), 0x80000000u);
  // NaN stays NaN (quiet), sign kept.
  EXPECT_EQ(h(f(0x7fc00000u)), 0x7e00);
  EXPECT_EQ(h(f(0xffc00000u)), 0xfe00);
  EXPECT_EQ(h(f(0x7f800001u)), 0x7e00);
  EXPECT_EQ(h(f(0x7fffe000u)), 0x7fff);
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7c01)));
  EXPECT_TRUE(std::signbit(f16_to_f32(0xfe00)));
  // Largest finite value and overflow.
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(h(65504.0f), 0x7bff);
  EXPECT_EQ(h(65519.996f), 0x7bff);  // below the halfway point 65520
  EXPECT_EQ(h(65520.0f), 0x7c00);    // tie with odd 0x7bff → inf
  EXPECT_EQ(h(-65520.0f), 0xfc00);
  EXPECT_EQ(h(1e6f), 0x7c00);
  EXPECT_EQ(h(std::numeric_limits<float>::max()), 0x7c00);
}

TEST(F16, Subnormals) {
  const float u = std::ldexp(1.0f, -24);  // f16's smallest subnormal
  // f16 → f32 of subnormals is exact.
  EXPECT_EQ(f16_to_f32(0x0001), u);
  EXPECT_EQ(f16_to_f32(0x8001), -u);
  EXPECT_EQ(f16_to_f32(0x0002), 2 * u);
  EXPECT_EQ(f16_to_f32(0x03ff), 1023 * u);
  EXPECT_EQ(f16_to_f32(0x0200), 512 * u);
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  // f32 → f16 into the subnormal range, with rounding.
  EXPECT_EQ(h(u), 0x0001);
  EXPECT_EQ(h(-u), 0x8001);
  EXPECT_EQ(h(1023 * u), 0x03ff);
  EXPECT_EQ(h(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(h(1023.5f * u), 0x0400);  // tie with odd 0x03ff → rounds up into the normals
  EXPECT_EQ(h(1022.5f * u), 0x03fe);  // tie → even
  EXPECT_EQ(h(0.5f * u), 0x0000);     // 2^-25: tie between 0 and 1 → even 0
  EXPECT_EQ(h(-0.5f * u), 0x8000);    // signed zero kept
  EXPECT_EQ(h(std::nextafter(0.5f * u, 1.0f)), 0x0001);
  EXPECT_EQ(h(1.5f * u), 0x0002);  // tie between 1 and 2 → even 2
  EXPECT_EQ(h(2.5f * u), 0x0002);  // tie between 2 and 3 → even 2
  EXPECT_EQ(h(0.49f * u), 0x0000);
  EXPECT_EQ(h(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(h(-std::numeric_limits<float>::denorm_min()), 0x8000);
}

TEST(F16, TiesRoundToEven) {
  const float e = std::ldexp(1.0f, -11);  // half an f16 ulp at 1.0
  EXPECT_EQ(h(1.0f + e), 0x3c00);         // halfway 0x3c00/0x3c01 → even 0x3c00
  EXPECT_EQ(h(1.0f + 3 * e), 0x3c02);     // halfway 0x3c01/0x3c02 → even 0x3c02
  EXPECT_EQ(h(std::nextafter(1.0f + e, 2.0f)), 0x3c01);
  EXPECT_EQ(h(std::nextafter(1.0f + 3 * e, 0.0f)), 0x3c01);
  EXPECT_EQ(h(-(1.0f + e)), 0xbc00);
  EXPECT_EQ(h(2048.0f + 1.0f), 0x6800);              // 2049: halfway 2048/2050 → 2048
  EXPECT_EQ(h(2048.0f + 3.0f), 0x6802);              // 2051: halfway 2050/2052 → 2052
  EXPECT_EQ(h(std::nextafter(2.0f, 0.0f)), 0x4000);  // carry into the exponent
}

TEST(F16, ExhaustiveRoundTrip) {
  for (std::uint32_t v = 0; v < 65536; ++v) {
    const auto b = static_cast<std::uint16_t>(v);
    const float x = f16_to_f32(b);
    const std::uint16_t back = h(x);
    if (f16_is_nan(b)) {
      ASSERT_TRUE(std::isnan(x)) << std::hex << v;
      ASSERT_TRUE(f16_is_nan(back)) << std::hex << v;
      ASSERT_EQ(back & 0x8000, b & 0x8000) << std::hex << v;
      if (b & 0x200) {  // quiet NaNs come back unchanged
        ASSERT_EQ(back, b) << std::hex << v;
      }
    } else {
      ASSERT_EQ(back, b) << std::hex << v;
    }
  }
}

// ---- SIMD paths against the scalar reference ----------------------------------------------------

TEST(Convert, DefaultPathIsTheBestThisCpuSupports) {
  std::string best = "scalar";
  if (detail::convert_simd_path_supported("avx2+f16c")) best = "avx2+f16c";
  if (detail::convert_simd_path_supported("avx512")) best = "avx512";
  EXPECT_EQ(convert_simd_path(), best);
  EXPECT_TRUE(detail::convert_simd_path_supported("scalar"));
  EXPECT_THROW(detail::set_convert_simd_path("sse9"), Error);
  {
    PathGuard g("scalar");
    EXPECT_STREQ(convert_simd_path(), "scalar");
  }
  EXPECT_EQ(convert_simd_path(), best);
}

namespace {

// Random bit patterns plus special values and patterns right at / next to rounding ties.
std::vector<std::uint32_t> interesting_f32_bits() {
  std::vector<std::uint32_t> v = {
      0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u,
      0xff800001u, 0x7fffffffu, 0xffffffffu, 0x7fbfffffu, 0x00000001u, 0x807fffffu, 0x00800000u,
      0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u, 0x7f7f7fffu, 0x477fe000u, 0x477ff000u, 0x477fefffu,
      0xc77ff000u, 0x38800000u, 0x387fffffu, 0x33000000u, 0x33000001u, 0x32ffffffu, 0x3f808000u,
      0x3f818000u, 0x3f801000u, 0x3f803000u, 0x3f800fffu, 0x3f800000u, 0xbf800000u};
  std::mt19937 rng(12345);
  for (int i = 0; i < 200000; ++i) {
    const std::uint32_t r = rng();
    v.push_back(r);
    v.push_back((r & 0xffff0000u) | 0x8000u);  // bf16 tie
    v.push_back((r & 0xffff0000u) | 0x7fffu);
    v.push_back((r & 0xffffe000u) | 0x1000u);  // f16 tie (normal range)
    // Values in the f16 range (|x| < 2^17), where f16 rounding is exercised.
    const std::uint32_t small = (r & 0x80000000u) | (0x30000000u + (r & 0x7fffffffu) % 0x18000000u);
    v.push_back(small);
    v.push_back((small & 0xffffe000u) | 0x1000u);
  }
  return v;
}

std::vector<std::uint16_t> all_16bit_patterns() {
  std::vector<std::uint16_t> v(65536);
  for (std::uint32_t i = 0; i < 65536; ++i) v[i] = static_cast<std::uint16_t>(i);
  return v;
}

}  // namespace

TEST(Convert, EveryPathMatchesScalarBitwise) {
  const auto in32 = interesting_f32_bits();
  const auto in16 = all_16bit_patterns();
  int paths_run = 0;
  for (const char* p : kPaths) {
    if (!detail::convert_simd_path_supported(p)) continue;
    ++paths_run;
    PathGuard g(p);
    SCOPED_TRACE(p);
    const std::size_t n = in32.size();
    const float* src = reinterpret_cast<const float*>(in32.data());
    std::vector<std::uint16_t> ob(n), oh(n);
    strata::f32_to_bf16(src, ob.data(), n);
    strata::f32_to_f16(src, oh.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(ob[i], strata::f32_to_bf16(src[i])) << "f32→bf16 of 0x" << std::hex << in32[i];
      ASSERT_EQ(oh[i], strata::f32_to_f16(src[i])) << "f32→f16 of 0x" << std::hex << in32[i];
    }
    // Every 16-bit pattern (signalling NaNs included) to f32.
    std::vector<float> fb(65536), fh(65536);
    strata::bf16_to_f32(in16.data(), fb.data(), 65536);
    strata::f16_to_f32(in16.data(), fh.data(), 65536);
    for (std::uint32_t i = 0; i < 65536; ++i) {
      const auto b = static_cast<std::uint16_t>(i);
      ASSERT_EQ(bits(fb[i]), bits(strata::bf16_to_f32(b))) << "bf16→f32 of 0x" << std::hex << i;
      ASSERT_EQ(bits(fh[i]), bits(strata::f16_to_f32(b))) << "f16→f32 of 0x" << std::hex << i;
    }
  }
  EXPECT_GE(paths_run, 1);
}

TEST(Convert, OddLengthsAndUnalignedPointersTouchOnlyTheirElements) {
  const auto pool = interesting_f32_bits();
  const std::uint16_t kGuard16 = 0xabcd;
  const std::uint32_t kGuard32 = 0xdeadbeefu;
  for (const char* p : kPaths) {
    if (!detail::convert_simd_path_supported(p)) continue;
    PathGuard g(p);
    for (std::size_t n : {0u, 1u, 7u, 15u, 16u, 17u, 31u, 33u, 1000u}) {
      for (std::size_t shift : {0u, 1u, 3u}) {  // element offsets: 4/12-byte and 2/6-byte skew
        SCOPED_TRACE(std::string(p) + " n=" + std::to_string(n) +
                     " shift=" + std::to_string(shift));
        const std::size_t pad = 40;
        // f32 → 16-bit
        std::vector<std::uint32_t> src(n + 2 * pad, kGuard32);
        for (std::size_t i = 0; i < n; ++i)
          src[pad + shift + i] = pool[(i * 7919 + n) % pool.size()];
        const float* s = reinterpret_cast<const float*>(src.data()) + pad + shift;
        std::vector<std::uint16_t> dst(n + 2 * pad, kGuard16);
        for (int which = 0; which < 2; ++which) {
          std::fill(dst.begin(), dst.end(), kGuard16);
          std::uint16_t* d = dst.data() + pad + shift;
          which ? strata::f32_to_f16(s, d, n) : strata::f32_to_bf16(s, d, n);
          for (std::size_t i = 0; i < dst.size(); ++i) {
            const std::ptrdiff_t k =
                static_cast<std::ptrdiff_t>(i) - static_cast<std::ptrdiff_t>(pad + shift);
            if (k < 0 || k >= static_cast<std::ptrdiff_t>(n)) {
              ASSERT_EQ(dst[i], kGuard16) << "wrote outside [0, n) at " << k;
            } else {
              ASSERT_EQ(dst[i], which ? strata::f32_to_f16(s[k]) : strata::f32_to_bf16(s[k])) << k;
            }
          }
        }
        // 16-bit → f32
        std::vector<std::uint16_t> src16(n + 2 * pad, kGuard16);
        for (std::size_t i = 0; i < n; ++i)
          src16[pad + shift + i] =
              static_cast<std::uint16_t>(pool[(i * 104729 + n) % pool.size()] >> 7);
        const std::uint16_t* s16 = src16.data() + pad + shift;
        std::vector<std::uint32_t> out(n + 2 * pad);
        for (int which = 0; which < 2; ++which) {
          std::fill(out.begin(), out.end(), kGuard32);
          float* d = reinterpret_cast<float*>(out.data()) + pad + shift;
          which ? strata::f16_to_f32(s16, d, n) : strata::bf16_to_f32(s16, d, n);
          for (std::size_t i = 0; i < out.size(); ++i) {
            const std::ptrdiff_t k =
                static_cast<std::ptrdiff_t>(i) - static_cast<std::ptrdiff_t>(pad + shift);
            if (k < 0 || k >= static_cast<std::ptrdiff_t>(n)) {
              ASSERT_EQ(out[i], kGuard32) << "wrote outside [0, n) at " << k;
            } else {
              ASSERT_EQ(out[i],
                        bits(which ? strata::f16_to_f32(s16[k]) : strata::bf16_to_f32(s16[k])))
                  << k;
            }
          }
        }
      }
    }
  }
}

TEST(Convert, GenericConvertUsesTheBulkPathsForHalfTypes) {
  const std::vector<float> x = {1.0f, f(0x3f808000u), f(0x3f818000u), -65520.0f, 1e-8f};
  std::vector<std::uint16_t> b(x.size()), hh(x.size());
  convert(x.data(), DType::f32, b.data(), DType::bf16, x.size());
  convert(x.data(), DType::f32, hh.data(), DType::f16, x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(b[i], bf(x[i]));
    EXPECT_EQ(hh[i], h(x[i]));
  }
  std::vector<float> back(x.size());
  convert(b.data(), DType::bf16, back.data(), DType::f32, x.size());
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], 1.0f);  // the tie went to even
  convert(hh.data(), DType::f16, back.data(), DType::f32, x.size());
  EXPECT_TRUE(std::isinf(back[3]) && back[3] < 0);
}

TEST(Convert, F64ToHalfRoundsOnceNotTwice) {
  // 1 + 2^-8 + 2^-30 is just above a bf16 tie; via f32 (RNE) it would land on the tie itself
  // and then round to even (down). Correct rounding goes up.
  const double d1 = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  std::uint16_t out = 0;
  convert(&d1, DType::f64, &out, DType::bf16, 1);
  EXPECT_EQ(out, 0x3f81);
  const double d2 = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);  // same for f16
  convert(&d2, DType::f64, &out, DType::f16, 1);
  EXPECT_EQ(out, 0x3c01);
  const double d3 = -(1.0 + std::ldexp(1.0, -11) - std::ldexp(1.0, -40));  // just below: down
  convert(&d3, DType::f64, &out, DType::f16, 1);
  EXPECT_EQ(out, 0xbc00);
  const double tiny = 1e-300;  // underflows f32 but must keep its sign as ±0
  convert(&tiny, DType::f64, &out, DType::bf16, 1);
  EXPECT_EQ(out, 0x0000);
  const double ntiny = -1e-300;
  convert(&ntiny, DType::f64, &out, DType::f16, 1);
  EXPECT_EQ(out, 0x8000);
  const double big = 1e300;
  convert(&big, DType::f64, &out, DType::bf16, 1);
  EXPECT_EQ(out, 0x7f80);
  const double nan = std::nan("");
  convert(&nan, DType::f64, &out, DType::f16, 1);
  EXPECT_TRUE(f16_is_nan(out));
  const double exact = 0.375;
  convert(&exact, DType::f64, &out, DType::bf16, 1);
  EXPECT_EQ(bf16_to_f32(out), 0.375f);
}

TEST(Convert, IntegersAndFloatToIntegerAreDefined) {
  // float → int truncates toward zero.
  const float fl[] = {-1.7f, 2.9f, -0.5f, 127.9f};
  std::int32_t i32[4];
  convert(fl, DType::f32, i32, DType::i32, 4);
  EXPECT_EQ(i32[0], -1);
  EXPECT_EQ(i32[1], 2);
  EXPECT_EQ(i32[2], 0);
  EXPECT_EQ(i32[3], 127);
  // Out of range saturates and NaN gives 0 (a plain C cast would be undefined behaviour).
  const double od[] = {300.0, -5.0, std::nan(""), 1e30, -1e30};
  std::uint8_t u8[5];
  convert(od, DType::f64, u8, DType::u8, 5);
  EXPECT_EQ(u8[0], 255);
  EXPECT_EQ(u8[1], 0);
  EXPECT_EQ(u8[2], 0);
  EXPECT_EQ(u8[3], 255);
  EXPECT_EQ(u8[4], 0);
  std::int64_t i64[5];
  convert(od, DType::f64, i64, DType::i64, 5);
  EXPECT_EQ(i64[3], std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(i64[4], std::numeric_limits<std::int64_t>::min());
  // int → int does not pass through double: large i64 values stay exact, narrowing wraps.
  const std::int64_t big[] = {(std::int64_t{1} << 53) + 1, (std::int64_t{1} << 32) + 5, -1};
  std::int32_t n32[3];
  convert(big, DType::i64, n32, DType::i32, 3);
  EXPECT_EQ(n32[1], 5);
  EXPECT_EQ(n32[2], -1);
  std::uint32_t u32[3];
  convert(big, DType::i64, u32, DType::u32, 3);
  EXPECT_EQ(u32[0], 1u);
  EXPECT_EQ(u32[2], 0xffffffffu);
  const std::uint32_t u[] = {0xffffffffu, 7u};
  std::int64_t w[2];
  convert(u, DType::u32, w, DType::i64, 2);
  EXPECT_EQ(w[0], 0xffffffffll);
  EXPECT_EQ(w[1], 7);
  double dd[3];
  convert(big, DType::i64, dd, DType::f64, 3);
  EXPECT_EQ(dd[1], 4294967301.0);
  // int → bf16 rounds to nearest even: 257 is the tie between 256 and 258.
  const std::int32_t ti[] = {257, 259, -3};
  std::uint16_t tb[3];
  convert(ti, DType::i32, tb, DType::bf16, 3);
  EXPECT_EQ(bf16_to_f32(tb[0]), 256.0f);
  EXPECT_EQ(bf16_to_f32(tb[1]), 260.0f);
  EXPECT_EQ(bf16_to_f32(tb[2]), -3.0f);
}

TEST(Convert, SameTypeIsACopyAndZeroLengthIsANoOp) {
  const std::int16_t a[] = {1, -2, 3};
  std::int16_t b[3] = {};
  convert(a, DType::i16, b, DType::i16, 3);
  EXPECT_EQ(std::memcmp(a, b, sizeof a), 0);
  convert(nullptr, DType::f32, nullptr, DType::bf16, 0);
  convert(nullptr, DType::i8, nullptr, DType::f64, 0);
}
