// matmul and linear against double-precision references; linear backward against central finite
// differences of the double reference forward. Once per instruction set: "avx512" runs Strata's
// own AVX-512 sgemm, the others OpenBLAS. Tolerances: forward 1e-5 and backward 1e-4, relative
// to the largest reference magnitude (float32 sums of <= a few thousand terms).
#include "tests/unit/cpu/cpu_test_util.hpp"

namespace strata::cpu::test {
namespace {

using Matmul = IsaTest;
using Linear = IsaTest;

struct MatmulCase {
  int M, N, K;
};

TEST_P(Matmul, AllTransposesAlphaBetaOddSizes) {
  // Small (one call), tiled (M*N*K large enough to split) and degenerate sizes.
  for (MatmulCase c : {MatmulCase{1, 1, 1},
                       {3, 17, 5},
                       {17, 3, 1},
                       {1, 300, 13},
                       {257, 131, 67},
                       {300, 200, 70},
                       {70, 600, 530}}) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      const auto A = randn(static_cast<std::size_t>(c.M) * c.K, 1 + t);
      const auto B = randn(static_cast<std::size_t>(c.K) * c.N, 2 + t);
      const auto C0 = randn(static_cast<std::size_t>(c.M) * c.N, 3 + t);
      for (auto [alpha, beta] :
           {std::pair{1.0f, 0.0f}, std::pair{0.5f, 1.0f}, std::pair{-2.0f, 0.25f}}) {
        std::vector<float> C = beta == 0.0f ? nan_filled(C0.size()) : C0;
        matmul(A.data(), B.data(), C.data(), c.M, c.N, c.K, ta, tb, alpha, beta);
        const auto ref = ref_matmul(A, B, C0, c.M, c.N, c.K, ta, tb, alpha, beta);
        EXPECT_TRUE(close(C, ref, 1e-5)) << c.M << "x" << c.N << "x" << c.K << " ta=" << ta
                                         << " tb=" << tb << " alpha=" << alpha << " beta=" << beta;
      }
    }
  }
}

TEST_P(Matmul, EmptyInnerDimensionScalesC) {
  std::vector<float> C = {1.0f, 2.0f, 3.0f, 4.0f};
  matmul(nullptr, nullptr, C.data(), 2, 2, 0, false, false, 1.0f, 0.5f);
  EXPECT_EQ(C, (std::vector<float>{0.5f, 1.0f, 1.5f, 2.0f}));
  std::vector<float> D = nan_filled(4);
  matmul(nullptr, nullptr, D.data(), 2, 2, 0, false, false, 1.0f, 0.0f);
  EXPECT_EQ(D, (std::vector<float>(4, 0.0f)));
}

struct LinearCase {
  int N, in, out;
};

TEST_P(Linear, ForwardMatchesReference) {
  for (LinearCase c : {LinearCase{1, 1, 1},
                       {3, 13, 7},
                       {17, 20, 3},
                       {300, 64, 96},
                       {2048, 64, 192},
                       {40, 300, 600}}) {
    const auto x = randn(static_cast<std::size_t>(c.N) * c.in, 10);
    const auto W = randn(static_cast<std::size_t>(c.out) * c.in, 11, 0.2f);
    const auto b = randn(c.out, 12);
    for (bool bias : {true, false}) {
      auto y = nan_filled(static_cast<std::size_t>(c.N) * c.out);
      linear_forward(x.data(), W.data(), bias ? b.data() : nullptr, y.data(), c.N, c.in, c.out);
      const auto bd = to_double(b);
      const auto ref =
          ref_linear(to_double(x), to_double(W), bias ? &bd : nullptr, c.N, c.in, c.out);
      EXPECT_TRUE(close(y, ref, 1e-5)) << c.N << " " << c.in << " " << c.out << " bias=" << bias;
    }
  }
}

TEST_P(Linear, BackwardMatchesFiniteDifferencesAndAccumulates) {
  for (LinearCase c : {LinearCase{1, 1, 1}, {3, 13, 7}, {17, 9, 20}}) {
    const auto x = randn(static_cast<std::size_t>(c.N) * c.in, 20);
    const auto W = randn(static_cast<std::size_t>(c.out) * c.in, 21, 0.3f);
    const auto b = randn(c.out, 22);
    const auto R = randn(static_cast<std::size_t>(c.N) * c.out, 23);  // L = sum(y * R) => dy = R
    auto xd = to_double(x), Wd = to_double(W), bd = to_double(b);
    const auto gx = fd_grad(xd, [&](const std::vector<double>& v) {
      return dot_loss(ref_linear(v, Wd, &bd, c.N, c.in, c.out), R);
    });
    const auto gW = fd_grad(Wd, [&](const std::vector<double>& v) {
      return dot_loss(ref_linear(xd, v, &bd, c.N, c.in, c.out), R);
    });
    const auto gb = fd_grad(bd, [&](const std::vector<double>& v) {
      return dot_loss(ref_linear(xd, Wd, &v, c.N, c.in, c.out), R);
    });
    // dx is overwritten (NaN before); dW, db accumulate onto their previous values.
    auto dx = nan_filled(x.size());
    const auto dW0 = randn(W.size(), 24), db0 = randn(b.size(), 25);
    auto dW = dW0, db = db0;
    linear_backward(x.data(), W.data(), R.data(), dx.data(), dW.data(), db.data(), c.N, c.in,
                    c.out);
    std::vector<double> gW_acc(gW.size()), gb_acc(gb.size());
    for (std::size_t i = 0; i < gW.size(); ++i) gW_acc[i] = gW[i] + dW0[i];
    for (std::size_t i = 0; i < gb.size(); ++i) gb_acc[i] = gb[i] + db0[i];
    EXPECT_TRUE(close(dx, gx, 1e-4)) << "dx " << c.N << " " << c.in << " " << c.out;
    EXPECT_TRUE(close(dW, gW_acc, 1e-4)) << "dW";
    EXPECT_TRUE(close(db, gb_acc, 1e-4)) << "db";

    // Null dx / db are skipped; dW alone still right.
    auto dW2 = dW0;
    linear_backward(x.data(), W.data(), R.data(), nullptr, dW2.data(), nullptr, c.N, c.in, c.out);
    EXPECT_TRUE(bitwise_equal(dW2, dW));
  }
}

TEST_P(Linear, LargeBackwardMatchesReference) {
  // Shapes of the GPT block (tiled path), against a direct double computation.
  const int N = 512, in = 256, out = 96;
  const auto x = randn(static_cast<std::size_t>(N) * in, 30);
  const auto W = randn(static_cast<std::size_t>(out) * in, 31, 0.1f);
  const auto dy = randn(static_cast<std::size_t>(N) * out, 32);
  auto dx = nan_filled(x.size());
  std::vector<float> dW(W.size(), 0.0f), db(out, 0.0f);
  linear_backward(x.data(), W.data(), dy.data(), dx.data(), dW.data(), db.data(), N, in, out);
  EXPECT_TRUE(close(
      dx, ref_matmul(dy, W, std::vector<float>(dx.size()), N, in, out, false, false, 1, 0), 1e-5));
  EXPECT_TRUE(close(
      dW, ref_matmul(dy, x, std::vector<float>(dW.size()), out, in, N, true, false, 1, 0), 1e-5));
  std::vector<double> rdb(out, 0.0);
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < out; ++o) rdb[o] += dy[static_cast<std::size_t>(n) * out + o];
  EXPECT_TRUE(close(db, rdb, 1e-5));
}

// 16-bit weights are widened where the product reads them (the AVX-512 kernel while packing its
// panels, the BLAS path per tile): bitwise the f32 kernels on the widened weights, forward and
// backward (dW and db accumulate onto what they held), bf16 and f16, with panel and k-block tails.
TEST_P(Linear, SixteenBitWeightsEqualTheF32KernelsOnTheWidenedWeights) {
  for (DType wt : {DType::bf16, DType::f16}) {
    for (LinearCase c : {LinearCase{3, 13, 7}, {37, 600, 70}, {64, 300, 530}}) {
      const auto n_w = static_cast<std::size_t>(c.out) * c.in;
      const auto x = randn(static_cast<std::size_t>(c.N) * c.in, 20);
      const auto dy = randn(static_cast<std::size_t>(c.N) * c.out, 21);
      const auto b = randn(c.out, 22);
      std::vector<std::uint16_t> w16(n_w);
      std::vector<float> wide(n_w);
      convert(randn(n_w, 23, 0.2f).data(), DType::f32, w16.data(), wt, n_w);
      convert(w16.data(), wt, wide.data(), DType::f32, n_w);
      auto y1 = nan_filled(static_cast<std::size_t>(c.N) * c.out), y2 = y1;
      linear_forward(x.data(), wide.data(), b.data(), y1.data(), c.N, c.in, c.out);
      linear_forward_w16(x.data(), w16.data(), wt, b.data(), y2.data(), c.N, c.in, c.out);
      EXPECT_TRUE(bitwise_equal(y1, y2)) << dtype_name(wt) << " forward " << c.N << " " << c.in << " " << c.out;
      auto dx1 = nan_filled(static_cast<std::size_t>(c.N) * c.in), dx2 = dx1;
      auto dW1 = randn(n_w, 24), dW2 = dW1;
      auto db1 = randn(c.out, 25), db2 = db1;
      linear_backward(x.data(), wide.data(), dy.data(), dx1.data(), dW1.data(), db1.data(), c.N, c.in,
                      c.out);
      linear_backward_w16(x.data(), w16.data(), wt, dy.data(), dx2.data(), dW2.data(), db2.data(), c.N,
                          c.in, c.out);
      EXPECT_TRUE(bitwise_equal(dx1, dx2)) << dtype_name(wt) << " dx " << c.N << " " << c.in << " " << c.out;
      EXPECT_TRUE(bitwise_equal(dW1, dW2)) << dtype_name(wt) << " dW";
      EXPECT_TRUE(bitwise_equal(db1, db2)) << dtype_name(wt) << " db";
    }
  }
  std::vector<float> x(4), y(4);
  std::vector<std::uint16_t> w(4);
  EXPECT_THROW(linear_forward_w16(x.data(), w.data(), DType::f32, nullptr, y.data(), 2, 2, 2), Error);
}

// accumulate = false (how the ops give 16-bit gradients their f32 workspaces): dW and db are
// written without being read — NaN-filled outputs come out bitwise equal to accumulating into
// zeros — for f32 and 16-bit weights, with panel and k-block tails.
TEST_P(Linear, BackwardWithoutAccumulatingOverwritesDwAndDb) {
  for (LinearCase c : {LinearCase{3, 13, 7}, {37, 600, 70}, {64, 300, 530}}) {
    const auto n_w = static_cast<std::size_t>(c.out) * c.in;
    const auto x = randn(static_cast<std::size_t>(c.N) * c.in, 30);
    const auto dy = randn(static_cast<std::size_t>(c.N) * c.out, 31);
    std::vector<std::uint16_t> w16(n_w);
    std::vector<float> wide(n_w);
    convert(randn(n_w, 32, 0.2f).data(), DType::f32, w16.data(), DType::bf16, n_w);
    convert(w16.data(), DType::bf16, wide.data(), DType::f32, n_w);
    for (bool sixteen : {false, true}) {
      auto dx1 = nan_filled(static_cast<std::size_t>(c.N) * c.in), dx2 = dx1;
      std::vector<float> dW1(n_w, 0.0f), db1(static_cast<std::size_t>(c.out), 0.0f);
      auto dW2 = nan_filled(n_w), db2 = nan_filled(static_cast<std::size_t>(c.out));
      if (sixteen) {
        linear_backward_w16(x.data(), w16.data(), DType::bf16, dy.data(), dx1.data(), dW1.data(),
                            db1.data(), c.N, c.in, c.out);
        linear_backward_w16(x.data(), w16.data(), DType::bf16, dy.data(), dx2.data(), dW2.data(),
                            db2.data(), c.N, c.in, c.out, /*accumulate=*/false);
      } else {
        linear_backward(x.data(), wide.data(), dy.data(), dx1.data(), dW1.data(), db1.data(), c.N,
                        c.in, c.out);
        linear_backward(x.data(), wide.data(), dy.data(), dx2.data(), dW2.data(), db2.data(), c.N,
                        c.in, c.out, /*accumulate=*/false);
      }
      EXPECT_TRUE(bitwise_equal(dx1, dx2))
          << sixteen << " dx " << c.N << " " << c.in << " " << c.out;
      EXPECT_TRUE(bitwise_equal(dW1, dW2))
          << sixteen << " dW " << c.N << " " << c.in << " " << c.out;
      EXPECT_TRUE(bitwise_equal(db1, db2))
          << sixteen << " db " << c.N << " " << c.in << " " << c.out;
    }
  }
}

STRATA_INSTANTIATE_ISA(Matmul);
STRATA_INSTANTIATE_ISA(Linear);

}  // namespace
}  // namespace strata::cpu::test
