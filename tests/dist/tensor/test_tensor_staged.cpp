// Tensor parallelism through the offload paths of a GPU job, on the CPU: with
// TrainingExtras::host_staging a tp 2 (x dp N/2) job with its optimizer state, gradients and (at
// ZeRO 3) parameter slices in host memory or on NVMe stages them as a GPU job does (reduced
// gradients copied down unit by unit, the update on the host, the 16-bit values copied back) and
// trains bitwise like the same job with everything on the device: losses, gradient norms, and the
// masters reassembled from the parts. (The pipeline's case: test_tensor_pipeline.cpp,
// TensorPipelineCombined *_staged.)
#include <gtest/gtest.h>

#include "offload/nvme_state_store.hpp"
#include "tests/dist/comm/dist_env.hpp"
#include "tests/dist/engine/model_parallel_fixture.hpp"
#include "tests/dist/tensor/tensor_fixture.hpp"
#include "tests/unit/offload/offload_test_util.hpp"

using namespace strata;
using namespace strata::test;

namespace {
namespace test_tensor_staged {  // file-local names, unique in a unity build

struct StagedCase {
  int zero;
  config::OffloadDevice device;
};

class TensorStagedOffload : public ::testing::TestWithParam<StagedCase> {};

TEST_P(TensorStagedOffload, BitwiseLikeOnTheDevice) {
  const auto [zero, device] = GetParam();
  const SingleThreaded one_thread;
  const auto& w = world();
  if (w.size() % 2 != 0) GTEST_SKIP() << "tp 2 needs an even number of ranks";
  const auto c = tp_gpt();
  const int b = 2, m = 2, steps = 4, tp = 2, dp = w.size() / tp;
  train::TrainerOptions o = trainer_options(DType::bf16);  // AdamW, clipping
  config::Config base = tp_config(o, b, m, zero, tp, DType::bf16);
  offload::test::ScratchDir dir("tp_staged");
  config::Config off = base;
  auto& z = off.zero_optimization;
  z.offload_optimizer.device = device;
  if (zero == 3) z.offload_param.device = device;
  z.offload_optimizer.nvme_path = dir.str() + "/opt";
  z.offload_param.nvme_path = dir.str() + "/params";
  z.offload_optimizer.buffer_count = 2;
  z.offload_param.buffer_count = 2;
  off.aio.block_size = 8192;
  Replica ref(c, base, w);
  parallel::TrainingExtras extras;
  extras.host_staging = true;
  Replica x(c, off, w, std::move(extras));
  ASSERT_TRUE(x.store.options().host_staging && x.store.grads_offloaded());
  BatchFeed f0{dp, ref.training->grid().coords().dp, b, c.block_size, c.vocab_size}, f1 = f0;
  for (int s = 0; s < steps; ++s) {
    const auto a = ref.engine.train_step(std::ref(f0));
    const auto y = x.engine.train_step(std::ref(f1));
    ASSERT_EQ(y.loss, a.loss) << "step " << s;
    ASSERT_EQ(y.result.grad_norm, a.result.grad_norm) << "step " << s;
  }
  EXPECT_TRUE(assemble_tp(*x.training, 0) == assemble_tp(*ref.training, 0)) << "masters differ";
  EXPECT_TRUE(assemble_tp(*x.training, 2) == assemble_tp(*ref.training, 2)) << "v differs";
}

INSTANTIATE_TEST_SUITE_P(Cases, TensorStagedOffload,
                         ::testing::Values(StagedCase{1, config::OffloadDevice::cpu},
                                           StagedCase{2, config::OffloadDevice::nvme},
                                           StagedCase{3, config::OffloadDevice::cpu}),
                         [](const auto& i) {
                           return "zero" + std::to_string(i.param.zero) + "_" +
                                  std::string(config::to_string(i.param.device));
                         });

}  // namespace test_tensor_staged
}  // namespace
