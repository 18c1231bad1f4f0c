// strata.optimizer_in_backward: each unit is updated where its final gradient is reduced, in the
// last micro-batch's backward (Trainer::step_unit), instead of after backward. Checked at ZeRO 1,
// 2 and 3, with accumulation, AdamW / AdamW8bit / SGD, f32 and bf16, gradients and optimizer
// state on the device, in host memory and on NVMe, parameters on NVMe: losses, gradient norms,
// learning rates, master weights and parameters bitwise those of the step after backward (the
// same kernels on the same gradients; only the order of the units' updates differs), with every
// unit updated in backward. Offloaded gradients are then never written. N ranks match one rank;
// with tensor parallelism (2 parts) every part is bitwise the step after backward too.
#include <gtest/gtest.h>

#include <memory>

#include "framework/optim/optimizers/adamw8bit.hpp"
#include "framework/optim/optimizers/lion.hpp"
#include "framework/optim/optimizers/lion8bit.hpp"
#include "offload/nvme_state_store.hpp"
#include "offload/value_shard_store.hpp"
#include "tests/dist/comm/dist_env.hpp"
#include "tests/dist/engine/model_parallel_fixture.hpp"
#include "tests/dist/engine/zero_fixture.hpp"
#include "tests/unit/offload/offload_test_util.hpp"

using namespace strata;
using namespace strata::test;

namespace {
namespace test_optimizer_in_backward {  // file-local names, unique in a unity build

using config::OffloadDevice;

struct Case {
  int stage;
  int accum;
  DType dtype;
  std::string optimizer;  // "AdamW", "AdamW8bit", "SGD", "Lion", "Lion8bit"
  OffloadDevice offload = OffloadDevice::none;  // offload_optimizer (and with it the gradients)
  bool params_on_nvme = false;                  // offload_param nvme (stage 3)
  bool overlap = true;
};

config::Config case_config(const Case& k, const std::string& dir, bool in_backward) {
  train::TrainerOptions o;
  const optim::AdamWHyper adamw{.lr = 3e-3, .weight_decay = 0.1};
  if (k.optimizer == "AdamW") o.optimizer = std::make_shared<optim::AdamW>(adamw);
  else if (k.optimizer == "AdamW8bit") o.optimizer = std::make_shared<optim::AdamW8bit>(adamw);
  else if (k.optimizer == "Lion" || k.optimizer == "Lion8bit") {
    const optim::LionHyper lion{.lr = 1e-3, .beta2 = 0.99, .weight_decay = 0.1};
    if (k.optimizer == "Lion") o.optimizer = std::make_shared<optim::Lion>(lion);
    else o.optimizer = std::make_shared<optim::Lion8bit>(lion);
  } else if (k.optimizer == "SGD")
    o.optimizer = std::make_shared<optim::SGD>(
        optim::SGDHyper{.lr = 3e-2, .momentum = 0.9, .weight_decay = 0.01});
  else ADD_FAILURE() << "no optimizer " << k.optimizer;
  o.precision = k.dtype == DType::bf16 ? train::Precision::bf16 : train::Precision::f32;
  config::Config cfg = job_config(o, 2, k.accum, k.stage, k.dtype, 1000, k.overlap);
  cfg.scheduler.type = config::SchedulerType::warmup_lr;  // a rate that changes every update
  cfg.scheduler.warmup_num_steps = 4;
  cfg.strata.optimizer_in_backward = in_backward;
  auto& oo = cfg.zero_optimization.offload_optimizer;
  oo.device = k.offload;
  if (k.offload == OffloadDevice::nvme) {
    oo.nvme_path = dir;
    oo.buffer_count = 3;  // fewer buffers than units: real swapping, read ahead in backward order
  }
  if (k.params_on_nvme) {
    auto& op = cfg.zero_optimization.offload_param;
    op.device = OffloadDevice::nvme;
    op.nvme_path = dir;
    op.buffer_count = 4;
  }
  cfg.aio.block_size = 8192;
  cfg.aio.queue_depth = 4;
  return cfg;
}

const offload::Swapper* grad_swapper(const Replica& r) {
  auto* gs = dynamic_cast<offload::NvmeValueShardStore*>(r.store.options().grad_store.get());
  return gs ? &gs->swapper() : nullptr;
}

const offload::Swapper* param_swapper(const Replica& r) {
  auto* vs = dynamic_cast<offload::NvmeValueShardStore*>(r.store.options().value_store.get());
  return vs ? &vs->swapper() : nullptr;
}

class OptimizerInBackward : public ::testing::TestWithParam<Case> {};

TEST_P(OptimizerInBackward, BitwiseLikeTheStepAfterBackward) {
  const Case k = GetParam();
  const auto& w = world();
  const int N = w.size(), steps = 5;
  nn::GptConfig c = tiny_gpt();
  c.n_layer = 8;  // 10 units: more than the buffers of every store
  // Two directories: rank r's swap files of both jobs would have the same names.
  offload::test::ScratchDir d_after("inbwd_after"), d_in("inbwd_in");
  Replica after(c, case_config(k, d_after.str(), false), w);
  Replica in(c, case_config(k, d_in.str(), true), w);
  ASSERT_TRUE(in.trainer.options().step_in_backward);
  auto* states = dynamic_cast<offload::NvmeStateStore*>(&in.trainer.states());
  if (states) states->swapper().reset_stats();
  BatchFeed f0{N, w.rank(), 2, c.block_size, c.vocab_size}, f1 = f0;
  for (int s = 0; s < steps; ++s) {
    const auto a = after.engine.train_step(std::ref(f0));
    const auto b = in.engine.train_step(std::ref(f1));
    ASSERT_EQ(b.loss, a.loss) << "step " << s;
    ASSERT_EQ(b.result.grad_norm, a.result.grad_norm) << "step " << s;
    ASSERT_EQ(b.result.lr, a.result.lr) << "step " << s;
    ASSERT_TRUE(b.result.applied);
    // Every unit went through step_unit (none was left to step()).
    EXPECT_EQ(in.trainer.last_updated_in_backward(), in.store.num_units()) << "step " << s;
    EXPECT_EQ(after.trainer.last_updated_in_backward(), 0u);
    EXPECT_EQ(in.trainer.units_stepped(), 0u);  // reset for the next step
  }
  if (states) {
    // Read ahead in backward's order: every acquire of the steps finds its unit read ahead
    // (the first step's first units included: expect_order started reading them).
    const auto s = states->swapper().stats();
    EXPECT_EQ(s.acquires, static_cast<std::uint64_t>(steps) * in.store.num_units());
    EXPECT_EQ(s.hits, s.acquires) << "optimizer state not read ahead in backward's order";
  }
  if (const offload::Swapper* p = param_swapper(in)) {
    // The updates overwrite parameter slices beside backward's gathers without evicting the
    // slices read ahead for them: no more parameter reads than updating after backward.
    EXPECT_LE(p->stats().bytes_read, param_swapper(after)->stats().bytes_read);
  }
  EXPECT_EQ(in.trainer.updates(), after.trainer.updates());
  EXPECT_EQ(in.master_weights(), after.master_weights());
  EXPECT_EQ(in.value_shards(), after.value_shards());
  if (const offload::Swapper* g = grad_swapper(in); g && k.accum == 1) {
    // The gradient is consumed where it is reduced: the gradient swap file is never written
    // (the run after backward writes every unit's).
    EXPECT_EQ(g->stats().bytes_written, 0u);
    EXPECT_EQ(g->stats().bytes_read, 0u);
    // Nor is a buffer of it taken (or zeroed): the stored slice holds nothing yet, so the reduced
    // slice goes to the update as it is (ZeroHooks::complete_reductions).
    EXPECT_EQ(g->stats().acquires, 0u);
    EXPECT_EQ(g->buffer_count(), 2);  // it only stages each unit's reduction
    EXPECT_GT(grad_swapper(after)->stats().bytes_written, 0u);
  }
}

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
  const Case& k = i.param;
  return "stage" + std::to_string(k.stage) + "_accum" + std::to_string(k.accum) + "_" +
         std::string(dtype_name(k.dtype)) + "_" + k.optimizer + "_" +
         std::string(config::to_string(k.offload)) + (k.params_on_nvme ? "_params_nvme" : "") +
         (k.overlap ? "" : "_nooverlap");
}

INSTANTIATE_TEST_SUITE_P(
    Stages, OptimizerInBackward,
    ::testing::Values(Case{1, 1, DType::f32, "AdamW"},
                      Case{1, 3, DType::bf16, "AdamW", OffloadDevice::nvme},
                      Case{2, 2, DType::bf16, "AdamW8bit", OffloadDevice::cpu},
                      Case{2, 1, DType::f32, "SGD", OffloadDevice::nvme, false, false},
                      Case{3, 2, DType::f32, "SGD"},
                      Case{3, 1, DType::bf16, "AdamW8bit", OffloadDevice::nvme, true},
                      Case{3, 1, DType::bf16, "AdamW", OffloadDevice::nvme, true, false},
                      Case{2, 2, DType::bf16, "Lion", OffloadDevice::cpu},
                      Case{3, 1, DType::bf16, "Lion8bit", OffloadDevice::nvme, true}),
    case_name);

// Tensor-parallel parts (tp 2, ZeRO sharding each part over the rest): updating in backward is
// bitwise the step after backward on every part.
TEST(OptimizerInBackwardTensorParallel, BitwiseLikeTheStepAfterBackward) {
  const auto& w = world();
  if (w.size() % 2 != 0) GTEST_SKIP() << "tensor parallelism over 2 parts needs an even rank count";
  const int steps = 4;
  nn::GptConfig c = tiny_gpt();
  c.n_layer = 4;
  offload::test::ScratchDir d_after("inbwd_tp_after"), d_in("inbwd_tp_in");
  for (const Case& k : {Case{1, 1, DType::f32, "AdamW"},
                        Case{3, 2, DType::bf16, "SGD", OffloadDevice::nvme, true}}) {
    config::Config a_cfg = case_config(k, d_after.str(), false), b_cfg = case_config(k, d_in.str(), true);
    a_cfg.strata.tensor_parallel_size = b_cfg.strata.tensor_parallel_size = 2;
    Replica after(c, a_cfg, w);
    Replica in(c, b_cfg, w);
    const auto coords = in.training->grid().coords();
    const int dp = in.training->grid().dp_size();
    BatchFeed f0{dp, coords.dp, 2, c.block_size, c.vocab_size}, f1 = f0;
    for (int s = 0; s < steps; ++s) {
      const auto a = after.engine.train_step(std::ref(f0));
      const auto b = in.engine.train_step(std::ref(f1));
      ASSERT_EQ(b.loss, a.loss) << "stage " << k.stage << ", step " << s;
      ASSERT_EQ(b.result.grad_norm, a.result.grad_norm) << "stage " << k.stage << ", step " << s;
      EXPECT_EQ(in.trainer.last_updated_in_backward(), in.store.num_units());
    }
    EXPECT_EQ(in.value_shards(), after.value_shards()) << "stage " << k.stage;
  }
}

// N ranks updating in backward train like one rank with N times the micro-batch (data
// parallelism's usual tolerance: reductions sum in another order).
TEST(OptimizerInBackwardRanks, NRanksMatchOneRank) {
  const auto& w = world();
  const int N = w.size(), steps = 5;
  const auto c = tiny_gpt();
  offload::test::ScratchDir dir_dp("inbwd_np"), dir_ref("inbwd_ref");
  for (int stage : {1, 3}) {
    const Case k{stage, 2, DType::f32, "AdamW", OffloadDevice::nvme};
    config::Config dp_cfg = case_config(k, dir_dp.str(), true);
    config::Config ref_cfg = case_config(k, dir_ref.str(), true);
    ref_cfg.train_micro_batch_size_per_gpu = 2 * N;
    Replica dp(c, dp_cfg, w);
    Replica ref(c, ref_cfg, w.split(w.rank(), 0, "self"));
    BatchFeed dp_feed{N, w.rank(), 2, c.block_size, c.vocab_size};
    BatchFeed ref_feed{1, 0, 2 * N, c.block_size, c.vocab_size};
    SCOPED_TRACE(fmt::format("stage {}", stage));
    step_side_by_side(dp.engine, dp_feed, ref.engine, ref_feed, steps, /*norm_tolerance=*/1e-5);
    EXPECT_EQ(dp.trainer.last_updated_in_backward(), dp.store.num_units());
    EXPECT_EQ(ref.trainer.last_updated_in_backward(), ref.store.num_units());
    EXPECT_LT(rel_l2(dp.master_weights(), ref.master_weights()), 5e-6) << "stage " << stage;
  }
}

}  // namespace test_optimizer_in_backward
}  // namespace
