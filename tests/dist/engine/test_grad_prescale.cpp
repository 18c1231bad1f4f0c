// DeepSpeed's prescale_gradients and gradient_predivide_factor in the ZeRO hooks' reductions:
// gradients so large that their plain sum over ranks overflows float32 come out as the average
// when divided before the reduction (prescale: by N; predivide f: by f, times f / N after); the
// config reaches the engine's options; and N ranks train like one rank with either (SGD, which
// follows the gradients' scale, at stages 0 and 2; and AdamW without bias correction).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "parallel/engine/training.hpp"
#include "tests/dist/comm/dist_env.hpp"
#include "tests/dist/engine/zero_fixture.hpp"

using namespace strata;
using namespace strata::test;

namespace {

enum class Scaling { none, prescale, predivide4 };

const char* scaling_name(Scaling s) {
  return s == Scaling::none ? "none" : s == Scaling::prescale ? "prescale" : "predivide4";
}

parallel::ZeroOptions zero_options(int stage, Scaling s) {
  parallel::ZeroOptions z{stage, 1000, true};
  z.prescale = s == Scaling::prescale;
  z.predivide = s == Scaling::predivide4 ? 4.0 : 1.0;
  return z;
}

// Rank r's gradient element i: near float32's largest value (3.4e38), so that two of them
// summed overflow.
double big_grad(int rank, std::int64_t i) {
  return 2.5e38 + rank * 1e37 + static_cast<double>(i) * 1e36;
}

struct SliceCase {
  int stage;
  Scaling scaling;
};

class GradScaling : public ::testing::TestWithParam<SliceCase> {};

TEST_P(GradScaling, LargeGradientsAverageWithoutOverflow) {
  const auto [stage, scaling] = GetParam();
  const auto& w = world();
  const int N = w.size();
  OneLinear m;
  nn::ParamStore store({m.parameters()}, parallel::ZeroHooks::store_options({}, stage, w));
  store.initialize(1);
  parallel::ZeroHooks hooks(store, w, zero_options(stage, scaling));
  nn::Context ctx;
  ctx.hooks = &hooks;
  ctx.before_backward(0);
  Tensor g = store.grads(0);  // as a backward would have written it
  for (std::int64_t i = 0; i < g.numel(); ++i)
    g.data<float>()[i] = static_cast<float>(big_grad(w.rank(), i));
  ctx.after_backward(0);
  hooks.end_backward();
  hooks.finish_gradients();
  const auto& l = store.layout(0);
  const auto got =
      (stage == 0 ? store.grads(0).slice(0, l.lo, l.hi) : store.grad_shard(0)).to_vector();
  for (std::size_t k = 0; k < got.size(); ++k) {
    const std::int64_t i = l.lo + static_cast<std::int64_t>(k);
    if (i >= l.numel) break;  // the padded tail (stage 0 reduces only the parameters)
    double sum = 0;
    for (int r = 0; r < N; ++r) sum += static_cast<float>(big_grad(r, i));
    const double avg = sum / N;
    if (scaling == Scaling::none && N > 1) {
      // What the two options are for: the plain sum overflows before the division.
      EXPECT_TRUE(std::isinf(got[k])) << "element " << i << " = " << got[k];
    } else {
      EXPECT_NEAR(got[k], avg, 1e-6 * avg)
          << scaling_name(scaling) << " rank " << w.rank() << " element " << i;
    }
  }
}

std::string slice_name(const ::testing::TestParamInfo<SliceCase>& i) {
  return "stage" + std::to_string(i.param.stage) + "_" + scaling_name(i.param.scaling);
}

INSTANTIATE_TEST_SUITE_P(
    Stages, GradScaling,
    ::testing::Values(SliceCase{0, Scaling::none}, SliceCase{0, Scaling::prescale},
                      SliceCase{0, Scaling::predivide4}, SliceCase{1, Scaling::prescale},
                      SliceCase{1, Scaling::predivide4}, SliceCase{2, Scaling::none},
                      SliceCase{2, Scaling::prescale}, SliceCase{2, Scaling::predivide4},
                      SliceCase{3, Scaling::prescale}, SliceCase{3, Scaling::predivide4}),
    slice_name);

TEST(GradScalingConfig, ReachesTheEngine) {
  config::Config cfg = job_config(train::TrainerOptions{}, 2, 1, 2);
  EXPECT_FALSE(parallel::engine_options(cfg).zero.prescale);
  EXPECT_EQ(parallel::engine_options(cfg).zero.predivide, 1.0);
  cfg.prescale_gradients = true;
  cfg.gradient_predivide_factor = 8;
  EXPECT_TRUE(parallel::engine_options(cfg).zero.prescale);
  EXPECT_EQ(parallel::engine_options(cfg).zero.predivide, 8.0);
}

// ---- N ranks = 1 rank ----

struct TrainCase {
  int stage;
  Scaling scaling;
  bool sgd;  // SGD, else AdamW
  bool bias_correction = true;
};

class GradScalingTraining : public ::testing::TestWithParam<TrainCase> {};

TEST_P(GradScalingTraining, NRanksTrainLikeOneRank) {
  const TrainCase c = GetParam();
  const auto& w = world();
  const int N = w.size(), b = 2, accum = 2, steps = 20;
  if (N < 2) GTEST_SKIP() << "compares N ranks with one rank";
  const auto model = tiny_gpt();
  train::TrainerOptions o;
  if (c.sgd)
    o.optimizer = std::make_shared<optim::SGD>(optim::SGDHyper{.lr = 0.3, .momentum = 0.9});
  else
    o.optimizer = std::make_shared<optim::AdamW>(
        optim::AdamWHyper{.lr = 3e-3, .bias_correction = c.bias_correction});
  config::Config cfg = job_config(o, b, accum, c.stage);
  cfg.prescale_gradients = c.scaling == Scaling::prescale;
  cfg.gradient_predivide_factor = c.scaling == Scaling::predivide4 ? 4.0 : 1.0;
  Replica z(model, cfg, w);
  Replica ref(model, job_config(o, N * b, accum, 0), w.split(w.rank(), 0, "self"));
  // Without bias correction: the same run with it, to see that the switch reached the optimizer.
  train::TrainerOptions with_bc = o;
  if (!c.sgd) with_bc.optimizer = std::make_shared<optim::AdamW>(optim::AdamWHyper{.lr = 3e-3});
  Replica corrected(model, job_config(with_bc, b, accum, c.stage), w);
  BatchFeed fz{N, w.rank(), b, model.block_size, model.vocab_size}, fc = fz;
  BatchFeed fr{1, 0, N * b, model.block_size, model.vocab_size};
  double worst = 0, first = 0, last = 0, last_corrected = 0;
  for (int s = 0; s < steps; ++s) {
    const auto a = z.engine.train_step(std::ref(fz));
    const auto r = ref.engine.train_step(std::ref(fr));
    if (!c.bias_correction) last_corrected = corrected.engine.train_step(std::ref(fc)).loss;
    worst = std::max(worst, std::abs(a.loss - r.loss) / r.loss);
    if (s == 0) first = r.loss;
    last = r.loss;
  }
  const double l2 = rel_l2(z.master_weights(), ref.master_weights());
  if (w.rank() == 0)
    std::printf("np=%d stage %d %s %s%s: vs 1 rank: loss %.2e, weights L2 %.2e; loss %.3f -> "
                "%.3f\n",
                N, c.stage, scaling_name(c.scaling),
                c.sgd ? "SGD" : "AdamW",
                c.bias_correction ? "" : " without bias correction", worst, l2, first, last);
  EXPECT_LT(last, 0.95 * first);
  // test_zero's bounds: the gradients differ from one rank's only by round-off.
  EXPECT_LT(worst, 1e-6);
  // Without bias correction AdamW's first steps are ~3x larger (m/sqrt(v) = 3.16 sign(g) at step
  // 1), which carries the same round-off ~9x further (measured 2.5e-5 to 4.9e-5 at np 2-4 where
  // the corrected run measures 2.7e-6 to 5e-6).
  EXPECT_LT(l2, c.bias_correction ? 1e-5 : 1e-4);
  // lr 3e-3 uncorrected descends faster (measured 3.11 vs 3.59 after 20 steps at np 2).
  if (!c.bias_correction) {
    EXPECT_LT(last, 0.95 * last_corrected);
  }
}

std::string train_name(const ::testing::TestParamInfo<TrainCase>& i) {
  return "stage" + std::to_string(i.param.stage) + "_" + scaling_name(i.param.scaling) +
         (i.param.sgd ? "_sgd" : "_adamw") +
         (i.param.bias_correction ? "" : "_no_bias_correction");
}

INSTANTIATE_TEST_SUITE_P(
    Scalings, GradScalingTraining,
    ::testing::Values(TrainCase{0, Scaling::prescale, true},
                      TrainCase{2, Scaling::prescale, true},
                      TrainCase{0, Scaling::predivide4, true},
                      TrainCase{2, Scaling::predivide4, true},
                      TrainCase{1, Scaling::none, false, true},
                      TrainCase{1, Scaling::none, false, false},
                      TrainCase{2, Scaling::prescale, false, false}),
    train_name);

}  // namespace
