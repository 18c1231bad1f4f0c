// Lion and Lion8bit through the Trainer (framework/optim/optimizers/lion.hpp, lion8bit.hpp): Lion
// against its definition in double over 10 steps (weight decay only on parameters declared
// `decay`, the scheduled rate, clipping's gradient scale), whole and sharded over 2 and 3 shards
// (threads standing in for ranks: each shard's owned elements are bitwise the whole run's);
// Lion8bit sharded bitwise like whole (its blocks never straddle shards) and tracking Lion; their
// declarations (one momentum; u8 codes and a per-block absmax) and the bytes they allocate.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "framework/core/rng.hpp"
#include "framework/optim/optimizers/lion.hpp"
#include "framework/optim/optimizers/lion8bit.hpp"
#include "framework/optim/quantize.hpp"
#include "framework/train/trainer.hpp"
#include "tests/unit/train/onebit_fixture.hpp"
#include "tests/unit/train/thread_reductions.hpp"

namespace strata::train {
namespace {
namespace test_lion_trainer {  // file-local names, unique in a unity build

using onebit_test::Params;

// One shard of the three-parameter model (W decayed, b not, in unit 0; E decayed in unit 1).
struct LionShard {
  Params model;
  nn::ParamStore store;
  Trainer trainer;
  LionShard(const TrainerOptions& o, int i, int n, ShardReductions red)
      : store(model.units, nn::ParamStoreOptions{DType::f32, DType::f32,
                                                 state_pad_multiple(o, n), {}, n, i}),
        trainer(store, o, std::move(red)) {}
};

// Values and gradients of step k (the same on every shard; gradients away from 0, so that no
// interpolation comes within round-off of a sign flip).
float initial_value(std::size_t q, std::int64_t i) {
  Philox r(11 + q, static_cast<std::uint64_t>(i));
  return 0.2f * (r.next_uniform() - 0.5f);
}
float gradient(int k, std::size_t q, std::int64_t i) {
  Philox r(1000 + 17 * k + q, static_cast<std::uint64_t>(i));
  const float g = r.next_uniform() - 0.5f;
  return g < 0 ? g - 0.25f : g + 0.25f;
}

// Runs `steps` steps on n shards; returns each parameter's values as the shards that own each
// element hold them.
std::vector<std::vector<float>> run_shards(const TrainerOptions& o, int n, int steps) {
  ThreadReductions red(n);
  std::vector<std::unique_ptr<LionShard>> shards;
  for (int i = 0; i < n; ++i) shards.push_back(std::make_unique<LionShard>(o, i, n, red.for_shard(i)));
  for (auto& s : shards) {
    const auto params = s->store.parameters();
    for (std::size_t q = 0; q < params.size(); ++q)
      for (std::int64_t i = 0; i < params[q]->shape.numel(); ++i)
        params[q]->value.data<float>()[i] = initial_value(q, i);
  }
  for (int k = 1; k <= steps; ++k) {
    std::vector<std::thread> threads;
    for (auto& s : shards) {
      const auto params = s->store.parameters();
      for (std::size_t q = 0; q < params.size(); ++q)
        for (std::int64_t i = 0; i < params[q]->shape.numel(); ++i)
          params[q]->grad.data<float>()[i] = gradient(k, q, i);
      threads.emplace_back([&s] { s->trainer.step(); });
    }
    for (auto& t : threads) t.join();
  }
  // Each element from the shard that owns it.
  std::vector<std::vector<float>> out;
  const auto params0 = shards[0]->store.parameters();
  for (std::size_t q = 0; q < params0.size(); ++q) out.emplace_back(params0[q]->shape.numel());
  for (auto& s : shards)
    for (std::size_t u = 0; u < s->store.num_units(); ++u) {
      const nn::UnitLayout& l = s->store.layout(u);
      for (std::size_t j = 0; j < l.params.size(); ++j) {
        std::size_t q = 0;
        while (params0[q]->name != l.params[j]->name) ++q;
        for (std::int64_t e = 0; e < l.params[j]->shape.numel(); ++e)
          if (l.offsets[j] + e >= l.lo && l.offsets[j] + e < l.hi)
            out[q][static_cast<std::size_t>(e)] = l.params[j]->value.data<float>()[e];
      }
    }
  return out;
}

TrainerOptions lion_options(bool eight_bit) {
  TrainerOptions o;
  const optim::LionHyper h{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.99, .weight_decay = 0.5};
  if (eight_bit) o.optimizer = std::make_shared<optim::Lion8bit>(h);
  else o.optimizer = std::make_shared<optim::Lion>(h);
  o.schedule.type = "WarmupLR";  // a rate that changes every update
  o.schedule.warmup_min_lr = 0;
  o.schedule.warmup_max_lr = 1e-2;
  o.schedule.warmup_num_steps = 5;
  o.schedule.warmup_type = "linear";
  o.max_grad_norm = 1.0;  // clipping: a gradient scale below 1
  return o;
}

TEST(LionTrainer, MatchesTheDoublePrecisionDefinitionWholeAndSharded) {
  const int steps = 10;
  const TrainerOptions o = lion_options(false);
  const auto& h = static_cast<const optim::Lion&>(*o.optimizer).hyper();
  // The reference: the same schedule and clipping, the update in double.
  Params model;
  std::vector<std::vector<double>> p, m;
  std::vector<bool> decay;
  for (const auto& unit : model.units)
    for (const nn::Parameter* prm : unit) {
      const std::size_t q = p.size();
      p.emplace_back();
      for (std::int64_t i = 0; i < prm->shape.numel(); ++i) p[q].push_back(initial_value(q, i));
      m.emplace_back(p[q].size(), 0.0);
      decay.push_back(prm->decay);
    }
  const auto schedule = optim::make_schedule(o.schedule, h.lr);
  for (int k = 1; k <= steps; ++k) {
    double ss = 0;
    for (std::size_t q = 0; q < p.size(); ++q)
      for (std::size_t i = 0; i < p[q].size(); ++i) {
        const double g = gradient(k, q, static_cast<std::int64_t>(i));
        ss += g * g;
      }
    const double norm = std::sqrt(ss);
    const double coef = std::min(1.0, o.max_grad_norm / (norm + 1e-6));
    const double lr = schedule->lr_for_update(k);
    for (std::size_t q = 0; q < p.size(); ++q) {
      const double wd = decay[q] ? h.weight_decay : 0.0;
      for (std::size_t i = 0; i < p[q].size(); ++i) {
        const double g = gradient(k, q, static_cast<std::int64_t>(i)) * static_cast<double>(static_cast<float>(coef));
        const double c = h.beta1 * m[q][i] + (1 - h.beta1) * g;
        p[q][i] = p[q][i] * (1 - lr * wd) - lr * (c > 0 ? 1.0 : -1.0);
        m[q][i] = h.beta2 * m[q][i] + (1 - h.beta2) * g;
      }
    }
  }
  const auto whole = run_shards(o, 1, steps);
  double worst = 0;
  for (std::size_t q = 0; q < p.size(); ++q)
    for (std::size_t i = 0; i < p[q].size(); ++i)
      worst = std::max(worst, std::fabs(whole[q][i] - p[q][i]));
  std::printf("Lion trainer vs the double reference over %d steps: worst %.2e\n", steps, worst);
  EXPECT_LT(worst, 1e-6);  // f32 round-off of values ~0.1 moved by ~10 steps of 1e-2
  for (int n : {2, 3}) EXPECT_EQ(run_shards(o, n, steps), whole) << n << " shards";
}

TEST(LionTrainer, EightBitShardsLikeWholeAndTracksLion) {
  const int steps = 10;
  const auto whole = run_shards(lion_options(true), 1, steps);
  for (int n : {2, 3}) EXPECT_EQ(run_shards(lion_options(true), n, steps), whole) << n << " shards";
  const auto f32 = run_shards(lion_options(false), 1, steps);
  std::size_t apart = 0, total = 0;
  for (std::size_t q = 0; q < whole.size(); ++q)
    for (std::size_t i = 0; i < whole[q].size(); ++i, ++total) apart += whole[q][i] != f32[q][i];
  // An element moves by ±lr per step either way: only the signs the 8-bit momentum flips differ.
  EXPECT_LT(static_cast<double>(apart), 0.3 * static_cast<double>(total));
}

TEST(LionTrainer, DeclaresItsStateAndAllocatesIt) {
  for (bool eight_bit : {false, true}) {
    const TrainerOptions o = lion_options(eight_bit);
    const optim::Declaration& d = o.optimizer->declaration();
    Params model;
    MemoryLedger ledger;
    nn::ParamStore store(model.units,
                         nn::ParamStoreOptions{DType::f32, DType::f32, state_pad_multiple(o, 1),
                                               TensorOptions{Device::cpu(), Tier::device,
                                                             Category::other, &ledger}});
    Trainer t(store, o);
    std::uint64_t want = 0;
    for (std::size_t u = 0; u < store.num_units(); ++u) {
      const auto elements = static_cast<std::uint64_t>(store.layout(u).hi - store.layout(u).lo);
      want += eight_bit ? elements + 4 * optim::quant_blocks(elements) : 4 * elements;
    }
    EXPECT_EQ(ledger.current(Tier::device, Category::optimizer), want) << d.name;
    EXPECT_TRUE(d.unit_steps) << d.name;
    if (eight_bit) {
      ASSERT_EQ(d.state.size(), 2u);
      EXPECT_EQ(d.state[0].kind, "exp_avg_q8");
      EXPECT_EQ(d.state[1].kind, "exp_avg_absmax");
      EXPECT_EQ(d.state[1].shape, optim::StateShape::blocks);
      EXPECT_FALSE(d.refusals.tensor_parallel.empty());
    } else {
      ASSERT_EQ(d.state.size(), 1u);
      EXPECT_EQ(d.state[0].kind, "exp_avg");
      EXPECT_EQ(d.state[0].shape, optim::StateShape::elements);
      EXPECT_TRUE(d.refusals.tensor_parallel.empty());
    }
  }
}

}  // namespace test_lion_trainer
}  // namespace
}  // namespace strata::train
