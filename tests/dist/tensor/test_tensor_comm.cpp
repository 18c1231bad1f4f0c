// The bytes a tensor-parallel GPT all-reduces per step are the formula's
// (nn::gpt_tp_allreduce_bytes): tp = 2, alone and inside pp = 2 stages, with and without
// activation checkpointing (and with selective recomputation, which all-reduces nothing again: the
// bytes without recomputation), f32 and bf16 activations, over a step of 3 micro-batches — what each
// rank's communicator counted equals the formula for the blocks its stage runs, exactly.
#include <gtest/gtest.h>

#include "framework/nn/gpt_stage.hpp"
#include "framework/train/from_config.hpp"
#include "tests/dist/comm/dist_env.hpp"
#include "tests/dist/tensor/tensor_fixture.hpp"

using namespace strata;
using namespace strata::test;

namespace {
namespace test_tensor_comm {

TEST(TensorComm, BytesPerStepAreTheFormulas) {
  const SingleThreaded one_thread;
  const auto& w = world();
  if (w.size() % 2 != 0) GTEST_SKIP() << "tp 2 needs an even number of ranks";
  nn::GptConfig c = tp_gpt();
  c.n_layer = 3;
  const int b = 2, m = 3, tp = 2;
  for (int pp : {1, 2}) {
    if (w.size() % (tp * pp) != 0) continue;
    for (const config::Recompute mode :
         {config::Recompute::none, config::Recompute::selective, config::Recompute::full})
      for (DType dt : {DType::f32, DType::bf16}) {
        const bool ckpt = mode == config::Recompute::full;
        SCOPED_TRACE(fmt::format("pp {} recompute {} {}", pp, config::to_string(mode), dtype_name(dt)));
        train::TrainerOptions o;
        if (dt == DType::bf16) o.precision = train::Precision::bf16;
        config::Config cfg = job_config(o, b, m, 1, dt, 1000, true, ckpt, dt != DType::f32);
        cfg.strata.activation_checkpointing = mode;
        cfg.strata.tensor_parallel_size = tp;
        cfg.strata.pipeline_parallel_size = pp;
        Replica r(c, cfg, w);
        const auto me = r.training->grid().coords();
        BatchFeed feed{r.training->grid().dp_size(), me.dp, b, c.block_size, c.vocab_size};
        const parallel::GroupTpComm* comm = r.training->tp_comm();
        ASSERT_NE(comm, nullptr);
        const std::int64_t before = comm->bytes();
        r.engine.train_step(std::ref(feed));
        const std::int64_t got = comm->bytes() - before;
        const std::vector<int> cut = nn::gpt_stage_blocks(c, pp);
        const DType act = train::activation_dtype(cfg);
        const std::int64_t want =
            m * nn::gpt_tp_allreduce_bytes(c, tp, static_cast<std::int64_t>(b) * c.block_size, act,
                                           ckpt, cut[me.pp], cut[me.pp + 1], me.pp == 0,
                                           me.pp == pp - 1);
        EXPECT_EQ(got, want) << "rank " << w.rank();
        if (w.rank() == 0)
          std::printf("tp 2 pp %d recompute %s %s activations: %lld bytes all-reduced per step "
                      "on rank 0 (formula %lld)\n",
                      pp, std::string(config::to_string(mode)).c_str(),
                      std::string(dtype_name(act)).c_str(),
                      static_cast<long long>(got),
                      static_cast<long long>(want));
      }
  }
}

}  // namespace test_tensor_comm
}  // namespace
