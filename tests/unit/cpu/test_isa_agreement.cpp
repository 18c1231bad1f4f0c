// Every instruction set's row kernels (one body over vector traits) agree with the scalar build at
// every tail length: bitwise where no fused multiply-add or lane reduction is involved, within
// float round-off elsewhere; masked stores never write past the end of a row.
#include <functional>

#include "framework/backend/cpu/row_kernels.hpp"
#include "tests/unit/cpu/cpu_test_util.hpp"

namespace strata::cpu::test {
namespace {

using detail::RowKernels;

constexpr float kSentinel = -1234.5f;  // what lies past the end of every output

// Runs fn(table, out) on a buffer of `n` outputs followed by `pad` sentinels; checks the sentinels
// are intact and returns the n outputs.
std::vector<float> run(const RowKernels& k, std::size_t n,
                       const std::function<void(const RowKernels&, float*)>& fn,
                       const char* what) {
  constexpr std::size_t pad = 17;
  std::vector<float> out(n + pad, kSentinel);
  fn(k, out.data());
  for (std::size_t i = n; i < n + pad; ++i)
    EXPECT_EQ(out[i], kSentinel) << what << " (" << k.name << ") wrote past the end: n=" << n;
  out.resize(n);
  return out;
}

class IsaAgreement : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    detail::force_isa(GetParam());
    vec_ = &detail::row_kernels();
    detail::force_isa("generic");
    ref_ = &detail::row_kernels();
    detail::force_isa("");
  }
  // Same outputs from the vector and the scalar build: bitwise, or within rtol of the scale.
  void expect_agree(std::size_t n, const std::function<void(const RowKernels&, float*)>& fn,
                    const char* what, double rtol) {
    const auto got = run(*vec_, n, fn, what), want = run(*ref_, n, fn, what);
    if (rtol == 0.0) {
      EXPECT_TRUE(bitwise_equal(got, want)) << what << " (" << vec_->name << ") n=" << n;
    } else {
      EXPECT_TRUE(close(got, want, rtol)) << what << " (" << vec_->name << ") n=" << n;
    }
  }
  const RowKernels* vec_ = nullptr;
  const RowKernels* ref_ = nullptr;
};

TEST_P(IsaAgreement, EveryRowKernelAgreesWithTheScalarBuildAtEveryTailLength) {
  ASSERT_STREQ(vec_->name, GetParam().c_str());
  ASSERT_STREQ(ref_->name, "generic");
  std::vector<std::size_t> lengths;
  for (std::size_t n = 1; n <= 34; ++n) lengths.push_back(n);  // every tail of 8 and 16 lanes
  lengths.push_back(1000);
  for (const std::size_t n : lengths) {
    const int in = static_cast<int>(n);
    const auto x = randn(n, 1 + in, 3.0f), dy = randn(n, 2 + in), w = randn(n, 3 + in),
               b = randn(n, 4 + in);
    expect_agree(n, [&](const RowKernels& k, float* y) { k.gelu_forward(x.data(), y, n); },
                 "gelu_forward", 1e-6);
    expect_agree(n, [&](const RowKernels& k, float* d) { k.gelu_backward(x.data(), dy.data(), d, n); },
                 "gelu_backward", 1e-6);
    // LayerNorm of 3 rows of width n: y, then mean and rstd; backward's dx, dw and db.
    const auto x3 = randn(3 * n, 5 + in), dy3 = randn(3 * n, 6 + in);
    expect_agree(3 * n + 6, [&](const RowKernels& k, float* o) {
      k.layernorm_forward(x3.data(), w.data(), b.data(), o, o + 3 * n, o + 3 * n + 3, 3, in, 1e-5f);
    }, "layernorm_forward", 1e-5);
    expect_agree(5 * n, [&](const RowKernels& k, float* o) {
      std::vector<float> y(3 * n), mean(3), rstd(3);
      ref_->layernorm_forward(x3.data(), w.data(), b.data(), y.data(), mean.data(), rstd.data(), 3,
                              in, 1e-5f);
      std::fill(o + 3 * n, o + 5 * n, 0.5f);
      k.layernorm_backward(dy3.data(), x3.data(), w.data(), mean.data(), rstd.data(), o, o + 3 * n,
                           o + 4 * n, 3, in);
    }, "layernorm_backward", 1e-5);
    expect_agree(2, [&](const RowKernels& k, float* o) {
      o[0] = k.dot(x.data(), dy.data(), in);
      o[1] = k.logsumexp(x.data(), in);
    }, "dot, logsumexp", 1e-5);
    expect_agree(n, [&](const RowKernels& k, float* d) {
      k.softmax_scaled(x.data(), 2.5f, 0.25f, d, in);
    }, "softmax_scaled", 1e-6);
    // Causal softmax over 4 rows of a block whose last row has n valid columns, 3 columns beyond.
    const int rows = 4, row0 = in - rows >= 0 ? in - rows : 0, ncols = row0 + rows + 3;
    const int lds = ncols;
    const std::size_t blk = static_cast<std::size_t>(rows) * lds;
    const auto s = randn(blk, 7 + in, 4.0f), dp = randn(blk, 8 + in), d = randn(rows, 9 + in);
    std::vector<float> lse(rows);
    expect_agree(blk + rows, [&](const RowKernels& k, float* o) {
      std::copy(s.begin(), s.end(), o);
      k.causal_softmax_forward(o, lds, rows, row0, ncols, o + blk);
    }, "causal_softmax_forward", 1e-6);
    ref_->causal_softmax_forward(std::vector<float>(s).data(), lds, rows, row0, ncols, lse.data());
    expect_agree(blk, [&](const RowKernels& k, float* o) {
      std::copy(s.begin(), s.end(), o);
      k.causal_softmax_recompute(o, lds, rows, row0, ncols, lse.data());
    }, "causal_softmax_recompute", 1e-6);
    // dp = p * (dp - d): one multiply and one subtract per element, the same on every build.
    expect_agree(blk, [&](const RowKernels& k, float* o) {
      std::copy(dp.begin(), dp.end(), o);
      k.causal_softmax_backward(s.data(), o, lds, rows, row0, ncols, d.data());
    }, "causal_softmax_backward", 0.0);
  }
}

std::vector<std::string> vector_isas() {
  std::vector<std::string> out;
  for (const auto& n : detail::available_isas())
    if (n != "generic") out.push_back(n);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Isa, IsaAgreement, ::testing::ValuesIn(vector_isas()), isa_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(IsaAgreement);  // a CPU without AVX2

}  // namespace
}  // namespace strata::cpu::test
