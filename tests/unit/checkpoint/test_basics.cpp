// Checksums, names, flat-range splitting and JSON state: the small pieces under the format.
#include <gtest/gtest.h>

#include "ckpt_test_util.hpp"
#include "framework/checkpoint/checksum.hpp"
#include "framework/checkpoint/flat_range.hpp"
#include "framework/checkpoint/naming.hpp"
#include "framework/checkpoint/train_state.hpp"

namespace strata::checkpoint {
namespace {

TEST(Checksum, MatchesStandardCrc32) {
  // The CRC-32 check value (same as Python's zlib.crc32(b"123456789")).
  EXPECT_EQ(crc32("123456789", 9), 0xcbf43926u);
  // Incremental equals one shot.
  EXPECT_EQ(crc32("6789", 4, crc32("12345", 5)), 0xcbf43926u);
  EXPECT_EQ(format_checksum(0xcbf43926u), "crc32:cbf43926");
  EXPECT_EQ(parse_checksum("crc32:cbf43926"), 0xcbf43926u);
  EXPECT_FALSE(parse_checksum("crc32:CBF4392"));
  EXPECT_FALSE(parse_checksum("md5:cbf43926"));
  EXPECT_FALSE(parse_checksum("crc32:cbf4392g"));
}

TEST(Naming, StepAndRankNamesRoundTrip) {
  EXPECT_EQ(step_dir_name(100), "step_00000100");
  EXPECT_EQ(parse_step_dir_name("step_00000100"), 100);
  EXPECT_EQ(parse_step_dir_name("step_123456789"), 123456789);
  EXPECT_FALSE(parse_step_dir_name("step_100"));
  EXPECT_FALSE(parse_step_dir_name("step_0000010x"));
  EXPECT_FALSE(parse_step_dir_name("step_00000100.tmp"));
  EXPECT_EQ(rank_file_name(3), "rank_00003.h5");
  EXPECT_EQ(parse_rank_file_name("rank_00003.h5"), 3);
  EXPECT_FALSE(parse_rank_file_name("rank_00003.h5.tmp"));
}

TEST(FlatRange, RangeInsideAndAcrossParameters) {
  const auto params = testing::toy_params();  // sizes 35, 5, 75, 5 at offsets 0, 35, 40, 115
  auto pieces = split_flat_range(params, 33, 42);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].param, 0u);
  EXPECT_EQ(pieces[0].begin, 33);
  EXPECT_EQ(pieces[0].end, 35);
  EXPECT_EQ(pieces[1].param, 1u);
  EXPECT_EQ(pieces[1].begin, 0);
  EXPECT_EQ(pieces[1].end, 5);
  EXPECT_EQ(pieces[1].flat_begin, 35);
  EXPECT_EQ(pieces[2].param, 2u);
  EXPECT_EQ(pieces[2].begin, 0);
  EXPECT_EQ(pieces[2].end, 2);
  // Padding beyond the last parameter is never a slice.
  pieces = split_flat_range(params, 118, 128);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].begin, 3);
  EXPECT_EQ(pieces[0].end, 5);
  EXPECT_TRUE(split_flat_range(params, 120, 128).empty());

  std::vector<float> shard(9);
  const auto slices = slices_for_flat_range(params, 33, 42, kExpAvg, shard.data(), DType::f32);
  ASSERT_EQ(slices.size(), 3u);
  EXPECT_EQ(slices[1].data, shard.data() + 2);
  EXPECT_EQ(slices[2].data, shard.data() + 7);
  EXPECT_EQ(slices[2].global_shape, (Shape{15, 5}));
}

TEST(FlatRange, OverlappingParametersAreRejected) {
  std::vector<FlatParam> p = {{"a", Shape{4}, 0}, {"b", Shape{4}, 2}};
  EXPECT_THROW(split_flat_range(p, 0, 8), Error);
}

TEST(TrainState, JsonRoundTripIsExact) {
  TrainState s;
  s.optimizer = "adamw";
  s.optimizer_updates = 123;
  s.scheduler_steps = 122;
  s.loss_scaler = LossScalerRecord{true, 0.1 + 0.2, 9, -1, 2};
  s.sampler = SamplerRecord{~std::uint64_t{0} - 5, 3};
  s.extra = {{"note", "x"}};
  EXPECT_EQ(train_state_from_json(json::parse(to_json(s).dump())), s);

  RankState r;
  r.rngs["dropout"] = RngRecord{~std::uint64_t{0}, 77};
  r.rngs["sample"] = RngRecord{1, 2};
  EXPECT_EQ(rank_state_from_json(json::parse(to_json(r).dump())), r);
}

TEST(TrainState, StrictParsingNamesTheKey) {
  json j = to_json(TrainState{});
  j["surprise"] = 1;
  EXPECT_TRUE(
      testing::throws_with<Error>([&] { train_state_from_json(j); }, {"unknown key 'surprise'"}));
  j = to_json(TrainState{});
  j["optimizer_updates"] = "ten";
  EXPECT_TRUE(
      testing::throws_with<Error>([&] { train_state_from_json(j); }, {"optimizer_updates"}));
}

}  // namespace
}  // namespace strata::checkpoint
