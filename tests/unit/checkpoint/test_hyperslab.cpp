// Hyperslab slices (SliceRef::run/stride): a tensor-parallel part of a parameter split along its
// second dimension writes its rows as one slice. The layout maps each element to the whole
// parameter; a saved checkpoint with a hyperslab beside flat slices reads back element for element
// across row boundaries, verifies, exports, records format_version 3 (2 without hyperslabs), and
// ill-formed layouts are refused.
#include <gtest/gtest.h>

#include <numeric>

#include "ckpt_test_util.hpp"
#include "framework/checkpoint/consolidated.hpp"
#include "framework/checkpoint/manifest.hpp"
#include "framework/checkpoint/reader.hpp"
#include "framework/checkpoint/save.hpp"
#include "framework/checkpoint/verify.hpp"

namespace strata::checkpoint {
namespace {
namespace test_hyperslab {

using testing::TempDir;

TEST(SliceLayout, MapsRowsOfAHyperslabToTheWholeParameter) {
  // Columns [2, 5) of a [4, 6] matrix: rows of 3 elements, 6 apart, from element 2.
  const SliceLayout l{2, 14, 3, 6};
  EXPECT_EQ(l.numel(), 12);
  EXPECT_EQ(l.extent_end(), 23);  // the last row ends at 3 * 6 + 5
  EXPECT_EQ(l.error(24), "");
  EXPECT_NE(l.error(22), "");  // reaches past a smaller parameter
  std::vector<std::int64_t> runs;
  l.for_each_run([&](std::int64_t b, std::int64_t n) {
    EXPECT_EQ(n, 3);
    runs.push_back(b);
  });
  EXPECT_EQ(runs, (std::vector<std::int64_t>{2, 8, 14, 20}));
  EXPECT_EQ(l.locate(2), (std::pair<std::int64_t, std::int64_t>{0, 3}));
  EXPECT_EQ(l.locate(9), (std::pair<std::int64_t, std::int64_t>{4, 2}));
  EXPECT_EQ(l.locate(5).first, -1);   // column 5: not in the slice
  EXPECT_EQ(l.locate(1).first, -1);   // before it
  EXPECT_EQ(l.locate(26).first, -1);  // past its last row
  EXPECT_NE((SliceLayout{0, 10, 3, 6}).error(100), "");  // not whole rows
  EXPECT_NE((SliceLayout{0, 12, 3, 2}).error(100), "");  // rows overlapping
  EXPECT_EQ((SliceLayout{0, 12, 0, 0}).error(12), "");   // flat
}

TEST(Hyperslab, SavedBesideFlatSlicesReadsBackVerifiesAndExports) {
  TempDir tmp;
  // w [4, 6]: columns [0, 2) and [5, 6) as hyperslabs, columns [2, 5) as one more; b flat.
  std::vector<float> whole(24);
  std::iota(whole.begin(), whole.end(), 100.0f);
  auto cols = [&](int c0, int c1) {
    std::vector<float> out;
    for (int r = 0; r < 4; ++r)
      for (int c = c0; c < c1; ++c) out.push_back(whole[static_cast<std::size_t>(r * 6 + c)]);
    return out;
  };
  const std::vector<float> a = cols(0, 2), m = cols(2, 5), z = cols(5, 6), b{1, 2, 3};
  auto slab = [](const char* kind, std::int64_t first, std::int64_t n, std::int64_t run,
                 const std::vector<float>& data) {
    SliceRef s{kind, "w", Shape{4, 6}, DType::f32, first, first + n, data.data()};
    s.run = run;
    s.stride = 6;
    return s;
  };
  std::vector<SliceRef> slices{slab("param", 0, 8, 2, a), slab("param", 2, 12, 3, m),
                               slab("param", 5, 4, 1, z),
                               SliceRef{"param", "b", Shape{3}, DType::f32, 0, 3, b.data()}};
  ManifestHeader h;
  h.step = 7;
  h.layout = WorldLayout{1, 1, 1, 1};
  SaveSpec spec{tmp / "ck", 0, h, {}};
  save_checkpoint(spec, slices, RankState{}, single_process_ok);
  const std::string dir = join_path(tmp / "ck", step_dir_name(7));
  CheckpointReader reader(dir);
  EXPECT_EQ(reader.manifest().format_version, 3);
  EXPECT_EQ(reader.read_f32("param", "w"), whole);
  // A range crossing rows and slices.
  std::vector<float> part(9);
  reader.read_range("param", "w", 4, 13, part.data(), DType::f32);
  EXPECT_EQ(part, std::vector<float>(whole.begin() + 4, whole.begin() + 13));
  const VerifyReport v = verify_checkpoint(dir);
  EXPECT_TRUE(v.ok()) << (v.faults.empty() ? "" : v.faults.front());
  const ExportResult e = export_consolidated(dir, tmp / "w.h5");
  EXPECT_EQ(e.elements, 27);
  // Without a hyperslab the manifest stays at format_version 2, readable by older builds.
  const std::vector<float> flat(whole);
  std::vector<SliceRef> plain{SliceRef{"param", "w", Shape{4, 6}, DType::f32, 0, 24, flat.data()}};
  SaveSpec spec2{tmp / "ck2", 0, h, {}};
  save_checkpoint(spec2, plain, RankState{}, single_process_ok);
  EXPECT_EQ(CheckpointReader(join_path(tmp / "ck2", step_dir_name(7))).manifest().format_version, 2);
}

TEST(Hyperslab, AGapBetweenRowsIsACoverageError) {
  TempDir tmp;
  const std::vector<float> a(8, 1.0f);
  SliceRef s{"param", "w", Shape{4, 6}, DType::f32, 0, 8, a.data()};
  s.run = 2;
  s.stride = 6;  // columns 0-1 only: columns 2-5 of every row are missing
  ManifestHeader h;
  h.step = 1;
  h.layout = WorldLayout{1, 1, 1, 1};
  SaveSpec spec{tmp / "ck", 0, h, {}};
  EXPECT_TRUE(testing::throws_with(
      [&] { save_checkpoint(spec, {s}, RankState{}, single_process_ok); },
      {"no rank file holds elements [2, 6) [8, 12)"}));
}

}  // namespace test_hyperslab
}  // namespace
}  // namespace strata::checkpoint
