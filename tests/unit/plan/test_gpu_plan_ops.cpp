// A GPU job's plan is charged the workspace the CUDA backend's ops allocate (the meta-CUDA table,
// framework/backend/ops/meta_cuda_table.cpp), not the CPU backend's: for a bf16 GPT, the plan of
// the job on "cuda" against the same job's plan charged the CPU's ops (PlanOptions::cpu_ops).
// Everything but the workspace, the batch's pinned upload buffers and the losses' pinned read
// buffer is the same to the byte; the device tier's workspace is what the CUDA ops take (no f32
// copies of 16-bit operands), and the host tier's is the set-up staging a GPU's parameters go
// through.
#include <gtest/gtest.h>

#include <cstdio>

#include "framework/backend/cuda/ops/workspace_sizes.hpp"
#include "framework/memory/size.hpp"
#include "framework/nn/batch_device.hpp"
#include "framework/nn/loss.hpp"
#include "tests/unit/plan/plan_test_util.hpp"

namespace strata {
namespace {
namespace test_gpu_plan_ops {  // file-local names, unique in a unity build

constexpr int kDevice = static_cast<int>(Tier::device);
constexpr int kHost = static_cast<int>(Tier::host);
constexpr int kWorkspace = static_cast<int>(Category::workspace);

TEST(GpuPlanOps, Bf16GptIsChargedTheCudaOpsWorkspace) {
  // plan_test's GPT: 2 layers, C 64, T 32, vocab 64, 2 heads, micro-batch 4 (N = 128 rows).
  const std::vector<std::string> sets = {"strata.device=cuda", "bf16.enabled=true"};
  const config::Config cfg = plan_test::gpt_config(sets);
  parallel::plan::PlanOptions cpu_ops;
  cpu_ops.cpu_ops = true;
  const auto gpu = parallel::plan::plan_memory(cfg, parallel::plan::gpt_model());
  const auto cpu = parallel::plan::plan_memory(cfg, parallel::plan::gpt_model(), cpu_ops);
  for (const Tier t : {Tier::device, Tier::host, Tier::nvme})
    for (std::size_t c = 0; c < kNumCategories; ++c) {
      const auto ti = static_cast<int>(t);
      std::printf("%-6s %-12s planned with the CUDA ops %10s, the CPU ops %10s\n",
                  std::string(tier_name(t)).c_str(),
                  std::string(category_name(static_cast<Category>(c))).c_str(),
                  format_bytes(gpu.memory.peak[ti][c]).c_str(),
                  format_bytes(cpu.memory.peak[ti][c]).c_str());
      // Only the workspace differs, the host's pinned buffers the GPU's batch goes up through
      // (nn::BatchUploads: one per upload in flight, a micro-batch's i32 tokens or targets), and
      // the pinned buffer the step's losses are read into (nn::LossSums::begin_read: as many f64
      // slots as the device's buffer of the losses).
      if (static_cast<int>(c) == kWorkspace && t != Tier::nvme) continue;
      const std::uint64_t uploads =
          t == Tier::host && static_cast<Category>(c) == Category::other
              ? nn::BatchUploads::kBuffers * 4 * 4 * 32  // micro-batch 4 x T 32 x 4 bytes
                    + nn::LossSums::kFirstSlots * 8
              : 0;
      EXPECT_EQ(gpu.memory.peak[ti][c], cpu.memory.peak[ti][c] + uploads)
          << tier_name(t) << " " << category_name(static_cast<Category>(c));
      EXPECT_EQ(gpu.memory.current[ti][c], cpu.memory.current[ti][c] + uploads);
    }

  const std::int64_t C = 64, T = 32, V = 64, H = 2, N = 4 * T;
  // The CUDA ops' largest workspace: the f32 D of a bf16 dW += dy^T x (beta 1: never written in
  // place, gemm_plan) of the MLP's [4C, C] and [C, 4C] weights. The others are smaller: the tied
  // head's dW [V, C], layernorm backward's strips, attention backward's D, cross-entropy's row
  // losses, embedding backward's sort scratch (CUB's figure, or its bound without a GPU), linear
  // backward's db strips. Nothing widened: every product is bf16 x bf16.
  const std::uint64_t mlp_dw = 4 * (4 * C * C);
  const std::uint64_t others[] = {
      static_cast<std::uint64_t>(4 * V * C),
      static_cast<std::uint64_t>(4 * cuda_ops::layernorm_backward_partial_floats(N, C)),
      static_cast<std::uint64_t>(4 * 4 * H * T),
      static_cast<std::uint64_t>(8 * N + 24),
      cuda_ops::embedding_dwte_scratch_total(
          N, cuda_ops::embedding_dwte_cub_bound(N, cuda_ops::embedding_key_bits(V))),
      static_cast<std::uint64_t>(4 * cuda_ops::column_sum_plan(N, 4 * C).strips * 4 * C)};
  for (const std::uint64_t o : others) EXPECT_LT(o, mlp_dw);
  EXPECT_EQ(gpu.peak(Tier::device, Category::workspace), mlp_dw);
  // The CPU's ops charge f32 copies of the 16-bit operands and row blocks besides: more.
  EXPECT_GT(cpu.peak(Tier::device, Category::workspace), mlp_dw);
  // Both plans reach their device peak in the MLP's backward, where their workspace peaks: the
  // tier's peaks differ by exactly the workspace's.
  EXPECT_EQ(cpu.peak(Tier::device) - gpu.peak(Tier::device),
            cpu.peak(Tier::device, Category::workspace) - gpu.peak(Tier::device, Category::workspace));

  // The host tier: set-up's staging of the largest unit (a block: 12 C^2 + 13 C parameters), drawn
  // in host memory (bf16) for its upload (ParamStore::initialize, both plans: host_staging); with
  // the CUDA ops' plan also its f32 masters converted on the host from the GPU's bf16 values
  // (the bf16 copy and the f32 conversion, 6 bytes a parameter: Tensor::copy_from), which a GPU
  // takes and the CPU's ops do not.
  const std::uint64_t block = 12 * C * C + 13 * C;
  EXPECT_EQ(cpu.peak(Tier::host, Category::workspace), 2 * block);
  EXPECT_EQ(gpu.peak(Tier::host, Category::workspace), 6 * block);
  EXPECT_EQ(gpu.memory.current[kHost][kWorkspace], 0u);
  EXPECT_EQ(gpu.memory.current[kDevice][kWorkspace], 0u);
}

// An f32 GPU job that offloads nothing: its host tier's whole-run peak is set-up's staging of one
// block's f32 parameters (measured on an H200 on 2026-11-28: 774.50 KiB, the quickstart GPT's
// block), which the plan counts.
TEST(GpuPlanOps, F32GpuJobsHostPeakIsTheInitialisationStaging) {
  const config::Config cfg =
      plan_test::gpt_config({"strata.device=cuda", "strata.activation_dtype=f32"});
  const auto plan = parallel::plan::plan_memory(cfg, parallel::plan::gpt_model());
  const std::uint64_t C = 64, block = 12 * C * C + 13 * C;
  EXPECT_EQ(plan.peak(Tier::host, Category::workspace), 4 * block);
  EXPECT_GE(plan.peak(Tier::host), 4 * block);
}

// The updates on the GPU read 16-bit gradients as they are: a bf16 GPU job's plan charges no f32
// copy of them (the CPU's Lion does), and the 8-bit ones run their op on the meta-CUDA device (its
// decay runs by value: a GPT block has fewer than 32). The largest workspace stays the MLP's dW.
TEST(GpuPlanOps, UpdatesOnTheGpuAreChargedTheCudaOps) {
  const std::uint64_t C = 64, mlp_dw = 4 * (4 * C * C);
  for (const char* opt : {"AdamW", "SGD", "Lion", "AdamW8bit", "Lion8bit"}) {
    const config::Config cfg = plan_test::gpt_config(
        {"strata.device=cuda", "bf16.enabled=true", std::string("optimizer.type=") + opt});
    parallel::plan::PlanOptions cpu_ops;
    cpu_ops.cpu_ops = true;
    const auto gpu = parallel::plan::plan_memory(cfg, parallel::plan::gpt_model());
    const auto cpu = parallel::plan::plan_memory(cfg, parallel::plan::gpt_model(), cpu_ops);
    EXPECT_EQ(gpu.peak(Tier::device, Category::workspace), mlp_dw) << opt;
    EXPECT_GT(cpu.peak(Tier::device, Category::workspace), mlp_dw) << opt;
    for (std::size_t c = 0; c < kNumCategories; ++c) {
      if (static_cast<int>(c) != kWorkspace) {
        EXPECT_EQ(gpu.memory.peak[kDevice][c], cpu.memory.peak[kDevice][c]) << opt;
      }
    }
  }
}

}  // namespace test_gpu_plan_ops
}  // namespace
}  // namespace strata
