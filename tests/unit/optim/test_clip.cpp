// Global-norm clipping helpers: sums of squares, the norm, and torch/DeepSpeed's coefficient.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "framework/core/error.hpp"
#include "framework/optim/clip.hpp"

namespace strata::optim {
namespace {

TEST(Clip, SumOfSquaresAndGlobalNormOverSeveralBuffers) {
  const std::vector<float> a = {3.0f, 4.0f}, b = {12.0f}, empty;
  EXPECT_EQ(sum_squares(a.data(), a.size()), 25.0);
  EXPECT_EQ(sum_squares(nullptr, 0), 0.0);
  const std::span<const float> bufs[] = {a, b, empty};
  const double total = sum_squares(bufs);
  EXPECT_EQ(total, 169.0);
  EXPECT_EQ(global_norm(total), 13.0);
}

TEST(Clip, SumOfSquaresIsAccurateOnALargeBuffer) {
  std::vector<float> g(1'000'003);
  double want = 0.0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    g[i] = static_cast<float>(std::sin(static_cast<double>(i)) * 1e-3);
    want += static_cast<double>(g[i]) * g[i];
  }
  const double got = sum_squares(g.data(), g.size());
  EXPECT_NEAR(got, want, 1e-12 * want);
  EXPECT_EQ(got, sum_squares(g.data(), g.size())) << "must be reproducible";
}

TEST(Clip, CoefficientIsMaxNormOverNormPlusEpsilonWhenBelowOne) {
  EXPECT_EQ(clip_coefficient(13.0, 1.0), static_cast<float>(1.0 / (13.0 + 1e-6)));
  EXPECT_EQ(clip_coefficient(4.0, 2.0), static_cast<float>(2.0 / (4.0 + 1e-6)));
  EXPECT_EQ(clip_coefficient(0.5, 1.0), 1.0f);  // no clipping
  EXPECT_EQ(clip_coefficient(1.0, 1.0), static_cast<float>(1.0 / (1.0 + 1e-6)));  // just < 1
  EXPECT_LT(clip_coefficient(1.0, 1.0), 1.0f);
  EXPECT_EQ(clip_coefficient(0.0, 1.0), 1.0f);
  EXPECT_EQ(clip_coefficient(std::numeric_limits<double>::infinity(), 1.0), 1.0f);
  EXPECT_EQ(clip_coefficient(std::nan(""), 1.0), 1.0f);
  EXPECT_THROW(clip_coefficient(1.0, 0.0), UserError);
  EXPECT_THROW(clip_coefficient(1.0, -1.0), UserError);
}

}  // namespace
}  // namespace strata::optim
