// 1-bit Adam through the Trainer, against the update DeepSpeed's OnebitAdam computes, written
// here in double: up to freeze_step it is Adam without bias correction; after it the second
// moment stays frozen, this rank's own gradient goes into the momentum, the momenta are handed to
// the compressed average (here a stand-in that records what it is given and transforms it
// deterministically, as the exchange would), and the update reads the averaged momentum. Also:
// when the engine is told to skip the gradient all-reduce, the error buffers' layout, and that
// one rank never calls the exchange.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "framework/core/rng.hpp"
#include "framework/optim/optimizers/onebit_adam.hpp"
#include "framework/train/trainer.hpp"
#include "tests/unit/train/onebit_fixture.hpp"

namespace strata::train {
namespace {
namespace test_onebit_adam {

using onebit_test::exchanged;
using onebit_test::Params;

struct Reference {  // one parameter's state in double
  std::vector<double> p, m, v;
};

TEST(OneBitAdamTrainer, WarmUpIsAdamWithoutBiasCorrectionThenMomentaGoThroughTheExchange) {
  constexpr int kFreeze = 3, kSteps = 7, kRanks = 2;
  TrainerOptions o;
  const optim::OneBitAdamHyper h{.lr = 1e-2, .weight_decay = 0.1, .freeze_step = kFreeze};
  o.optimizer = std::make_shared<optim::OneBitAdam>(h);
  o.schedule.type = "constant";
  int calls = 0;
  std::vector<std::vector<float>> handed;  // what the last exchange was given, per tensor
  ShardReductions red;
  red.ranks = kRanks;
  red.compressed_average = [&](std::span<const optim::ErrorFeedbackTensor> ts) {
    ++calls;
    handed.clear();
    for (const auto& t : ts) {
      // The error buffers are this tensor's, padded for kRanks ranks, and distinct.
      EXPECT_EQ(t.server_error, t.worker_error + optim::onebit_padded_size(t.n, kRanks));
      handed.emplace_back(t.data, t.data + t.n);
      for (std::size_t i = 0; i < t.n; ++i) t.data[i] = exchanged(t.data[i], i);
    }
  };
  Params model;
  nn::ParamStore store(model.units, nn::ParamStoreOptions{DType::f32, DType::f32, 1, {}, 1, 0});
  Trainer trainer(store, o, std::move(red));

  // Error slots: worker then server floats of each parameter, back to back in its unit.
  const auto slots = trainer.error_slots(0);
  ASSERT_EQ(slots.size(), 2u);
  EXPECT_EQ(slots[0].worker, 0);
  EXPECT_EQ(slots[0].server, 64);  // 60 padded to a multiple of 2 × lcm(2, 8) = 16
  EXPECT_EQ(slots[0].size, 64 + 32);
  EXPECT_EQ(slots[1].worker, 96);
  EXPECT_EQ(slots[1].size, 16 + 8);

  Philox rng(11);
  std::vector<Reference> ref;
  for (nn::Parameter* p : store.parameters()) {
    Reference r;
    float* x = p->value.data<float>();
    for (std::int64_t i = 0; i < p->shape.numel(); ++i) {
      x[i] = 0.2f * (rng.next_uniform() - 0.5f);
      r.p.push_back(x[i]);
    }
    r.m.assign(r.p.size(), 0.0);
    r.v.assign(r.p.size(), 0.0);
    ref.push_back(r);
  }
  double worst = 0;
  for (int k = 1; k <= kSteps; ++k) {
    // The engine asks before step k whether to leave the gradients unreduced.
    EXPECT_EQ(trainer.local_gradients_next(), k > kFreeze) << "before step " << k;
    const std::vector<nn::Parameter*> params = store.parameters();
    std::vector<std::vector<double>> pre(params.size());  // momenta before the exchange
    for (std::size_t q = 0; q < params.size(); ++q) {
      float* g = params[q]->grad.data<float>();
      for (std::int64_t i = 0; i < params[q]->shape.numel(); ++i) g[i] = rng.next_uniform() - 0.45f;
      Reference& r = ref[q];
      const double wd = params[q]->decay ? h.weight_decay : 0.0;
      for (std::size_t i = 0; i < r.p.size(); ++i) {
        r.m[i] = h.beta1 * r.m[i] + (1 - h.beta1) * g[i];
        if (k <= kFreeze) r.v[i] = h.beta2 * r.v[i] + (1 - h.beta2) * g[i] * g[i];
        pre[q].push_back(r.m[i]);
      }
      if (k > kFreeze)
        for (std::size_t i = 0; i < r.p.size(); ++i)
          r.m[i] = exchanged(static_cast<float>(r.m[i]), i);
      for (std::size_t i = 0; i < r.p.size(); ++i)
        r.p[i] = r.p[i] * (1 - h.lr * wd) - h.lr * r.m[i] / (std::sqrt(r.v[i]) + h.eps);
    }
    const int calls_before = calls;
    std::vector<float> v_before;
    if (k > kFreeze) {
      auto& s = trainer.states().acquire(1);
      v_before = s[1].to_vector();  // exp_avg_sq
      trainer.states().release(1, false);
    }
    trainer.step();
    if (k > kFreeze) {
      EXPECT_EQ(calls, calls_before + 1) << "step " << k << ": one exchange for all tensors";
      ASSERT_EQ(handed.size(), 3u);
      // What the exchange got: this rank's momentum with this rank's gradient folded in.
      for (std::size_t q = 0; q < 3; ++q)
        for (std::size_t i = 0; i < handed[q].size(); ++i)
          worst = std::max(worst, std::fabs(handed[q][i] - pre[q][i]));
      auto& s = trainer.states().acquire(1);
      EXPECT_TRUE(s[1].to_vector() == v_before) << "v moved after freeze_step, step " << k;
      trainer.states().release(1, false);
    } else {
      EXPECT_EQ(calls, 0) << "an exchange in the warm-up, step " << k;
    }
    for (std::size_t q = 0; q < params.size(); ++q) {
      const float* x = params[q]->value.data<float>();
      for (std::size_t i = 0; i < ref[q].p.size(); ++i)
        worst = std::max(worst, std::fabs(x[i] - ref[q].p[i]));
    }
  }
  std::printf("1-bit Adam trainer vs the double reference over %d steps: worst %.2e\n", kSteps,
              worst);
  EXPECT_LT(worst, 2e-6);
  EXPECT_EQ(calls, kSteps - kFreeze);
}

TEST(OneBitAdamTrainer, OneRankNeverExchangesAndReducesItsGradientsAsUsual) {
  TrainerOptions o;
  // Compressed from the first step, were there ranks.
  o.optimizer = std::make_shared<optim::OneBitAdam>(optim::OneBitAdamHyper{.freeze_step = 0});
  ShardReductions red;
  red.compressed_average = [](std::span<const optim::ErrorFeedbackTensor>) {
    ADD_FAILURE() << "one rank called the exchange";
  };
  Params model;
  nn::ParamStore store(model.units, nn::ParamStoreOptions{DType::f32, DType::f32, 1, {}, 1, 0});
  Trainer trainer(store, o, std::move(red));
  EXPECT_FALSE(trainer.local_gradients_next());
  for (nn::Parameter* p : store.parameters()) p->grad.fill(0.5f);
  trainer.step();
  EXPECT_EQ(trainer.error_slots(1)[0].size, optim::onebit_error_size(52, 1));
}

TEST(OneBitAdamTrainer, BadHyperparametersAreRefused) {
  optim::OneBitAdamHyper h;
  h.freeze_step = -1;
  EXPECT_THROW(optim::validate(h), UserError);
  h.freeze_step = 10;
  h.beta2 = 1.0;
  EXPECT_THROW(optim::validate(h), UserError);
}

}  // namespace test_onebit_adam
}  // namespace
}  // namespace strata::train
