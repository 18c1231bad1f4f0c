// The pipeline's transfers need no tags: PipelineExecutor posts, between any two stages and in
// each direction, its receives in the order of the matching sends, so matching by posting order
// alone (as NCCL does: nccl_comm.cpp's rule) pairs them as MPI's tags do. Run over
// parallel::testing::tags_ignored (every tag replaced by 0 below Group), a pipeline trains bit for
// bit like the same pipeline over tagged MPI; a posting order that broke the rule would hand a
// stage another micro-batch's activation or gradient (or a message of another size: an error).
#include <gtest/gtest.h>

#include "parallel/comm/testing.hpp"
#include "tests/dist/comm/dist_env.hpp"
#include "tests/dist/engine/adamw_job.hpp"
#include "tests/dist/engine/model_parallel_fixture.hpp"
#include "tests/dist/pipeline/pipeline_fixture.hpp"

using namespace strata;
using namespace strata::test;

TEST(PipelineTagsIgnored, TrainsBitwiseLikeTaggedTransfers) {
  const SingleThreaded one_thread;
  const auto& w = world();
  const auto c = pipe_gpt();
  const int b = 2, m = 4, steps = 3;
  const parallel::Group untagged = parallel::testing::tags_ignored(w);
  for (int pp : pipeline_sizes(w.size()))
    for (int zero : {0, 2}) {
      const int dp = w.size() / pp;
      SCOPED_TRACE(fmt::format("pp {} x dp {}, ZeRO {}", pp, dp, zero));
      config::Config cfg = adamw_job(b, m, zero);  // (no TrainerOptions: see adamw_job.hpp)
      cfg.strata.pipeline_parallel_size = pp;
      Replica tagged(c, cfg, w);
      Replica plain(c, cfg, untagged);
      ASSERT_NE(plain.engine.pipeline(), nullptr);
      const auto me = tagged.training->grid().coords();
      BatchFeed f1{dp, me.dp, b, c.block_size, c.vocab_size}, f2 = f1;
      for (int s = 0; s < steps; ++s) {
        const auto a = tagged.engine.train_step(std::ref(f1));
        const auto p = plain.engine.train_step(std::ref(f2));
        EXPECT_EQ(a.loss, p.loss) << "step " << s;
        EXPECT_EQ(a.result.grad_norm, p.result.grad_norm) << "step " << s;
      }
      EXPECT_TRUE(by_name(*tagged.training) == by_name(*plain.training))
          << "the fp32 masters differ";
    }
}
