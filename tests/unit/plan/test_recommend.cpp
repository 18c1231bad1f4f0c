// The recommendation: DeepSpeed's ladder in order, the first rung with a fitting option chosen,
// sharding rungs skipped on one rank, the global batch kept, and the chosen option's flags fit
// when run for real.
#include <gtest/gtest.h>

#include "parallel/engine/training.hpp"
#include "parallel/plan/recommend.hpp"
#include "parallel/plan/report.hpp"

#include <sstream>
#include "tests/unit/plan/plan_test_util.hpp"

namespace strata {
namespace {

using parallel::plan::Recommendation;

Recommendation recommend_for(const config::Config& cfg, int ranks) {
  return parallel::plan::recommend(cfg, ranks, parallel::plan::gpt_model(),
                                   parallel::plan::caps_of(cfg));
}

TEST(Recommend, OneRankTakesTheFirstFittingRungInDeepSpeedsOrder) {
  const config::Config free_cfg = plan_test::gpt_config({"train_micro_batch_size_per_gpu=8"});
  const auto free_plan = parallel::plan::plan_memory(free_cfg, parallel::plan::gpt_model());
  // Below model states + the smallest step's activations without offload: no-ZeRO cannot fit.
  const std::uint64_t states = free_plan.peak(Tier::device, Category::params) +
                               free_plan.peak(Tier::device, Category::grads) +
                               free_plan.peak(Tier::device, Category::optimizer);
  const config::Config cfg = plan_test::gpt_config(
      {"train_micro_batch_size_per_gpu=8", fmt::format("strata.memory.device_limit={}", states)});
  const Recommendation r = recommend_for(cfg, 1);
  ASSERT_TRUE(r.chosen);
  const auto& chosen = r.options[*r.chosen];
  EXPECT_EQ(chosen.rung, "ZeRO-1 + optimizer offload");
  // Considered in order: no ZeRO (planned, does not fit), ZeRO-1 and ZeRO-2 skipped (one rank).
  ASSERT_GE(r.options.size(), 6u);
  EXPECT_EQ(r.options[0].rung, "no ZeRO");
  ASSERT_TRUE(r.options[0].trial);
  EXPECT_FALSE(r.options[0].trial->fits());
  // Three options a rung: no recomputation, selective, full.
  EXPECT_EQ(r.options[1].recompute, config::Recompute::selective);
  EXPECT_EQ(r.options[2].recompute, config::Recompute::full);
  EXPECT_EQ(r.options[3].rung, "ZeRO-1");
  EXPECT_NE(r.options[3].skipped.find("one rank"), std::string::npos);
  EXPECT_EQ(r.options[6].rung, "ZeRO-2");
  EXPECT_FALSE(r.options[6].skipped.empty());
  for (const auto& o : r.options) EXPECT_NE(o.rung, "ZeRO-3") << "planned past the chosen rung";
  // The global batch stays: micro-batch x accumulation = 8.
  EXPECT_EQ(chosen.trial->plan.micro_batch * chosen.trial->plan.accumulation, 8);
  // Run for real with the chosen config (its flags applied to cfg): it fits.
  EXPECT_NO_THROW(plan_test::measure(chosen.trial->cfg));
}

TEST(Recommend, WithoutACapNoZeroWinsAndSeveralRanksConsiderSharding) {
  const config::Config cfg = plan_test::gpt_config({});
  const Recommendation free_r = recommend_for(cfg, 1);
  ASSERT_TRUE(free_r.chosen);
  EXPECT_EQ(free_r.options[*free_r.chosen].rung, "no ZeRO");

  // On 4 ranks with a cap below no-ZeRO's smallest step, a sharding rung is planned and chosen.
  config::Config four = plan_test::gpt_config({}, 4);
  const auto stage0 = parallel::plan::plan_memory(
      plan_test::gpt_config({"train_micro_batch_size_per_gpu=1", "gradient_accumulation_steps=4",
                             "strata.activation_checkpointing=true"}, 4),
      parallel::plan::gpt_model(), {4, 2});
  four.strata.memory.device_limit = stage0.peak(Tier::device) - 1;
  const Recommendation r = recommend_for(four, 4);
  ASSERT_TRUE(r.chosen);
  const std::string rung = r.options[*r.chosen].rung;
  EXPECT_TRUE(rung == "ZeRO-1" || rung == "ZeRO-2") << rung;
  EXPECT_TRUE(r.options[3].skipped.empty()) << r.options[3].skipped;
}

// The flags of the recommendation's last line ("  --set a=b --set c=d"), applied to cfg's document
// as the command line applies them.
config::Config follow_printed(const config::Config& cfg, const std::string& report) {
  const auto at = report.rfind("\n  --set ");
  EXPECT_NE(at, std::string::npos) << report;
  std::istringstream in(report.substr(at + 3));
  config::json doc = config::to_json(cfg);
  for (std::string flag, value; in >> flag >> value;) {
    EXPECT_EQ(flag, "--set") << report;
    config::apply_override(doc, value);
  }
  config::Config out = config::parse_config(doc);
  config::resolve_batch(out, 1);
  return out;
}

// With a cap that the step without recomputation exceeds at the configured micro-batch but
// selective recomputation meets, the recommendation is selective (cheaper than full, which fits
// too: no product redone; cheaper than no recomputation at a smaller micro-batch), and its
// printed flags, applied literally, make a run that fits.
TEST(Recommend, SelectiveBeforeFullWhenItIsEnough) {
  const std::vector<std::string> base = {"train_micro_batch_size_per_gpu=8", "strata.model.n_layer=4"};
  auto peak = [&](const char* mode, int micro) {
    std::vector<std::string> sets = base;
    sets.push_back(fmt::format("strata.activation_checkpointing={}", mode));
    sets.push_back(fmt::format("train_micro_batch_size_per_gpu={}", micro));
    sets.push_back(fmt::format("gradient_accumulation_steps={}", 8 / micro));
    return parallel::plan::plan_memory(plan_test::gpt_config(sets), parallel::plan::gpt_model())
        .peak(Tier::device);
  };
  // Between selective's need at micro-batch 8 and no recomputation's: without recomputation only
  // smaller micro-batches fit (slower: a device is less busy), with selective 8 does.
  const std::uint64_t sel8 = peak("selective", 8), none8 = peak("false", 8);
  ASSERT_LT(sel8, none8);
  const std::uint64_t cap = (sel8 + none8) / 2;
  std::vector<std::string> sets = base;
  sets.push_back(fmt::format("strata.memory.device_limit={}", cap));
  const config::Config cfg = plan_test::gpt_config(sets);
  const Recommendation r = recommend_for(cfg, 1);
  ASSERT_TRUE(r.chosen);
  const auto& chosen = r.options[*r.chosen];
  const std::string report = parallel::plan::format_recommendation(r, cfg);
  std::printf("%s", report.c_str());
  EXPECT_EQ(chosen.rung, "no ZeRO");
  EXPECT_EQ(chosen.recompute, config::Recompute::selective) << report;
  EXPECT_EQ(chosen.trial->plan.micro_batch, 8);
  EXPECT_NE(report.find("--set strata.activation_checkpointing=selective"), std::string::npos)
      << report;
  // Followed literally: the config the printed flags make fits when run for real.
  const config::Config followed = follow_printed(cfg, report);
  EXPECT_EQ(followed.strata.activation_checkpointing, config::Recompute::selective);
  EXPECT_NO_THROW(plan_test::measure(followed));
}

// A GPU job (planned on the meta device: this runs without a GPU) climbs the same ladder: offload
// from the GPU runs, so under the same cap it gets the same offload rung; an optimizer without CUDA
// kernels (Lamb) skips the rungs that keep its state on the GPU, saying why; one with them
// (AdamW8bit) skips none.
TEST(Recommend, GpuJobsClimbToOffloadAndSkipWhatTheyRefuse) {
  const config::Config free_cfg = plan_test::gpt_config({"train_micro_batch_size_per_gpu=8"});
  const auto free_plan = parallel::plan::plan_memory(free_cfg, parallel::plan::gpt_model());
  const std::uint64_t states = free_plan.peak(Tier::device, Category::params) +
                               free_plan.peak(Tier::device, Category::grads) +
                               free_plan.peak(Tier::device, Category::optimizer);
  const config::Config cfg = plan_test::gpt_config(
      {"train_micro_batch_size_per_gpu=8", "strata.device=cuda",
       fmt::format("strata.memory.device_limit={}", states)});
  const Recommendation r = recommend_for(cfg, 1);
  ASSERT_TRUE(r.chosen);
  EXPECT_EQ(r.options[*r.chosen].rung, "ZeRO-1 + optimizer offload");

  // OneBitAdam has no CUDA kernels (refusals.gpu): a GPU job refuses its state on the GPU, naming
  // it. (It refuses ZeRO, which optimizer offload needs, so it cannot run on a GPU at all, and no
  // registered optimizer that runs under ZeRO refuses a GPU any more: the ladder's skip of such a
  // rung has no optimizer left to show it.)
  const config::Config onebit = plan_test::gpt_config({"strata.device=cuda", "optimizer.type=OneBitAdam"});
  EXPECT_NE(parallel::gpu_refusal(onebit).find("OneBitAdam"), std::string::npos)
      << parallel::gpu_refusal(onebit);
  // The ladder skips the rung that keeps its state on the GPU, naming the optimizer, without a
  // trial; the offload rungs, which it refuses itself (1-bit Adam refuses ZeRO), are skipped with
  // that refusal, and nothing is proposed.
  const Recommendation ro = recommend_for(onebit, 1);
  EXPECT_EQ(ro.options[0].rung, "no ZeRO");
  EXPECT_NE(ro.options[0].skipped.find("a GPU job refuses the OneBitAdam optimizer"),
            std::string::npos) << ro.options[0].skipped;
  EXPECT_FALSE(ro.options[0].trial);
  int refused = 0;
  for (const parallel::plan::Option& o : ro.options) {
    EXPECT_FALSE(o.skipped.empty()) << o.rung;
    EXPECT_FALSE(o.trial) << o.rung;
    if (o.skipped.find("the job refuses it: ") != std::string::npos &&
        o.skipped.find("zero_optimization.stage") != std::string::npos)
      ++refused;
  }
  EXPECT_GT(refused, 0);
  EXPECT_FALSE(ro.chosen);
  // Lamb and Adafactor have CUDA kernels now (ops::lamb_*, adafactor_*): nothing is skipped.
  for (const char* type : {"optimizer.type=Lamb", "optimizer.type=Adafactor"}) {
    std::vector<std::string> sets = {"strata.device=cuda", type};
    if (std::string(type) == "optimizer.type=Adafactor") sets.push_back("optimizer.params.relative_step=false");
    const Recommendation rl = recommend_for(plan_test::gpt_config(sets), 1);
    ASSERT_TRUE(rl.chosen) << type;
    EXPECT_EQ(rl.options[0].rung, "no ZeRO") << type;
    EXPECT_TRUE(rl.options[0].skipped.empty()) << type << ": " << rl.options[0].skipped;
  }
  // AdamW8bit has CUDA kernels (ops::adamw8bit_step): nothing is skipped, its state may stay.
  const Recommendation r8 = recommend_for(
      plan_test::gpt_config({"strata.device=cuda", "optimizer.type=AdamW8bit"}), 1);
  ASSERT_TRUE(r8.chosen);
  EXPECT_EQ(r8.options[0].rung, "no ZeRO");
  EXPECT_TRUE(r8.options[0].skipped.empty()) << r8.options[0].skipped;
}

}  // namespace
}  // namespace strata
