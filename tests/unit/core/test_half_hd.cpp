// The CUDA kernels' 16-bit conversions (framework/backend/cuda/ops/half_hd.hpp, compiled for host
// and device) are bitwise the CPU's (framework/core/half.hpp): every 16-bit pattern widened, and
// every f32 rounding class (normal, subnormal in the target, ties, overflow, NaN, inf) narrowed.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <random>

#include "framework/backend/cuda/ops/half_hd.hpp"
#include "framework/core/half.hpp"

namespace strata {
namespace {

TEST(CudaHalfConversions, EveryBf16AndF16PatternWidensAsTheCpu) {
  for (std::uint32_t h = 0; h <= 0xffffu; ++h) {
    const auto b = static_cast<std::uint16_t>(h);
    ASSERT_EQ(std::bit_cast<std::uint32_t>(cuda_ops::bf16_to_f32(b)),
              std::bit_cast<std::uint32_t>(bf16_to_f32(b))) << std::hex << h;
    ASSERT_EQ(std::bit_cast<std::uint32_t>(cuda_ops::f16_to_f32(b)),
              std::bit_cast<std::uint32_t>(f16_to_f32(b))) << std::hex << h;
  }
}

TEST(CudaHalfConversions, F32NarrowsAsTheCpu) {
  auto check = [](std::uint32_t u) {
    const float f = std::bit_cast<float>(u);
    ASSERT_EQ(cuda_ops::f32_to_bf16(f), f32_to_bf16(f)) << std::hex << u;
    ASSERT_EQ(cuda_ops::f32_to_f16(f), f32_to_f16(f)) << std::hex << u;
  };
  // Every exponent with the mantissas around the rounding boundaries of both formats, both signs.
  for (std::uint32_t sign : {0u, 0x80000000u})
    for (std::uint32_t e = 0; e <= 0xff; ++e)
      for (std::uint32_t m : {0u, 1u, 0xfffu, 0x1000u, 0x1001u, 0x1fffu, 0x7fffu, 0x8000u, 0x8001u,
                              0x18000u, 0x3fffffu, 0x400000u, 0x7fe000u, 0x7ff000u, 0x7fffffu})
        check(sign | (e << 23) | m);
  std::mt19937 rng(7);
  for (int i = 0; i < 2'000'000; ++i) check(rng());
}

TEST(CudaHalfConversions, LoadAndStoreByDtypeCode) {
  const std::uint16_t b = f32_to_bf16(1.5f), h = f32_to_f16(-2.25f);
  const float f = 3.0f;
  EXPECT_EQ(cuda_ops::load(&b, cuda_ops::DT::bf16, 0), 1.5f);
  EXPECT_EQ(cuda_ops::load(&h, cuda_ops::DT::f16, 0), -2.25f);
  EXPECT_EQ(cuda_ops::load(&f, cuda_ops::DT::f32, 0), 3.0f);
  std::uint16_t out16 = 0;
  cuda_ops::store(&out16, cuda_ops::DT::bf16, 0, 1.00390625f);  // a tie: rounds to even (1.0)
  EXPECT_EQ(out16, f32_to_bf16(1.00390625f));
  cuda_ops::store(&out16, cuda_ops::DT::f16, 0, 70000.0f);  // overflow: inf
  EXPECT_EQ(out16, 0x7c00u);
  EXPECT_EQ(cuda_ops::round_to(cuda_ops::DT::bf16, 1.00390625f), 1.0f);
}

}  // namespace
}  // namespace strata
