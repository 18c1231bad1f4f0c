// Resharding on load: a checkpoint written by 1, 2, 3 or 4 ranks with uneven flat ranges (cut
// inside parameters) is read back exactly over any other partition, for values and optimizer
// state, in the stored or another dtype.
#include <gtest/gtest.h>

#include "ckpt_test_util.hpp"
#include "framework/checkpoint/reader.hpp"
#include "framework/core/half.hpp"

namespace strata::checkpoint {
namespace {

using testing::TempDir;

// Reads every parameter as `readers` ranks would: each reader takes its uneven flat range of the
// unit and reads the pieces of each parameter it covers; the assembled unit must equal the
// original.
void expect_reads_back(CheckpointReader& r, int readers, const std::string& kind) {
  const auto params = testing::toy_params();
  const std::int64_t n = testing::total_numel(params);
  const auto want = testing::flat_values(kind, n);
  std::vector<float> got(static_cast<std::size_t>(n), -999.0f);
  for (const auto& [lo, hi] : testing::uneven_ranges(n, readers)) {
    for (const FlatPiece& piece : split_flat_range(params, lo, hi))
      r.read_range(kind, params[piece.param].name, piece.begin, piece.end,
                   got.data() + piece.flat_begin, DType::f32);
  }
  EXPECT_EQ(got, want) << kind << " read by " << readers << " ranks";
}

TEST(Reshard, AnyWriterLayoutLoadsOnAnyReaderLayout) {
  TempDir tmp;
  for (int writers = 1; writers <= 4; ++writers) {
    const std::string dir = testing::save_toy(tmp / ("w" + std::to_string(writers)), 10, writers);
    CheckpointReader r(dir);
    EXPECT_EQ(r.manifest().layout.world, writers);
    EXPECT_EQ(r.manifest().files.size(), static_cast<std::size_t>(writers));
    for (int readers = 1; readers <= 4; ++readers)
      for (const char* kind : {"param", "exp_avg", "exp_avg_sq"})
        expect_reads_back(r, readers, kind);
  }
}

TEST(Reshard, SlicesCrossingParameterBoundariesAreSplitPerParameter) {
  TempDir tmp;
  const std::string dir = testing::save_toy(tmp.str(), 1, 4);
  CheckpointReader r(dir);
  const ParamEntry* bias =
      r.manifest().find("transformer.h.0.ln_1.bias");  // flat [35, 40); cut at 37
  ASSERT_NE(bias, nullptr);
  std::vector<std::pair<std::int64_t, std::int64_t>> param_slices;
  for (const auto& s : bias->slices)
    if (s.kind == "param") param_slices.push_back({s.begin, s.end});
  EXPECT_EQ(param_slices, (std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 2}, {2, 5}}));
  // A range spanning both pieces, and single elements on each side of the cut.
  std::vector<float> v(5);
  r.read_range("param", bias->name, 0, 5, v.data(), DType::f32);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(v[i], testing::value_at("param", 35 + i));
  float one = 0;
  r.read_range("exp_avg", bias->name, 1, 2, &one, DType::f32);
  EXPECT_EQ(one, testing::value_at("exp_avg", 36));
  r.read_range("exp_avg", bias->name, 2, 3, &one, DType::f32);
  EXPECT_EQ(one, testing::value_at("exp_avg", 37));
}

TEST(Reshard, Bf16ParametersKeepTheirBitsAndConvertOnRequest) {
  TempDir tmp;
  const std::string dir = testing::save_toy(tmp.str(), 3, 3, DType::bf16);
  CheckpointReader r(dir);
  const auto params = testing::toy_params();
  const FlatParam& w = params[2];
  EXPECT_EQ(r.manifest().find(w.name)->dtype, DType::bf16);
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(w.shape.numel()));
  r.read_range("param", w.name, 0, w.shape.numel(), bits.data(), DType::bf16);
  std::vector<float> f(bits.size());
  r.read_range("param", w.name, 0, w.shape.numel(), f.data(), DType::f32);
  for (std::size_t i = 0; i < bits.size(); ++i) {
    const float want = testing::value_at("param", w.offset + static_cast<std::int64_t>(i));
    EXPECT_EQ(bits[i], f32_to_bf16(want));
    EXPECT_EQ(f[i], bf16_to_f32(f32_to_bf16(want)));
  }
}

TEST(Reshard, StateRoundTrips) {
  TempDir tmp;
  const std::string dir = testing::save_toy(tmp.str(), 40, 3);
  CheckpointReader r(dir);
  EXPECT_EQ(r.step(), 40);
  EXPECT_EQ(r.state().optimizer, "adamw");
  EXPECT_EQ(r.state().optimizer_updates, 40);
  ASSERT_TRUE(r.state().loss_scaler);
  EXPECT_EQ(r.state().loss_scaler->cur_scale, 32768.0);
  EXPECT_EQ(r.state().loss_scaler->last_overflow_iter, 33);
  ASSERT_TRUE(r.state().sampler);
  EXPECT_EQ(r.state().sampler->position, 640u);
  for (int rank = 0; rank < 3; ++rank)
    EXPECT_EQ(r.rank_state(rank).rngs.at("dropout").counter,
              static_cast<std::uint64_t>(4000 + rank));
  EXPECT_THROW(r.rank_state(3), UserError);
  EXPECT_EQ(r.manifest().config["strata"]["model"]["n_layer"], 1);
}

TEST(Reshard, BadRequestsAreUserErrors) {
  TempDir tmp;
  CheckpointReader r(testing::save_toy(tmp.str(), 1, 2));
  float x[4];
  EXPECT_TRUE(testing::throws_with<UserError>(
      [&] { r.read_range("param", "nope", 0, 1, x, DType::f32); }, {"no parameter 'nope'"}));
  EXPECT_TRUE(testing::throws_with<UserError>(
      [&] { r.read_range("momentum", "transformer.ln_f.weight", 0, 1, x, DType::f32); },
      {"no 'momentum'", "exp_avg, exp_avg_sq, param"}));
  EXPECT_THROW(r.read_range("param", "transformer.ln_f.weight", 3, 6, x, DType::f32), UserError);
  EXPECT_FALSE(r.has("momentum", "transformer.ln_f.weight"));
  EXPECT_TRUE(r.has("exp_avg", "transformer.ln_f.weight"));
}

}  // namespace
}  // namespace strata::checkpoint
