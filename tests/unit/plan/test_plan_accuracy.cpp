// The memory planner's prediction against the ledger's measured peak: for configurations spanning
// ZeRO stages, optimizer and parameter offload (host and NVMe), activation checkpointing (full
// and selective),
// micro-batch, accumulation, dtypes and optimizers (AdamW, SGD, AdamW8bit, Adafactor), gradient
// offload, updates in backward, every tier's planned peak is within 5% of the
// peak a real run of the same steps reaches.
#include <gtest/gtest.h>

#include <cstdio>

#include "framework/memory/size.hpp"
#include "tests/unit/plan/plan_test_util.hpp"

namespace strata {
namespace {
namespace test_plan_accuracy {  // file-local names, unique in a unity build

struct Case {
  const char* name;
  std::vector<std::string> sets;
  friend void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }
};

const Case kCases[] = {
    {"Stage0F32", {"strata.activation_dtype=f32"}},
    {"Stage0Bf16", {"bf16.enabled=true"}},
    {"Stage0Fp16Accumulation2", {"fp16.enabled=true", "gradient_accumulation_steps=2"}},
    {"Stage0Checkpointing", {"strata.activation_checkpointing=true", "train_micro_batch_size_per_gpu=8"}},
    {"Stage0Selective", {"strata.activation_checkpointing=selective", "train_micro_batch_size_per_gpu=8"}},
    {"Stage0SelectiveBf16", {"strata.activation_checkpointing=selective", "bf16.enabled=true"}},
    {"Stage0MicroBatch1Sgd", {"train_micro_batch_size_per_gpu=1", "optimizer.type=SGD"}},
    {"Stage1Accumulation3", {"zero_optimization.stage=1", "train_micro_batch_size_per_gpu=2",
                             "gradient_accumulation_steps=3"}},
    {"Stage1OptimizerOffload", {"zero_optimization.stage=1",
                                "zero_optimization.offload_optimizer.device=cpu"}},
    {"Stage2Bf16", {"zero_optimization.stage=2", "bf16.enabled=true"}},
    {"Stage2OffloadCheckpointing", {"zero_optimization.stage=2",
                                    "zero_optimization.offload_optimizer.device=cpu",
                                    "strata.activation_checkpointing=true"}},
    {"Stage3", {"zero_optimization.stage=3"}},
    {"Stage3Prefetch", {"zero_optimization.stage=3", "strata.activation_checkpointing=selective", "zero_optimization.stage3_max_reuse_distance=0",
                        "zero_optimization.stage3_prefetch_bucket_size=0", "bf16.enabled=true"}},
    {"Stage3ParamAndOptimizerOffload", {"zero_optimization.stage=3", "bf16.enabled=true",
                                        "zero_optimization.offload_optimizer.device=cpu",
                                        "zero_optimization.offload_param.device=cpu"}},
    {"Stage3NvmeOptimizer", {"zero_optimization.stage=3",
                             "zero_optimization.offload_optimizer.device=nvme",
                             "zero_optimization.offload_optimizer.nvme_path=NVME"}},
    {"Stage3NvmeEverythingCheckpointing", {"zero_optimization.stage=3", "bf16.enabled=true",
                                           "strata.activation_checkpointing=true",
                                           "zero_optimization.offload_optimizer.device=nvme",
                                           "zero_optimization.offload_optimizer.nvme_path=NVME",
                                           "zero_optimization.offload_param.device=nvme",
                                           "zero_optimization.offload_param.nvme_path=NVME"}},
    // The optimizers whose kernels the planner does not run (it walks their state instead).
    {"Stage0AdamW8bit", {"optimizer.type=AdamW8bit"}},
    {"Stage2AdafactorBf16", {"optimizer.type=Adafactor", "optimizer.params.relative_step=false",
                             "zero_optimization.stage=2",
                             "bf16.enabled=true"}},
    // Gradients offloaded with the optimizer (ZeRO-1 stashes unreduced micro-batch gradients).
    {"Stage1NvmeOptimizerBf16", {"zero_optimization.stage=1", "bf16.enabled=true",
                                 "zero_optimization.offload_optimizer.device=nvme",
                                 "zero_optimization.offload_optimizer.nvme_path=NVME"}},
    {"Stage1NvmeOptimizerAccumulation2", {"zero_optimization.stage=1", "gradient_accumulation_steps=2",
                                          "zero_optimization.offload_optimizer.device=nvme",
                                          "zero_optimization.offload_optimizer.nvme_path=NVME"}},
    // Updates in backward: the optimizer's buffers and workspace beside backward's activations.
    {"Stage2InBackwardBf16", {"zero_optimization.stage=2", "bf16.enabled=true",
                              "strata.optimizer_in_backward=true"}},
    {"Stage3NvmeEverythingInBackwardAdamW8bit", {"zero_optimization.stage=3", "bf16.enabled=true",
                                                 "optimizer.type=AdamW8bit",
                                                 "strata.optimizer_in_backward=true",
                                                 "zero_optimization.offload_optimizer.device=nvme",
                                                 "zero_optimization.offload_optimizer.nvme_path=NVME",
                                                 "zero_optimization.offload_param.device=nvme",
                                                 "zero_optimization.offload_param.nvme_path=NVME"}},
};

class PlanAccuracy : public ::testing::TestWithParam<Case> {};

TEST_P(PlanAccuracy, PeakPerTierWithinFivePercentOfMeasured) {
  const config::Config cfg = plan_test::gpt_config(GetParam().sets);
  const auto plan = parallel::plan::plan_memory(cfg, parallel::plan::gpt_model());
  const MemorySnapshot got = plan_test::measure(cfg);
  for (const Tier t : {Tier::device, Tier::host, Tier::nvme}) {
    const double want = static_cast<double>(got.tier_peak[static_cast<int>(t)]);
    const double planned = static_cast<double>(plan.peak(t));
    std::printf("%-36s %-6s planned %12s measured %12s (%+.2f%%)\n", GetParam().name,
                std::string(tier_name(t)).c_str(), format_bytes(plan.peak(t)).c_str(),
                format_bytes(got.tier_peak[static_cast<int>(t)]).c_str(),
                want > 0 ? 100.0 * (planned - want) / want : 0.0);
    if (want == 0) {
      EXPECT_EQ(planned, 0) << tier_name(t);
      continue;
    }
    EXPECT_NEAR(planned, want, 0.05 * want) << tier_name(t) << " tier";
  }
  // The device peak is not trivially small: activations or model states dominate it.
  EXPECT_GT(plan.peak(Tier::device), 100u * 1024);
}

INSTANTIATE_TEST_SUITE_P(Configs, PlanAccuracy, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// Selective recomputation is planned to the byte (the planner runs the layers that drop and
// recompute), and its activations lie between full recomputation's and none's.
TEST(PlanRecompute, SelectiveIsExactAndBetweenFullAndNone) {
  std::uint64_t acts[3] = {};
  const char* modes[] = {"false", "selective", "true"};
  for (int i = 0; i < 3; ++i) {
    const config::Config cfg = plan_test::gpt_config(
        {fmt::format("strata.activation_checkpointing={}", modes[i]), "train_micro_batch_size_per_gpu=8"});
    const auto plan = parallel::plan::plan_memory(cfg, parallel::plan::gpt_model());
    const MemorySnapshot got = plan_test::measure(cfg);
    const int d = static_cast<int>(Tier::device), a = static_cast<int>(Category::activations);
    EXPECT_EQ(plan.peak(Tier::device, Category::activations), got.peak[d][a]) << modes[i];
    EXPECT_EQ(plan.peak(Tier::device), got.tier_peak[d]) << modes[i];
    acts[i] = plan.peak(Tier::device, Category::activations);
  }
  std::printf("planned activation peak: none %s, selective %s, full %s\n",
              format_bytes(acts[0]).c_str(), format_bytes(acts[1]).c_str(),
              format_bytes(acts[2]).c_str());
  EXPECT_LT(acts[1], acts[0]);
  EXPECT_LT(acts[2], acts[1]);
}

// More configurations than the 12.
static_assert(std::size(kCases) >= 12);

// A GPU job with offload, planned on the meta device (so without a GPU), against the same job run
// on the CPU through the offload paths of a GPU job (TrainingExtras::host_staging: staging buffers,
// copies landing a hook later, device-tier accumulation, uploaded parameter slices): the plan of a
// GPU job is what such a run acquires and releases, every tier to the byte.
const Case kGpuCases[] = {
    {"GpuStage1OptimizerOffload", {"zero_optimization.stage=1",
                                   "zero_optimization.offload_optimizer.device=cpu"}},
    {"GpuStage2OffloadBf16Accumulation2", {"zero_optimization.stage=2", "bf16.enabled=true",
                                           "gradient_accumulation_steps=2",
                                           "zero_optimization.offload_optimizer.device=cpu"}},
    {"GpuStage3ParamAndOptimizerOffload", {"zero_optimization.stage=3", "bf16.enabled=true",
                                           "zero_optimization.offload_optimizer.device=cpu",
                                           "zero_optimization.offload_param.device=cpu"}},
    {"GpuStage3ParamOffloadOnly", {"zero_optimization.stage=3",
                                   "zero_optimization.offload_param.device=cpu"}},
    {"GpuStage3NvmeAdamW8bit", {"zero_optimization.stage=3", "bf16.enabled=true",
                                "optimizer.type=AdamW8bit",
                                "zero_optimization.offload_optimizer.device=nvme",
                                "zero_optimization.offload_optimizer.nvme_path=NVME",
                                "zero_optimization.offload_param.device=nvme",
                                "zero_optimization.offload_param.nvme_path=NVME"}},
};

class GpuPlanAccuracy : public ::testing::TestWithParam<Case> {};

TEST_P(GpuPlanAccuracy, PlanOfAGpuJobFollowsItsStagedRun) {
  std::vector<std::string> gpu = GetParam().sets, cpu = GetParam().sets;
  gpu.push_back("strata.device=cuda");
  cpu.push_back("strata.device=cpu");
  // The staged run's ops are the CPU backend's: so are the plan's here (cpu_ops); a GPU job's
  // plan is otherwise charged the CUDA backend's workspace (GpuPlanOps below).
  parallel::plan::PlanOptions po;
  po.cpu_ops = true;
  const auto plan =
      parallel::plan::plan_memory(plan_test::gpt_config(gpu), parallel::plan::gpt_model(), po);
  const MemorySnapshot got = plan_test::measure(plan_test::gpt_config(cpu), 2, false, /*host_staging=*/true);
  // The plan's staging buffers are the run's: host params held by the update's staging.
  EXPECT_EQ(plan.memory.peak[static_cast<int>(Tier::host)][static_cast<int>(Category::params)] > 0,
            got.peak[static_cast<int>(Tier::host)][static_cast<int>(Category::params)] > 0);
  for (const Tier t : {Tier::device, Tier::host, Tier::nvme}) {
    const double want = static_cast<double>(got.tier_peak[static_cast<int>(t)]);
    const double planned = static_cast<double>(plan.peak(t));
    std::printf("%-36s %-6s planned %12s measured %12s (%+.2f%%)\n", GetParam().name,
                std::string(tier_name(t)).c_str(), format_bytes(plan.peak(t)).c_str(),
                format_bytes(got.tier_peak[static_cast<int>(t)]).c_str(),
                want > 0 ? 100.0 * (planned - want) / want : 0.0);
    if (want == 0) {
      EXPECT_EQ(planned, 0) << tier_name(t);
      continue;
    }
    // The same code acquires the same buffers on the meta device: to the byte.
    EXPECT_EQ(plan.peak(t), got.tier_peak[static_cast<int>(t)]) << tier_name(t) << " tier";
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, GpuPlanAccuracy, ::testing::ValuesIn(kGpuCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace test_plan_accuracy
}  // namespace
}  // namespace strata
