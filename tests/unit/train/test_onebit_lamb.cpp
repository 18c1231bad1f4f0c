// 1-bit LAMB through the Trainer, against the update DeepSpeed's OnebitLamb computes, written here
// in double: up to freeze_step it is LAMB without bias correction whose clamped trust ratios feed
// a running average; after it v is frozen, each momentum gets a fixed scaling to the mean RMS,
// this rank's own gradient goes into it, all momenta are handed to the compressed average as one
// fused tensor (here a stand-in that records what it is given and transforms it
// deterministically, as the exchange would), and each parameter steps with the running average
// times a clamped factor from the fresh second moment. Also: the error slots of the fused tensor,
// the factor's clamps, and the refused hyperparameters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "framework/core/rng.hpp"
#include "framework/optim/optimizers/onebit_lamb.hpp"
#include "framework/train/trainer.hpp"
#include "tests/unit/train/onebit_fixture.hpp"

namespace strata::train {
namespace {
namespace test_onebit_lamb {

using onebit_test::exchanged;
using onebit_test::Params;

struct Reference {  // one parameter's state in double
  std::vector<double> p, m, v, vf;
  double coeff_freeze = 0, last_factor = 1, scaling = 0;
  bool decay = false;
};

double sum_sq(const std::vector<double>& x) {
  double s = 0;
  for (double e : x) s += e * e;
  return s;
}

TEST(OneBitLambTrainer, WarmUpIsLambAveragingItsRatiosThenFusedMomentaGoThroughTheExchange) {
  constexpr int kFreeze = 3, kSteps = 8, kRanks = 2;
  TrainerOptions o;
  optim::OneBitLambHyper h;
  h.lr = 2e-2;
  h.weight_decay = 0.1;
  h.freeze_step = kFreeze;
  h.max_coeff = 0.3;  // the ratios (0.017 for the matrices, 0.44 for the vector) clamp
  h.min_coeff = 0.02;
  h.factor_threshold = 0.02;
  o.optimizer = std::make_shared<optim::OneBitLamb>(h);
  o.schedule.type = "constant";
  int calls = 0;
  std::vector<float> handed;  // what the last exchange was given
  ShardReductions red;
  red.ranks = kRanks;
  red.compressed_average = [&](std::span<const optim::ErrorFeedbackTensor> ts) {
    ++calls;
    ASSERT_EQ(ts.size(), 1u) << "the momenta are not exchanged as one fused tensor";
    const auto& t = ts[0];
    EXPECT_EQ(t.server_error, t.worker_error + optim::onebit_padded_size(t.n, kRanks));
    handed.assign(t.data, t.data + t.n);
    for (std::size_t i = 0; i < t.n; ++i) t.data[i] = exchanged(t.data[i], i);
  };
  Params model;
  nn::ParamStore store(model.units, nn::ParamStoreOptions{DType::f32, DType::f32, 1, {}, 1, 0});
  Trainer trainer(store, o, std::move(red));

  // One fused tensor of 60 + 10 + 52 = 122 elements, padded to 128: its errors sit on W alone.
  const auto s0 = trainer.error_slots(0), s1 = trainer.error_slots(1);
  ASSERT_EQ(s0.size(), 2u);
  EXPECT_EQ(s0[0].worker, 0);
  EXPECT_EQ(s0[0].server, 128);
  EXPECT_EQ(s0[0].size, 128 + 64);
  EXPECT_EQ(s0[1].size, 0);
  ASSERT_EQ(s1.size(), 1u);
  EXPECT_EQ(s1[0].size, 0);

  Philox rng(17);
  std::vector<Reference> ref;
  for (nn::Parameter* p : store.parameters()) {
    Reference r;
    r.decay = p->decay;
    float* x = p->value.data<float>();
    for (std::int64_t i = 0; i < p->shape.numel(); ++i) {
      // The vector's weights are large: its trust ratio reaches max_coeff.
      x[i] = (p->decay ? 0.2f : 4.0f) * (rng.next_uniform() - 0.5f);
      r.p.push_back(x[i]);
    }
    r.m.assign(r.p.size(), 0.0);
    r.v.assign(r.p.size(), 0.0);
    r.vf.assign(r.p.size(), 0.0);
    ref.push_back(r);
  }
  double worst = 0, worst_coeff = 0;
  bool clamped_high = false, clamped_low = false, thresholded = false;
  for (int k = 1; k <= kSteps; ++k) {
    EXPECT_EQ(trainer.local_gradients_next(), k > kFreeze) << "before step " << k;
    const std::vector<nn::Parameter*> params = store.parameters();
    std::vector<std::vector<double>> grads(params.size());
    for (std::size_t q = 0; q < params.size(); ++q) {
      float* g = params[q]->grad.data<float>();
      for (std::int64_t i = 0; i < params[q]->shape.numel(); ++i) {
        g[i] = rng.next_uniform() - 0.45f;
        grads[q].push_back(g[i]);
      }
    }
    std::vector<double> coeffs;
    std::vector<double> fused_before;  // the reference's momenta as handed to the exchange
    if (k <= kFreeze) {
      for (std::size_t q = 0; q < ref.size(); ++q) {
        Reference& r = ref[q];
        const double wd = r.decay ? h.weight_decay : 0.0;
        std::vector<double> u(r.p.size());
        for (std::size_t i = 0; i < r.p.size(); ++i) {
          const double g = grads[q][i];
          r.m[i] = h.beta1 * r.m[i] + (1 - h.beta1) * g;
          r.v[i] = h.beta2 * r.v[i] + (1 - h.beta2) * g * g;
          u[i] = r.m[i] / (std::sqrt(r.v[i]) + h.eps) + wd * r.p[i];
        }
        if (k == kFreeze) r.vf = r.v;
        const double wn = std::sqrt(sum_sq(r.p)), un = std::sqrt(sum_sq(u));
        double ratio = 1.0;
        if (wn != 0 && un != 0) ratio = std::clamp(wn / un, h.min_coeff, h.max_coeff);
        clamped_high = clamped_high || ratio == h.max_coeff;
        clamped_low = clamped_low || ratio == h.min_coeff;
        if (ratio != 1.0)
          r.coeff_freeze = h.coeff_beta * r.coeff_freeze + (1 - h.coeff_beta) * ratio;
        for (std::size_t i = 0; i < r.p.size(); ++i) r.p[i] -= h.lr * ratio * u[i];
        coeffs.push_back(ratio);
      }
    } else {
      if (ref[0].scaling == 0) {
        std::vector<double> rms;
        for (const Reference& r : ref)
          rms.push_back(std::sqrt(sum_sq(r.m)) / std::sqrt(static_cast<double>(r.m.size())));
        double united = 0;
        for (double x : rms) united += x;
        united /= static_cast<double>(rms.size());
        for (std::size_t q = 0; q < ref.size(); ++q) ref[q].scaling = united / rms[q];
      }
      std::vector<std::vector<double>> last(ref.size());
      std::size_t at = 0;
      for (std::size_t q = 0; q < ref.size(); ++q) {
        Reference& r = ref[q];
        last[q] = r.m;
        for (std::size_t i = 0; i < r.m.size(); ++i) {
          r.m[i] = (h.beta1 * r.m[i] + (1 - h.beta1) * grads[q][i]) * r.scaling;
          fused_before.push_back(r.m[i]);
          r.m[i] = exchanged(static_cast<float>(r.m[i]), at++) / r.scaling;
        }
      }
      for (std::size_t q = 0; q < ref.size(); ++q) {
        Reference& r = ref[q];
        const double wd = r.decay ? h.weight_decay : 0.0;
        std::vector<double> prelim(r.p.size()), u(r.p.size());
        double ratio_max = 0;
        for (std::size_t i = 0; i < r.p.size(); ++i) {
          const double g = (r.m[i] - last[q][i] * h.beta1) / (1 - h.beta1);
          r.vf[i] = h.beta2 * r.vf[i] + (1 - h.beta2) * g * g;
          const double denom = std::sqrt(r.v[i]) + h.eps;
          prelim[i] = r.m[i] / denom;
          u[i] = prelim[i] + wd * r.p[i];
          ratio_max = std::max(ratio_max, denom / (std::sqrt(r.vf[i]) + h.eps));
        }
        double factor = ratio_max;
        if (wd > 0) {
          const double share = std::min(1.0, std::sqrt(sum_sq(prelim)) / std::sqrt(sum_sq(u)));
          factor = factor * share + (1 - share);
        }
        factor = std::clamp(factor, h.factor_min, h.factor_max);
        const double hi = r.last_factor * (1 + h.factor_threshold);
        const double lo = r.last_factor * (1 - h.factor_threshold);
        thresholded = thresholded || factor > hi || factor < lo;
        factor = std::clamp(factor, lo, hi);
        r.last_factor = factor;
        const double coeff = r.coeff_freeze * factor;
        for (std::size_t i = 0; i < r.p.size(); ++i) r.p[i] -= h.lr * coeff * u[i];
        coeffs.push_back(coeff);
      }
    }
    const int calls_before = calls;
    std::vector<float> v_before;
    if (k > kFreeze) {
      auto& s = trainer.states().acquire(0);
      v_before = s[1].to_vector();  // exp_avg_sq
      trainer.states().release(0, false);
    }
    trainer.step();
    if (k > kFreeze) {
      EXPECT_EQ(calls, calls_before + 1) << "step " << k << ": one exchange";
      ASSERT_EQ(handed.size(), fused_before.size());
      for (std::size_t i = 0; i < handed.size(); ++i)
        worst = std::max(worst, std::fabs(handed[i] - fused_before[i]));
      auto& s = trainer.states().acquire(0);
      EXPECT_TRUE(s[1].to_vector() == v_before) << "v moved after freeze_step, step " << k;
      trainer.states().release(0, false);
    } else {
      EXPECT_EQ(calls, 0) << "an exchange in the warm-up, step " << k;
    }
    ASSERT_EQ(trainer.optimizer_as<optim::OneBitLamb>().coeffs().size(), coeffs.size());
    for (std::size_t q = 0; q < coeffs.size(); ++q)
      worst_coeff =
          std::max(worst_coeff, std::fabs(trainer.optimizer_as<optim::OneBitLamb>().coeffs()[q] - coeffs[q]) /
                                    std::max(1e-12, std::fabs(coeffs[q])));
    for (std::size_t q = 0; q < params.size(); ++q) {
      const float* x = params[q]->value.data<float>();
      for (std::size_t i = 0; i < ref[q].p.size(); ++i)
        worst = std::max(worst, std::fabs(x[i] - ref[q].p[i]));
    }
  }
  std::printf(
      "1-bit LAMB trainer vs the double reference over %d steps: values %.2e, "
      "coefficients %.2e (relative)\n",
      kSteps, worst, worst_coeff);
  // Measured 2.1e-7 and 1.9e-7 (float32 state against double).
  EXPECT_LT(worst, 2e-6);
  EXPECT_LT(worst_coeff, 2e-6);
  EXPECT_EQ(calls, kSteps - kFreeze);
  // The cases the reference covers were reached: both trust-ratio clamps and the threshold.
  EXPECT_TRUE(clamped_high);
  EXPECT_TRUE(clamped_low);
  EXPECT_TRUE(thresholded);
  // The scalars kept with the state (checkpointed) are the reference's.
  auto& s = trainer.states().acquire(1);
  const float* sc = s[3].data<float>();  // onebit_lamb_scalars of the unit's first parameter
  EXPECT_NEAR(sc[0], ref[2].coeff_freeze, 1e-6 * ref[2].coeff_freeze);
  EXPECT_NEAR(sc[1], ref[2].last_factor, 1e-5);
  EXPECT_NEAR(sc[2], ref[2].scaling, 1e-5 * ref[2].scaling);
  trainer.states().release(1, false);
}

TEST(OneBitLambTrainer, OneRankNeverExchanges) {
  TrainerOptions o;
  o.optimizer = std::make_shared<optim::OneBitLamb>(optim::OneBitLambHyper{.freeze_step = 1});
  ShardReductions red;
  red.compressed_average = [](std::span<const optim::ErrorFeedbackTensor>) {
    ADD_FAILURE() << "one rank called the exchange";
  };
  Params model;
  nn::ParamStore store(model.units, nn::ParamStoreOptions{DType::f32, DType::f32, 1, {}, 1, 0});
  Trainer trainer(store, o, std::move(red));
  for (int k = 0; k < 3; ++k) {
    EXPECT_FALSE(trainer.local_gradients_next());
    for (nn::Parameter* p : store.parameters()) p->grad.fill(0.5f);
    trainer.step();
  }
}

TEST(OneBitLambFactor, ClampsToItsBoundsAndMovesAtMostThresholdPerUpdate) {
  optim::OneBitLambHyper h;  // factor in [0.5, 4], threshold 0.1
  auto factor = [&](double ratio, double last, double wd = 0, double prelim = 1, double upd = 1) {
    return optim::onebit_lamb_factor(h, wd, {prelim, upd, ratio}, last);
  };
  EXPECT_DOUBLE_EQ(factor(1.05, 0), 1.05);  // no last factor yet: 1
  EXPECT_DOUBLE_EQ(factor(3.0, 0), 1.1);    // at most +10% per update
  EXPECT_DOUBLE_EQ(factor(0.1, 0), 0.9);
  EXPECT_DOUBLE_EQ(factor(9.0, 3.9), 4.0);   // factor_max
  EXPECT_DOUBLE_EQ(factor(0.1, 0.52), 0.5);  // factor_min
  // Weight decay's share of the update blends the factor towards 1: ||prelim|| / ||u|| = 0.5.
  EXPECT_DOUBLE_EQ(factor(1.08, 1.0, 0.1, 1.0, 4.0), 1.04);
  EXPECT_DOUBLE_EQ(optim::onebit_lamb_coeff_average(h, 0.5, 1.0), 0.5);  // a ratio of 1 is skipped
  EXPECT_DOUBLE_EQ(optim::onebit_lamb_coeff_average(h, 0.5, 0.3), 0.9 * 0.5 + 0.1 * 0.3);
}

TEST(OneBitLambTrainer, BadHyperparametersAreRefused) {
  auto refused = [](auto&& set) {
    optim::OneBitLambHyper h;
    set(h);
    EXPECT_THROW(optim::validate(h), UserError);
  };
  refused([](auto& h) { h.freeze_step = 0; });
  refused([](auto& h) { h.coeff_beta = 1.0; });
  refused([](auto& h) { h.factor_min = 0; });
  refused([](auto& h) { h.factor_min = 5; });
  refused([](auto& h) { h.factor_threshold = 1.0; });
  refused([](auto& h) { h.min_coeff = 20; });
  optim::validate(optim::OneBitLambHyper{});
}

}  // namespace test_onebit_lamb
}  // namespace
}  // namespace strata::train
