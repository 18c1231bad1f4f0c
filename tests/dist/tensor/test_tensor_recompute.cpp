// Activation recomputation changes no bit of training: with strata.activation_checkpointing
// false, "selective" and true, every step's loss and gradient norm and the final fp32 masters are
// bitwise equal — on one rank, with tp = 2, with pp = 2 (and tp 2 x pp 2 on 4 ranks) at ZeRO 1, and
// data-parallel over every rank at ZeRO 3 (parameters gathered again for backward, where the
// LayerNorms recompute), in f32 and with bf16 parameters and activations, over 4 steps of 2
// micro-batches. Also with sequence parallelism at tp 2 (and tp 2 x pp 2 on 4 ranks): there the
// LayerNorm outputs selective drops and recomputes are the rank's part of the tokens, which is what
// the column-parallel layers keep (they gather every part again in backward), so the recomputed
// part is handed back in its place; full recomputation redoes the forward's all-gathers and
// reduce-scatters. Bitwise equal to the same layout with sequence parallelism and no recomputation.
#include <gtest/gtest.h>

#include "tests/dist/comm/dist_env.hpp"
#include "tests/dist/tensor/tensor_fixture.hpp"

using namespace strata;
using namespace strata::test;

namespace {
namespace test_tensor_recompute {

struct Trace {
  std::vector<double> losses, norms;
  std::map<std::string, std::vector<float>> masters;
};

Trace train_with(const parallel::Group& g, int tp, int pp, int zero, bool sp, DType dt,
                 config::Recompute mode) {
  const nn::GptConfig c = tp_gpt();
  const int b = 2, m = 2, steps = 4;
  train::TrainerOptions o;
  o.optimizer = std::make_shared<optim::AdamW>(optim::AdamWHyper{.lr = 3e-3, .eps = 1e-6});
  o.max_grad_norm = 0.5;
  if (dt == DType::bf16) o.precision = train::Precision::bf16;
  config::Config cfg = job_config(o, b, m, zero, dt, 1000, true, false, dt != DType::f32);
  cfg.strata.tensor_parallel_size = tp;
  cfg.strata.pipeline_parallel_size = pp;
  cfg.strata.sequence_parallel = sp;
  cfg.strata.activation_checkpointing = mode;
  Replica r(c, cfg, g);
  const auto me = r.training->grid().coords();
  BatchFeed feed{r.training->grid().dp_size(), me.dp, b, c.block_size, c.vocab_size};
  Trace t;
  for (int s = 0; s < steps; ++s) {
    const auto st = r.engine.train_step(std::ref(feed));
    t.losses.push_back(st.loss);
    t.norms.push_back(st.result.grad_norm);
  }
  t.masters = assemble_3d(*r.training);
  return t;
}

TEST(TensorRecompute, NoneSelectiveAndFullTrainBitwiseAlike) {
  const SingleThreaded one_thread;
  const auto& w = world();
  // (tp, pp, ZeRO stage, on the whole world or each rank alone, sequence parallelism); dp = the
  // rest.
  struct Layout {
    int tp, pp, zero;
    bool solo, sp;
  };
  std::vector<Layout> layouts = {{1, 1, 1, true, false}, {1, 1, 3, false, false}};
  for (const auto& l : {Layout{2, 1, 1, false, false}, Layout{1, 2, 1, false, false},
                        Layout{2, 2, 1, false, false}, Layout{2, 1, 1, false, true},
                        Layout{2, 2, 1, false, true}})
    if (w.size() % (l.tp * l.pp) == 0) layouts.push_back(l);
  const parallel::Group solo = w.split(w.rank(), 0, "solo");
  for (const auto& [tp, pp, zero, alone, sp] : layouts)
    for (const DType dt : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(fmt::format("tp {} pp {} ZeRO {}{}{} {}", tp, pp, zero, alone ? " alone" : "",
                               sp ? " sequence parallel" : "", dtype_name(dt)));
      const parallel::Group& g = alone ? solo : w;
      const Trace none = train_with(g, tp, pp, zero, sp, dt, config::Recompute::none);
      for (const config::Recompute mode : {config::Recompute::selective, config::Recompute::full}) {
        SCOPED_TRACE(config::to_string(mode));
        const Trace t = train_with(g, tp, pp, zero, sp, dt, mode);
        EXPECT_EQ(t.losses, none.losses);
        EXPECT_EQ(t.norms, none.norms);
        EXPECT_TRUE(t.masters == none.masters) << "fp32 masters differ after the steps";
      }
      if (w.rank() == 0)
        std::printf("tp %d pp %d ZeRO %d (%d ranks)%s %s: none, selective and full bitwise equal "
                    "over %zu steps (last loss %.6f)\n",
                    tp, pp, zero, g.size(), sp ? " sequence parallel" : "",
                    std::string(dtype_name(dt)).c_str(), none.losses.size(), none.losses.back());
    }
}

}  // namespace test_tensor_recompute
}  // namespace
