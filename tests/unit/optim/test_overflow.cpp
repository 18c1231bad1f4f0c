// Inf/NaN detection on f32, f16 and bf16 gradient buffers.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include "framework/core/error.hpp"
#include "framework/precision/overflow.hpp"

namespace strata::precision {
namespace {

TEST(Overflow, FindsInfOrNanAnywhereInAFloatBuffer) {
  std::vector<float> g(10007, 1.5f);
  g[17] = FLT_MAX;  // large but finite: no overflow (DeepSpeed's sum test would say yes)
  g[18] = FLT_MAX;
  g[19] = -0.0f;
  g[20] = 1e-45f;   // subnormal
  EXPECT_FALSE(has_inf_or_nan(g.data(), g.size()));
  EXPECT_FALSE(has_inf_or_nan(nullptr, 0));
  for (std::size_t at : {std::size_t{0}, std::size_t{4095}, std::size_t{4096}, g.size() - 1}) {
    for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::quiet_NaN(), -std::nanf("7")}) {
      std::vector<float> h = g;
      h[at] = bad;
      EXPECT_TRUE(has_inf_or_nan(h.data(), h.size())) << "at " << at << " value " << bad;
      EXPECT_FALSE(has_inf_or_nan(h.data(), at)) << "must not read past n";
    }
  }
}

TEST(Overflow, SixteenBitBuffers) {
  std::vector<std::uint16_t> f16(5000, 0x3c00), bf16(5000, 0x3f80);  // 1.0
  f16[3] = 0x7bff;   // 65504, the largest finite f16
  bf16[3] = 0x7f7f;  // the largest finite bf16
  EXPECT_FALSE(has_inf_or_nan(f16.data(), f16.size(), DType::f16));
  EXPECT_FALSE(has_inf_or_nan(bf16.data(), bf16.size(), DType::bf16));
  for (std::uint16_t bad : {0x7c00, 0xfc00, 0x7e00, 0x7c01}) {
    auto h = f16;
    h[4999] = bad;
    EXPECT_TRUE(has_inf_or_nan(h.data(), h.size(), DType::f16)) << std::hex << bad;
  }
  for (std::uint16_t bad : {0x7f80, 0xff80, 0x7fc0, 0x7f81}) {
    auto h = bf16;
    h[0] = bad;
    EXPECT_TRUE(has_inf_or_nan(h.data(), h.size(), DType::bf16)) << std::hex << bad;
  }
  // The same bits mean different things: 0x7c00 is inf in f16 but finite (~8.4e36) in bf16.
  auto h = bf16;
  h[1] = 0x7c00;
  EXPECT_FALSE(has_inf_or_nan(h.data(), h.size(), DType::bf16));
  EXPECT_THROW(has_inf_or_nan(f16.data(), f16.size(), DType::f32), Error);
}

}  // namespace
}  // namespace strata::precision
