// GPT training on a GPU against the same job on the CPU (one rank, the whole engine: Training,
// ZeRO hooks, Trainer, checkpoints). Every test is named cuda_* (labelled `cuda`, run by
// scripts/gpu-check) and skips, saying why, where no GPU and CUDA kernels are present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "framework/backend/math_mode.hpp"
#include "framework/memory/out_of_memory.hpp"
#include "tests/unit/gpu/gpu_test_util.hpp"

namespace strata {
namespace {

using gpu_test::Feed;
using gpu_test::job_config;
using gpu_test::masters_of;
using gpu_test::max_rel;
using gpu_test::one_rank;
using gpu_test::rel_l2;
using gpu_test::train;
using gpu_test::Trained;

TEST(GptCuda, cuda_F32LossesMatchTheCpuOver20Steps) {
  SKIP_WITHOUT_GPU();
  const Trained cpu = train(job_config("cpu"), 20), gpu = train(job_config("cuda"), 20);
  ASSERT_EQ(gpu.losses.size(), 20u);
  for (double l : gpu.losses) ASSERT_TRUE(std::isfinite(l));
  EXPECT_LT(max_rel(gpu.losses, cpu.losses), 1e-5) << "first losses cpu " << cpu.losses[0]
                                                   << " gpu " << gpu.losses[0];
  EXPECT_LT(rel_l2(gpu.masters, cpu.masters), 1e-4);
  EXPECT_LT(gpu.losses.back(), gpu.losses.front());  // it learns
}

TEST(GptCuda, cuda_Bf16TracksF32) {
  SKIP_WITHOUT_GPU();
  const Trained f32 = train(job_config("cuda"), 20), bf16 = train(job_config("cuda", {"bf16.enabled=true"}), 20);
  EXPECT_LT(max_rel(bf16.losses, f32.losses), 3e-2);
  EXPECT_LT(rel_l2(bf16.masters, f32.masters), 3e-2);
}

TEST(GptCuda, cuda_Fp16WithLossScalingTracksF32) {
  SKIP_WITHOUT_GPU();
  const Trained f32 = train(job_config("cuda"), 20), fp16 = train(job_config("cuda", {"fp16.enabled=true"}), 20);
  EXPECT_LT(max_rel(fp16.losses, f32.losses), 3e-2);
}

TEST(GptCuda, cuda_RunsAreBitwiseRepeatable) {
  SKIP_WITHOUT_GPU();
  for (const char* precision : {"bf16.enabled=false", "bf16.enabled=true"}) {
    const Trained a = train(job_config("cuda", {precision}), 5), b = train(job_config("cuda", {precision}), 5);
    EXPECT_EQ(a.losses, b.losses) << precision;
    EXPECT_EQ(a.masters, b.masters) << precision;
  }
}

// strata.allow_rounded_attention: bf16 attention with P and dS rounded to 16 bits once (fewer
// tensor-core products) trains as the split form does, differs from it (the key acts) and is
// bitwise repeatable.
TEST(GptCuda, cuda_RoundedAttentionTracksTheSplitFormAndRepeats) {
  SKIP_WITHOUT_GPU();
  const MathModeGuard restore(allow_tf32(), allow_rounded_attention());  // Training sets the modes
  const Trained split = train(job_config("cuda", {"bf16.enabled=true"}), 10);
  const auto rounded_cfg =
      job_config("cuda", {"bf16.enabled=true", "strata.allow_rounded_attention=true"});
  const Trained a = train(rounded_cfg, 10), b = train(rounded_cfg, 10);
  EXPECT_NE(a.masters, split.masters) << "the rounded form changed nothing";
  EXPECT_LT(max_rel(a.losses, split.losses), 3e-2);
  EXPECT_LT(rel_l2(a.masters, split.masters), 3e-2);  // as bf16 against f32 (cuda_Bf16TracksF32)
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.masters, b.masters);
}

TEST(GptCuda, cuda_ActivationCheckpointingIsBitwiseTheSame) {
  SKIP_WITHOUT_GPU();
  for (const char* precision : {"bf16.enabled=false", "bf16.enabled=true"}) {
    const Trained plain = train(job_config("cuda", {precision}), 5);
    for (const char* mode : {"strata.activation_checkpointing=true",
                             "strata.activation_checkpointing=selective"}) {
      const Trained ckpt = train(job_config("cuda", {precision, mode}), 5);
      EXPECT_EQ(plain.losses, ckpt.losses) << precision << " " << mode;
      EXPECT_EQ(plain.masters, ckpt.masters) << precision << " " << mode;
    }
  }
}

TEST(GptCuda, cuda_ZeroStagesOnOneRankEqualStageZero) {
  SKIP_WITHOUT_GPU();
  const Trained z0 = train(job_config("cuda", {"bf16.enabled=true"}), 5);
  for (const char* stage : {"zero_optimization.stage=1", "zero_optimization.stage=2",
                            "zero_optimization.stage=3"}) {
    const Trained z = train(job_config("cuda", {"bf16.enabled=true", stage}), 5);
    EXPECT_EQ(z.losses, z0.losses) << stage;
    EXPECT_EQ(z.masters, z0.masters) << stage;
  }
}

TEST(GptCuda, cuda_SgdMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::string> sgd = {"optimizer.type=SGD", "optimizer.params.lr=0.05",
                                        "optimizer.params.momentum=0.9"};
  auto with = [&](const char* d) { return job_config(d, sgd); };
  const Trained cpu = train(with("cpu"), 10), gpu = train(with("cuda"), 10);
  EXPECT_LT(max_rel(gpu.losses, cpu.losses), 1e-5);
}

// Lion, Lion8bit and AdamW8bit with their state on the GPU (ops::lion_step, lion8bit_step,
// adamw8bit_step: the CUDA kernels, bitwise the CPU's update and 8-bit quantization) against the
// same job on the CPU: only the forward and backward differ (sums in other orders), so the losses
// stay within 1e-4 in f32 (Lion's sign and the 8-bit codes can turn on a last-bit difference of a
// gradient) and 1e-3 with bf16 parameters (the 16-bit copy written by the kernels, bf16
// gradients widened by them).
// Each optimizer's settings, in f32 and with bf16 parameters: 10 steps on the GPU against the same
// job on the CPU, losses within 1e-4 (f32) and 1e-3 (bf16), finite, and learning.
void expect_track_the_cpu(const std::vector<std::vector<std::string>>& optimizers) {
  for (const auto& opt : optimizers)
    for (const char* precision : {"bf16.enabled=false", "bf16.enabled=true"}) {
      std::vector<std::string> sets = opt;
      sets.push_back(precision);
      const Trained cpu = train(job_config("cpu", sets), 10), gpu = train(job_config("cuda", sets), 10);
      ASSERT_EQ(gpu.losses.size(), 10u) << opt[0];
      for (double l : gpu.losses) ASSERT_TRUE(std::isfinite(l)) << opt[0] << " " << precision;
      const bool bf16 = std::string(precision) == "bf16.enabled=true";
      EXPECT_LT(max_rel(gpu.losses, cpu.losses), bf16 ? 1e-3 : 1e-4) << opt[0] << " " << precision;
      EXPECT_LT(gpu.losses.back(), gpu.losses.front()) << opt[0] << " " << precision << ": it learns";
    }
}

TEST(GptCuda, cuda_LionLion8bitAdamW8bitMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::vector<std::string>> optimizers = {
      {"optimizer.type=Lion", "optimizer.params.lr=0.0003", "optimizer.params.weight_decay=0.1"},
      {"optimizer.type=Lion8bit", "optimizer.params.lr=0.0003", "optimizer.params.weight_decay=0.1"},
      {"optimizer.type=AdamW8bit", "optimizer.params.weight_decay=0.1"}};
  expect_track_the_cpu(optimizers);
}

// Adafactor and LAMB on the GPU with their state there (ops::adafactor_*, lamb_*: the CUDA
// kernels, bitwise the CPU's sums in the CPU's order and its updates; the per-parameter scalars
// from sums reduced on the host once per reduction) against the same job on the CPU, ZeRO-1
// and ZeRO-0. Only the forward and backward differ (sums in other orders), so the losses stay
// within 1e-4 in f32 (Adafactor's update clipping and LAMB's trust ratios carry a last-bit
// difference of a gradient into every element of a parameter) and 1e-3 with bf16 parameters.
TEST(GptCuda, cuda_AdafactorLambMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::vector<std::string>> optimizers = {
      {"optimizer.type=Adafactor", "optimizer.params.relative_step=false",
       "optimizer.params.lr=0.05"},
      {"optimizer.type=Adafactor", "optimizer.params.beta1=0.9", "optimizer.params.relative_step=false",
       "optimizer.params.scale_parameter=false", "optimizer.params.lr=0.001",
       "optimizer.params.weight_decay=0.01", "zero_optimization.stage=1"},
      {"optimizer.type=Lamb", "optimizer.params.lr=0.002", "optimizer.params.weight_decay=0.01"},
      {"optimizer.type=Lamb", "optimizer.params.lr=0.002", "zero_optimization.stage=1"}};
  expect_track_the_cpu(optimizers);
}

// A checkpoint moves between the devices with every bit of its state: written on one device,
// loaded on the other and written again, the two step directories hold the same masters and
// moments; and training on from it goes on as on the device that wrote it.
TEST(GptCuda, cuda_CheckpointsMoveBetweenCpuAndGpuBitwise) {
  SKIP_WITHOUT_GPU();
  const auto root = std::filesystem::temp_directory_path() /
                    ("strata-gpu-ckpt-" + std::to_string(static_cast<long>(::getpid())));
  std::filesystem::remove_all(root);
  for (const auto& [from, to] : {std::pair{"cpu", "cuda"}, std::pair{"cuda", "cpu"}}) {
    const std::string dir = (root / (std::string(from) + "_to_" + to)).string();
    const std::vector<std::string> sets = {"bf16.enabled=true", "strata.checkpoint.dir=" + dir};
    std::vector<float> written;
    {
      const config::Config cfg = job_config(from, sets);
      nn::Gpt model(train::gpt_config(cfg));
      parallel::Training job(cfg, one_rank(), model);
      Feed feed;
      for (int s = 0; s < 3; ++s) job.step([&](nn::Batch& b) { feed(b); });
      job.checkpoints().save(3);
      job.checkpoints().finish();
      written = masters_of(job);
    }
    const config::Config cfg = job_config(to, sets);
    nn::Gpt model(train::gpt_config(cfg));
    parallel::Training job(cfg, one_rank(), model);
    ASSERT_EQ(job.checkpoints().resume(), 3) << from << " -> " << to;
    EXPECT_EQ(masters_of(job), written) << from << " -> " << to;
    Feed feed;
    feed.k = 3;
    const double loss = job.step([&](nn::Batch& b) { feed(b); }).loss;
    EXPECT_TRUE(std::isfinite(loss));
  }
  std::filesystem::remove_all(root);
}

// strata.optimizer_in_backward on the GPU: each unit updated in the last micro-batch's backward,
// bitwise the step after backward (the same kernels on the same gradients) at ZeRO 1-3, f32 and
// bf16, with accumulation.
TEST(GptCuda, cuda_OptimizerInBackwardIsBitwiseTheStepAfterBackward) {
  SKIP_WITHOUT_GPU();
  for (const char* precision : {"bf16.enabled=false", "bf16.enabled=true"})
    for (const char* stage : {"zero_optimization.stage=1", "zero_optimization.stage=2",
                              "zero_optimization.stage=3"}) {
      const std::vector<std::string> sets = {precision, stage, "gradient_accumulation_steps=2"};
      std::vector<std::string> in_backward = sets;
      in_backward.push_back("strata.optimizer_in_backward=true");
      const Trained after = train(job_config("cuda", sets), 4);
      const Trained during = train(job_config("cuda", in_backward), 4);
      EXPECT_EQ(during.losses, after.losses) << precision << " " << stage;
      EXPECT_EQ(during.masters, after.masters) << precision << " " << stage;
    }
}

// How often a step's host waits for the GPU (cuda::host_waits): once, for the gradient norm's
// sums, the losses' copy to the host queued just before them (nn::LossSums::begin_read); the batch
// goes up without a wait, and the embedding's tokens, checked on the host by the GPT, are not
// checked again by the CUDA op (ops::TokenCheck), so micro-batches add no wait. Measured on steps
// 2-4 (the first step sets things up). On an H200 (2026-11-28, at e6e888f, before the TokenCheck
// and begin_read) it was 2 fixed + 2 per micro-batch.
TEST(GptCuda, cuda_AStepWaitsForTheGpuAFixedNumberOfTimes) {
  SKIP_WITHOUT_GPU();
  auto waits_per_step = [](int accumulation) {
    const config::Config cfg = job_config(
        "cuda", {"gradient_accumulation_steps=" + std::to_string(accumulation)});
    nn::Gpt model(train::gpt_config(cfg));
    parallel::Training job(cfg, one_rank(), model);
    Feed feed;
    job.step([&](nn::Batch& b) { feed(b); });
    const std::uint64_t before = cuda::host_waits();
    for (int s = 0; s < 3; ++s) job.step([&](nn::Batch& b) { feed(b); });
    return static_cast<std::int64_t>(cuda::host_waits() - before) / 3;
  };
  const std::int64_t one = waits_per_step(1), four = waits_per_step(4);
  const std::int64_t per_micro_batch = (four - one) / 3, fixed = one - per_micro_batch;
  std::printf("host waits per step: %lld with 1 micro-batch, %lld with 4 (%lld fixed + %lld per "
              "micro-batch)\n", static_cast<long long>(one), static_cast<long long>(four),
              static_cast<long long>(fixed), static_cast<long long>(per_micro_batch));
  EXPECT_EQ(four - one, 3 * per_micro_batch);
  EXPECT_EQ(per_micro_batch, 0) << "a micro-batch makes the host wait for the GPU";
  EXPECT_EQ(fixed, 1) << "one wait, for the gradient norm's sums and the losses together";
}

// What a GPU job cannot run is one line naming the key to change.
TEST(GptCuda, cuda_UnsupportedGpuJobsAreOneLineErrors) {
  SKIP_WITHOUT_GPU();
  for (const auto& [sets, key] :
       {std::pair{std::vector<std::string>{"optimizer.type=OneBitAdam"}, "strata.device"},
        std::pair{std::vector<std::string>{"zero_optimization.stage=2",
                                           "zero_optimization.offload_optimizer.device=cpu",
                                           "strata.optimizer_in_backward=true"},
                  "strata.optimizer_in_backward to false"}}) {
    const config::Config cfg = job_config("cuda", sets);
    nn::Gpt model(train::gpt_config(cfg));
    try {
      parallel::Training job(cfg, one_rank(), model);
      ADD_FAILURE() << "accepted " << sets[0];
    } catch (const UserError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      EXPECT_NE(msg.find(key), std::string::npos) << msg;
    }
  }
}

// A device cap below what the step needs: Strata's OutOfMemory, on the device tier, with advice.
TEST(GptCuda, cuda_ADeviceCapBelowTheStepIsOutOfMemoryWithAdvice) {
  SKIP_WITHOUT_GPU();
  const config::Config cfg = job_config("cuda", {"strata.memory.device_limit=64KiB"});
  try {
    (void)plan_test::measure(cfg, 1, true);
    ADD_FAILURE() << "a 64 KiB device cap was not exceeded";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.context().tier, Tier::device);
    EXPECT_FALSE(e.advice().empty());
  }
}

}  // namespace
}  // namespace strata
