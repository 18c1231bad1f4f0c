// DeepSpeed's batch arithmetic: train_batch_size = micro × accumulation × data-parallel size.
#include <gtest/gtest.h>

#include "framework/config/config.hpp"
#include "tests/unit/config/expect_error.hpp"

namespace strata::config {
namespace {

Config batch(std::int64_t train, std::int64_t micro, std::int64_t accum) {
  json doc = json::object();
  if (train) doc["train_batch_size"] = train;
  if (micro) doc["train_micro_batch_size_per_gpu"] = micro;
  if (accum) doc["gradient_accumulation_steps"] = accum;
  return parse_config(doc);
}

void expect_resolved(Config c, std::int64_t dp, std::int64_t train, std::int64_t micro,
                     std::int64_t accum) {
  resolve_batch(c, dp);
  EXPECT_EQ(c.train_batch_size, train);
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, micro);
  EXPECT_EQ(c.gradient_accumulation_steps, accum);
  EXPECT_EQ(c.data_parallel_size, dp);
}

TEST(ConfigBatch, AnyTwoDetermineTheThird) {
  expect_resolved(batch(64, 4, 0), 2, 64, 4, 8);
  expect_resolved(batch(64, 0, 4), 2, 64, 8, 4);
  expect_resolved(batch(0, 4, 3), 5, 60, 4, 3);
  expect_resolved(batch(24, 4, 3), 2, 24, 4, 3);
}

TEST(ConfigBatch, OneGivenMeansNoAccumulation) {
  expect_resolved(batch(0, 8, 0), 4, 32, 8, 1);
  expect_resolved(batch(32, 0, 0), 4, 32, 8, 1);
  expect_resolved(batch(0, 8, 0), 1, 8, 8, 1);
}

TEST(ConfigBatch, DisagreementShowsTheNumbers) {
  Config c = batch(64, 8, 2);
  EXPECT_TRUE(testing::fails_with(
      [&] { resolve_batch(c, 2); },
      {"batch sizes disagree: train_batch_size 64 != train_micro_batch_size_per_gpu 8 × "
       "gradient_accumulation_steps 2 × data-parallel size 2 = 32"}));
}

TEST(ConfigBatch, UnderivableValuesShowTheNumbers) {
  Config a = batch(64, 8, 0);
  EXPECT_TRUE(testing::fails_with(
      [&] { resolve_batch(a, 3); },
      {"train_batch_size 64 is not divisible by train_micro_batch_size_per_gpu 8 × "
       "data-parallel size 3 = 24"}));
  Config b = batch(64, 0, 4);
  EXPECT_TRUE(testing::fails_with(
      [&] { resolve_batch(b, 3); },
      {"train_batch_size 64 is not divisible by gradient_accumulation_steps 4 × "
       "data-parallel size 3 = 12"}));
  Config d = batch(10, 0, 0);
  EXPECT_TRUE(
      testing::fails_with([&] { resolve_batch(d, 4); },
                          {"train_batch_size 10 is not divisible by the data-parallel size 4"}));
}

TEST(ConfigBatch, ResolvingAgainWithTheSameSizeIsANoOp) {
  Config c = batch(0, 4, 2);
  resolve_batch(c, 2);
  EXPECT_NO_THROW(resolve_batch(c, 2));
  EXPECT_EQ(c.train_batch_size, 16);
  // The resolved numbers no longer fit another data-parallel size.
  EXPECT_TRUE(testing::fails_with([&] { resolve_batch(c, 4); }, {"batch sizes disagree"}));
}

TEST(ConfigBatch, DataParallelSizeMustBePositive) {
  Config c = batch(0, 4, 0);
  EXPECT_TRUE(testing::fails_with([&] { resolve_batch(c, 0); }, {"data-parallel size is 0"}));
}

TEST(ConfigBatch, DataParallelSizeIsWorldOverModelParallel) {
  Config c = parse_config(json::parse(
      R"({"train_micro_batch_size_per_gpu": 1, "strata": {"tensor_parallel_size": 2, "pipeline_parallel_size": 2, "model": {"vocab_size": 256}}})"));
  EXPECT_EQ(data_parallel_size(c, 8), 2);
  EXPECT_EQ(data_parallel_size(c, 4), 1);
  EXPECT_TRUE(
      testing::fails_with([&] { data_parallel_size(c, 6); },
                          {"world size 6 is not divisible by strata.tensor_parallel_size 2 × "
                           "strata.pipeline_parallel_size 2 = 4"}));
  EXPECT_TRUE(testing::fails_with([&] { data_parallel_size(c, 0); }, {"world size is 0"}));
}

TEST(ConfigBatch, OverflowIsAnErrorNotAWrap) {
  Config c = batch(0, std::int64_t{1} << 40, std::int64_t{1} << 20);
  EXPECT_TRUE(testing::fails_with([&] { resolve_batch(c, 1 << 10); }, {"overflows"}));
}

}  // namespace
}  // namespace strata::config
