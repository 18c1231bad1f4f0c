// Offload from a GPU (ZeRO-Offload / ZeRO-Infinity on a GPU): optimizer state, master weights and
// gradients in host memory or on NVMe, ZeRO-3 parameter slices too, against the same GPT with
// everything on the GPU. Every test is named cuda_* (labelled `cuda`, run by scripts/gpu-check)
// and skips, saying why, where no GPU and CUDA kernels are present; the same paths run on the CPU
// in tests/dist/engine/test_offload_staging.cpp (TrainingExtras::host_staging).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "framework/memory/out_of_memory.hpp"
#include "framework/memory/size.hpp"
#include "tests/unit/gpu/gpu_test_util.hpp"

namespace strata {
namespace {
namespace test_offload_cuda {  // file-local names, unique in a unity build

using gpu_test::Feed;
using gpu_test::job_config;
using gpu_test::max_rel;
using gpu_test::train;
using gpu_test::Trained;

// Optimizer state (and with it the gradients) in host memory ("cpu") or in swap files ("nvme",
// under the plan tests' scratch directory, 2 buffers: real swapping).
std::vector<std::string> optimizer_offload(const std::string& where) {
  if (where == "cpu") return {"zero_optimization.offload_optimizer.device=cpu"};
  return {"zero_optimization.offload_optimizer.device=nvme",
          "zero_optimization.offload_optimizer.nvme_path=NVME",
          "zero_optimization.offload_optimizer.buffer_count=2", "aio.block_size=8192"};
}
std::vector<std::string> param_offload(const std::string& where) {
  if (where == "cpu") return {"zero_optimization.offload_param.device=cpu"};
  return {"zero_optimization.offload_param.device=nvme",
          "zero_optimization.offload_param.nvme_path=NVME",
          "zero_optimization.offload_param.buffer_count=2", "aio.block_size=8192"};
}
std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const std::vector<std::string> kSgd = {"optimizer.type=SGD", "optimizer.params.lr=0.05",
                                       "optimizer.params.momentum=0.9"};

// (a) AdamW and SGD with their state in host memory or on NVMe — the update on the host, the
// gradients landing there, the updated parameters copied back — are bitwise the same GPT with its
// state on the GPU, at ZeRO 1, 2 and 3, f32 and bf16, with gradient clipping (the norm is taken on
// the GPU as without offload) and, at stage 2, with accumulation (micro-batches added on the GPU).
TEST(OffloadCuda, cuda_OptimizerOffloadIsBitwiseTheRunOnTheGpu) {
  SKIP_WITHOUT_GPU();
  int compared = 0;
  for (const bool sgd : {false, true}) {
    for (const char* precision : {"bf16.enabled=false", "bf16.enabled=true"}) {
      for (const std::string stage : {"1", "2", "3", "2+accumulation"}) {
        std::vector<std::string> base = {precision, "gradient_clipping=1.0",
                                         "zero_optimization.stage=" + stage.substr(0, 1)};
        if (stage.size() > 1) base = base + std::vector<std::string>{"train_micro_batch_size_per_gpu=2",
                                                                     "gradient_accumulation_steps=2"};
        if (sgd) base = base + kSgd;
        const Trained resident = gpu_test::train(job_config("cuda", base), 5);
        for (const std::string where : {"cpu", "nvme"}) {
          const Trained off = gpu_test::train(job_config("cuda", base + optimizer_offload(where)), 5);
          const std::string what = std::string(sgd ? "SGD " : "AdamW ") + precision + " ZeRO " +
                                   stage + " on " + where;
          EXPECT_EQ(off.losses, resident.losses) << what;
          EXPECT_EQ(off.masters, resident.masters) << what;
          ++compared;
        }
      }
    }
  }
  std::printf("optimizer offload from the GPU: %d runs bitwise the runs on the GPU\n", compared);
}

// (b) Optimizers train on a GPU with their state offloaded (their update on the host): AdamW8bit
// and Adafactor (which also have CUDA kernels: offloaded, their host kernels run)
// against the same job on the CPU, losses within 1e-5.
TEST(OffloadCuda, cuda_OptimizersWithoutKernelsTrainWithOffloadLikeTheCpu) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::vector<std::string>> optimizers = {
      {"optimizer.type=AdamW8bit"},
      {"optimizer.type=Adafactor", "optimizer.params.relative_step=false",
       "optimizer.params.scale_parameter=false", "optimizer.params.lr=0.001",
       "optimizer.params.eps=[1e-16, 0.001]"}};
  for (const auto& opt : optimizers) {
    for (const std::string where : {"cpu", "nvme"}) {
      const std::vector<std::string> sets = opt + std::vector<std::string>{"zero_optimization.stage=2"} +
                                            optimizer_offload(where);
      const Trained cpu = gpu_test::train(job_config("cpu", sets), 10);
      const Trained gpu = gpu_test::train(job_config("cuda", sets), 10);
      for (double l : gpu.losses) ASSERT_TRUE(std::isfinite(l));
      EXPECT_LT(max_rel(gpu.losses, cpu.losses), 1e-5) << opt[0] << " on " << where;
      EXPECT_LT(gpu.losses.back(), gpu.losses.front()) << opt[0] << ": it learns";
    }
  }
}

// (c) ZeRO-3 parameter slices in host memory or on NVMe (uploaded before each gather), with the
// optimizer state offloaded too or on the GPU: bitwise the run with everything on the GPU.
TEST(OffloadCuda, cuda_ParameterOffloadIsBitwiseTheRunOnTheGpu) {
  SKIP_WITHOUT_GPU();
  for (const char* precision : {"bf16.enabled=false", "bf16.enabled=true"}) {
    const std::vector<std::string> base = {precision, "zero_optimization.stage=3",
                                           "gradient_clipping=1.0"};
    const Trained resident = gpu_test::train(job_config("cuda", base), 5);
    for (const std::string where : {"cpu", "nvme"}) {
      for (const std::string opt : {"none", "cpu"}) {
        std::vector<std::string> sets = base + param_offload(where);
        if (opt == "cpu") sets = sets + optimizer_offload("cpu");
        const Trained off = gpu_test::train(job_config("cuda", sets), 5);
        const std::string what = std::string(precision) + " parameters on " + where + ", optimizer " + opt;
        EXPECT_EQ(off.losses, resident.losses) << what;
        EXPECT_EQ(off.masters, resident.masters) << what;
      }
    }
  }
}

// The model states of a plan (params + grads + optimizer on the device tier).
std::uint64_t planned_states(const parallel::plan::MemoryPlan& p) {
  return p.peak(Tier::device, Category::params) + p.peak(Tier::device, Category::grads) +
         p.peak(Tier::device, Category::optimizer);
}

// (d) A device cap below the model states: without offload the run stops with Strata's
// OutOfMemory whose advice names offload; with the optimizer state offloaded it trains under the
// same cap.
TEST(OffloadCuda, cuda_ACapBelowTheModelStatesNeedsOffloadAndTrainsWithIt) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::string> base = {"zero_optimization.stage=1", "strata.model.n_layer=4",
                                         "strata.model.n_embd=128", "train_micro_batch_size_per_gpu=1",
                                         "strata.activation_checkpointing=true"};
  const auto model = parallel::plan::gpt_model();
  const auto resident = parallel::plan::plan_memory(job_config("cuda", base), model);
  const auto offloaded =
      parallel::plan::plan_memory(job_config("cuda", base + optimizer_offload("cpu")), model);
  const std::uint64_t states = planned_states(resident);
  // Halfway between the offloaded step's peak and the model states.
  const std::uint64_t cap = (offloaded.peak(Tier::device) + states) / 2;
  ASSERT_LT(static_cast<double>(offloaded.peak(Tier::device)), 0.9 * static_cast<double>(cap))
      << "test setup: offload must fit well under the cap";
  const std::string limit = "strata.memory.device_limit=" + std::to_string(cap);
  try {
    (void)plan_test::measure(job_config("cuda", base + std::vector<std::string>{limit}), 2, true);
    ADD_FAILURE() << "a " << format_bytes(cap) << " cap below the model states ("
                  << format_bytes(states) << ") was not exceeded";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.context().tier, Tier::device);
    bool offload = false;
    for (const auto& line : e.advice()) offload = offload || line.find("offload") != std::string::npos;
    EXPECT_TRUE(offload) << e.what();
  }
  const MemorySnapshot got = plan_test::measure(
      job_config("cuda", base + optimizer_offload("cpu") + std::vector<std::string>{limit}), 3, true);
  EXPECT_LE(got.tier_peak[static_cast<int>(Tier::device)], cap);
  EXPECT_GT(got.tier_current[static_cast<int>(Tier::host)], 0u);
}

// (e) The device's gradient bytes: none between steps, and during backward at most the staged
// window — the unit computed, the previous one's reduction, the one before it landing in host
// memory (with accumulation, its stored micro-batches come up beside it), unit 0 — far below the
// whole model's gradients.
TEST(OffloadCuda, cuda_DeviceGradientsStayWithinTheWindow) {
  SKIP_WITHOUT_GPU();
  for (const std::string stage : {"1", "2", "3"}) {
    const config::Config cfg = job_config(
        "cuda", std::vector<std::string>{"zero_optimization.stage=" + stage, "strata.model.n_layer=12",
                                         "gradient_accumulation_steps=2",
                                         "train_micro_batch_size_per_gpu=2"} +
                    optimizer_offload("cpu"));
    MemoryLedger ledger;
    nn::Gpt model(train::gpt_config(cfg));
    parallel::Training job(cfg, gpu_test::one_rank(), model, parallel::TrainingExtras::on(&ledger));
    double biggest = 0, all = 0;
    const double e = static_cast<double>(dtype_size(job.store().options().grad_dtype));
    for (std::size_t u = 0; u < job.store().num_units(); ++u) {
      const double b = static_cast<double>(job.store().layout(u).padded) * e;
      biggest = std::max(biggest, b);
      all += b;
    }
    const double window = 4 * biggest + static_cast<double>(job.store().layout(0).padded) * e;
    ASSERT_GT(all, 1.5 * window) << "test setup";
    Feed feed;
    for (int s = 0; s < 3; ++s) {
      ledger.reset_peaks();
      job.step([&](nn::Batch& b) { feed(b); });
      EXPECT_EQ(ledger.current(Tier::device, Category::grads), 0u) << "ZeRO " << stage << ", step " << s;
      EXPECT_LE(static_cast<double>(ledger.peak(Tier::device, Category::grads)), window)
          << "ZeRO " << stage << ", step " << s << " (whole model " << format_bytes(static_cast<std::uint64_t>(all)) << ")";
      EXPECT_GT(ledger.current(Tier::host, Category::grads), 0u);
    }
  }
}

// (f) The memory planner's prediction of a GPU offload run (planned on the meta device, which
// takes the same staging paths) against the run on the GPU: the device peak within 5%, as
// tests/unit/plan compares them on the CPU.
TEST(OffloadCuda, cuda_PlannedDevicePeakWithinFivePercent) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::vector<std::string>> cases = {
      std::vector<std::string>{"zero_optimization.stage=1"} + optimizer_offload("cpu"),
      std::vector<std::string>{"zero_optimization.stage=2", "bf16.enabled=true",
                               "gradient_accumulation_steps=2"} + optimizer_offload("nvme"),
      std::vector<std::string>{"zero_optimization.stage=3", "bf16.enabled=true"} +
          optimizer_offload("cpu") + param_offload("cpu"),
      std::vector<std::string>{"zero_optimization.stage=3"} + param_offload("nvme")};
  for (const auto& sets : cases) {
    const config::Config cfg = job_config("cuda", sets);
    const auto plan = parallel::plan::plan_memory(cfg, parallel::plan::gpt_model());
    const MemorySnapshot got = plan_test::measure(cfg);
    for (const Tier t : {Tier::device, Tier::host}) {
      const double want = static_cast<double>(got.tier_peak[static_cast<int>(t)]);
      const double planned = static_cast<double>(plan.peak(t));
      std::printf("%-60s %-6s planned %12s measured %12s (%+.2f%%)\n", sets[0].c_str(),
                  std::string(tier_name(t)).c_str(), format_bytes(plan.peak(t)).c_str(),
                  format_bytes(got.tier_peak[static_cast<int>(t)]).c_str(),
                  want > 0 ? 100.0 * (planned - want) / want : 0.0);
    }
    const double want = static_cast<double>(got.tier_peak[static_cast<int>(Tier::device)]);
    EXPECT_NEAR(static_cast<double>(plan.peak(Tier::device)), want, 0.05 * want) << sets[0];
  }
}

}  // namespace test_offload_cuda
}  // namespace
}  // namespace strata
