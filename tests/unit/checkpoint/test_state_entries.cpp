// Optimizer-state entries ("owner#what": AdamW8bit's block absmax, Adafactor's row/column
// statistics): a manifest may hold them without "param" slices, a reader reads them by range,
// the model-compatibility check and the consolidated export leave them out, and a '#' name with
// parameter values is refused.
#include <gtest/gtest.h>

#include "ckpt_test_util.hpp"
#include "framework/checkpoint/compat.hpp"
#include "framework/checkpoint/consolidated.hpp"
#include "framework/checkpoint/manifest.hpp"
#include "framework/checkpoint/reader.hpp"
#include "framework/checkpoint/save.hpp"

namespace strata::checkpoint {
namespace {
namespace test_state_entries {  // file-local names, unique in a unity build

using testing::TempDir;
using testing::throws_with;

DatasetRecord rec(std::string kind, std::string name, Shape shape, std::int64_t b, std::int64_t e,
                  DType dt = DType::f32) {
  return DatasetRecord{"/" + kind + "/" + name, kind, name, shape, dt, b, e, 0x1234u};
}

ManifestHeader header() {
  ManifestHeader h;
  h.step = 3;
  h.layout = WorldLayout{1, 1, 1, 1};
  h.state.optimizer = "adamw8bit";
  return h;
}

TEST(StateEntries, AreAcceptedWithoutParamSlicesAndRoundTrip) {
  std::vector<ShardRecord> r(1);
  r[0] = ShardRecord{"rank_00000.h5", 0, 100, 1,
                     {rec("param", "w", Shape{2, 3}, 0, 6),
                      rec("exp_avg_q8", "w", Shape{2, 3}, 0, 6, DType::u8),
                      rec("exp_avg_absmax", "w#blocks", Shape{1}, 0, 1)}};
  const Manifest m = build_manifest(header(), r);
  ASSERT_EQ(m.params.size(), 2u);
  EXPECT_EQ(m.params[1].name, "w#blocks");
  EXPECT_EQ(m.params[1].dtype, DType::f32);
  const Manifest back = manifest_from_json(to_json(m));
  EXPECT_EQ(to_json(back), to_json(m));
  // The model has only w: the state entry is not "not in the model".
  EXPECT_TRUE(compatibility_differences(m, {{"w", Shape{2, 3}}}).empty());
  EXPECT_FALSE(compatibility_differences(m, {{"w", Shape{3, 2}}}).empty());
}

TEST(StateEntries, OnlyNamesWithTheSeparatorMayLackParamSlices) {
  std::vector<ShardRecord> r(1);
  r[0] = ShardRecord{"rank_00000.h5", 0, 100, 1,
                     {rec("param", "w", Shape{2}, 0, 2), rec("exp_avg_absmax", "blocks", Shape{1}, 0, 1)}};
  EXPECT_TRUE(throws_with([&] { build_manifest(header(), r); }, {"blocks: no 'param' slices"}));
  r[0].datasets = {rec("param", "w", Shape{2}, 0, 2), rec("param", "w#row", Shape{1}, 0, 1)};
  EXPECT_TRUE(throws_with([&] { build_manifest(header(), r); }, {"'param' slices on an optimizer-state entry"}));
}

TEST(StateEntries, AreReadByRangeAndLeftOutOfTheExport) {
  TempDir tmp;
  const std::vector<float> w{1, 2, 3, 4, 5, 6}, blocks{0.5f, 0.25f};
  const std::vector<std::uint8_t> codes{0, 1, 2, 253, 254, 255};
  std::vector<SliceRef> slices{
      SliceRef{"param", "w", Shape{2, 3}, DType::f32, 0, 6, w.data()},
      SliceRef{"exp_avg_q8", "w", Shape{2, 3}, DType::u8, 0, 6, codes.data()},
      SliceRef{"exp_avg_absmax", "w#blocks", Shape{2}, DType::f32, 0, 2, blocks.data()}};
  SaveSpec spec{tmp / "ck", 0, header(), {}};
  save_checkpoint(spec, slices, RankState{}, single_process_ok);
  const std::string dir = join_path(tmp / "ck", step_dir_name(3));
  CheckpointReader reader(dir);
  float b1 = 0;
  reader.read_range("exp_avg_absmax", "w#blocks", 1, 2, &b1, DType::f32);
  EXPECT_EQ(b1, 0.25f);
  std::vector<std::uint8_t> got(6);
  reader.read_range("exp_avg_q8", "w", 0, 6, got.data(), DType::u8);
  EXPECT_EQ(got, codes);
  const ExportResult e = export_consolidated(dir, tmp / "m.h5");
  EXPECT_EQ(e.params, 1u);
  EXPECT_EQ(e.elements, 6);
}

}  // namespace test_state_entries
}  // namespace
}  // namespace strata::checkpoint
