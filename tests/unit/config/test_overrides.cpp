// Command-line overrides (--set key=value, --device-memory) applied to a config document.
#include <gtest/gtest.h>

#include "framework/config/cli_options.hpp"
#include "framework/config/config.hpp"
#include "tests/unit/config/expect_error.hpp"

namespace strata::config {
namespace {

json minimal() {
  return {{"train_micro_batch_size_per_gpu", 4}};
}

TEST(ConfigOverride, MemoryCapFromASizeString) {
  json doc = minimal();
  apply_override(doc, "strata.memory.device_limit", "2GiB");
  EXPECT_EQ(doc["strata"]["memory"]["device_limit"], "2GiB");
  EXPECT_EQ(parse_config(doc).strata.memory.device_limit, std::uint64_t{2} << 30);
  apply_override(doc, "strata.memory.device_limit", "1073741824");
  EXPECT_EQ(doc["strata"]["memory"]["device_limit"], 1073741824);
  apply_override(doc, "strata.memory.device_limit", "null");
  EXPECT_FALSE(parse_config(doc).strata.memory.device_limit.has_value());
}

TEST(ConfigOverride, ValuesTakeTheKindOfTheirKey) {
  json doc = minimal();
  apply_override(doc, "zero_optimization.stage=3");
  apply_override(doc, "zero_optimization.overlap_comm=false");
  apply_override(doc, "optimizer.type=sgd");
  apply_override(doc, "optimizer.params.lr=0.05");
  apply_override(doc, "strata.checkpoint.resume=1234");  // a string key: stays text
  apply_override(doc, "strata.data.train=\"data/a b.bin\"");
  apply_override(doc, "zero_optimization.reduce_bucket_size=5e8");
  const Config c = parse_config(doc);
  EXPECT_EQ(c.zero_optimization.stage, 3);
  EXPECT_FALSE(c.zero_optimization.overlap_comm);
  EXPECT_EQ(c.optimizer.type, "SGD");
  EXPECT_DOUBLE_EQ(c.optimizer.lr(), 0.05);
  EXPECT_EQ(c.strata.checkpoint.resume, "1234");
  EXPECT_EQ(c.strata.data.train, "data/a b.bin");
  EXPECT_EQ(c.zero_optimization.reduce_bucket_size, 500'000'000);
  json betas = minimal();
  apply_override(betas, "optimizer.params.betas", "[0.8, 0.9]");
  EXPECT_DOUBLE_EQ(parse_config(betas).optimizer.params.pair("betas")[1], 0.9);
}

TEST(ConfigOverride, LaterOverridesWinAndEmptyDocumentsGrow) {
  json doc;  // null: as if no file was given
  apply_override(doc, "train_micro_batch_size_per_gpu=2");
  apply_override(doc, "train_micro_batch_size_per_gpu=6");
  EXPECT_EQ(parse_config(doc).train_micro_batch_size_per_gpu, 6);
}

TEST(ConfigOverride, UnknownKeySuggestsTheClosest) {
  json doc = minimal();
  EXPECT_TRUE(testing::fails_with(
      [&] { apply_override(doc, "zero_optimization.stgae=1"); },
      {"unknown key 'zero_optimization.stgae'", "did you mean 'zero_optimization.stage'?"}));
  EXPECT_TRUE(testing::fails_with([&] { apply_override(doc, "strata.memory.device_limt", "1G"); },
                                  {"did you mean 'strata.memory.device_limit'?"}));
}

TEST(ConfigOverride, MalformedAssignments) {
  json doc = minimal();
  EXPECT_TRUE(testing::fails_with([&] { apply_override(doc, "zero_optimization.stage"); },
                                  {"override 'zero_optimization.stage' has no '='"}));
  EXPECT_TRUE(testing::fails_with([&] { apply_override(doc, "=3"); }, {"has no key"}));
  EXPECT_TRUE(testing::fails_with([&] { apply_override(doc, "flux.enabled=true"); },
                                  {"unknown key 'flux'; valid keys at the top level:"}));
  EXPECT_TRUE(
      testing::fails_with([&] { apply_override(doc, "fp16.enabled.x=1"); },
                          {"unknown key 'fp16.enabled.x': fp16.enabled takes true or false"}));
  json scalar = {{"fp16", 5}};
  EXPECT_TRUE(testing::fails_with([&] { apply_override(scalar, "fp16.enabled=true"); },
                                  {"cannot set fp16.enabled: fp16 is 5, not an object"}));
}

// DeepSpeed keys Strata does not have can be set too; the parser judges them as in a file.
TEST(ConfigOverride, DeepSpeedKeysAreJudgedLikeInAFile) {
  json doc = minimal();
  apply_override(doc, "wandb.enabled=true");
  apply_override(doc, "dump_state=false");
  apply_override(doc, "optimizer.params.torch_adam=true");
  EXPECT_EQ(doc["wandb"]["enabled"], true);
  Problems problems;
  const Config c = check_config(doc, problems);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems.list()[0].kind, ProblemKind::not_implemented);
  EXPECT_NE(problems.list()[0].text.find("wandb asks for logging to Weights & Biases, a service "
                                         "reached over the network (not available without one)"),
            std::string::npos);
  EXPECT_EQ(c.notes.size(), 2u);
}

TEST(ConfigOverride, BadValuesAreReportedByTheParserWithTheKey) {
  json doc = minimal();
  apply_override(doc, "zero_optimization.stage=three");
  EXPECT_TRUE(testing::fails_with([&] { parse_config(doc); },
                                  {"zero_optimization.stage must be an integer, got \"three\""}));
}

TEST(ConfigOverride, MemoryFlags) {
  json doc = minimal();
  apply_memory_flags(doc, {"512MiB", "", "1TB"});
  const Config c = parse_config(doc);
  EXPECT_EQ(c.strata.memory.device_limit, 512u << 20);
  EXPECT_FALSE(c.strata.memory.host_limit.has_value());
  EXPECT_EQ(c.strata.memory.nvme_limit, 1'000'000'000'000u);
  EXPECT_TRUE(testing::fails_with(
      [&] {
        apply_memory_flags(doc, {"12 parsecs", "", ""});
      },
      {"--device-memory '12 parsecs' is not a size"}));
}

TEST(ConfigOverride, CommandLineOptionsApplyFlagsThenSets) {
  CLI::App app;
  ConfigOptions o;
  add_config_options(app, o, /*config_required=*/false);
  const char* argv[] = {"prog", "--set", "train_micro_batch_size_per_gpu=3", "--device-memory",
                        "2GiB", "--set", "strata.memory.device_limit=3GiB"};
  app.parse(static_cast<int>(std::size(argv)), argv);
  const Config c = o.load();
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 3);
  EXPECT_EQ(c.strata.memory.device_limit, std::uint64_t{3} << 30);  // --set is applied last
  CLI::App bad;
  ConfigOptions ob;
  add_config_options(bad, ob, false);
  const char* argv_bad[] = {"prog", "--host-memory", "lots"};
  EXPECT_THROW(bad.parse(3, argv_bad), CLI::ValidationError);
}

}  // namespace
}  // namespace strata::config
