// The 16-bit conversions of framework/core/half.hpp (round to nearest even, the same bits for every
// input, NaN and inf included) written once for host and device code: the CUDA kernels load and
// store bf16/f16 through these, so a GPU rounds exactly as the CPU backend does. Compiles under
// g++ (tests/unit/cuda checks every 16-bit pattern and a sweep of f32 ones against half.hpp) and
// nvcc.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define STRATA_HD __host__ __device__ __forceinline__
#else
#define STRATA_HD inline
#endif

namespace strata::cuda_ops {

STRATA_HD std::uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

STRATA_HD float bits_f32(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

STRATA_HD float bf16_to_f32(std::uint16_t h) { return bits_f32(static_cast<std::uint32_t>(h) << 16); }

STRATA_HD std::uint16_t f32_to_bf16(float f) {
  std::uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

STRATA_HD float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t out;
  if (exp == 0x1f) {
    out = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    out = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    out = sign;
  } else {
    // Subnormal: mant * 2^-24 is exact in f32.
    const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    out = sign | f32_bits(v);
  }
  return bits_f32(out);
}

STRATA_HD std::uint16_t f32_to_f16(float f) {
  const std::uint32_t u = f32_bits(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u | static_cast<std::uint16_t>((a >> 13) & 0x3ffu);
  if (a >= 0x477ff000u) return sign | 0x7c00u;
  if (a >= 0x38800000u) {
    std::uint32_t r = a - 0x38000000u;
    r += 0xfffu + ((r >> 13) & 1u);
    return sign | static_cast<std::uint16_t>(r >> 13);
  }
  if (a < 0x33000000u) return sign;
  const std::uint32_t e = a >> 23;
  const std::uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126u - e;
  std::uint32_t r = mant >> shift;
  const std::uint32_t rem = mant & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (r & 1u))) ++r;
  return sign | static_cast<std::uint16_t>(r);
}

// Element types of a kernel operand, chosen at run time (one instantiation per kernel; the branch
// is uniform across a launch). Values match strata::DType's float members by name, not number.
enum class DT : int { f32 = 0, bf16 = 1, f16 = 2 };

STRATA_HD float load(const void* p, DT t, std::int64_t i) {
  switch (t) {
    case DT::bf16: return bf16_to_f32(static_cast<const std::uint16_t*>(p)[i]);
    case DT::f16: return f16_to_f32(static_cast<const std::uint16_t*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

// Stores v rounded to nearest even in t.
STRATA_HD void store(void* p, DT t, std::int64_t i, float v) {
  switch (t) {
    case DT::bf16: static_cast<std::uint16_t*>(p)[i] = f32_to_bf16(v); break;
    case DT::f16: static_cast<std::uint16_t*>(p)[i] = f32_to_f16(v); break;
    default: static_cast<float*>(p)[i] = v; break;
  }
}

// v rounded to t and widened back (f32: v itself).
STRATA_HD float round_to(DT t, float v) {
  switch (t) {
    case DT::bf16: return bf16_to_f32(f32_to_bf16(v));
    case DT::f16: return f16_to_f32(f32_to_f16(v));
    default: return v;
  }
}

}  // namespace strata::cuda_ops
