// Config files: missing files, JSON syntax errors with line:column, duplicate keys, errors
// naming the file, and edit distance for suggestions.
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>

#include "framework/config/config.hpp"
#include "framework/config/suggest.hpp"
#include "tests/unit/config/expect_error.hpp"

namespace strata::config {
namespace {

class ConfigFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("strata_config_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const auto p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  std::filesystem::path dir_;
};

TEST_F(ConfigFile, MissingFileNamesIt) {
  const std::string p = (dir_ / "nope.json").string();
  EXPECT_TRUE(testing::fails_with([&] { load_config(p); },
                                  {"cannot open config file '" + p + "'", "No such file"}));
}

TEST_F(ConfigFile, DirectoryIsNotAFile) {
  EXPECT_TRUE(testing::fails_with([&] { load_config(dir_.string()); }, {"it is a directory"}));
}

TEST_F(ConfigFile, SyntaxErrorGivesLineAndColumn) {
  const std::string p =
      write("bad.json", "{\n  \"train_batch_size\": 8,\n  \"fp16\": {\"enabled\": tru}\n}\n");
  EXPECT_TRUE(testing::fails_with([&] { load_config(p); }, {p + ":3:", "invalid JSON"}));
  const std::string q = write("trailing.json", "{\"train_batch_size\": 8,}\n");
  EXPECT_TRUE(testing::fails_with([&] { load_config(q); }, {q + ":1:", "invalid JSON"}));
}

TEST_F(ConfigFile, DuplicateKeysAreRefused) {
  const std::string p = write(
      "dup.json", R"({"train_batch_size": 8, "zero_optimization": {"stage": 1, "stage": 2}})");
  EXPECT_TRUE(testing::fails_with([&] { load_config(p); },
                                  {p, "key 'zero_optimization.stage' appears twice"}));
}

TEST_F(ConfigFile, ValidationErrorsNameTheFile) {
  const std::string p = write("typo.json", R"({"train_micro_batch_size_per_gp": 8})");
  EXPECT_TRUE(testing::fails_with([&] { load_config(p); },
                                  {p + ": unknown key 'train_micro_batch_size_per_gp'",
                                   "did you mean 'train_micro_batch_size_per_gpu'?"}));
}

TEST_F(ConfigFile, LoadsWithOverrides) {
  const std::string p = write(
      "ok.json", R"({"train_micro_batch_size_per_gpu": 8, "zero_optimization": {"stage": 1}})");
  const Config c = load_config(p, {"zero_optimization.stage=2", "strata.memory.host_limit=4GiB"});
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 8);
  EXPECT_EQ(c.zero_optimization.stage, 2);
  EXPECT_EQ(c.strata.memory.host_limit, std::uint64_t{4} << 30);
  EXPECT_TRUE(testing::fails_with([&] { load_config(p, {"zero_optimization.stgae=2"}); },
                                  {"--set zero_optimization.stgae=2: unknown key"}));
  EXPECT_TRUE(testing::fails_with([&] { load_config(p, {"zero_optimization.stage=7"}); },
                                  {p + " with --set overrides: zero_optimization.stage is 7"}));
}

TEST(ConfigSuggest, EditDistanceCountsASwapAsOne) {
  EXPECT_EQ(edit_distance("stgae", "stage"), 1u);
  EXPECT_EQ(edit_distance("train_micro_batch_size_per_gp", "train_micro_batch_size_per_gpu"), 1u);
  EXPECT_EQ(edit_distance("Stage", "stage"), 0u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(ConfigSuggest, ClosestOnlyWhenPlausible) {
  const std::vector<std::string> keys = {"stage", "overlap_comm", "reduce_bucket_size",
                                         "offload_param"};
  EXPECT_EQ(closest("stgae", keys), "stage");
  EXPECT_EQ(closest("reduce_bucket", keys), "reduce_bucket_size");  // a prefix
  EXPECT_EQ(closest("ofload_param", keys), "offload_param");
  EXPECT_EQ(closest("tensorboard", keys), std::nullopt);
}

}  // namespace
}  // namespace strata::config
