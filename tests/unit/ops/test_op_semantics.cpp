// What ops.hpp promises for the ops that have no gradient to check, against host loops, on every
// backend and for f32, bf16 and f16 operands (the harness only compares a backend with the CPU
// table; this anchors the CPU table itself): elementwise results and casts are the f32 result
// rounded once to nearest even (exact); sum_squares is the exact sum of squares (1e-12 relative);
// row_max and target_logit are exact; row_sum_exp is the double sum rounded to f32 (1e-6
// relative); the optimizer updates are bitwise optim's one-element-at-a-time references on the
// widened gradient, and a param16 copy is the updated master rounded once.
#include <algorithm>
#include <cmath>

#include "framework/backend/ops/ops.hpp"
#include "framework/core/half.hpp"
#include "tests/support/numeric.hpp"
#include "tests/unit/ops/op_harness.hpp"

namespace strata::ops::test {
namespace {

using ::strata::test::randn;

float rne(DType dt, float x) {
  if (dt == DType::bf16) return bf16_to_f32(f32_to_bf16(x));
  if (dt == DType::f16) return f16_to_f32(f32_to_f16(x));
  return x;
}

// Values drawn in f32 and rounded to dt, as a host tensor of dtype dt.
Tensor values(std::int64_t n, std::uint32_t seed, DType dt, float scale = 1.0f) {
  Tensor t = Tensor::empty(Shape{n}, DType::f32);
  const std::vector<float> v = randn(static_cast<std::size_t>(n), seed, scale);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t.to(dt, TensorOptions{});
}

class OpSemantics : public ::testing::TestWithParam<BackendDType> {};

TEST_P(OpSemantics, ElementwiseResultsAreTheF32ResultRoundedOnce) {
  const Backend& be = backend_named(std::get<0>(GetParam()));
  STRATA_SKIP_UNLESS_AVAILABLE(be);
  const DType dt = std::get<1>(GetParam());
  const std::int64_t n = 20001;
  const Tensor a = values(n, 1, dt), b = values(n, 2, dt, 3.0f);
  const std::vector<float> av = a.to_vector(), bv = b.to_vector();
  const Tensor out = Tensor::empty(Shape{n}, dt, TensorOptions{be.device});
  add(on_device(a, dt, be.device), on_device(b, dt, be.device), out);
  const Tensor acc = on_device(a, dt, be.device);
  add_inplace(acc, on_device(b, dt, be.device));
  const Tensor sc = on_device(a, dt, be.device);
  scale_inplace(sc, -0.375f);
  const std::vector<float> o = to_host(out).to_vector(), c = to_host(acc).to_vector(),
                           s = to_host(sc).to_vector();
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(o[i], rne(dt, av[i] + bv[i])) << "add at " << i;
    ASSERT_EQ(c[i], rne(dt, av[i] + bv[i])) << "add_inplace at " << i;
    ASSERT_EQ(s[i], rne(dt, av[i] * -0.375f)) << "scale_inplace at " << i;
  }
}

TEST_P(OpSemantics, CastRoundsToNearestEvenAndSumSquaresIsExact) {
  const Backend& be = backend_named(std::get<0>(GetParam()));
  STRATA_SKIP_UNLESS_AVAILABLE(be);
  const DType src_dt = std::get<1>(GetParam());
  Tensor src = values(1000, 3, DType::f32, 3.0f);
  const float special[] = {65504.0f, 65520.0f, 1e5f, 1e-6f, -0.0f, 1e-40f, -3e38f};
  std::copy(std::begin(special), std::end(special), src.data<float>());
  src = src.to(src_dt, TensorOptions{});
  const std::vector<float> sv = src.to_vector();
  long double ss = 0.0L;
  for (float x : sv) ss += static_cast<long double>(x) * x;
  for (DType dst_dt : {DType::f32, DType::bf16, DType::f16}) {
    SCOPED_TRACE(be.name + " to " + std::string(dtype_name(dst_dt)));
    const Tensor dst = Tensor::empty(Shape{1000}, dst_dt, TensorOptions{be.device});
    cast(on_device(src, src_dt, be.device), dst);
    const std::vector<float> dv = to_host(dst).to_vector();
    for (std::size_t i = 0; i < dv.size(); ++i)
      ASSERT_EQ(dv[i], rne(dst_dt, sv[i])) << "element " << i << " = " << sv[i];
  }
  const double got = sum_squares(on_device(src, src_dt, be.device));
  if (!std::isinf(static_cast<double>(ss))) {
    EXPECT_NEAR(got, static_cast<double>(ss), 1e-12 * static_cast<double>(ss));
  }
}

TEST_P(OpSemantics, CrossEntropyPiecesMatchHostLoops) {
  const Backend& be = backend_named(std::get<0>(GetParam()));
  STRATA_SKIP_UNLESS_AVAILABLE(be);
  const DType dt = std::get<1>(GetParam());
  const std::int64_t N = 9, V = 37, start = 20;
  Tensor logits = values(N * V, 4, DType::f32, 3.0f).view(Shape{N, V});
  logits.data<float>()[0] = 20.0f;          // row 0's max in its first column,
  logits.data<float>()[2 * V - 1] = 20.0f;  // row 1's in its last
  logits = logits.to(dt, TensorOptions{});
  const std::vector<float> lv = logits.to_vector();
  Tensor targets = Tensor::empty(Shape{N}, DType::i32);
  const std::int32_t tv[] = {20, -1, 56, 57, 19, 33, 0, 79, 40};
  std::copy(std::begin(tv), std::end(tv), targets.data<std::int32_t>());
  const Tensor l = on_device(logits, dt, be.device), t = on_device(targets, DType::i32, be.device);
  const Tensor mx = Tensor::empty(Shape{N}, DType::f32, TensorOptions{be.device});
  const Tensor se = Tensor::empty(Shape{N}, DType::f32, TensorOptions{be.device});
  const Tensor tl = Tensor::empty(Shape{N}, DType::f32, TensorOptions{be.device});
  row_max(l, mx);
  row_sum_exp(l, mx, se);
  target_logit(l, t, start, tl);
  const std::vector<float> m = to_host(mx).to_vector(), s = to_host(se).to_vector(),
                           g = to_host(tl).to_vector();
  for (std::int64_t r = 0; r < N; ++r) {
    const float* row = lv.data() + r * V;
    EXPECT_EQ(m[r], *std::max_element(row, row + V)) << "row_max of row " << r;
    double sum = 0.0;
    for (std::int64_t j = 0; j < V; ++j) sum += std::exp(double(row[j]) - double(m[r]));
    EXPECT_NEAR(s[r], sum, 1e-6 * sum) << "row_sum_exp of row " << r;
    const std::int32_t k = tv[r];
    const float want = k >= start && k < start + V ? row[k - start] : 0.0f;
    EXPECT_EQ(g[r], want) << "target_logit of row " << r << " (target " << k << ")";
  }
}

// The loss's sum left where the logits are (the form a training step reads later) is the
// returned form's, and a target >= V is the same one-line error on every backend: the CPU raises
// it in the op, a GPU's sum is NaN and the returning form finds the row.
TEST_P(OpSemantics, CrossEntropySumStaysOnTheDeviceAndBadTargetsAreOneError) {
  const Backend& be = backend_named(std::get<0>(GetParam()));
  STRATA_SKIP_UNLESS_AVAILABLE(be);
  const DType dt = std::get<1>(GetParam());
  const std::int64_t N = 9, V = 37;
  const Tensor logits = values(N * V, 5, DType::f32, 3.0f).view(Shape{N, V}).to(dt, TensorOptions{});
  Tensor targets = Tensor::empty(Shape{N}, DType::i32);
  const std::int32_t tv[] = {20, -1, 36, 0, 19, 33, 0, 7, 10};
  std::copy(std::begin(tv), std::end(tv), targets.data<std::int32_t>());
  const Tensor l = on_device(logits, dt, be.device), t = on_device(targets, DType::i32, be.device);
  const Tensor lse = Tensor::empty(Shape{N}, DType::f32, TensorOptions{be.device});
  const Tensor sum = Tensor::empty(Shape{1}, DType::f64, TensorOptions{be.device});
  cross_entropy_forward(l, t, lse, sum);
  EXPECT_EQ(sum.device(), be.device);
  const double returned = cross_entropy_forward(l, t, lse);
  EXPECT_EQ(to_host(sum).item(), returned);
  EXPECT_GT(returned, 0.0);
  targets.data<std::int32_t>()[7] = 40;
  targets.data<std::int32_t>()[8] = 37;
  const Tensor bad = on_device(targets, DType::i32, be.device);
  try {
    cross_entropy_forward(l, bad, lse);
    ADD_FAILURE() << "a target outside the vocabulary was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cross_entropy: target 40 of row 7 is outside the "
                                         "vocabulary of 37"),
              std::string::npos)
        << e.what();
  }
}

TEST_P(OpSemantics, OptimizerUpdatesAreTheReferenceOnTheWidenedGradient) {
  const Backend& be = backend_named(std::get<0>(GetParam()));
  STRATA_SKIP_UNLESS_AVAILABLE(be);
  const DType grad_dt = std::get<1>(GetParam());
  const std::int64_t n = 1003;
  const Tensor master = values(n, 5, DType::f32), grad = values(n, 6, grad_dt, 0.1f),
               m = values(n, 7, DType::f32, 0.01f), mom = values(n, 8, DType::f32, 0.1f);
  Tensor v = values(n, 9, DType::f32, 1e-3f);
  for (std::int64_t i = 0; i < n; ++i) v.data<float>()[i] = std::abs(v.data<float>()[i]);
  const std::vector<float> g = grad.to_vector();
  optim::AdamWHyper ah;
  ah.lr = 1e-2;
  ah.weight_decay = 0.1;
  optim::SGDHyper sh;
  sh.lr = 0.05;
  sh.momentum = 0.9;
  sh.dampening = 0.1;
  sh.weight_decay = 0.01;
  // The references, on host copies.
  std::vector<float> am = master.to_vector(), amm = m.to_vector(), av = v.to_vector();
  optim::adamw_step_reference(am.data(), g.data(), amm.data(), av.data(),
                              static_cast<std::size_t>(n), ah, 3, 0.5f);
  std::vector<float> sm = master.to_vector(), smom = mom.to_vector();
  optim::sgd_step_reference(sm.data(), g.data(), smom.data(), static_cast<std::size_t>(n), sh, 2,
                            0.5f);
  for (DType copy_dt : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(be.name + ", copy " + std::string(dtype_name(copy_dt)));
    const Device d = be.device;
    const Tensor p = on_device(master, DType::f32, d), mm = on_device(m, DType::f32, d),
                 vv = on_device(v, DType::f32, d), gg = on_device(grad, grad_dt, d);
    const Tensor p16 = Tensor::empty(Shape{n}, copy_dt, TensorOptions{d});
    adamw_step(p, gg, mm, vv, ah, 3, 0.5f, p16);
    EXPECT_TRUE(::strata::test::bitwise_equal(to_host(p).to_vector(), am)) << "adamw master";
    EXPECT_TRUE(::strata::test::bitwise_equal(to_host(mm).to_vector(), amm)) << "adamw m";
    EXPECT_TRUE(::strata::test::bitwise_equal(to_host(vv).to_vector(), av)) << "adamw v";
    const std::vector<float> c = to_host(p16).to_vector();
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(c[i], rne(copy_dt, am[i])) << "param16 at " << i;

    const Tensor sp = on_device(master, DType::f32, d), sb = on_device(mom, DType::f32, d);
    sgd_step(sp, gg, sb, sh, 2, 0.5f, Tensor());
    EXPECT_TRUE(::strata::test::bitwise_equal(to_host(sp).to_vector(), sm)) << "sgd master";
    EXPECT_TRUE(::strata::test::bitwise_equal(to_host(sb).to_vector(), smom)) << "sgd momentum";
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, OpSemantics, ::testing::ValuesIn(backend_dtype_params()),
                         backend_dtype_name);

}  // namespace
}  // namespace strata::ops::test
