// The manifest: built from rank records only when they form a whole checkpoint, round-trips
// through JSON, and is parsed strictly.
#include <gtest/gtest.h>

#include "ckpt_test_util.hpp"
#include "framework/checkpoint/checkpoint_error.hpp"
#include "framework/checkpoint/durable_fs.hpp"
#include "framework/checkpoint/manifest.hpp"

namespace strata::checkpoint {
namespace {

using testing::throws_with;

DatasetRecord rec(std::string kind, std::string name, Shape shape, std::int64_t b, std::int64_t e) {
  return DatasetRecord{"/" + kind + "/" + name, kind, name, shape, DType::f32, b, e, 0x1234u};
}

ManifestHeader header(int world) {
  ManifestHeader h;
  h.step = 7;
  h.layout = WorldLayout{world, world, 1, 1};
  return h;
}

TEST(Manifest, BuildsFromCompleteRecords) {
  std::vector<ShardRecord> r(2);
  r[0] = ShardRecord{"rank_00000.h5",
                     0,
                     100,
                     1,
                     {rec("param", "w", Shape{2, 3}, 0, 4), rec("param", "b", Shape{3}, 0, 3)}};
  r[1] =
      ShardRecord{"rank_00001.h5",
                  1,
                  100,
                  2,
                  {rec("param", "w", Shape{2, 3}, 4, 6), rec("exp_avg", "w", Shape{2, 3}, 0, 6)}};
  const Manifest m = build_manifest(header(2), r);
  ASSERT_EQ(m.params.size(), 2u);
  EXPECT_EQ(m.params[0].name, "w");  // order of the rank files, values first
  EXPECT_EQ(m.params[0].slices.size(), 3u);
  EXPECT_EQ(m.params[0].kinds(), (std::vector<std::string>{"exp_avg", "param"}));
  EXPECT_EQ(m.files.size(), 2u);
  EXPECT_EQ(m.total_bytes(), 200u);

  const Manifest back = manifest_from_json(json::parse(to_json(m).dump()));
  EXPECT_EQ(to_json(back), to_json(m));
}

TEST(Manifest, GapsMissingRanksAndConflictsAreNamed) {
  std::vector<ShardRecord> r(2);
  r[0] = ShardRecord{"rank_00000.h5", 0, 1, 0, {rec("param", "w", Shape{10}, 0, 4)}};
  r[1] = ShardRecord{"rank_00001.h5", 1, 1, 0, {rec("param", "w", Shape{10}, 6, 10)}};
  EXPECT_TRUE(throws_with<Error>([&] { build_manifest(header(2), r); }, {"param w", "[4, 6)"}));

  EXPECT_TRUE(throws_with<Error>([&] { build_manifest(header(3), r); }, {"no file from rank 2"}));

  r[1].datasets = {rec("param", "w", Shape{5, 2}, 4, 10)};
  EXPECT_TRUE(throws_with<Error>([&] { build_manifest(header(2), r); }, {"w", "[5, 2]", "[10]"}));

  r[1].datasets = {rec("param", "w", Shape{10}, 4, 10), rec("exp_avg", "w", Shape{10}, 0, 9)};
  EXPECT_TRUE(throws_with<Error>([&] { build_manifest(header(2), r); }, {"exp_avg w", "[9, 10)"}));

  r[1].datasets = {rec("param", "w", Shape{10}, 4, 10), rec("exp_avg", "only_m", Shape{10}, 0, 10)};
  EXPECT_TRUE(
      throws_with<Error>([&] { build_manifest(header(2), r); }, {"only_m", "no 'param' slices"}));

  ManifestHeader bad = header(2);
  bad.layout.tp = 2;
  r[1].datasets = {rec("param", "w", Shape{10}, 4, 10)};
  EXPECT_TRUE(
      throws_with<Error>([&] { build_manifest(bad, r); }, {"world 2 is not dp 2 x tp 2 x pp 1"}));
}

TEST(Manifest, StrictParsing) {
  std::vector<ShardRecord> r(1);
  r[0] = ShardRecord{"rank_00000.h5", 0, 1, 0, {rec("param", "w", Shape{4}, 0, 4)}};
  const json good = to_json(build_manifest(header(1), r));
  json j = good;
  j["params"][0]["slices"][0]["end"] = 5;
  EXPECT_TRUE(throws_with<Error>([&] { manifest_from_json(j); }, {"param w", "[0, 5)"}));
  j = good;
  j["extra_key"] = true;
  EXPECT_TRUE(throws_with<Error>([&] { manifest_from_json(j); }, {"unknown key 'extra_key'"}));
  j = good;
  j["format_version"] = 99;
  EXPECT_TRUE(throws_with<Error>([&] { manifest_from_json(j); }, {"format_version 99"}));
  j = good;
  j["params"][0]["slices"][0]["checksum"] = "crc32:xyz";
  EXPECT_TRUE(throws_with<Error>([&] { manifest_from_json(j); }, {"checksum"}));
  j = good;
  j["params"][0]["slices"][0]["file"] = "rank_00009.h5";
  EXPECT_TRUE(throws_with<Error>([&] { manifest_from_json(j); }, {"rank_00009.h5"}));
}

TEST(Manifest, ReadNamesTheManifestFile) {
  testing::TempDir tmp;
  EXPECT_TRUE(throws_with<CheckpointError>([&] { read_manifest(tmp.str()); },
                                           {"manifest.json", "no manifest"}));
  write_file_atomic(tmp / "manifest.json", "{\"format\": \"strata-checkpoint\", ");
  EXPECT_TRUE(throws_with<CheckpointError>([&] { read_manifest(tmp.str()); },
                                           {"manifest.json", "not valid JSON"}));
}

}  // namespace
}  // namespace strata::checkpoint
