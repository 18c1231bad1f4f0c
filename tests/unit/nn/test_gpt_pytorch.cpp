// Strata's GPT against PyTorch (tests/fixtures/gpt_tiny.fx, made by
// tools/pytorch/make_gpt_fixtures.py): logits, loss, every gradient, and 10 AdamW steps.
#include <gtest/gtest.h>

#include "framework/train/trainer.hpp"
#include "tests/unit/nn/gpt_fixture_util.hpp"

using namespace strata;
using namespace strata::test;

namespace {

struct Model {
  nn::Gpt gpt;
  nn::ParamStore store;
  explicit Model(const Fixture& fx, DType dt = DType::f32)
      : gpt(fixture_gpt_config(fx)), store(gpt.units(), nn::ParamStoreOptions{dt, dt, 1, {}}) {
    load_params(fx, store);
  }
};

void check_batch(const std::string& pre, bool checkpointing) {
  const Fixture& fx = gpt_fixture();
  Model m(fx);
  m.gpt.set_checkpointing(checkpointing);
  const int B = static_cast<int>(fx.scalar("config/batch")), T = static_cast<int>(fx.scalar("config/seq"));
  auto idx = fx.i32(pre + "idx");
  auto tgt = fx.i32(pre + "targets");
  nn::Context ctx;
  {
    nn::Context eval = ctx;
    Tensor logits = m.gpt.logits(eval, idx.data(), B, T);
    EXPECT_LT(rel_max_err(logits.to_vector(), fx.f32(pre + "logits")), 1e-5) << pre << "logits";
  }
  const double loss = m.gpt.forward(ctx, idx.data(), tgt.data(), B, T);
  const double ref = fx.scalar(pre + "loss");
  EXPECT_LT(std::abs(loss - ref) / std::abs(ref), 1e-5) << pre << " loss " << loss << " vs " << ref;
  m.store.zero_grads();
  m.gpt.backward(ctx, 1.0f);
  for (auto* p : m.store.parameters()) {
    const double e = rel_max_err(p->grad.to_vector(), fx.f32(pre + "grad/" + p->name));
    EXPECT_LT(e, 1e-4) << pre << "grad/" << p->name;
  }
}

}  // namespace

TEST(GptPyTorch, LogitsLossAndGradients) { check_batch("", false); }
TEST(GptPyTorch, IgnoredTargets) { check_batch("batch2/", false); }
TEST(GptPyTorch, WithActivationCheckpointing) { check_batch("", true); }

void run_adamw(bool clip) {
  const Fixture& fx = gpt_fixture();
  Model m(fx);
  const int B = static_cast<int>(fx.scalar("config/batch")), T = static_cast<int>(fx.scalar("config/seq"));
  auto idx = fx.i32("idx");
  auto tgt = fx.i32("targets");
  train::TrainerOptions o;
  o.optimizer = std::make_shared<optim::AdamW>(optim::AdamWHyper{
      .lr = fx.scalar("adamw/lr"),
      .beta1 = fx.scalar("adamw/beta1"),
      .beta2 = fx.scalar("adamw/beta2"),
      .eps = fx.scalar("adamw/eps"),
      .weight_decay = fx.scalar("adamw/weight_decay")});
  o.max_grad_norm = clip ? fx.scalar("adamw/clip_norm") : 0.0;
  train::Trainer trainer(m.store, o);
  const auto losses = fx.f32(clip ? "adamw_clip_losses" : "adamw_losses");
  const auto norms = clip ? fx.f32("adamw_clip_grad_norms") : std::vector<float>{};
  nn::Context ctx;
  for (std::size_t s = 0; s < losses.size(); ++s) {
    const double loss = m.gpt.forward(ctx, idx.data(), tgt.data(), B, T);
    EXPECT_LT(std::abs(loss - losses[s]) / losses[s], 1e-5) << "step " << s << ": " << loss << " vs " << losses[s];
    m.gpt.backward(ctx, trainer.loss_scale());
    auto r = trainer.step();
    if (clip) {
      EXPECT_LT(std::abs(r.grad_norm - norms[s]) / norms[s], 1e-4) << "norm at step " << s;
    }
  }
  for (auto* p : m.store.parameters()) {
    const double e = rel_max_err(p->value.to_vector(), fx.f32((clip ? "final_clip/" : "final/") + p->name));
    EXPECT_LT(e, 1e-4) << "final " << p->name;
  }
}

TEST(GptPyTorch, TenAdamWSteps) { run_adamw(false); }
TEST(GptPyTorch, TenAdamWStepsWithClipping) { run_adamw(true); }
