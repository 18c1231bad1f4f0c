// Causal multi-head attention against a double reference (out and lse), its backward against
// central finite differences of that reference, and causality, once per instruction set.
// Tolerances: forward 1e-5, backward 2e-4 relative to the largest reference magnitude.
#include "tests/unit/cpu/cpu_test_util.hpp"

namespace strata::cpu::test {
namespace {

struct Case {
  int B, T, C, NH;
};

using Attention = IsaTest;

TEST_P(Attention, ForwardMatchesReference) {
  // Head sizes 3..80 (80 = two and a half 32-wide panels), T across 1..3 blocks of 64 rows.
  for (Case c : {Case{1, 1, 4, 1}, Case{2, 3, 6, 2}, Case{2, 17, 12, 3}, Case{1, 70, 8, 1},
                 Case{2, 130, 20, 4}, Case{1, 129, 80, 1}, Case{3, 65, 128, 2}}) {
    const std::size_t n = static_cast<std::size_t>(c.B) * c.T * 3 * c.C;
    const auto qkv = randn(n, 50);
    auto out = nan_filled(static_cast<std::size_t>(c.B) * c.T * c.C);
    auto lse = nan_filled(static_cast<std::size_t>(c.B) * c.NH * c.T);
    attention_forward(qkv.data(), out.data(), lse.data(), c.B, c.T, c.C, c.NH);
    std::vector<double> rlse;
    const auto ref = ref_attention(to_double(qkv), c.B, c.T, c.C, c.NH, &rlse);
    EXPECT_TRUE(close(out, ref, 1e-5)) << c.B << " " << c.T << " " << c.C << " " << c.NH;
    EXPECT_TRUE(close(lse, rlse, 1e-5)) << c.B << " " << c.T << " " << c.C << " " << c.NH;
  }
}

TEST_P(Attention, BackwardMatchesFiniteDifferences) {
  // T=70 spans two query blocks (the kernel blocks rows by 64).
  for (Case c : {Case{1, 1, 4, 1}, Case{2, 3, 6, 2}, Case{2, 17, 12, 3}, Case{1, 70, 4, 1}}) {
    const std::size_t n = static_cast<std::size_t>(c.B) * c.T * 3 * c.C;
    const auto qkv = randn(n, 51);
    const auto R = randn(static_cast<std::size_t>(c.B) * c.T * c.C, 52);
    std::vector<float> out(R.size()), lse(static_cast<std::size_t>(c.B) * c.NH * c.T);
    attention_forward(qkv.data(), out.data(), lse.data(), c.B, c.T, c.C, c.NH);
    auto dqkv = nan_filled(n);  // overwritten
    attention_backward(qkv.data(), out.data(), lse.data(), R.data(), dqkv.data(), c.B, c.T, c.C,
                       c.NH);
    const auto g = fd_grad(to_double(qkv), [&](const auto& v) {
      return dot_loss(ref_attention(v, c.B, c.T, c.C, c.NH), R);
    });
    EXPECT_TRUE(close(dqkv, g, 2e-4)) << c.B << " " << c.T << " " << c.C << " " << c.NH;
  }
}

TEST_P(Attention, BackwardMatchesFiniteDifferencesLargeHeads) {
  // Head size 34 (two panels, one partial) and T = 66 (two row blocks): sampled coordinates.
  const Case c{2, 66, 68, 2};
  const std::size_t n = static_cast<std::size_t>(c.B) * c.T * 3 * c.C;
  const auto qkv = randn(n, 56);
  const auto R = randn(static_cast<std::size_t>(c.B) * c.T * c.C, 57);
  std::vector<float> out(R.size()), lse(static_cast<std::size_t>(c.B) * c.NH * c.T);
  attention_forward(qkv.data(), out.data(), lse.data(), c.B, c.T, c.C, c.NH);
  auto dqkv = nan_filled(n);
  attention_backward(qkv.data(), out.data(), lse.data(), R.data(), dqkv.data(), c.B, c.T, c.C,
                     c.NH);
  const auto idx = sample_indices(n, 400, 58);
  const auto g = fd_grad_at(to_double(qkv), idx, [&](const auto& v) {
    return dot_loss(ref_attention(v, c.B, c.T, c.C, c.NH), R);
  });
  std::vector<float> got(idx.size());
  for (std::size_t i = 0; i < idx.size(); ++i) got[i] = dqkv[idx[i]];
  EXPECT_TRUE(close(got, g, 2e-4));
}

TEST_P(Attention, FutureTokensDoNotChangeEarlierOutputs) {
  const int B = 2, T = 100, C = 32, NH = 4, t0 = 37;
  const std::size_t n = static_cast<std::size_t>(B) * T * 3 * C;
  auto qkv = randn(n, 53);
  std::vector<float> out1(static_cast<std::size_t>(B) * T * C),
      lse1(static_cast<std::size_t>(B) * NH * T);
  attention_forward(qkv.data(), out1.data(), lse1.data(), B, T, C, NH);
  // Change q, k and v of every position >= t0 in both sequences.
  auto qkv2 = qkv;
  const auto noise = randn(n, 54, 5.0f);
  for (int b = 0; b < B; ++b)
    for (int t = t0; t < T; ++t)
      for (int j = 0; j < 3 * C; ++j) {
        const std::size_t i = (static_cast<std::size_t>(b) * T + t) * 3 * C + j;
        qkv2[i] = noise[i];
      }
  auto out2 = out1, lse2 = lse1;
  attention_forward(qkv2.data(), out2.data(), lse2.data(), B, T, C, NH);
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      for (int j = 0; j < C; ++j) {
        const std::size_t i = (static_cast<std::size_t>(b) * T + t) * C + j;
        if (t < t0) {
          ASSERT_EQ(out1[i], out2[i]) << "b=" << b << " t=" << t;
        }
      }
      if (t >= t0) {
        const std::size_t i = (static_cast<std::size_t>(b) * T + t) * C;
        EXPECT_NE(out1[i], out2[i]) << "b=" << b << " t=" << t;
      }
    }
  }
  // Backward: a loss on rows < t0 only gives exactly zero gradient to positions >= t0.
  auto dout = randn(out1.size(), 55);
  for (int b = 0; b < B; ++b)
    for (int t = t0; t < T; ++t)
      for (int j = 0; j < C; ++j) dout[(static_cast<std::size_t>(b) * T + t) * C + j] = 0.0f;
  auto dqkv = nan_filled(n);
  attention_backward(qkv.data(), out1.data(), lse1.data(), dout.data(), dqkv.data(), B, T, C, NH);
  bool some_nonzero = false;
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < 3 * C; ++j) {
        const float v = dqkv[(static_cast<std::size_t>(b) * T + t) * 3 * C + j];
        if (t >= t0) {
          ASSERT_EQ(v, 0.0f) << "b=" << b << " t=" << t << " j=" << j;
        } else {
          some_nonzero = some_nonzero || v != 0.0f;
        }
      }
  EXPECT_TRUE(some_nonzero);
}

TEST(AttentionArgs, RejectsHeadsThatDoNotDivideC) {
  std::vector<float> qkv(3 * 10), out(10), lse(3);
  EXPECT_THROW(attention_forward(qkv.data(), out.data(), lse.data(), 1, 1, 10, 3), strata::Error);
}

STRATA_INSTANTIATE_ISA(Attention);

}  // namespace
}  // namespace strata::cpu::test
