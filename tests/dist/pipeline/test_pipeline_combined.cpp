// Pipeline stages together with everything else a job turns on: 16-bit mixed precision (bf16
// parameters and activations; fp16 with a dynamic loss scale that must skip the same steps on
// every stage), ZeRO inside each stage's dp group, activation checkpointing, gradient
// accumulation, and offload of optimizer state and parameters (host and NVMe) — which trains
// bitwise like the same pipeline without offload. And the clear errors of what cannot be split.
#include <gtest/gtest.h>

#include "framework/nn/linear.hpp"
#include "tests/dist/comm/dist_env.hpp"
#include "tests/dist/engine/test_resume_fixture.hpp"
#include "tests/dist/pipeline/pipeline_fixture.hpp"
#include "tests/unit/offload/offload_test_util.hpp"

using namespace strata;
using namespace strata::test;

namespace {

struct MixedCase {
  DType dtype;
  int zero;
};

class PipelineMixedPrecision : public ::testing::TestWithParam<MixedCase> {};

// 16-bit training through the pipeline tracks the same 16-bit training without pipeline on the
// same dp ranks (losses within 1%: 16-bit rounding of the tied embedding's gradient sum), and with
// fp16 every rank skips the same steps and keeps the same loss scale as that run.
TEST_P(PipelineMixedPrecision, TracksOneRank) {
  const auto [dt, zero] = GetParam();
  const SingleThreaded one_thread;
  const auto& w = world();
  const auto c = pipe_gpt();
  const int b = 2, m = 4, steps = 10;
  train::TrainerOptions o = trainer_options(dt);
  o.dynamic_scaler.init_scale = 16777216.0;  // fp16: 2^24 overflows first, then settles
  o.dynamic_scaler.delayed_shift = 1;
  for (int pp : pipeline_sizes(w.size())) {
    const int dp = w.size() / pp;
    SCOPED_TRACE(fmt::format("pp {} x dp {}", pp, dp));
    auto cfg = [&](int micro, int stages) {
      config::Config x = job_config(o, micro, m, zero, dt, 1000, true, true, /*act16=*/true);
      x.strata.pipeline_parallel_size = stages;
      return x;
    };
    Replica pipe(c, cfg(b, pp), w);
    // The reference: data parallelism alone on this stage's dp ranks, the same micro-batches per
    // rank (16-bit gradients, and so fp16 overflows, depend on what each rank sums).
    const auto me = pipe.training->grid().coords();
    Replica ref(c, cfg(b, 1), w.split(me.pp, me.dp, "dp_ref"));
    BatchFeed feed{dp, me.dp, b, c.block_size, c.vocab_size}, ref_feed = feed;
    double worst = 0;
    int skipped = 0;
    for (int s = 0; s < steps; ++s) {
      const auto a = pipe.engine.train_step(std::ref(feed));
      const auto r = ref.engine.train_step(std::ref(ref_feed));
      EXPECT_EQ(a.result.applied, r.result.applied) << "step " << s;
      EXPECT_EQ(a.result.loss_scale, r.result.loss_scale) << "step " << s;
      skipped += !a.result.applied;
      // The same scale and the same decision on every rank of the pipeline.
      const std::array<double, 4> mine{a.result.loss_scale, -a.result.loss_scale,
                                       a.result.applied ? 1.0 : 0.0, a.result.applied ? 0.0 : 1.0};
      const auto most = w.all_reduce_values(mine, parallel::ReduceOp::max);
      EXPECT_EQ(most[0], -most[1]) << "ranks disagree on the loss scale at step " << s;
      EXPECT_EQ(most[2] + most[3], 1.0) << "ranks disagree on skipping step " << s;
      worst = std::max(worst, std::abs(a.loss - r.loss) / r.loss);
    }
    if (dt == DType::f16) {
      EXPECT_GT(skipped, 0);  // the scale really moved
      EXPECT_LT(skipped, steps - 2);  // and training went on
    }
    if (w.rank() == 0)
      std::printf("pp=%d dp=%d %s ZeRO %d (activations 16-bit, checkpointing, %d micro-batches): "
                  "worst loss rel %.2e vs dp alone, %d overflow step(s) skipped\n",
                  pp, dp, std::string(dtype_name(dt)).c_str(), zero, m, worst, skipped);
    EXPECT_LT(worst, 1e-3);  // measured <= 1.3e-4
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PipelineMixedPrecision,
                         ::testing::Values(MixedCase{DType::bf16, 2}, MixedCase{DType::bf16, 3},
                                           MixedCase{DType::f16, 1}),
                         [](const auto& i) {
                           return std::string(dtype_name(i.param.dtype)) + "_zero" +
                                  std::to_string(i.param.zero);
                         });

using config::OffloadDevice;

struct OffloadCase {
  OffloadDevice param, opt;
};

class PipelineOffload : public ::testing::TestWithParam<OffloadCase> {};

TEST_P(PipelineOffload, TrainsBitwiseLikeWithout) {
  const auto [param, opt] = GetParam();
  const SingleThreaded one_thread;
  const auto& w = world();
  const auto c = pipe_gpt();
  const int b = 2, m = 3, steps = 5;
  const train::TrainerOptions o = trainer_options(DType::bf16);
  offload::test::ScratchDir dir("pipe_offload");
  for (int pp : pipeline_sizes(w.size())) {
    const int dp = w.size() / pp;
    SCOPED_TRACE(fmt::format("pp {} x dp {}", pp, dp));
    config::Config base = pipe_config(o, b, m, 3, pp, DType::bf16, true);
    config::Config off = base;
    off.zero_optimization.offload_param.device = param;
    off.zero_optimization.offload_optimizer.device = opt;
    if (param == OffloadDevice::nvme) {
      off.zero_optimization.offload_param.nvme_path = dir.str() + "/params" + std::to_string(pp);
      off.zero_optimization.offload_param.buffer_count = 2;
    }
    if (opt == OffloadDevice::nvme) {
      off.zero_optimization.offload_optimizer.nvme_path = dir.str() + "/opt" + std::to_string(pp);
      off.zero_optimization.offload_optimizer.buffer_count = 2;
    }
    off.aio.block_size = 8192;
    MemoryLedger ledger;
    Replica ref(c, base, w);
    Replica x(c, off, w, parallel::TrainingExtras::on(&ledger));
    BatchFeed f0{dp, ref.training->grid().coords().dp, b, c.block_size, c.vocab_size}, f1 = f0;
    for (int s = 0; s < steps; ++s) {
      const auto a = ref.engine.train_step(std::ref(f0));
      const auto y = x.engine.train_step(std::ref(f1));
      ASSERT_EQ(y.loss, a.loss) << "step " << s;
      ASSERT_EQ(y.result.grad_norm, a.result.grad_norm) << "step " << s;
      if (param != OffloadDevice::none) {
        EXPECT_EQ(ledger.current(Tier::device, Category::params), 0u) << "step " << s;
      }
      if (opt != OffloadDevice::none) {
        EXPECT_EQ(ledger.current(Tier::device, Category::optimizer), 0u) << "step " << s;
      }
    }
    EXPECT_TRUE(by_name(*x.training, 0) == by_name(*ref.training, 0));
    EXPECT_TRUE(by_name(*x.training, 2) == by_name(*ref.training, 2));
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, PipelineOffload,
                         ::testing::Values(OffloadCase{OffloadDevice::cpu, OffloadDevice::cpu},
                                           OffloadCase{OffloadDevice::nvme, OffloadDevice::nvme}),
                         [](const auto& i) {
                           return "params_" + std::string(config::to_string(i.param.param)) +
                                  "_optimizer_" + std::string(config::to_string(i.param.opt));
                         });

// A model that declares no stages cannot run with pipeline_parallel_size > 1: the job says so
// and what to set, on every rank, before anything is allocated.
struct Unstaged : nn::Model {
  nn::Linear fc{"fc", 4, 4, true, 0.02f};
  Unstaged() : Model("") { add_child(fc); }
  std::vector<std::vector<nn::Parameter*>> units() override { return {fc.parameters()}; }
  std::vector<nn::UnitUse> unit_schedule() const override { return {{false, 0}, {true, 0}}; }
  std::vector<nn::BatchField> batch_fields(int micro) const override {
    return {{"x", Shape{micro, 4}, DType::f32}};
  }
  double forward(nn::Context&, const nn::Batch&) override { return 0; }
  void backward(nn::Context&, float) override {}
};

TEST(PipelineErrors, ModelsThatCannotBeSplitSaySo) {
  const auto& w = world();
  train::TrainerOptions o;
  Unstaged model;
  try {
    parallel::Training t(pipe_config(o, 1, 2, 0, 2), w, model);
    ADD_FAILURE() << "an unstaged model ran with 2 pipeline stages";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be split into pipeline stages (asked for stage"),
              std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("set strata.pipeline_parallel_size to 1"), std::string::npos);
  }
  // More stages than blocks.
  nn::GptConfig one = pipe_gpt();
  one.n_layer = 1;
  nn::Gpt gpt(one);
  try {
    parallel::Training t(pipe_config(o, 1, 2, 0, 2), w, gpt);
    ADD_FAILURE() << "a 1-layer GPT ran with 2 pipeline stages";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("a GPT with n_layer 1 cannot be cut into 2 pipeline stages"),
              std::string::npos) << e.what();
  }
}

}  // namespace
