// Training-technique invariants on a small GPT: activation checkpointing is bitwise neutral,
// gradient accumulation equals one big batch, 16-bit training tracks fp32, init is sharding-proof.
#include <gtest/gtest.h>

#include <cmath>

#include "framework/core/rng.hpp"
#include "framework/nn/gpt.hpp"
#include "framework/nn/param_store.hpp"
#include "framework/optim/optimizers/sgd.hpp"
#include "framework/train/trainer.hpp"
#include "tests/unit/nn/gpt_fixture_util.hpp"

using namespace strata;

namespace {

nn::GptConfig small_config() {
  nn::GptConfig c;
  c.vocab_size = 64;
  c.block_size = 16;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  return c;
}

// Random tokens with some structure (t+1 = t+3 mod V half the time) so the loss can fall.
std::vector<std::int32_t> make_tokens(int n, int V, std::uint64_t seed) {
  Philox r(seed);
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  t[0] = static_cast<std::int32_t>(r.next_below(V));
  for (int i = 1; i < n; ++i)
    t[i] = r.next_uniform() < 0.7f ? (t[i - 1] + 3) % V : static_cast<std::int32_t>(r.next_below(V));
  return t;
}

struct TinyGpt {
  nn::Gpt gpt;
  nn::ParamStore store;
  TinyGpt(const nn::GptConfig& c, DType dt = DType::f32)
      : gpt(c), store(gpt.units(), nn::ParamStoreOptions{dt, dt, 1, {}}) {
    store.initialize(42);
  }
  std::vector<float> all_grads() {
    std::vector<float> g;
    for (auto* p : store.parameters()) {
      auto v = p->grad.to_vector();
      g.insert(g.end(), v.begin(), v.end());
    }
    return g;
  }
  std::vector<float> all_values() {
    std::vector<float> g;
    for (auto* p : store.parameters()) {
      auto v = p->value.to_vector();
      g.insert(g.end(), v.begin(), v.end());
    }
    return g;
  }
};

}  // namespace

TEST(GptTraining, ActivationCheckpointingGivesBitwiseEqualGradients) {
  const auto c = small_config();
  const int B = 3, T = 16;
  auto toks = make_tokens(B * T + 1, c.vocab_size, 7);
  std::vector<std::int32_t> in(toks.begin(), toks.end() - 1), tgt(toks.begin() + 1, toks.end());
  TinyGpt a(c), b(c);
  b.gpt.set_checkpointing(true);
  nn::Context ctx;
  const double la = a.gpt.forward(ctx, in.data(), tgt.data(), B, T);
  a.gpt.backward(ctx, 1.0f);
  const double lb = b.gpt.forward(ctx, in.data(), tgt.data(), B, T);
  b.gpt.backward(ctx, 1.0f);
  EXPECT_EQ(la, lb);
  const auto ga = a.all_grads(), gb = b.all_grads();
  ASSERT_EQ(ga.size(), gb.size());
  for (std::size_t i = 0; i < ga.size(); ++i) ASSERT_EQ(ga[i], gb[i]) << "element " << i;
}

TEST(GptTraining, CheckpointingSavesActivationMemory) {
  auto c = small_config();
  c.n_layer = 4;
  const int B = 4, T = 16;
  auto toks = make_tokens(B * T + 1, c.vocab_size, 8);
  std::vector<std::int32_t> in(toks.begin(), toks.end() - 1), tgt(toks.begin() + 1, toks.end());
  auto peak_acts = [&](bool ckpt) {
    MemoryLedger ledger;
    nn::Gpt gpt(c);
    nn::ParamStore store(gpt.units(), nn::ParamStoreOptions{DType::f32, DType::f32, 1,
                                                            TensorOptions{Device::cpu(), Tier::device, Category::other, &ledger}});
    store.initialize(1);
    gpt.set_checkpointing(ckpt);
    nn::Context ctx;
    ctx.activations.ledger = &ledger;
    ctx.workspace.ledger = &ledger;
    gpt.forward(ctx, in.data(), tgt.data(), B, T);
    const auto after_forward = ledger.current(Tier::device, Category::activations);
    gpt.backward(ctx, 1.0f);
    EXPECT_EQ(ledger.current(Tier::device, Category::activations), 0u) << "activations leaked";
    return after_forward;
  };
  const auto full = peak_acts(false), ckpt = peak_acts(true);
  EXPECT_LT(ckpt * 3, full) << "checkpointed " << ckpt << " vs " << full;
}

// k micro-batches of b accumulated equal one batch of k*b: gradients within 1e-6 (max-norm
// relative), and training with clipping keeps losses, norms and weights within 1e-6. SGD is used
// for the multi-step part because AdamW's m/sqrt(v) turns round-off in near-zero gradients into
// full-size updates, so no summation order survives it element-wise (the PyTorch parity tests
// cover AdamW).
TEST(GptTraining, AccumulatedMicroBatchesEqualOneBigBatch) {
  const auto c = small_config();
  const int k = 4, b = 2, T = 16;
  auto toks = make_tokens(k * b * T + 1, c.vocab_size, 9);
  std::vector<std::int32_t> in(toks.begin(), toks.end() - 1), tgt(toks.begin() + 1, toks.end());
  TinyGpt big(c), acc(c);
  train::TrainerOptions o;
  o.optimizer = std::make_shared<optim::SGD>(optim::SGDHyper{.lr = 0.5, .momentum = 0.9});
  o.max_grad_norm = 0.5;  // clipping on: the norm must match too
  train::Trainer tb(big.store, o), ta(acc.store, o);
  nn::Context ctx;
  for (int step = 0; step < 5; ++step) {
    const double lb = big.gpt.forward(ctx, in.data(), tgt.data(), k * b, T);
    big.gpt.backward(ctx, 1.0f);
    double la = 0;
    for (int m = 0; m < k; ++m) {
      const std::size_t off = static_cast<std::size_t>(m) * b * T;
      la += acc.gpt.forward(ctx, in.data() + off, tgt.data() + off, b, T);
      acc.gpt.backward(ctx, 1.0f / k);
    }
    la /= k;
    EXPECT_NEAR(la, lb, 1e-6 * std::abs(lb)) << "step " << step;
    if (step == 0) {
      EXPECT_LT(test::rel_max_err(acc.all_grads(), big.all_grads()), 1e-6);
    }
    auto rb = tb.step();
    auto ra = ta.step();
    EXPECT_NEAR(ra.grad_norm, rb.grad_norm, 1e-6 * rb.grad_norm) << "step " << step;
    EXPECT_GT(rb.grad_norm, 0.5) << "clipping should be active at step " << step;
  }
  EXPECT_LT(test::rel_max_err(acc.all_values(), big.all_values()), 1e-6);
}

TEST(GptTraining, InitIsAPureFunctionOfSeedNameAndIndex) {
  const auto c = small_config();
  TinyGpt a(c), b(c);
  EXPECT_EQ(a.all_values(), b.all_values());
  // A slice initialised on its own (as a ZeRO-3 shard would be) equals the same range of the whole.
  nn::Parameter* p = a.store.find("transformer.h.1.mlp.c_fc.weight");
  ASSERT_NE(p, nullptr);
  std::vector<float> part(100);
  nn::init_values(*p, 42, 1234, part.data(), part.size());
  auto whole = p->value.to_vector();
  for (std::size_t i = 0; i < part.size(); ++i) ASSERT_EQ(part[i], whole[1234 + i]);
  // GPT-2 init: residual projections use std 0.02/sqrt(2L), LayerNorm weights are 1, biases 0.
  auto proj = a.store.find("transformer.h.0.attn.c_proj.weight")->value.to_vector();
  double ss = 0;
  for (float v : proj) ss += v * v;
  EXPECT_NEAR(std::sqrt(ss / proj.size()), 0.02 / std::sqrt(4.0), 0.002);
  for (float v : a.store.find("transformer.ln_f.weight")->value.to_vector()) ASSERT_EQ(v, 1.0f);
  for (float v : a.store.find("transformer.h.0.mlp.c_fc.bias")->value.to_vector()) ASSERT_EQ(v, 0.0f);
}

// 16-bit storage (bf16, and fp16 with dynamic loss scaling) follows the fp32 loss curve.
// Stated tolerance: every loss within 0.05 absolute of fp32's over 40 steps, final loss within 2%.
class GptPrecision : public ::testing::TestWithParam<train::Precision> {};

TEST_P(GptPrecision, TracksFp32LossCurve) {
  const auto c = small_config();
  const int B = 4, T = 16, steps = 40;
  auto curve = [&](train::Precision p) {
    const DType dt = p == train::Precision::bf16 ? DType::bf16 : p == train::Precision::fp16 ? DType::f16 : DType::f32;
    TinyGpt r(c, dt);
    train::TrainerOptions o;
    o.optimizer = std::make_shared<optim::AdamW>(optim::AdamWHyper{.lr = 3e-3});
    o.precision = p;
    train::Trainer t(r.store, o);
    nn::Context ctx;
    std::vector<double> losses;
    int skipped = 0;
    for (int s = 0; s < steps; ++s) {
      auto toks = make_tokens(B * T + 1, c.vocab_size, 100 + s);
      std::vector<std::int32_t> in(toks.begin(), toks.end() - 1), tgt(toks.begin() + 1, toks.end());
      losses.push_back(r.gpt.forward(ctx, in.data(), tgt.data(), B, T));
      r.gpt.backward(ctx, t.loss_scale());
      skipped += !t.step().applied;
    }
    EXPECT_EQ(t.updates() + skipped, steps);
    return losses;
  };
  const auto ref = curve(train::Precision::f32);
  const auto got = curve(GetParam());
  EXPECT_LT(ref.back(), ref.front() - 0.3) << "fp32 did not learn";
  for (int s = 0; s < steps; ++s) EXPECT_NEAR(got[s], ref[s], 0.05) << "step " << s;
  EXPECT_NEAR(got.back(), ref.back(), 0.02 * ref.back());
}

INSTANTIATE_TEST_SUITE_P(Bf16AndFp16, GptPrecision,
                         ::testing::Values(train::Precision::bf16, train::Precision::fp16),
                         [](const auto& info) { return std::string(train::precision_name(info.param)); });

// 16-bit activations (the context's act_dtype, what bf16.enabled / fp16.enabled give by default):
// with 16-bit parameters too, the loss curve tracks fp32's within the tolerance used for 16-bit
// parameters, and the activations saved for backward take at most 0.55 of the f32 bytes per
// token (16-bit tensors, with the few statistics that stay f32: LayerNorm's mean/rstd,
// attention's and the loss's log-sum-exp, tokens and targets).
class GptActivations16 : public ::testing::TestWithParam<train::Precision> {};

TEST_P(GptActivations16, TrackFp32LossCurveWithHalfTheActivationBytes) {
  const auto c = small_config();
  const int B = 4, T = 16, steps = 40;
  auto curve = [&](train::Precision p, bool act16, std::uint64_t* saved_bytes) {
    const DType dt = p == train::Precision::bf16 ? DType::bf16 : p == train::Precision::fp16 ? DType::f16 : DType::f32;
    MemoryLedger ledger;
    TensorOptions mem{Device::cpu(), Tier::device, Category::other, &ledger};
    nn::Gpt gpt(c);
    nn::ParamStore store(gpt.units(), nn::ParamStoreOptions{dt, dt, 1, mem});
    store.initialize(42);
    train::TrainerOptions o;
    o.optimizer = std::make_shared<optim::AdamW>(optim::AdamWHyper{.lr = 3e-3});
    o.precision = p;
    train::Trainer t(store, o);
    nn::Context ctx;
    ctx.activations.ledger = &ledger;
    ctx.workspace.ledger = &ledger;
    ctx.act_dtype = act16 ? dt : DType::f32;
    std::vector<double> losses;
    std::uint64_t saved = 0;
    for (int s = 0; s < steps; ++s) {
      auto toks = make_tokens(B * T + 1, c.vocab_size, 100 + s);
      std::vector<std::int32_t> in(toks.begin(), toks.end() - 1), tgt(toks.begin() + 1, toks.end());
      losses.push_back(gpt.forward(ctx, in.data(), tgt.data(), B, T));
      saved = std::max(saved, ledger.current(Tier::device, Category::activations));
      gpt.backward(ctx, t.loss_scale());
      t.step();
    }
    EXPECT_EQ(ledger.current(Tier::device, Category::activations), 0u) << "activations leaked";
    if (saved_bytes) *saved_bytes = saved;
    return losses;
  };
  std::uint64_t f32_bytes = 0, act16_bytes = 0;
  const auto ref = curve(train::Precision::f32, false, &f32_bytes);
  const auto got = curve(GetParam(), true, &act16_bytes);
  for (int s = 0; s < steps; ++s) EXPECT_NEAR(got[s], ref[s], 0.05) << "step " << s;
  EXPECT_NEAR(got.back(), ref.back(), 0.02 * ref.back());
  const double ratio = static_cast<double>(act16_bytes) / static_cast<double>(f32_bytes);
  EXPECT_LE(ratio, 0.55) << act16_bytes << " vs " << f32_bytes << " bytes saved for backward";
  std::printf("%s activations: %.1f bytes/token saved for backward vs %.1f with f32 (%.3f)\n",
              train::precision_name(GetParam()), static_cast<double>(act16_bytes) / (B * T),
              static_cast<double>(f32_bytes) / (B * T), ratio);
}
INSTANTIATE_TEST_SUITE_P(Bf16AndFp16, GptActivations16,
                         ::testing::Values(train::Precision::bf16, train::Precision::fp16),
                         [](const auto& info) { return std::string(train::precision_name(info.param)); });
