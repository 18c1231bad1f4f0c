// Out-of-memory advice from the memory planner, followed literally: for configurations that do
// not fit a cap, the error states the whole step's need (rounded up, at least what the step
// really takes), every suggested change is valid for the config, and applying the first one's
// flags exactly as printed makes the same run fit in one try.
#include <gtest/gtest.h>

#include <sstream>

#include "framework/config/overrides.hpp"
#include "framework/memory/out_of_memory.hpp"
#include "framework/memory/size.hpp"
#include "parallel/plan/oom_advice.hpp"
#include "tests/unit/plan/plan_test_util.hpp"

namespace strata {
namespace {

struct Case {
  const char* name;
  std::vector<std::string> sets;
  Tier tier;        // the capped tier
  double fraction;  // its cap: this fraction of the uncapped run's peak
  friend void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }
};

const Case kCases[] = {
    {"Stage0F32", {"strata.activation_dtype=f32"}, Tier::device, 0.8},
    {"Stage0Bf16Micro8", {"bf16.enabled=true", "train_micro_batch_size_per_gpu=8"}, Tier::device, 0.7},
    {"Stage0CheckpointingMicro8", {"strata.activation_checkpointing=true",
                                   "train_micro_batch_size_per_gpu=8"}, Tier::device, 0.8},
    {"Stage0SelectiveMicro8", {"strata.activation_checkpointing=selective",
                               "train_micro_batch_size_per_gpu=8"}, Tier::device, 0.8},
    {"Stage0Micro1", {"train_micro_batch_size_per_gpu=1"}, Tier::device, 0.9},
    {"Stage0Fp16Accumulation2", {"fp16.enabled=true", "gradient_accumulation_steps=2"}, Tier::device, 0.6},
    {"Stage0SgdHalf", {"optimizer.type=SGD"}, Tier::device, 0.5},
    {"Stage1Accumulation3", {"zero_optimization.stage=1", "train_micro_batch_size_per_gpu=2",
                             "gradient_accumulation_steps=3"}, Tier::device, 0.85},
    {"Stage1OptimizerOffload", {"zero_optimization.stage=1",
                                "zero_optimization.offload_optimizer.device=cpu"}, Tier::device, 0.8},
    {"Stage2Bf16", {"zero_optimization.stage=2", "bf16.enabled=true"}, Tier::device, 0.8},
    {"Stage3", {"zero_optimization.stage=3"}, Tier::device, 0.8},
    {"Stage3ParamOffloadCheckpointing", {"zero_optimization.stage=3", "strata.activation_checkpointing=true",
                                         "zero_optimization.offload_optimizer.device=cpu",
                                         "zero_optimization.offload_param.device=cpu"},
     Tier::device, 0.9},
    {"HostCapOptimizerOffload", {"zero_optimization.stage=1",
                                 "zero_optimization.offload_optimizer.device=cpu"},
     Tier::host, 0.5},
};

// The flags of an advice line "what: --set a=b --device-memory 3.2MiB (planned peak ...)".
std::vector<std::string> flags_of(const std::string& line) {
  const auto at = line.find(": --");
  if (at == std::string::npos) return {};
  std::istringstream in(line.substr(at + 2));
  std::vector<std::string> out;
  for (std::string w; in >> w && w.front() != '(';) out.push_back(w);
  return out;
}

// cfg's document with the flags applied as the command line applies them.
config::Config follow(const config::Config& cfg, const std::vector<std::string>& flags) {
  config::json doc = config::to_json(cfg);
  for (std::size_t i = 0; i + 1 < flags.size(); i += 2) {
    const std::string& f = flags[i];
    const std::string& v = flags[i + 1];
    if (f == "--set") config::apply_override(doc, v);
    else if (f == "--device-memory") config::apply_override(doc, "strata.memory.device_limit=" + v);
    else if (f == "--host-memory") config::apply_override(doc, "strata.memory.host_limit=" + v);
    else if (f == "--nvme-memory") config::apply_override(doc, "strata.memory.nvme_limit=" + v);
    else ADD_FAILURE() << "not a flag: " << f;
  }
  config::Config out = config::parse_config(doc);
  config::resolve_batch(out, 1);
  return out;
}

class OomAdvice : public ::testing::TestWithParam<Case> {};

TEST_P(OomAdvice, FirstSuggestionFollowedLiterallyFits) {
  const Case& k = GetParam();
  const config::Config free_cfg = plan_test::gpt_config(k.sets);
  const MemorySnapshot free_run = plan_test::measure(free_cfg);
  const std::uint64_t need = free_run.tier_peak[static_cast<int>(k.tier)];
  const auto cap = static_cast<std::uint64_t>(k.fraction * static_cast<double>(need));
  std::vector<std::string> sets = k.sets;
  sets.push_back(fmt::format("strata.memory.{}_limit={}", tier_name(k.tier), cap));
  const config::Config capped = plan_test::gpt_config(sets);

  std::vector<std::string> advice;
  try {
    plan_test::measure(capped, 2, /*planned_advice=*/true);
    FAIL() << "the capped run fitted: the case tests nothing";
  } catch (const OutOfMemory& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.context().tier, k.tier) << what;
    // The whole step's need, not the allocation that failed: at least what the step takes, and
    // printed rounded up.
    ASSERT_TRUE(e.step_needs()) << what;
    EXPECT_GE(*e.step_needs(), need) << what;
    EXPECT_NE(what.find(format_bytes_ceil(*e.step_needs())), std::string::npos) << what;
    advice = e.advice();
    std::printf("%s: %s\n", k.name, what.c_str());
  }
  ASSERT_FALSE(advice.empty());
  for (const auto& line : advice) {
    // Valid for this config: the printed flags make a config that parses (optimizer offload only
    // with stage >= 1), and on one rank no change is ZeRO sharding alone.
    const auto flags = flags_of(line);
    ASSERT_FALSE(flags.empty()) << line;
    EXPECT_NO_THROW(follow(capped, flags)) << line;
    EXPECT_EQ(line.find("shard over the data-parallel ranks"), std::string::npos) << line;
  }
  const config::Config followed = follow(capped, flags_of(advice.front()));
  EXPECT_NO_THROW(plan_test::measure(followed)) << "followed: " << advice.front();
}

INSTANTIATE_TEST_SUITE_P(Configs, OomAdvice, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

static_assert(std::size(kCases) >= 10);

// A GPU job's advice (planned on the meta device: this runs without a GPU): with the device capped
// below the model states, between them and the step's need with the optimizer state in host
// memory, that offload is offered, as for the CPU (the config of tests/unit/gpu's
// cuda_ACapBelowTheModelStatesNeedsOffloadAndTrainsWithIt, which runs it on a GPU).
TEST(OomAdviceGpu, AGpuJobIsOfferedOffload) {
  const std::vector<std::string> base = {
      "zero_optimization.stage=1", "strata.device=cuda", "strata.model.n_layer=4",
      "strata.model.n_embd=128", "train_micro_batch_size_per_gpu=1",
      "strata.activation_checkpointing=true"};
  std::vector<std::string> off = base;
  off.push_back("zero_optimization.offload_optimizer.device=cpu");
  const auto model = parallel::plan::gpt_model();
  const auto resident = parallel::plan::plan_memory(plan_test::gpt_config(base), model);
  const std::uint64_t states = resident.peak(Tier::device, Category::params) +
                               resident.peak(Tier::device, Category::grads) +
                               resident.peak(Tier::device, Category::optimizer);
  const std::uint64_t offloaded =
      parallel::plan::plan_memory(plan_test::gpt_config(off), model).peak(Tier::device);
  const std::uint64_t cap = (offloaded + states) / 2;
  std::printf("states %s, offloaded step %s, cap %s\n", format_bytes(states).c_str(),
              format_bytes(offloaded).c_str(), format_bytes(cap).c_str());
  ASSERT_LT(static_cast<double>(offloaded), 0.9 * static_cast<double>(cap));
  std::vector<std::string> capped = base;
  capped.push_back(fmt::format("strata.memory.device_limit={}", cap));
  const config::Config cfg = plan_test::gpt_config(capped);
  const auto advice = parallel::plan::plan_advice(cfg, 1, parallel::plan::gpt_model(), Tier::device,
                                                  parallel::plan::caps_of(cfg));
  bool offload = false;
  std::string all;
  for (const auto& line : advice.changes) {
    offload = offload ||
              line.find("zero_optimization.offload_optimizer.device=cpu") != std::string::npos;
    all += line + " | ";
  }
  EXPECT_TRUE(offload) << "advice: " << all;
}

}  // namespace
}  // namespace strata
