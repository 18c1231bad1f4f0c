// Sequence parallelism's activation memory, measured by the ledger: one block's saved activations
// (the peak of the activations category with n_layer + 1 blocks less the peak with n_layer) equal
// nn::gpt_block_activation_bytes exactly — with sequence parallelism everything a block keeps is
// divided by tp; without it the LayerNorm regions stay whole — at tp 2 (and tp 4 on 4 ranks), f32
// and bf16 activations, without recomputation and with selective and full recomputation (with
// sequence parallelism selective keeps s·b·(9·e·h + 16)/t, full the block input's part e·h/t). Each
// row is printed beside Megatron's formula (Korthikanti et al. 2022: s·b·h·(34 + 5·a·s/h), divided
// by t with tp and sequence parallelism; 10 + 24/t + 5as/(ht) with tp alone; selective 34/t and
// 10 + 24/t; full 2, over t with sequence parallelism), which counts 16-bit activations, the s²
// softmax and two dropout masks that Strata does not keep (docs/parallelism.md).
#include <gtest/gtest.h>

#include "framework/train/from_config.hpp"
#include "tests/dist/comm/dist_env.hpp"
#include "tests/dist/tensor/tensor_fixture.hpp"

using namespace strata;
using namespace strata::test;

namespace {
namespace test_tensor_sequence {

// The peak of the activations category over one training step of `c`.
std::uint64_t activation_peak(const nn::GptConfig& c, const config::Config& cfg, int b) {
  MemoryLedger ledger;
  Replica r(c, cfg, world(), parallel::TrainingExtras::on(&ledger));
  const auto me = r.training->grid().coords();
  BatchFeed feed{r.training->grid().dp_size(), me.dp, b, c.block_size, c.vocab_size};
  r.engine.train_step(std::ref(feed));
  return ledger.snapshot().peak[static_cast<int>(Tier::device)][static_cast<int>(Category::activations)];
}

// Megatron's per-layer bytes (16-bit activations; scaled by d/2 for d-byte activations).
double megatron_bytes(const nn::GptConfig& c, int tp, bool sp, std::int64_t tokens, DType act,
                      config::Recompute mode) {
  const double s = c.block_size, h = c.n_embd, a = c.n_head, t = tp;
  const double sbh = static_cast<double>(tokens) * h;
  double per = 0;
  switch (mode) {
    case config::Recompute::none:
      per = sp ? (34.0 + 5.0 * a * s / h) / t : 10.0 + 24.0 / t + 5.0 * a * s / (h * t);
      break;
    case config::Recompute::selective:
      per = sp ? 34.0 / t : 10.0 + 24.0 / t;
      break;
    case config::Recompute::full:
      per = sp ? 2.0 / t : 2.0;
      break;
  }
  return sbh * per * static_cast<double>(dtype_size(act)) / 2.0;
}

TEST(TensorSequence, ActivationBytesPerLayerAreTheFormula) {
  const SingleThreaded one_thread;
  const auto& w = world();
  const int b = 2;
  for (int tp : {2, 4}) {
    if (w.size() % tp != 0) continue;
    for (DType dt : {DType::f32, DType::bf16})
      for (const config::Recompute mode :
           {config::Recompute::none, config::Recompute::selective, config::Recompute::full})
      for (bool sp : {false, true}) {
        SCOPED_TRACE(fmt::format("tp {} {} recompute {} sequence parallel {}", tp, dtype_name(dt),
                                 config::to_string(mode), sp));
        train::TrainerOptions o;
        if (dt == DType::bf16) o.precision = train::Precision::bf16;
        config::Config cfg = job_config(o, b, 1, 0, dt, 1000, true, /*checkpointing=*/false,
                                        /*act16=*/dt != DType::f32);
        cfg.strata.tensor_parallel_size = tp;
        cfg.strata.sequence_parallel = sp;
        cfg.strata.activation_checkpointing = mode;
        nn::GptConfig c = tp_gpt();
        c.n_layer = 2;
        const std::uint64_t two = activation_peak(c, cfg, b);
        c.n_layer = 3;
        const std::uint64_t three = activation_peak(c, cfg, b);
        const DType act = train::activation_dtype(cfg);
        const std::int64_t tokens = static_cast<std::int64_t>(b) * c.block_size;
        const std::int64_t want =
            nn::gpt_block_activation_bytes(c, nn::TpShard{0, tp, sp}, tokens, act,
                                           parallel::recompute_mode(mode));
        const std::int64_t got = static_cast<std::int64_t>(three) - static_cast<std::int64_t>(two);
        EXPECT_EQ(got, want) << "rank " << w.rank();
        if (w.rank() == 0)
          std::printf("tp %d %s%s recompute %s s=%d b=%d h=%d a=%d: one block keeps %lld bytes "
                      "(formula %lld), Megatron's formula %.0f (x%.3f), tp 1 %lld\n",
                      tp, std::string(dtype_name(act)).c_str(), sp ? " sequence parallel" : "",
                      std::string(config::to_string(mode)).c_str(), c.block_size, b, c.n_embd,
                      c.n_head, static_cast<long long>(got), static_cast<long long>(want),
                      megatron_bytes(c, tp, sp, tokens, act, mode),
                      static_cast<double>(got) / megatron_bytes(c, tp, sp, tokens, act, mode),
                      static_cast<long long>(nn::gpt_block_activation_bytes(
                          c, {}, tokens, act, parallel::recompute_mode(mode))));
      }
  }
}

}  // namespace test_tensor_sequence
}  // namespace
