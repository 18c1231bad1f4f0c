// LayerNorm against a double reference (forward, saved mean/rstd) and its backward against
// central finite differences of that reference, once per instruction set. Tolerances: forward
// 1e-5, backward 1e-4 relative to the largest reference magnitude.
#include "tests/unit/cpu/cpu_test_util.hpp"

namespace strata::cpu::test {
namespace {
namespace test_layernorm {  // file-local names, unique in a unity build

constexpr float kEps = 1e-5f;

using LayerNorm = IsaTest;

struct Case {
  int N, C;
};

TEST_P(LayerNorm, ForwardMatchesReference) {
  for (Case c : {Case{1, 1}, Case{3, 13}, Case{17, 8}, Case{5, 31}, Case{64, 256}, Case{2, 1000}}) {
    auto x = randn(static_cast<std::size_t>(c.N) * c.C, 1, 2.0f);
    for (auto& v : x) v += 3.0f;  // a non-zero mean
    const auto w = randn(c.C, 2), b = randn(c.C, 3);
    auto y = nan_filled(x.size()), mean = nan_filled(c.N), rstd = nan_filled(c.N);
    layernorm_forward(x.data(), w.data(), b.data(), y.data(), mean.data(), rstd.data(), c.N, c.C,
                      kEps);
    std::vector<double> rm, rr;
    const auto ref = ref_layernorm(to_double(x), to_double(w), to_double(b), c.N, c.C, &rm, &rr);
    EXPECT_TRUE(close(y, ref, 1e-5)) << c.N << "x" << c.C;
    EXPECT_TRUE(close(mean, rm, 1e-5)) << c.N << "x" << c.C;
    EXPECT_TRUE(close(rstd, rr, 1e-4)) << c.N << "x" << c.C;  // rstd of C=1 rows is 1/sqrt(eps)
  }
}

TEST_P(LayerNorm, BackwardMatchesFiniteDifferencesAndAccumulates) {
  for (Case c : {Case{1, 2}, Case{3, 13}, Case{17, 8}, Case{4, 37}}) {
    const auto x = randn(static_cast<std::size_t>(c.N) * c.C, 4);
    const auto w = randn(c.C, 5), b = randn(c.C, 6);
    const auto R = randn(x.size(), 7);
    auto y = nan_filled(x.size()), mean = nan_filled(c.N), rstd = nan_filled(c.N);
    layernorm_forward(x.data(), w.data(), b.data(), y.data(), mean.data(), rstd.data(), c.N, c.C,
                      kEps);
    const auto xd = to_double(x), wd = to_double(w), bd = to_double(b);
    const auto gx =
        fd_grad(xd, [&](const auto& v) { return dot_loss(ref_layernorm(v, wd, bd, c.N, c.C), R); });
    const auto gw =
        fd_grad(wd, [&](const auto& v) { return dot_loss(ref_layernorm(xd, v, bd, c.N, c.C), R); });
    const auto gb =
        fd_grad(bd, [&](const auto& v) { return dot_loss(ref_layernorm(xd, wd, v, c.N, c.C), R); });
    auto dx = nan_filled(x.size());
    const auto dw0 = randn(c.C, 8), db0 = randn(c.C, 9);
    auto dw = dw0, db = db0;
    layernorm_backward(R.data(), x.data(), w.data(), mean.data(), rstd.data(), dx.data(), dw.data(),
                       db.data(), c.N, c.C);
    std::vector<double> gw_acc(c.C), gb_acc(c.C);
    for (int i = 0; i < c.C; ++i) {
      gw_acc[i] = gw[i] + dw0[i];
      gb_acc[i] = gb[i] + db0[i];
    }
    // C=2 rows normalise to +-1 whatever x is, so dx is ~0 there: judge it against an O(1) scale.
    EXPECT_TRUE(close(dx, gx, 1e-4, /*floor=*/1e-2)) << c.N << "x" << c.C;
    EXPECT_TRUE(close(dw, gw_acc, 1e-4)) << c.N << "x" << c.C;
    EXPECT_TRUE(close(db, gb_acc, 1e-4)) << c.N << "x" << c.C;
  }
}

TEST_P(LayerNorm, BackwardSumsOverManyRows) {
  // Enough rows for several reduction chunks: dw/db against direct double sums.
  const int N = 1000, C = 24;
  const auto x = randn(static_cast<std::size_t>(N) * C, 10), w = randn(C, 11), b = randn(C, 12);
  const auto dy = randn(x.size(), 13);
  std::vector<float> y(x.size()), mean(N), rstd(N), dx(x.size()), dw(C, 0.0f), db(C, 0.0f);
  layernorm_forward(x.data(), w.data(), b.data(), y.data(), mean.data(), rstd.data(), N, C, kEps);
  layernorm_backward(dy.data(), x.data(), w.data(), mean.data(), rstd.data(), dx.data(), dw.data(),
                     db.data(), N, C);
  std::vector<double> rm, rr;
  ref_layernorm(to_double(x), to_double(w), to_double(b), N, C, &rm, &rr);
  std::vector<double> rdw(C, 0.0), rdb(C, 0.0);
  for (int n = 0; n < N; ++n) {
    for (int c = 0; c < C; ++c) {
      const std::size_t i = static_cast<std::size_t>(n) * C + c;
      rdw[c] += dy[i] * (x[i] - rm[n]) * rr[n];
      rdb[c] += dy[i];
    }
  }
  EXPECT_TRUE(close(dw, rdw, 1e-5));
  EXPECT_TRUE(close(db, rdb, 1e-5));
}

STRATA_INSTANTIATE_ISA(LayerNorm);

}  // namespace test_layernorm
}  // namespace
}  // namespace strata::cpu::test
