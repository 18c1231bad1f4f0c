// GELU (tanh approximation, PyTorch's formula) against a double reference and its backward
// against central finite differences, once per instruction set. Tolerances: forward 2e-6 and
// backward 1e-5 relative to each element's magnitude scale (floor 1).
#include "tests/unit/cpu/cpu_test_util.hpp"

namespace strata::cpu::test {
namespace {

using Gelu = IsaTest;

std::vector<float> inputs(std::size_t n) {
  auto x = randn(n, 40, 3.0f);
  const float special[] = {0.0f, -0.0f, 1e-8f, -1e-8f, 10.0f, -10.0f, 50.0f, -50.0f, 1e4f, -1e4f};
  for (std::size_t i = 0; i < std::size(special) && i < n; ++i) x[i] = special[i];
  return x;
}

TEST_P(Gelu, ForwardMatchesReference) {
  for (std::size_t n : {std::size_t{1}, std::size_t{3}, std::size_t{17}, std::size_t{100003}}) {
    const auto x = inputs(n);
    auto y = nan_filled(n);
    gelu_forward(x.data(), y.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      const double r = ref_gelu(x[i]);
      ASSERT_NEAR(y[i], r, 2e-6 * std::max(1.0, std::abs(r))) << "x=" << x[i] << " n=" << n;
    }
  }
}

TEST_P(Gelu, BackwardMatchesFiniteDifferences) {
  for (std::size_t n : {std::size_t{1}, std::size_t{3}, std::size_t{17}, std::size_t{1001}}) {
    const auto x = inputs(n);
    const auto dy = randn(n, 41);
    auto dx = nan_filled(n);
    gelu_backward(x.data(), dy.data(), dx.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      const double h = 1e-5 * std::max(1.0, std::abs(double(x[i])));
      const double d = (ref_gelu(x[i] + h) - ref_gelu(x[i] - h)) / (2 * h);
      ASSERT_NEAR(dx[i], dy[i] * d, 1e-5 * std::max(1.0, std::abs(dy[i] * d))) << "x=" << x[i];
    }
    // dx may alias dy.
    auto g = dy;
    gelu_backward(x.data(), g.data(), g.data(), n);
    EXPECT_TRUE(bitwise_equal(g, dx));
  }
}

STRATA_INSTANTIATE_ISA(Gelu);

}  // namespace
}  // namespace strata::cpu::test
