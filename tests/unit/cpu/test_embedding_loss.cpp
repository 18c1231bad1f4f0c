// Embedding and cross-entropy against double references; backwards against central finite
// differences of those references (cross-entropy once per instruction set). Tolerances:
// forward 1e-6 (embedding, exact up to one rounding) / 1e-5 (cross-entropy), backward 1e-4,
// relative to the largest reference magnitude.
#include "tests/unit/cpu/cpu_test_util.hpp"

namespace strata::cpu::test {
namespace {

TEST(Embedding, ForwardAndBackwardWithRepeatedTokens) {
  struct Case {
    int B, T, C, V;
  };
  for (Case c : {Case{1, 1, 1, 1}, Case{2, 3, 5, 4}, Case{3, 17, 13, 5}}) {
    const auto tok = randint(static_cast<std::size_t>(c.B) * c.T, c.V, 60);  // V small => repeats
    const auto wte = randn(static_cast<std::size_t>(c.V) * c.C, 61),
               wpe = randn(static_cast<std::size_t>(c.T) * c.C, 62);
    auto out = nan_filled(static_cast<std::size_t>(c.B) * c.T * c.C);
    embedding_forward(tok.data(), wte.data(), wpe.data(), out.data(), c.B, c.T, c.C);
    const auto wted = to_double(wte), wped = to_double(wpe);
    EXPECT_TRUE(close(out, ref_embedding(tok, wted, wped, c.B, c.T, c.C), 1e-6));

    const auto R = randn(out.size(), 63);
    const auto gte = fd_grad(wted, [&](const auto& v) {
      return dot_loss(ref_embedding(tok, v, wped, c.B, c.T, c.C), R);
    });
    const auto gpe = fd_grad(wped, [&](const auto& v) {
      return dot_loss(ref_embedding(tok, wted, v, c.B, c.T, c.C), R);
    });
    const auto dte0 = randn(wte.size(), 64), dpe0 = randn(wpe.size(), 65);
    auto dte = dte0, dpe = dpe0;  // accumulated
    embedding_backward(tok.data(), R.data(), dte.data(), dpe.data(), c.B, c.T, c.C);
    for (std::size_t i = 0; i < dte.size(); ++i) dte[i] -= dte0[i];
    for (std::size_t i = 0; i < dpe.size(); ++i) dpe[i] -= dpe0[i];
    EXPECT_TRUE(close(dte, gte, 1e-4));
    EXPECT_TRUE(close(dpe, gpe, 1e-4));
  }
}

TEST(Embedding, RejectsNegativeTokens) {
  std::vector<std::int32_t> tok = {0, -1};
  std::vector<float> wte(4), wpe(4), out(4);
  EXPECT_THROW(embedding_forward(tok.data(), wte.data(), wpe.data(), out.data(), 1, 2, 2),
               strata::Error);
}

using CrossEntropy = IsaTest;

struct CeCase {
  int N, V;
};

TEST_P(CrossEntropy, ForwardMatchesReferenceWithIgnoredRows) {
  for (CeCase c : {CeCase{1, 1}, CeCase{3, 5}, CeCase{17, 13}, CeCase{64, 257}}) {
    auto logits = randn(static_cast<std::size_t>(c.N) * c.V, 70, 3.0f);
    logits[0] += 60.0f;  // a large logit: needs the max shift
    auto tgt = randint(c.N, c.V, 71);
    if (c.N > 2) tgt[1] = -1, tgt[c.N - 1] = -100;  // ignored
    auto lse = nan_filled(c.N);
    const double loss = cross_entropy_forward(logits.data(), tgt.data(), lse.data(), c.N, c.V);
    std::vector<double> rlse;
    const double ref = ref_ce(to_double(logits), tgt, c.N, c.V, &rlse);
    EXPECT_NEAR(loss, ref, 1e-5 * std::max(1.0, std::abs(ref))) << c.N << "x" << c.V;
    EXPECT_TRUE(close(lse, rlse, 1e-6)) << c.N << "x" << c.V;
  }
}

TEST_P(CrossEntropy, BackwardMatchesFiniteDifferencesInPlace) {
  for (CeCase c : {CeCase{1, 1}, CeCase{3, 5}, CeCase{17, 13}, CeCase{5, 70}}) {
    const auto logits = randn(static_cast<std::size_t>(c.N) * c.V, 72, 2.0f);
    auto tgt = randint(c.N, c.V, 73);
    if (c.N > 2) tgt[0] = -1;
    int valid = 0;
    for (auto t : tgt) valid += t >= 0;
    const float scale = 1.0f / std::max(1, valid);  // mean over non-ignored rows
    std::vector<float> lse(c.N);
    cross_entropy_forward(logits.data(), tgt.data(), lse.data(), c.N, c.V);
    auto g =
        fd_grad(to_double(logits), [&](const auto& v) { return ref_ce(v, tgt, c.N, c.V) * scale; });
    auto d = nan_filled(logits.size());
    cross_entropy_backward(logits.data(), lse.data(), tgt.data(), d.data(), c.N, c.V, scale);
    EXPECT_TRUE(close(d, g, 1e-4)) << c.N << "x" << c.V;
    // Ignored rows get exactly zero.
    for (int n = 0; n < c.N; ++n) {
      if (tgt[n] < 0) {
        for (int v = 0; v < c.V; ++v) ASSERT_EQ(d[static_cast<std::size_t>(n) * c.V + v], 0.0f);
      }
    }
    // dlogits may alias logits.
    auto inplace = logits;
    cross_entropy_backward(inplace.data(), lse.data(), tgt.data(), inplace.data(), c.N, c.V, scale);
    EXPECT_TRUE(bitwise_equal(inplace, d));
  }
}

TEST(CrossEntropyArgs, RejectsTargetOutsideVocabulary) {
  std::vector<float> logits(4), lse(2);
  std::vector<std::int32_t> tgt = {0, 2};
  EXPECT_THROW(cross_entropy_forward(logits.data(), tgt.data(), lse.data(), 2, 2), strata::Error);
}

STRATA_INSTANTIATE_ISA(CrossEntropy);

}  // namespace
}  // namespace strata::cpu::test
