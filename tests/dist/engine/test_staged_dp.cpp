// Data parallelism through the host-staged transport, the path of ranks that share a GPU: every
// collective of the engine (ZeRO's gradient reductions and parameter gathers, the loss mean, the
// norm and overflow agreement) goes through staging buffers and the copy back before its Work
// completes. On CPU buffers (parallel::testing::staged_cpu_buffers) each ZeRO stage trains bit for
// bit like the same job over MPI directly; tests/dist/gpu runs it on a GPU.
#include <gtest/gtest.h>

#include "parallel/comm/testing.hpp"
#include "tests/dist/comm/dist_env.hpp"
#include "tests/dist/engine/adamw_job.hpp"
#include "tests/dist/engine/zero_fixture.hpp"

using namespace strata;
using namespace strata::test;

namespace {
namespace test_staged_dp {  // file-local names, unique in a unity build

class StagedDataParallel : public ::testing::TestWithParam<int> {};

TEST_P(StagedDataParallel, TrainsBitwiseLikeTheHostTransport) {
  const int stage = GetParam();
  const auto& w = world();
  const int N = w.size(), b = 2, accum = 2, steps = 5;
  const auto c = tiny_gpt();
  const config::Config cfg = adamw_job(b, accum, stage);
  const parallel::Group staged = parallel::testing::staged_cpu_buffers(w);
  Replica direct(c, cfg, w);
  Replica through(c, cfg, staged);
  EXPECT_EQ(through.engine.dp().transport(), "staged");
  BatchFeed f1{N, w.rank(), b, c.block_size, c.vocab_size}, f2 = f1;
  for (int s = 0; s < steps; ++s) {
    const auto a = direct.engine.train_step(std::ref(f1));
    const auto t = through.engine.train_step(std::ref(f2));
    EXPECT_EQ(a.loss, t.loss) << "step " << s;
    EXPECT_EQ(a.result.grad_norm, t.result.grad_norm) << "step " << s;
  }
  EXPECT_TRUE(direct.master_weights() == through.master_weights()) << "the fp32 masters differ";
  EXPECT_TRUE(direct.value_shards() == through.value_shards()) << "the parameters differ";
}

INSTANTIATE_TEST_SUITE_P(Stages, StagedDataParallel, ::testing::Values(0, 1, 2, 3),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "stage" + std::to_string(i.param);
                         });

}  // namespace test_staged_dp
}  // namespace
