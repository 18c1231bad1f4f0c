// GPT pipeline stages in one process: the cut by cost, one stage is exactly the whole model
// (units, unit schedule, loss and gradients bitwise), and 2 or 4 stages chained by hand compute the
// same loss bitwise and the same gradients (bitwise for everything but the tied embedding, whose
// two copies' gradients sum to the model's), with the unit hooks called exactly as each stage's
// unit schedule says.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "framework/core/rng.hpp"
#include "framework/nn/gpt.hpp"
#include "framework/nn/gpt_stage.hpp"
#include "framework/nn/param_store.hpp"
#include "framework/nn/stage_balance.hpp"

using namespace strata;

namespace {

nn::GptConfig stage_gpt(int layers) {
  nn::GptConfig c;
  c.vocab_size = 64;
  c.block_size = 16;
  c.n_layer = layers;
  c.n_head = 2;
  c.n_embd = 32;
  return c;
}

// A micro-batch with some structure.
nn::Batch make_batch(const nn::Gpt& g, int B, std::uint64_t seed) {
  nn::Batch b(g.batch_fields(B));
  Philox r(seed);
  const auto n = static_cast<std::size_t>(b["tokens"].numel());
  auto* in = b["tokens"].data<std::int32_t>();
  auto* tgt = b["targets"].data<std::int32_t>();
  for (std::size_t i = 0; i < n; ++i) {
    in[i] = static_cast<std::int32_t>(r.next_below(64));
    tgt[i] = i % 7 == 3 ? -1 : static_cast<std::int32_t>((in[i] + 3) % 64);
  }
  return b;
}

// Records the hooks' calls: the before_* ones as unit uses.
struct Recorder : nn::UnitHooks {
  std::vector<nn::UnitUse> uses;
  int open_forward = 0, open_backward = 0;
  void before_forward(int u) override { uses.push_back({false, u}), ++open_forward; }
  void after_forward(int) override { --open_forward; }
  void before_backward(int u) override { uses.push_back({true, u}), ++open_backward; }
  void after_backward(int) override { --open_backward; }
};

std::map<std::string, std::vector<float>> grads_by_name(const std::vector<nn::Parameter*>& ps) {
  std::map<std::string, std::vector<float>> out;
  for (auto* p : ps) out[p->name] = p->grad.to_vector();
  return out;
}

}  // namespace

TEST(StageBalance, EqualLayersWithoutExtras) {
  EXPECT_EQ(nn::balance_stages(8, 4), (std::vector<int>{0, 2, 4, 6, 8}));
  // Uneven: the extra layer goes late (earlier stages hold more micro-batches in flight).
  EXPECT_EQ(nn::balance_stages(5, 2), (std::vector<int>{0, 2, 5}));
  EXPECT_EQ(nn::balance_stages(10, 4), (std::vector<int>{0, 2, 4, 7, 10}));
  EXPECT_EQ(nn::balance_stages(3, 3), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(nn::balance_stages(7, 1), (std::vector<int>{0, 7}));
}

TEST(StageBalance, AHeavyHeadTakesLayersFromTheLastStage) {
  // The head costs 2.5 layers: 4 / 4 / 1 + 2.5 is the only cut whose largest stage costs 4.
  EXPECT_EQ(nn::balance_stages(9, 3, 0.0, 2.5), (std::vector<int>{0, 4, 8, 9}));
  EXPECT_EQ(nn::balance_stages(8, 2, 0.0, 2.0), (std::vector<int>{0, 5, 8}));
  EXPECT_EQ(nn::balance_stages(8, 2, 2.0, 0.0), (std::vector<int>{0, 3, 8}));
  // Never an empty stage, even when the head alone outweighs everything.
  EXPECT_EQ(nn::balance_stages(4, 4, 0.0, 100.0), (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(StageBalance, RejectsMoreStagesThanLayers) {
  EXPECT_THROW(nn::balance_stages(2, 3), UserError);
  EXPECT_THROW(nn::balance_stages(2, 0), UserError);
  try {
    nn::gpt_stage_blocks(stage_gpt(2), 4);
    ADD_FAILURE() << "4 stages of 2 layers accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("set strata.pipeline_parallel_size between 1 and 2"),
              std::string::npos) << e.what();
  }
}

TEST(StageBalance, GptCostModelWeighsTheHead) {
  // Tiny vocabulary: the head is cheap, layers split evenly.
  EXPECT_EQ(nn::gpt_stage_blocks(stage_gpt(4), 2), (std::vector<int>{0, 2, 4}));
  // GPT-2 small's shape: the head (2 V C per token) costs ~5.4 blocks, so the last stage gets
  // fewer blocks.
  nn::GptConfig g;
  g.vocab_size = 50257;
  g.block_size = 1024;
  g.n_layer = 12;
  g.n_embd = 768;
  g.n_head = 12;
  // The last stage (1 block + head = 5.46) sets the pace; the other 11 blocks spread 3 / 4 / 4.
  EXPECT_EQ(nn::gpt_stage_blocks(g, 4), (std::vector<int>{0, 3, 7, 11, 12}));
}

TEST(GptStage, OneStageIsTheWholeModel) {
  for (bool ckpt : {false, true}) {
    SCOPED_TRACE(ckpt ? "activation checkpointing" : "no checkpointing");
    const auto c = stage_gpt(3);
    nn::Gpt a(c), b(c);
    a.set_checkpointing(ckpt);
    b.set_checkpointing(ckpt);
    auto st = b.stage(0, 1);
    ASSERT_EQ(st->units(), b.units());
    EXPECT_EQ(st->unit_schedule(), b.unit_schedule());
    EXPECT_TRUE(st->tied_units().empty());
    nn::ParamStore sa(a.units(), {}), sb(st->units(), {});
    sa.initialize(3);
    sb.initialize(3);
    const nn::Batch batch = make_batch(a, 3, 11);
    nn::Context ca, cb;
    Recorder rec;
    cb.hooks = &rec;
    const double la = a.forward(ca, batch);
    a.backward(ca, 0.5f);
    const nn::StageOutput out = st->forward(cb, batch, Tensor());
    EXPECT_FALSE(st->backward(cb, Tensor(), 0.5f).defined());
    EXPECT_EQ(out.loss.value(), la);
    EXPECT_EQ(grads_by_name(sa.parameters()), grads_by_name(sb.parameters()));
    EXPECT_EQ(rec.uses, b.unit_schedule());
    EXPECT_TRUE(cb.saved->empty());
  }
}

class ChainedStages : public ::testing::TestWithParam<int> {};

TEST_P(ChainedStages, MatchTheWholeModel) {
  const int S = GetParam();
  const auto c = stage_gpt(4);
  nn::Gpt whole(c);
  whole.set_checkpointing(true);
  nn::ParamStore ws(whole.units(), {});
  ws.initialize(9);
  // Each stage on a model object and store of its own, as on its own rank.
  std::vector<std::unique_ptr<nn::Gpt>> models;
  std::vector<std::unique_ptr<nn::ModelStage>> stages;
  std::vector<std::unique_ptr<nn::ParamStore>> stores;
  for (int s = 0; s < S; ++s) {
    models.push_back(std::make_unique<nn::Gpt>(c));
    models.back()->set_checkpointing(true);
    stages.push_back(models.back()->stage(s, S));
    stores.push_back(std::make_unique<nn::ParamStore>(stages.back()->units(), nn::ParamStoreOptions{}));
    stores.back()->initialize(9);
  }
  // The tied embedding: owned by the first stage, copied on the last, initialised bitwise alike.
  ASSERT_EQ(stages.front()->tied_units().size(), 1u);
  ASSERT_EQ(stages.back()->tied_units().size(), 1u);
  EXPECT_TRUE(stages.front()->tied_units()[0].owner);
  EXPECT_FALSE(stages.back()->tied_units()[0].owner);
  const auto wte_of = [&](int s) {
    const int u = stages[static_cast<std::size_t>(s)]->tied_units()[0].unit;
    return stores[static_cast<std::size_t>(s)]->layout(static_cast<std::size_t>(u)).params[0];
  };
  EXPECT_EQ(wte_of(0)->name, "transformer.wte.weight");
  EXPECT_EQ(wte_of(S - 1)->name, "transformer.wte.weight");
  EXPECT_EQ(wte_of(0)->value.to_vector(), wte_of(S - 1)->value.to_vector());
  // Every block on exactly one stage.
  int blocks = 0;
  for (auto& st : stages) blocks += static_cast<const nn::GptStage&>(*st).end_block() -
                                    static_cast<const nn::GptStage&>(*st).first_block();
  EXPECT_EQ(blocks, c.n_layer);

  for (int micro = 0; micro < 2; ++micro) {  // gradients accumulate over two micro-batches
    const nn::Batch batch = make_batch(whole, 2, 100 + micro);
    nn::Context wc;
    const double want = whole.forward(wc, batch);
    whole.backward(wc, 0.25f);
    std::vector<nn::Context> ctx(static_cast<std::size_t>(S));
    std::vector<Recorder> rec(static_cast<std::size_t>(S));
    Tensor x;
    double loss = -1;
    for (int s = 0; s < S; ++s) {
      ctx[static_cast<std::size_t>(s)].hooks = &rec[static_cast<std::size_t>(s)];
      const nn::StageOutput out = stages[static_cast<std::size_t>(s)]->forward(ctx[static_cast<std::size_t>(s)], batch, x);
      if (s < S - 1) {
        ASSERT_EQ(out.activation.shape(), stages[static_cast<std::size_t>(s) + 1]->input_shape(batch));
        ASSERT_EQ(out.activation.shape(), stages[static_cast<std::size_t>(s)]->output_shape(batch));
      }
      x = out.activation;
      loss = out.loss.value();
    }
    EXPECT_EQ(loss, want) << "micro-batch " << micro;
    Tensor g;
    for (int s = S; s-- > 0;) g = stages[static_cast<std::size_t>(s)]->backward(ctx[static_cast<std::size_t>(s)], g, 0.25f);
    EXPECT_FALSE(g.defined());
    for (int s = 0; s < S; ++s) {
      EXPECT_EQ(rec[static_cast<std::size_t>(s)].uses, stages[static_cast<std::size_t>(s)]->unit_schedule()) << "stage " << s;
      EXPECT_EQ(rec[static_cast<std::size_t>(s)].open_forward, 0);
      EXPECT_EQ(rec[static_cast<std::size_t>(s)].open_backward, 0);
      EXPECT_TRUE(ctx[static_cast<std::size_t>(s)].saved->empty()) << "stage " << s;
    }
  }
  // Gradients: bitwise for every parameter but wte, held once across the stages.
  const auto want = grads_by_name(ws.parameters());
  std::map<std::string, std::vector<float>> got;
  for (int s = 0; s < S; ++s)
    for (auto* p : stores[static_cast<std::size_t>(s)]->parameters()) {
      if (p->name == "transformer.wte.weight") continue;
      EXPECT_EQ(got.count(p->name), 0u) << p->name << " on two stages";
      got[p->name] = p->grad.to_vector();
    }
  EXPECT_EQ(got.size() + 1, want.size());
  for (const auto& [name, g] : got) EXPECT_EQ(g, want.at(name)) << name;
  // wte: the embedding's gradient (first stage) plus the head's (last stage), as the engine sums.
  const auto a = wte_of(0)->grad.to_vector(), b = wte_of(S - 1)->grad.to_vector();
  const auto& w = want.at("transformer.wte.weight");
  double num = 0, den = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double d = static_cast<double>(a[i]) + b[i] - w[i];
    num += d * d;
    den += static_cast<double>(w[i]) * w[i];
  }
  EXPECT_LT(std::sqrt(num / den), 1e-6);
  EXPECT_GT(den, 0);
}

INSTANTIATE_TEST_SUITE_P(Stages, ChainedStages, ::testing::Values(2, 4));
