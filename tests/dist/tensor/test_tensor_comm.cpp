// The bytes a tensor-parallel GPT moves over its tp group per step are the formula's
// (nn::gpt_tp_traffic, by kind: all-reduce, all-gather, reduce-scatter): tp = 2, alone and inside
// pp = 2 stages, without recomputation, with selective recomputation (which moves nothing again:
// the bytes without recomputation) and with activation checkpointing, f32 and bf16 activations (and
// tp = 4 on 4 ranks: f32, pp 1, no recomputation), with and without sequence parallelism, over a
// step of 3 micro-batches — what each
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

// Bytes a rank sends under ring algorithms: an all-reduce of n bytes 2(t-1)/t n, an all-gather or
// a reduce-scatter (t-1)/t n.
double ring_bytes(const nn::TpTraffic& t, int tp) {
  const double f = static_cast<double>(tp - 1) / tp;
  return f * (2.0 * static_cast<double>(t.all_reduce) + static_cast<double>(t.all_gather) +
              static_cast<double>(t.reduce_scatter));
}

TEST(TensorComm, BytesPerStepAreTheFormulas) {
  const SingleThreaded one_thread;
  const auto& w = world();
  if (w.size() % 2 != 0) GTEST_SKIP() << "tp 2 needs an even number of ranks";
  nn::GptConfig c = tp_gpt();
  c.n_layer = 3;
  const int b = 2, m = 3;
  for (int tp : {2, 4})
    for (int pp : {1, 2}) {
      if (w.size() % (tp * pp) != 0) continue;
      for (const config::Recompute mode :
           {config::Recompute::none, config::Recompute::selective, config::Recompute::full})
        for (DType dt : {DType::f32, DType::bf16}) {
          // (test time)
          if (tp == 4 && (pp > 1 || mode != config::Recompute::none || dt != DType::f32)) continue;
          const bool ckpt = mode == config::Recompute::full;  // selective redoes no collective
          nn::TpTraffic per_sp[2];
          std::string act_name;
          for (bool sp : {false, true}) {
            SCOPED_TRACE(fmt::format("tp {} pp {} recompute {} {} sequence parallel {}", tp, pp,
                                     config::to_string(mode), dtype_name(dt), sp));
            train::TrainerOptions o;
            if (dt == DType::bf16) o.precision = train::Precision::bf16;
            config::Config cfg = job_config(o, b, m, 1, dt, 1000, true, ckpt, dt != DType::f32);
            cfg.strata.activation_checkpointing = mode;
            cfg.strata.tensor_parallel_size = tp;
            cfg.strata.pipeline_parallel_size = pp;
            cfg.strata.sequence_parallel = sp;
            Replica r(c, cfg, w);
            const auto me = r.training->grid().coords();
            BatchFeed feed{r.training->grid().dp_size(), me.dp, b, c.block_size, c.vocab_size};
            const parallel::GroupTpComm* comm = r.training->tp_comm();
            ASSERT_NE(comm, nullptr);
            const nn::TpTraffic before = comm->traffic();
            r.engine.train_step(std::ref(feed));
            const nn::TpTraffic got = comm->traffic() - before;
            const std::vector<int> cut = nn::gpt_stage_blocks(c, pp);
            const DType act = train::activation_dtype(cfg);
            act_name = std::string(dtype_name(act));
            const nn::TpTraffic want =
                nn::gpt_tp_traffic(c, tp, static_cast<std::int64_t>(b) * c.block_size, act, ckpt,
                                   cut[me.pp], cut[me.pp + 1], me.pp == 0, me.pp == pp - 1, sp) *
                m;
            EXPECT_EQ(got.all_reduce, want.all_reduce) << "rank " << w.rank();
            EXPECT_EQ(got.all_gather, want.all_gather) << "rank " << w.rank();
            EXPECT_EQ(got.reduce_scatter, want.reduce_scatter) << "rank " << w.rank();
            if (!sp) {
              EXPECT_EQ(got.all_reduce,
                        m * nn::gpt_tp_allreduce_bytes(c, tp, static_cast<std::int64_t>(b) * c.block_size,
                                                       act, ckpt, cut[me.pp], cut[me.pp + 1],
                                                       me.pp == 0, me.pp == pp - 1));
            }
            per_sp[sp] = got;
          }
          if (w.rank() == 0)
            std::printf("tp %d pp %d recompute %s %s activations, rank 0 per step: without "
                        "sequence parallelism all-reduce %lld B; with it all-reduce %lld, "
                        "all-gather %lld, reduce-scatter %lld B; ring bytes sent %.0f vs %.0f "
                        "(x%.3f)\n",
                        tp, pp, std::string(config::to_string(mode)).c_str(), act_name.c_str(),
                        static_cast<long long>(per_sp[0].all_reduce),
                        static_cast<long long>(per_sp[1].all_reduce),
                        static_cast<long long>(per_sp[1].all_gather),
                        static_cast<long long>(per_sp[1].reduce_scatter), ring_bytes(per_sp[0], tp),
                        ring_bytes(per_sp[1], tp), ring_bytes(per_sp[1], tp) / ring_bytes(per_sp[0], tp));
        }
    }
}

}  // namespace test_tensor_comm
}  // namespace
