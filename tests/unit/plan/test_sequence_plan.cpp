// The memory planner and sequence parallelism. The planner runs the model's own code on the meta
// device, so it counts what sequence parallelism keeps: one block's activations (the activations
// peak with 3 blocks less the peak with 2, no activation checkpointing) equal
// nn::gpt_block_activation_bytes exactly for a GPT-2-medium-sized layer (h 1024, a 16, s 1024,
// b 1) at tp 1, 2, 4 with and without sequence parallelism, f32 and bf16 activations, without
// recomputation and with selective and full recomputation, printed beside Megatron's formula
// (bench/README.md's tables). `strata plan --recommend` proposes
// strata.sequence_parallel for a tensor-parallel job when that is what fits (and not when the
// job fits without it), also together with selective recomputation, and the flags it prints plan
// as recommended; the out-of-memory advice lists it.
#include <gtest/gtest.h>

#include "parallel/plan/oom_advice.hpp"
#include "parallel/plan/recommend.hpp"
#include "parallel/plan/report.hpp"
#include "tests/unit/plan/plan_test_util.hpp"

namespace strata {
namespace {

std::uint64_t activation_peak(const config::Config& cfg, int ranks) {
  const auto p = parallel::plan::plan_memory(cfg, parallel::plan::gpt_model(), {ranks, 1});
  return p.peak(Tier::device, Category::activations);
}

// One block of the layer above (h, a, s; b 1) as the planner counts it: the activations peak of
// 3 blocks less that of 2, with the recomputation mode `mode` (a config value), tp and sequence
// parallelism; `two` is the 2-block config (for its dtype and model).
struct PlannedBlock {
  std::int64_t bytes;
  config::Config two;
};
PlannedBlock planned_block(int h, int a, int s, const char* mode, int tp, const char* dtype,
                           bool sp) {
  std::vector<std::string> sets = {
      "train_micro_batch_size_per_gpu=1",
      fmt::format("strata.activation_checkpointing={}", mode),
      fmt::format("strata.tensor_parallel_size={}", tp),
      fmt::format("strata.sequence_parallel={}", sp ? "true" : "false"),
      fmt::format("strata.model.n_embd={}", h), fmt::format("strata.model.n_head={}", a),
      fmt::format("strata.model.block_size={}", s), "strata.model.vocab_size=1024"};
  if (std::string(dtype) == "bf16") sets.push_back("bf16.enabled=true");
  sets.push_back("strata.model.n_layer=2");
  config::Config two = plan_test::gpt_config(sets);
  sets.push_back("strata.model.n_layer=3");
  const config::Config three = plan_test::gpt_config(sets);
  return {static_cast<std::int64_t>(activation_peak(three, tp)) -
              static_cast<std::int64_t>(activation_peak(two, tp)),
          std::move(two)};
}

TEST(PlanSequenceParallel, ActivationBytesPerLayerAreTheFormula) {
  const int s = 1024, h = 1024, a = 16;
  std::printf("| tp | activations | sequence parallel | one block, planned (ledger) | Strata's "
              "formula | Megatron, full | ledger / full | Megatron, selective recompute | ledger / "
              "selective |\n");
  for (int tp : {1, 2, 4})
    for (const char* dtype : {"f32", "bf16"})
      for (bool sp : {false, true}) {
        if (sp && tp == 1) continue;
        SCOPED_TRACE(fmt::format("tp {} {} sequence parallel {}", tp, dtype, sp));
        const PlannedBlock block = planned_block(h, a, s, "false", tp, dtype, sp);
        const config::Config& two = block.two;
        const std::int64_t got = block.bytes;
        const DType act = train::activation_dtype(two);
        const std::int64_t want = nn::gpt_block_activation_bytes(
            train::gpt_config(two), nn::TpShard{0, tp, sp}, s, act);
        EXPECT_EQ(got, want);
        // Megatron's (16-bit activations; f32 doubles it): sbh(34 + 5as/h)/t with sequence
        // parallelism (or tp = 1), sbh(10 + 24/t + 5as/(ht)) with tp alone; with selective
        // recomputation (no s² term) sbh·34/t and sbh(10 + 24/t).
        const double sbh = static_cast<double>(s) * h, t = tp, scale = dtype_size(act) / 2.0;
        const bool split = sp || tp == 1;
        const double full = sbh * scale *
                            (split ? (34.0 + 5.0 * a * s / h) / t : 10.0 + 24.0 / t + 5.0 * a * s / (h * t));
        const double selective = sbh * scale * (split ? 34.0 / t : 10.0 + 24.0 / t);
        std::printf("| %d | %s | %s | %lld | %lld | %.0f | %.3f | %.0f | %.3f |\n", tp,
                    std::string(dtype_name(act)).c_str(), sp ? "on" : "off",
                    static_cast<long long>(got), static_cast<long long>(want), full,
                    static_cast<double>(got) / full, selective, static_cast<double>(got) / selective);
      }
}

// The same with selective and full recomputation: the planner's bytes for sequence parallelism
// with either mode are nn::gpt_block_activation_bytes exactly (selective with sequence parallelism
// keeps s·b·(9·e·h + 16)/t, full the block input's part s·b·e·h/t), printed beside Megatron's
// (selective: s·b·h·34/t with sequence parallelism, s·b·h·(10 + 24/t) without; full 2·s·b·h, over
// t with sequence parallelism).
TEST(PlanSequenceParallel, RecomputeActivationBytesPerLayerAreTheFormula) {
  const int s = 1024, h = 1024, a = 16;
  std::printf("| tp | activations | sequence parallel | recompute | one block, planned (ledger) | "
              "Strata's formula | Megatron | ledger / Megatron |\n");
  for (const char* mode : {"selective", "true"})
    for (int tp : {1, 2, 4})
      for (const char* dtype : {"f32", "bf16"})
        for (bool sp : {false, true}) {
          if (sp && tp == 1) continue;
          SCOPED_TRACE(fmt::format("recompute {} tp {} {} sequence parallel {}", mode, tp, dtype, sp));
          const PlannedBlock block = planned_block(h, a, s, mode, tp, dtype, sp);
          const config::Config& two = block.two;
          const std::int64_t got = block.bytes;
          const DType act = train::activation_dtype(two);
          const config::Recompute r = two.strata.activation_checkpointing;
          ASSERT_NE(r, config::Recompute::none);
          const std::int64_t want = nn::gpt_block_activation_bytes(
              train::gpt_config(two), nn::TpShard{0, tp, sp}, s, act, parallel::recompute_mode(r));
          EXPECT_EQ(got, want);
          const double sbh = static_cast<double>(s) * h, t = tp, scale = dtype_size(act) / 2.0;
          const bool split = sp || tp == 1;
          const double mega = sbh * scale *
                              (r == config::Recompute::full ? (split ? 2.0 / t : 2.0)
                                                            : (split ? 34.0 / t : 10.0 + 24.0 / t));
          std::printf("| %d | %s | %s | %s | %lld | %lld | %.0f | %.3f |\n", tp,
                      std::string(dtype_name(act)).c_str(), tp == 1 ? "–" : sp ? "on" : "off",
                      std::string(config::to_string(r)).c_str(), static_cast<long long>(got),
                      static_cast<long long>(want), mega, static_cast<double>(got) / mega);
        }
}

using parallel::plan::Recommendation;

TEST(PlanSequenceParallel, RecommendProposesItWhenThatIsWhatFits) {
  const std::vector<std::string> base = {"strata.tensor_parallel_size=2",
                                         "train_micro_batch_size_per_gpu=8"};
  const config::Config cfg = plan_test::gpt_config(base);
  auto with_sp = base;
  with_sp.push_back("strata.sequence_parallel=true");
  const auto sp_plan = parallel::plan::plan_memory(plan_test::gpt_config(with_sp),
                                                   parallel::plan::gpt_model(), {2, 2});
  const auto plain = parallel::plan::plan_memory(cfg, parallel::plan::gpt_model(), {2, 2});
  ASSERT_LT(sp_plan.peak(Tier::device), plain.peak(Tier::device));
  EXPECT_LT(sp_plan.peak(Tier::device, Category::activations),
            plain.peak(Tier::device, Category::activations));
  EXPECT_NE(parallel::plan::format_plan_report(sp_plan, plan_test::gpt_config(with_sp))
                .find("sequence parallel over tp 2"),
            std::string::npos);

  // Capped at what the step needs with sequence parallelism: that is the recommendation.
  config::Config capped = cfg;
  capped.strata.memory.device_limit = sp_plan.peak(Tier::device);
  const Recommendation r = parallel::plan::recommend(capped, 2, parallel::plan::gpt_model(),
                                                     parallel::plan::caps_of(capped));
  ASSERT_TRUE(r.chosen);
  const auto& chosen = r.options[*r.chosen];
  EXPECT_EQ(chosen.rung, "no ZeRO");
  EXPECT_TRUE(chosen.sequence_parallel);
  EXPECT_EQ(chosen.recompute, config::Recompute::none);
  EXPECT_EQ(chosen.trial->plan.micro_batch, 8);
  const std::string text = parallel::plan::format_recommendation(r, capped);
  EXPECT_NE(text.find("--set strata.sequence_parallel=true"), std::string::npos) << text;
  EXPECT_NE(text.find("sequence parallelism on"), std::string::npos) << text;
  // The printed flags, applied to the config as the command line does, plan as recommended.
  const config::Config followed = parallel::plan::apply(capped, chosen.trial->change);
  EXPECT_TRUE(followed.strata.sequence_parallel);
  auto p = parallel::plan::plan_memory(followed, parallel::plan::gpt_model(), {2, 2});
  p.caps = parallel::plan::caps_of(capped);
  EXPECT_TRUE(p.fits());
  // The out-of-memory advice under that cap lists it among the changes that fit.
  const auto advice = parallel::plan::plan_advice(capped, 2, parallel::plan::gpt_model(),
                                                  Tier::device, parallel::plan::caps_of(capped));
  bool advised = false;
  for (const auto& sets : advice.sets)
    advised = advised || (sets.size() == 1 && sets[0] == "strata.sequence_parallel=true");
  EXPECT_TRUE(advised);
  // Without the cap the job fits as it is: no sequence parallelism proposed.
  const Recommendation free_r = parallel::plan::recommend(cfg, 2, parallel::plan::gpt_model(),
                                                          parallel::plan::caps_of(cfg));
  ASSERT_TRUE(free_r.chosen);
  EXPECT_FALSE(free_r.options[*free_r.chosen].sequence_parallel);
}

// They compose in --recommend too: capped at what the step needs with sequence parallelism and
// selective recomputation together (below either alone at the same micro-batch), that pair is the
// recommendation, and its printed flags plan as recommended.
TEST(PlanSequenceParallel, RecommendProposesItWithSelectiveWhenThatIsWhatFits) {
  const std::vector<std::string> base = {"strata.tensor_parallel_size=2",
                                         "train_micro_batch_size_per_gpu=8"};
  const config::Config cfg = plan_test::gpt_config(base);
  const auto peak_with = [&](std::vector<std::string> sets) {
    sets.insert(sets.begin(), base.begin(), base.end());
    return parallel::plan::plan_memory(plan_test::gpt_config(sets), parallel::plan::gpt_model(),
                                       {2, 2})
        .peak(Tier::device);
  };
  const std::uint64_t both = peak_with({"strata.sequence_parallel=true",
                                        "strata.activation_checkpointing=selective"});
  ASSERT_LT(both, peak_with({"strata.sequence_parallel=true"}));
  ASSERT_LT(both, peak_with({"strata.activation_checkpointing=selective"}));
  config::Config capped = cfg;
  capped.strata.memory.device_limit = both;
  const Recommendation r = parallel::plan::recommend(capped, 2, parallel::plan::gpt_model(),
                                                     parallel::plan::caps_of(capped));
  ASSERT_TRUE(r.chosen);
  const auto& chosen = r.options[*r.chosen];
  const std::string text = parallel::plan::format_recommendation(r, capped);
  EXPECT_EQ(chosen.rung, "no ZeRO") << text;
  EXPECT_TRUE(chosen.sequence_parallel) << text;
  EXPECT_EQ(chosen.recompute, config::Recompute::selective) << text;
  EXPECT_EQ(chosen.trial->plan.micro_batch, 8) << text;
  EXPECT_NE(text.find("--set strata.sequence_parallel=true"), std::string::npos) << text;
  EXPECT_NE(text.find("--set strata.activation_checkpointing=selective"), std::string::npos) << text;
  const config::Config followed = parallel::plan::apply(capped, chosen.trial->change);
  EXPECT_TRUE(followed.strata.sequence_parallel);
  EXPECT_EQ(followed.strata.activation_checkpointing, config::Recompute::selective);
  auto p = parallel::plan::plan_memory(followed, parallel::plan::gpt_model(), {2, 2});
  p.caps = parallel::plan::caps_of(capped);
  EXPECT_TRUE(p.fits());
  EXPECT_EQ(p.peak(Tier::device), both);
  // The out-of-memory advice under that cap lists the pair.
  const auto advice = parallel::plan::plan_advice(capped, 2, parallel::plan::gpt_model(),
                                                  Tier::device, parallel::plan::caps_of(capped));
  bool advised = false;
  for (const auto& sets : advice.sets)
    advised = advised || sets == std::vector<std::string>{"strata.sequence_parallel=true",
                                                          "strata.activation_checkpointing=selective"};
  EXPECT_TRUE(advised);
}

}  // namespace
}  // namespace strata
