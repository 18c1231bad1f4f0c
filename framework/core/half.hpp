// 16-bit floating point storage types (IEEE binary16 and bfloat16) and their scalar
// conversions to and from f32 with round-to-nearest-even. Bulk, vectorised conversions
// live in convert.hpp.
#pragma once

#include <bit>
#include <cstdint>

#include "framework/core/dtype.hpp"

namespace strata {

struct bfloat16 {
  std::uint16_t bits = 0;
};
struct float16 {
  std::uint16_t bits = 0;
};
template <> struct DTypeOf<bfloat16> { static constexpr DType value = DType::bf16; };
template <> struct DTypeOf<float16> { static constexpr DType value = DType::f16; };

inline float bf16_to_f32(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

// Round to nearest even; NaN stays NaN (quiet), inf stays inf.
inline std::uint16_t f32_to_bf16(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

inline float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t out;
  if (exp == 0x1f) {
    out = sign | 0x7f800000u | (mant << 13);  // inf / nan
  } else if (exp != 0) {
    out = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    out = sign;  // ±0
  } else {       // subnormal: normalise
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    out = sign | ((112u - static_cast<std::uint32_t>(e)) << 23) | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(out);
}

// Round to nearest even, overflow to inf, underflow through subnormals to ±0.
inline std::uint16_t f32_to_f16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u | static_cast<std::uint16_t>((a >> 13) & 0x3ffu);
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520 → inf (and inf itself)
  if (a >= 0x38800000u) {                       // normal in f16
    std::uint32_t r = a - 0x38000000u;          // rebias exponent 127 → 15
    r += 0xfffu + ((r >> 13) & 1u);
    return sign | static_cast<std::uint16_t>(r >> 13);
  }
  if (a < 0x33000000u) return sign;  // < 2^-25: rounds to zero
  // subnormal: value = mant * 2^(e-150); f16 subnormal unit is 2^-24.
  const std::uint32_t e = a >> 23;
  const std::uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126u - e;  // 14..24 bits dropped
  std::uint32_t r = mant >> shift;
  const std::uint32_t rem = mant & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (r & 1u))) ++r;
  return sign | static_cast<std::uint16_t>(r);
}

inline float to_f32(float x) { return x; }
inline float to_f32(bfloat16 x) { return bf16_to_f32(x.bits); }
inline float to_f32(float16 x) { return f16_to_f32(x.bits); }
template <typename T> T from_f32(float x);
template <> inline float from_f32<float>(float x) { return x; }
template <> inline bfloat16 from_f32<bfloat16>(float x) { return {f32_to_bf16(x)}; }
template <> inline float16 from_f32<float16>(float x) { return {f32_to_f16(x)}; }

}  // namespace strata
