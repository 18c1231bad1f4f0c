// The fast data path under rank files: CRC-32 by carry-less multiplication (fused with a copy)
// against a bitwise reference; RawWriter writing exact byte ranges into a file someone else laid
// out (whole blocks with O_DIRECT, neighbours untouched); rank files whose datasets lie back to
// back so that a staging arena goes to the disk in one request; reads of a range that still
// checksum the whole dataset.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "ckpt_test_util.hpp"
#include "framework/checkpoint/checkpoint_error.hpp"
#include "framework/checkpoint/checksum.hpp"
#include "framework/checkpoint/h5_io.hpp"
#include "framework/checkpoint/raw_io.hpp"
#include "framework/checkpoint/reader.hpp"
#include "framework/checkpoint/shard_file.hpp"
#include "framework/checkpoint/shard_writer.hpp"
#include "framework/checkpoint/staging.hpp"

namespace strata::checkpoint {
namespace {

using testing::TempDir;

// CRC-32 (zlib's) one bit at a time: the definition, independent of any table or instruction.
std::uint32_t crc32_reference(const unsigned char* p, std::size_t n, std::uint32_t crc = 0) {
  crc = ~crc;
  for (std::size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

std::vector<unsigned char> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

TEST(Checksum, FastCrcMatchesTheDefinitionAtEveryLengthAlignmentAndSeed) {
  const auto data = random_bytes(70000, 1);
  std::mt19937_64 rng(2);
  std::vector<unsigned char> dst(70000 + 128);
  for (int t = 0; t < 600; ++t) {
    // Short lengths around the 16- and 64-byte folding steps, then long ones.
    const std::size_t n = t < 300 ? static_cast<std::size_t>(t) : rng() % 65000;
    const std::size_t off = rng() % 64;
    const std::uint32_t seed = t % 3 == 0 ? 0u : static_cast<std::uint32_t>(rng());
    const std::uint32_t want = crc32_reference(data.data() + off, n, seed);
    ASSERT_EQ(crc32(data.data() + off, n, seed), want) << "n " << n << " offset " << off;
    // The copying variant: same CRC, exact copy, nothing written past the end.
    std::fill(dst.begin(), dst.end(), 0xAB);
    const std::size_t doff = (off * 7) % 64;
    ASSERT_EQ(crc32_copy(dst.data() + doff, data.data() + off, n, seed), want) << "n " << n;
    ASSERT_TRUE(std::equal(data.begin() + static_cast<std::ptrdiff_t>(off),
                           data.begin() + static_cast<std::ptrdiff_t>(off + n),
                           dst.begin() + static_cast<std::ptrdiff_t>(doff)));
    ASSERT_EQ(dst[doff + n], 0xAB);
    if (doff > 0) {
      ASSERT_EQ(dst[doff - 1], 0xAB);
    }
  }
  // Split anywhere: incremental equals one shot.
  EXPECT_EQ(crc32(data.data() + 1000, 50000, crc32(data.data(), 1000)),
            crc32_reference(data.data(), 51000));
}

// A file of `size` bytes of 0xEE, standing in for one HDF5 laid out.
std::string filler_file(const TempDir& tmp, std::size_t size) {
  const std::string path = tmp / "laid_out.bin";
  std::ofstream(path, std::ios::binary) << std::string(size, '\xEE');
  return path;
}

std::vector<unsigned char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(in), {});
}

TEST(RawWriter, WritesExactlyItsRangesAndLeavesEveryOtherByte) {
  TempDir tmp;
  const std::size_t size = 24u << 20;
  const std::string path = filler_file(tmp, size);
  const auto src = random_bytes(size, 3);
  // (offset, length, how): back-to-back copied ranges crossing 8 MiB bounce buffers, a gap,
  // ranges inside one block, a borrowed range aligned like its offset, a borrowed one that is not.
  struct Range {
    std::uint64_t offset;
    std::size_t n;
    char how;  // 'c' copy, 'b' borrowed
  };
  const std::vector<Range> ranges = {{1000, 5000, 'c'},
                                     {6000, 9u << 20, 'c'},
                                     {6000 + (9u << 20), 3, 'c'},
                                     {(9u << 20) + 7000, 10, 'c'},
                                     {(10u << 20) + 100, 50, 'c'},
                                     {(10u << 20) + 150, 4000, 'c'},
                                     {12u << 20, 3u << 20, 'b'},
                                     {(15u << 20) + 8192, 1u << 20, 'b'},
                                     {(17u << 20) + 5, 1u << 20, 'b'}};
  std::vector<bool> written(size, false);
  std::uint64_t requests = 0;
  bool direct = false;
  {
    RawWriter w(path);
    direct = w.direct();
    for (const Range& r : ranges) {
      const unsigned char* p = src.data() + r.offset;
      if (r.how == 'c')
        EXPECT_EQ(w.write(r.offset, p, r.n), crc32_reference(p, r.n));
      else
        w.write_borrowed(r.offset, p, r.n);
      for (std::size_t i = 0; i < r.n; ++i) written[r.offset + i] = true;
    }
    w.sync_and_close();
    requests = w.direct_requests();
    EXPECT_EQ(w.direct(), direct);
  }
  const auto out = read_all(path);
  ASSERT_EQ(out.size(), size);
  for (std::size_t i = 0; i < size; ++i)
    ASSERT_EQ(out[i], written[i] ? src[i] : 0xEE) << "byte " << i;
  if (direct) {
    EXPECT_GT(requests, 0u);
  } else {
    EXPECT_EQ(requests, 0u);
  }
}

TEST(RawWriter, OneAlignedBorrowedRunIsOneDirectRequest) {
  TempDir tmp;
  const std::string path = filler_file(tmp, 4u << 20);
  AlignedBuffer buf = aligned_buffer(2u << 20);
  for (std::size_t i = 0; i < (2u << 20); ++i) buf.get()[i] = static_cast<unsigned char>(i * 7);
  RawWriter w(path);
  if (!w.direct()) GTEST_SKIP() << "no O_DIRECT on " << path;
  // Three consecutive pieces of one aligned buffer at an aligned offset: one run, one request.
  w.write_borrowed(1u << 20, buf.get(), 1000);
  w.write_borrowed((1u << 20) + 1000, buf.get() + 1000, 500000);
  w.write_borrowed((1u << 20) + 501000, buf.get() + 501000, (2u << 20) - 501000);
  w.sync_and_close();
  EXPECT_EQ(w.direct_requests(), 1u);
  EXPECT_EQ(w.direct_bytes(), 2u << 20);
  const auto out = read_all(path);
  EXPECT_TRUE(std::equal(buf.get(), buf.get() + (2u << 20), out.begin() + (1 << 20)));
}

TEST(RawWriter, MissingFileIsAnError) {
  TempDir tmp;
  EXPECT_THROW(RawWriter(tmp / "nope.bin"), Error);
}

TEST(RawReader, ReadsAheadInOrderRestartsAnywhereAndRefusesPastTheEnd) {
  TempDir tmp;
  const std::size_t size = (20u << 20) + 1234;  // not a whole number of blocks
  const auto data = random_bytes(size, 5);
  const std::string path = tmp / "f.bin";
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(size));
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  {
    RawReader r(path, fd);
    std::vector<unsigned char> out(size);
    // In order, in pieces that straddle the read-ahead buffers, to the last byte.
    std::uint64_t at = 0;
    std::mt19937_64 rng(6);
    while (at < size) {
      const std::size_t n = std::min<std::size_t>(size - at, 1 + rng() % (3u << 20));
      ASSERT_EQ(r.read(at, out.data() + at, n), crc32_reference(data.data() + at, n)) << at;
      at += n;
    }
    EXPECT_EQ(out, data);
    // Anywhere else (backwards, forwards), and continuing a checksum.
    for (const auto& [off, n] : std::vector<std::pair<std::uint64_t, std::size_t>>{
             {5, 100}, {(17u << 20) + 3, 3u << 20}, {4096, 4096}, {size - 1, 1}}) {
      std::vector<unsigned char> piece(n);
      EXPECT_EQ(r.read(off, piece.data(), n, 77u), crc32_reference(data.data() + off, n, 77u));
      EXPECT_TRUE(std::equal(piece.begin(), piece.end(), data.begin() + static_cast<long>(off)));
    }
    r.idle();  // buffers freed; reading again starts over
    std::vector<unsigned char> piece(10);
    EXPECT_EQ(r.read(1000, piece.data(), 10), crc32_reference(data.data() + 1000, 10));
    EXPECT_THROW(r.read(size - 5, piece.data(), 10), Error);  // the file is shorter
  }
  ::close(fd);
}

// A staged save: the datasets lie back to back from an aligned offset in the order they were
// added, so an arena's slices reach the disk in one O_DIRECT request, untouched by a copy.
TEST(RawWriter, StagedArenaGoesToDiskInOneRequest) {
  TempDir tmp;
  MemoryLedger ledger;
  const std::vector<std::int64_t> sizes = {100003, 383, 1, 50001, 4096, 77};
  std::vector<std::vector<float>> values;
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    values.emplace_back(static_cast<std::size_t>(sizes[i]));
    for (std::size_t k = 0; k < values[i].size(); ++k)
      values[i][k] = static_cast<float>(i) * 1000.0f + static_cast<float>(k) * 0.5f;
    bytes += values[i].size() * sizeof(float);
  }
  std::vector<StagedSlice> staged;
  {
    StagingArena arena(bytes, ledger);
    for (std::size_t i = 0; i < sizes.size(); ++i)
      staged.push_back(
          arena.stage(SliceRef{i % 2 ? "exp_avg" : "param", fmt::format("p{}", i), Shape{sizes[i]},
                               DType::f32, 0, sizes[i], values[i].data()}));
    EXPECT_EQ(arena.used(), bytes);
  }
  EXPECT_GE(ledger.current(Tier::host, Category::other), bytes);  // held by the slices
  ShardWriter w(tmp / "step_00000001", 0, 1, 1);
  for (const StagedSlice& s : staged) {
    EXPECT_EQ(s.checksum, crc32(s.data.raw(), s.data.nbytes()));
    w.add(s.ref());
  }
  const ShardRecord rec = w.commit();
  if (w.direct_io()) {
    EXPECT_EQ(w.direct_requests(), 1u);
    EXPECT_GE(w.direct_bytes(), bytes - 2 * kDirectIoAlign);
  }
  staged.clear();
  EXPECT_EQ(ledger.current(Tier::host, Category::other), 0u);
  // Back to back, in the order added; every value as staged.
  ShardFile f(w.final_path());
  std::uint64_t next = 0;
  for (std::size_t i = 0; i < rec.datasets.size(); ++i) {
    const DatasetRecord d = f.describe(rec.datasets[i].path);
    ASSERT_TRUE(d.data_offset.has_value());
    if (i > 0) {
      EXPECT_EQ(*d.data_offset, next) << d.path;
    }
    next = *d.data_offset + static_cast<std::uint64_t>(d.numel()) * sizeof(float);
    std::vector<float> back(static_cast<std::size_t>(d.numel()));
    EXPECT_EQ(f.read_checksummed(d, 0, d.numel(), back.data()), d.checksum);
    EXPECT_EQ(back, values[i]);
  }
}

TEST(ShardFile, ARangeIsReadOnceAndTheWholeDatasetChecksummed) {
  TempDir tmp;
  std::vector<float> v(3'000'000);  // larger than one read piece
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.25f;
  ShardWriter w(tmp / "step_00000001", 0, 1, 1);
  w.add(SliceRef{"param", "w", Shape{3'000'000}, DType::f32, 0, 3'000'000, v.data()});
  const ShardRecord rec = w.commit();
  ShardFile f(w.final_path());
  const DatasetRecord d = f.describe(rec.datasets[0].path);
  for (const auto& [off, n] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {0, 10}, {2'999'990, 10}, {1'234'567, 2'100'000 - 1'234'567}, {0, 3'000'000}}) {
    std::vector<float> out(static_cast<std::size_t>(n) + 1, -1.0f);
    EXPECT_EQ(f.read_checksummed(d, off, n, out.data()), rec.datasets[0].checksum);
    for (std::int64_t i = 0; i < n; ++i)
      ASSERT_EQ(out[static_cast<std::size_t>(i)], v[static_cast<std::size_t>(off + i)]);
    EXPECT_EQ(out.back(), -1.0f);  // nothing past the range
  }
  EXPECT_THROW(f.read_checksummed(d, 2'999'999, 2, v.data()), CheckpointError);
}

// A rank file from another writer (an h5py script, say) may store a dataset chunked and
// compressed: it has no raw offset and is read through HDF5, checksummed all the same.
TEST(ShardFile, ChunkedDatasetsAreReadThroughHdf5) {
  TempDir tmp;
  const std::string path = tmp / "rank_00000.h5";
  std::vector<float> v(10000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 97) * 0.5f;
  {
    h5::Id f = h5::create_file(path);
    h5::write_attr(f.get(), "format", kShardFormat);
    h5::write_attr(f.get(), "format_version", kShardFormatVersion);
    h5::write_attr(f.get(), "rank", std::int64_t{0});
    h5::write_attr(f.get(), "world", std::int64_t{1});
    h5::write_attr(f.get(), "step", std::int64_t{3});
    h5::Id g = h5::create_group(f.get(), "/param");
    const hsize_t dims[1] = {10000}, chunk[1] = {1000};
    h5::Id space(H5Screate_simple(1, dims, nullptr), H5Sclose);
    h5::Id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_chunk(dcpl.get(), 1, chunk);
    H5Pset_deflate(dcpl.get(), 4);
    h5::Id ds(H5Dcreate2(f.get(), "/param/w", H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, dcpl.get(),
                         H5P_DEFAULT),
              H5Dclose);
    ASSERT_TRUE(ds.valid());
    ASSERT_GE(H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
    h5::write_attr(ds.get(), "global_name", "w");
    h5::write_attr(ds.get(), "kind", "param");
    h5::write_attr(ds.get(), "global_shape", std::vector<std::int64_t>{10000});
    h5::write_attr(ds.get(), "slice_begin", std::int64_t{0});
    h5::write_attr(ds.get(), "slice_end", std::int64_t{10000});
    h5::write_attr(ds.get(), "dtype", "f32");
    h5::write_attr(ds.get(), "checksum", format_checksum(crc32(v.data(), v.size() * 4)));
  }
  ShardFile f(path);
  const DatasetRecord d = f.describe("/param/w");
  EXPECT_FALSE(d.data_offset.has_value());
  std::vector<float> out(300);
  EXPECT_EQ(f.read_checksummed(d, 4321, 300, out.data()), d.checksum);
  EXPECT_TRUE(std::equal(out.begin(), out.end(), v.begin() + 4321));
  EXPECT_EQ(f.checksum(d), d.checksum);
}

}  // namespace
}  // namespace strata::checkpoint
