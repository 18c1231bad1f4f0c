// add / add_inplace / scale_inplace (exact) and sum_squares (double, against a long double sum;
// tolerance 1e-12 relative).
#include "tests/unit/cpu/cpu_test_util.hpp"

namespace strata::cpu::test {
namespace {

TEST(Elementwise, AddAndScaleAreExact) {
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{17}, std::size_t{100003}}) {
    const auto a = randn(n, 80), b = randn(n, 81);
    auto out = nan_filled(n);
    add(a.data(), b.data(), out.data(), n);
    auto acc = a;
    add_inplace(acc.data(), b.data(), n);
    auto sc = a;
    scale_inplace(sc.data(), -0.375f, n);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(out[i], a[i] + b[i]);
      ASSERT_EQ(acc[i], a[i] + b[i]);
      ASSERT_EQ(sc[i], a[i] * -0.375f);
    }
  }
}

TEST(Elementwise, SumSquaresMatchesLongDouble) {
  EXPECT_EQ(sum_squares(nullptr, 0), 0.0);
  for (std::size_t n : {std::size_t{1}, std::size_t{3}, std::size_t{17}, std::size_t{1000003}}) {
    const auto a = randn(n, 82, 10.0f);
    long double ref = 0.0L;
    for (float v : a) ref += static_cast<long double>(v) * v;
    EXPECT_NEAR(sum_squares(a.data(), n), static_cast<double>(ref),
                1e-12 * static_cast<double>(ref));
  }
}

TEST(Elementwise, SumSquaresOf16BitValuesEqualsThatOfTheirF32WideningForAnyThreadCount) {
  const int saved = num_threads();
  for (DType dt : {DType::bf16, DType::f16}) {
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{17}, std::size_t{32769},
                          std::size_t{1000003}}) {
      const auto a = randn(n, 83, 3.0f);
      std::vector<std::uint16_t> h(n);
      convert(a.data(), DType::f32, h.data(), dt, n);
      std::vector<float> wide(n);
      convert(h.data(), dt, wide.data(), DType::f32, n);
      const double ref = sum_squares(wide.data(), n);
      for (int threads : {1, 2, 3}) {
        set_num_threads(threads);
        EXPECT_EQ(sum_squares(h.data(), dt, n), ref) << dtype_name(dt) << " n=" << n << " threads=" << threads;
      }
    }
  }
  set_num_threads(saved);
}

}  // namespace
}  // namespace strata::cpu::test
