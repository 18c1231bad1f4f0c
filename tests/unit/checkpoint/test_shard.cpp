// Rank files: slices and rank state round-trip bit-exactly, every dataset describes itself, and
// the commit protocol never leaves a file under its final name unless it is complete.
#include <gtest/gtest.h>

#include <filesystem>

#include "ckpt_test_util.hpp"
#include "framework/checkpoint/checksum.hpp"
#include "framework/checkpoint/h5_io.hpp"
#include "framework/checkpoint/shard_file.hpp"
#include "framework/checkpoint/shard_writer.hpp"
#include "framework/core/half.hpp"

namespace strata::checkpoint {
namespace {

using testing::TempDir;

TEST(Shard, SlicesAndStateRoundTrip) {
  TempDir tmp;
  const std::string dir = tmp / "step_00000005";
  std::vector<float> f(12);
  for (std::size_t i = 0; i < f.size(); ++i)
    f[i] = std::ldexp(1.0f + static_cast<float>(i), -3) - 0.7f;
  std::vector<std::uint16_t> b(6);
  for (std::size_t i = 0; i < b.size(); ++i)
    b[i] = f32_to_bf16(static_cast<float>(i) * 1.5f - 2.0f);

  RankState rs;
  rs.rngs["dropout"] = RngRecord{42, 1000};
  ShardRecord rec;
  {
    ShardWriter w(dir, 1, 2, 5);
    w.add(SliceRef{"param", "a.weight", Shape{4, 5}, DType::f32, 8, 20, f.data()});
    w.add(SliceRef{"param", "b.bias", Shape{6}, DType::bf16, 0, 6, b.data()});
    w.add(SliceRef{"exp_avg", "a.weight", Shape{4, 5}, DType::f32, 8, 20, f.data()});
    w.set_rank_state(rs);
    EXPECT_TRUE(std::filesystem::exists(w.temp_path()));
    EXPECT_FALSE(std::filesystem::exists(w.final_path()));
    rec = w.commit();
    EXPECT_FALSE(std::filesystem::exists(w.temp_path()));
  }
  EXPECT_EQ(rec.file, "rank_00001.h5");
  ASSERT_EQ(rec.datasets.size(), 3u);
  EXPECT_EQ(rec.bytes, std::filesystem::file_size(dir + "/rank_00001.h5"));

  ShardFile sf(dir + "/rank_00001.h5");
  EXPECT_EQ(sf.header().rank, 1);
  EXPECT_EQ(sf.header().world, 2);
  EXPECT_EQ(sf.header().step, 5);
  const auto scanned = sf.scan();
  ASSERT_EQ(scanned.size(), 3u);
  // Creation order: exp_avg group was created after param, so param datasets come first.
  EXPECT_EQ(scanned[0].path, "/param/a.weight");
  EXPECT_EQ(scanned[1].path, "/param/b.bias");
  EXPECT_EQ(scanned[2].path, "/exp_avg/a.weight");
  const DatasetRecord& a = scanned[0];
  EXPECT_EQ(a.name, "a.weight");
  EXPECT_EQ(a.global_shape, (Shape{4, 5}));
  EXPECT_EQ(a.begin, 8);
  EXPECT_EQ(a.end, 20);
  EXPECT_EQ(a.checksum, rec.datasets[0].checksum);
  EXPECT_EQ(sf.checksum(a), a.checksum);

  std::vector<float> back(12);
  sf.read(a, 0, 12, back.data());
  EXPECT_EQ(0, std::memcmp(back.data(), f.data(), 48));
  std::vector<std::uint16_t> bback(6);
  EXPECT_EQ(scanned[1].dtype, DType::bf16);
  sf.read(scanned[1], 0, 6, bback.data());
  EXPECT_EQ(bback, b);
  EXPECT_EQ(sf.rank_state(nullptr), rs);
}

TEST(Shard, DatasetsAreSelfDescribingForOtherTools) {
  TempDir tmp;
  std::vector<float> f(3, 1.0f);
  ShardWriter w(tmp / "s", 0, 1, 0);
  w.add(SliceRef{"param", "x", Shape{2, 3}, DType::f32, 3, 6, f.data()});
  w.commit();
  h5::Id file = h5::open_file(tmp / "s/rank_00000.h5");
  h5::Id ds = h5::open_dataset(file.get(), "/param/x");
  EXPECT_EQ(h5::read_attr_string(ds.get(), "global_name"), "x");
  EXPECT_EQ(h5::read_attr_i64s(ds.get(), "global_shape"), (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(h5::read_attr_i64(ds.get(), "slice_begin"), 3);
  EXPECT_EQ(h5::read_attr_i64(ds.get(), "slice_end"), 6);
  EXPECT_EQ(h5::read_attr_string(ds.get(), "dtype"), "f32");
  EXPECT_EQ(h5::read_attr_string(ds.get(), "checksum"), format_checksum(crc32(f.data(), 12)));
  EXPECT_EQ(h5::read_attr_string(file.get(), "format"), "strata-checkpoint-shard");
}

TEST(Shard, TwoSlicesOfOneParameterInOneFile) {
  TempDir tmp;
  std::vector<float> f(4, 2.0f);
  ShardWriter w(tmp / "s", 0, 1, 0);
  w.add(SliceRef{"param", "x", Shape{10}, DType::f32, 0, 2, f.data()});
  w.add(SliceRef{"param", "x", Shape{10}, DType::f32, 6, 10, f.data()});
  const auto rec = w.commit();
  ASSERT_EQ(rec.datasets.size(), 2u);
  EXPECT_EQ(rec.datasets[1].path, "/param/x@6");
}

TEST(Shard, UncommittedWriterLeavesNothing) {
  TempDir tmp;
  std::string tmp_path;
  {
    ShardWriter w(tmp / "s", 0, 1, 0);
    tmp_path = w.temp_path();
    std::vector<float> f(2);
    w.add(SliceRef{"param", "x", Shape{2}, DType::f32, 0, 2, f.data()});
  }
  EXPECT_FALSE(std::filesystem::exists(tmp_path));
  EXPECT_FALSE(std::filesystem::exists(tmp / "s/rank_00000.h5"));
}

TEST(Shard, BadSlicesAreRejected) {
  TempDir tmp;
  ShardWriter w(tmp / "s", 0, 1, 0);
  std::vector<float> f(4);
  EXPECT_THROW(w.add(SliceRef{"param", "x", Shape{3}, DType::f32, 0, 4, f.data()}),
               Error);  // past the end
  EXPECT_THROW(w.add(SliceRef{"param", "x", Shape{3}, DType::f32, 2, 2, f.data()}),
               Error);  // empty
  EXPECT_THROW(w.add(SliceRef{"param", "a/b", Shape{3}, DType::f32, 0, 1, f.data()}), Error);
  EXPECT_THROW(w.add(SliceRef{"Param", "x", Shape{3}, DType::f32, 0, 1, f.data()}), Error);
  EXPECT_THROW(w.add(SliceRef{"state", "x", Shape{3}, DType::f32, 0, 1, f.data()}), Error);
}

}  // namespace
}  // namespace strata::checkpoint
