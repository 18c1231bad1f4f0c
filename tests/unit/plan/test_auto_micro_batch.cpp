// train_micro_batch_size_per_gpu: "auto" with a device cap: the planner picks the largest
// micro-batch whose step fits — the run with it fits, the next one up does not; without any
// micro-batch that fits, a one-line error with the step's need and what would fit.
#include <gtest/gtest.h>

#include "framework/memory/out_of_memory.hpp"
#include "parallel/plan/auto_micro_batch.hpp"
#include "tests/unit/plan/plan_test_util.hpp"

namespace strata {
namespace {

config::Config auto_config(const std::string& cap) {
  config::json doc = plan_test::gpt_document({"gradient_accumulation_steps=2"});
  doc["train_micro_batch_size_per_gpu"] = "auto";
  doc["strata"]["memory"]["device_limit"] = cap;
  return config::parse_config(doc);
}

config::Config with_micro(config::Config cfg, std::int64_t m) {
  cfg.micro_batch_auto = false;
  cfg.train_micro_batch_size_per_gpu = m;
  cfg.train_batch_size = 0;
  config::resolve_batch(cfg, 1);
  return cfg;
}

TEST(AutoMicroBatch, LargestThatFitsIsChosenAndFitsForReal) {
  config::Config cfg = auto_config("3MiB");
  ASSERT_TRUE(cfg.micro_batch_auto);
  const auto plan = parallel::plan::resolve_auto_micro_batch(cfg, 1, parallel::plan::gpt_model());
  ASSERT_TRUE(plan);
  const std::int64_t m = cfg.train_micro_batch_size_per_gpu;
  ASSERT_GE(m, 1);
  EXPECT_TRUE(plan->fits());
  EXPECT_EQ(plan->micro_batch, m);
  bool noted = false;
  for (const auto& n : cfg.notes) noted = noted || n.find(fmt::format("= {},", m)) != std::string::npos;
  EXPECT_TRUE(noted);
  config::resolve_batch(cfg, 1);
  EXPECT_EQ(cfg.gradient_accumulation_steps, 2);
  EXPECT_NO_THROW(plan_test::measure(cfg));
  EXPECT_THROW(plan_test::measure(with_micro(cfg, m + 1)), OutOfMemory);
}

TEST(AutoMicroBatch, NothingFitsSaysWhatTheStepNeeds) {
  config::Config cfg = auto_config("600KiB");
  try {
    parallel::plan::resolve_auto_micro_batch(cfg, 1, parallel::plan::gpt_model());
    FAIL() << "micro-batch " << cfg.train_micro_batch_size_per_gpu << " chosen under 600 KiB";
  } catch (const UserError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("not even micro-batch 1 fits: a step needs"), std::string::npos) << w;
    EXPECT_NE(w.find("--device-memory"), std::string::npos) << w;
  }
}

}  // namespace
}  // namespace strata
