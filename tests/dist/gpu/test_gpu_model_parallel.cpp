// Tensor and pipeline parallelism on GPUs, under mpirun -np 2 (gpu_dist_np2: one GPU shared by
// both ranks takes the host-staged transport, a GPU each NCCL): tp 2 (with and without sequence
// parallelism), pp 2 and pp 2 with the interleaved schedule, each against one rank on the GPU with
// the whole batch — the N-ranks-equals-1-rank test of tests/dist/tensor on the GPU: every loss
// within 1e-6 relative, the gradient norm within 1e-5, the fp32 masters reassembled from the parts
// and stages within 1e-5 relative L2 per parameter (the key biases within 1e-4 absolute; see
// compare_weights), and the replicated parameters bitwise equal on every tensor-parallel part.
// What it exercises on the device: the vocabulary-parallel embedding and cross-entropy (row pieces
// all-reduced on device buffers, combined by a kernel), the tp all-reduces, sequence parallelism's
// all-gathers and reduce-scatters, the stages' activations and gradients sent and received on
// device buffers, the batch copied to the GPU by the first and last stages.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>

#include "framework/optim/optimizers/adamw.hpp"
#include "tests/dist/comm/dist_env.hpp"
#include "tests/dist/engine/model_parallel_fixture.hpp"
#include "tests/dist/gpu/gpu_env.hpp"
#include "tests/dist/tensor/tensor_fixture.hpp"

using namespace strata;
using namespace strata::test;

namespace {
namespace test_gpu_model_parallel {  // file-local names, unique in a unity build

struct Layout {
  int tp = 1, pp = 1;
  bool sp = false;  // sequence parallelism
  int v = 1;        // model chunks per pipeline rank (the interleaved schedule)
};

std::string layout_name(const ::testing::TestParamInfo<Layout>& i) {
  const Layout& l = i.param;
  return "tp" + std::to_string(l.tp) + "_pp" + std::to_string(l.pp) + (l.sp ? "_sp" : "") +
         (l.v > 1 ? "_v" + std::to_string(l.v) : "");
}

class GpuModelParallel : public ::testing::TestWithParam<Layout> {};

TEST_P(GpuModelParallel, cuda_MatchesOneRankOnTheGpu) {
  const Layout l = GetParam();
  const auto& w = world();
  if (w.size() != l.tp * l.pp) GTEST_SKIP() << "needs " << l.tp * l.pp << " ranks";
  nn::GptConfig c = tp_gpt();  // 4 heads: splits over tp 2
  c.n_layer = 4;               // two blocks or more per stage, one per chunk with v 2
  const int b = 2, m = 2, steps = 6;
  train::TrainerOptions o;
  o.optimizer = std::make_shared<optim::AdamW>(optim::AdamWHyper{.lr = 3e-3, .eps = 1e-6});
  o.max_grad_norm = 0.5;
  config::Config cfg = tp_config(o, b, m, 1, l.tp);
  cfg.strata.pipeline_parallel_size = l.pp;
  cfg.strata.sequence_parallel = l.sp;
  cfg.strata.virtual_pipeline_stages = l.v;
  cfg.strata.device = DeviceType::cuda;
  config::Config one_cfg = tp_config(o, b, m, 0, 1);
  one_cfg.strata.device = DeviceType::cuda;
  Replica par(c, cfg, w);
  Replica one(c, one_cfg, w.split(w.rank(), 0, "one_gpu"));
  EXPECT_TRUE(assemble_3d(*par.training) == by_name(*one.training))
      << "the parts and stages do not start from the one-rank weights";
  BatchFeed feed{1, 0, b, c.block_size, c.vocab_size};
  BatchFeed one_feed{1, 0, b, c.block_size, c.vocab_size};
  const StepAgreement agree = step_side_by_side(par.engine, feed, one.engine, one_feed, steps, 1e-5);
  const WeightComparison cmp =
      compare_weights(assemble_3d(*par.training), by_name(*one.training), c.n_embd);
  const auto worst = w.all_reduce_values(std::array<double, 2>{cmp.worst_rel_l2, cmp.key_bias_abs},
                                         parallel::ReduceOp::max);
  const parallel::Group& axis = l.tp > 1 ? par.training->grid().tp() : par.training->grid().pp();
  const std::string transport = axis.device_transport();
  if (w.rank() == 0)
    std::printf("tp=%d%s pp=%d v=%d on the GPU (%s): worst loss rel %.2e, grad norm rel %.2e, "
                "weights worst rel L2 of a parameter %.2e (key biases: max abs diff %.1e)\n",
                l.tp, l.sp ? " (sequence parallel)" : "", l.pp, l.v, transport.c_str(),
                agree.worst_loss, agree.worst_norm, worst[0], worst[1]);
  EXPECT_LT(cmp.worst_rel_l2, 1e-5) << cmp.worst;
  EXPECT_LT(cmp.key_bias_abs, 1e-4);
  EXPECT_TRUE(replicated_mismatches(*par.training).empty())
      << "replicated parameters differ between tensor-parallel parts";
  // Device buffers took a device transport (not a CPU path by mistake).
  EXPECT_TRUE(transport == "staged" || transport == "nccl") << transport;
}

INSTANTIATE_TEST_SUITE_P(Layouts, GpuModelParallel,
                         ::testing::Values(Layout{2, 1}, Layout{2, 1, true}, Layout{1, 2},
                                           Layout{1, 2, false, 2}),
                         layout_name);

}  // namespace test_gpu_model_parallel
}  // namespace
