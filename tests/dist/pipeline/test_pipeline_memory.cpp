// Memory under pipeline parallelism, from the ledger: activation memory on stage s is bounded by
// the micro-batches in flight, min(pp - s, m) under 1F1B — the peak grows with every extra
// micro-batch up to pp - s and not after (but for receive buffers posted ahead) — and model-state
// bytes per
// rank match the ZeRO formula applied to the stage's own parameters, the stages' parameters adding
// up to the model's plus the last stage's copy of the tied embedding.
#include <gtest/gtest.h>

#include "framework/memory/size.hpp"
#include "tests/dist/comm/dist_env.hpp"
#include "tests/dist/engine/test_resume_fixture.hpp"
#include "tests/dist/pipeline/pipeline_fixture.hpp"

using namespace strata;
using namespace strata::test;

namespace {

struct Measured {
  double peak_activations = 0;
  int in_flight = 0;
};

// The second step's peak of activation bytes on this rank with m micro-batches of b samples.
Measured measure(int pp, int m, int b, bool checkpointing) {
  const auto& w = world();
  MemoryLedger ledger;
  train::TrainerOptions o;
  config::Config cfg = pipe_config(o, b, m, 0, pp, DType::f32, checkpointing);
  Replica r(pipe_gpt(), cfg, w, parallel::TrainingExtras::on(&ledger));
  const auto me = r.training->grid().coords();
  BatchFeed feed{r.training->grid().dp_size(), me.dp, b, pipe_gpt().block_size, pipe_gpt().vocab_size};
  r.engine.train_step(std::ref(feed));
  ledger.reset_peaks();
  r.engine.train_step(std::ref(feed));
  return {static_cast<double>(ledger.peak(Tier::device, Category::activations)),
          r.engine.pipeline()->peak_in_flight()};
}

class ActivationMemory : public ::testing::TestWithParam<bool> {};

TEST_P(ActivationMemory, BoundedByMicroBatchesInFlight) {
  const bool checkpointing = GetParam();
  const SingleThreaded one_thread;
  const auto& w = world();
  const int pp = w.size(), b = 2, most = 2 * pp;
  std::vector<Measured> at(static_cast<std::size_t>(most) + 1);
  for (int m = 1; m <= most; ++m) at[static_cast<std::size_t>(m)] = measure(pp, m, b, checkpointing);
  const int s = w.rank();  // dp = 1: the world rank is the stage
  const int bound = pp - s;
  // One activation between stages, [b T, C] f32: each micro-batch in flight keeps at least its
  // stage input (the first block saves it), and the executor posts at most two receives ahead.
  const auto c = pipe_gpt();
  const double boundary = 4.0 * b * c.block_size * c.n_embd;
  std::string row;
  for (int m = 1; m <= most; ++m)
    row += fmt::format(" m={}: {} ({} in flight)", m,
                       format_bytes(static_cast<std::uint64_t>(at[static_cast<std::size_t>(m)].peak_activations)),
                       at[static_cast<std::size_t>(m)].in_flight);
  std::printf("[stage %d of %d, checkpointing %s] peak activations:%s\n", s, pp,
              checkpointing ? "on" : "off", row.c_str());
  const double flat = at[static_cast<std::size_t>(bound)].peak_activations;
  for (int m = 1; m <= most; ++m) {
    SCOPED_TRACE(fmt::format("stage {} of {}, m {}", s, pp, m));
    const auto& x = at[static_cast<std::size_t>(m)];
    EXPECT_EQ(x.in_flight, std::min(m, bound));
    // Up to pp - s, each extra micro-batch in flight holds at least its input more; beyond, the
    // peak stays where it was at pp - s (one activation of slack for when a send completes).
    if (m > 1 && m <= bound) {
      EXPECT_GE(x.peak_activations - at[static_cast<std::size_t>(m) - 1].peak_activations, boundary);
    }
    if (m > bound) {
      EXPECT_LE(x.peak_activations, flat + boundary);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Checkpointing, ActivationMemory, ::testing::Bool());

// Model states per rank (bf16, AdamW): the ZeRO paper's formula with the stage's parameter count
// Psi_s — 16 Psi_s (stage 0), 4 Psi_s + 12 Psi_s / dp (1), 2 Psi_s + 14 Psi_s / dp (2),
// 16 Psi_s / dp (3) — where the Psi_s of all stages add up to the model's Psi plus V x C for the
// last stage's tied copy of the token embedding (all counted with padding).
TEST(PipelineModelStates, MatchTheFormulaPerStage) {
  const auto& w = world();
  nn::GptConfig c;
  c.vocab_size = 256;
  c.block_size = 32;
  c.n_layer = 4;
  c.n_head = 8;
  c.n_embd = 256;
  for (int pp : {2, 4}) {
    if (w.size() % pp != 0) continue;
    const int dp = w.size() / pp;
    for (int stage = 0; stage <= 3; ++stage) {
      SCOPED_TRACE(fmt::format("pp {} dp {} ZeRO {}", pp, dp, stage));
      MemoryLedger ledger;
      train::TrainerOptions o;
      o.precision = train::Precision::bf16;
      config::Config cfg = pipe_config(o, 1, pp, stage, pp, DType::bf16, false);
      Replica r(c, cfg, w, parallel::TrainingExtras::on(&ledger));
      BatchFeed feed{dp, r.training->grid().coords().dp, 1, c.block_size, c.vocab_size};
      r.engine.train_step(std::ref(feed));
      double psi = 0;
      for (std::size_t u = 0; u < r.store.num_units(); ++u) psi += static_cast<double>(r.store.layout(u).padded);
      const double n = dp;
      const double expect[4] = {16 * psi, 4 * psi + 12 * psi / n, 2 * psi + 14 * psi / n, 16 * psi / n};
      const auto predicted = r.training->predicted_model_states();
      const auto measured = r.training->measured_model_states();
      EXPECT_NEAR(predicted.total() / expect[stage], 1.0, 1e-9);
      EXPECT_NEAR(measured.total() / expect[stage], 1.0, 0.05)
          << "measured " << measured.total() << ", formula " << expect[stage];
      // The stages' parameters: the model's, plus the tied copy.
      const double stages_psi = r.training->grid().pp().all_reduce_value(psi, parallel::ReduceOp::sum);
      double model_psi = static_cast<double>(c.num_parameters());
      EXPECT_GE(stages_psi, model_psi + c.vocab_size * c.n_embd);
      EXPECT_LE(stages_psi, model_psi + c.vocab_size * c.n_embd + 16.0 * dp * (c.n_layer + 4));
      if (w.rank() == 0)
        std::printf("pp=%d dp=%d ZeRO %d: stage 0 Psi_s %.0f, model states %s (formula %s)\n", pp, dp,
                    stage, psi, format_bytes(static_cast<std::uint64_t>(measured.total())).c_str(),
                    format_bytes(static_cast<std::uint64_t>(expect[stage])).c_str());
    }
  }
}

}  // namespace
