#include "framework/checkpoint/shard_writer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "framework/checkpoint/checkpoint_error.hpp"
#include "framework/checkpoint/checksum.hpp"
#include "framework/checkpoint/durable_fs.hpp"
#include "framework/checkpoint/fault_point.hpp"
#include "framework/checkpoint/h5_io.hpp"
#include "framework/checkpoint/naming.hpp"
#include "framework/checkpoint/space.hpp"
#include "framework/core/error.hpp"

namespace strata::checkpoint {

template <typename F>
auto ShardWriter::guard_space(std::uint64_t pending, F&& f) {
  try {
    return f();
  } catch (const NoSpaceError&) {
    const bool known = expected_ > 0;
    no_space(step_dir_, fmt::format("'{}'", record_.file),
             known ? expected_
                   : written_ + pending + kMetadataBase +
                         kMetadataPerDataset * (record_.datasets.size() + 1),
             !known);
  }
}

ShardWriter::ShardWriter(const std::string& step_dir, int rank, int world, std::int64_t step)
    : step_dir_(step_dir) {
  STRATA_CHECK(rank >= 0 && rank < world, "checkpoint", "rank {} outside world of {}", rank, world);
  STRATA_CHECK(step >= 0, "checkpoint", "negative step {}", step);
  fault_point("before_rank_file", step, rank);
  step_ = step;
  make_dirs(step_dir_);
  record_.rank = rank;
  record_.file = rank_file_name(rank);
  final_path_ = join_path(step_dir_, record_.file);
  temp_path_ = final_path_ + std::string(kTmpSuffix);
  try {
    open(world, step);
  } catch (...) {
    drop();  // no destructor runs for a constructor that threw
    throw;
  }
}

void ShardWriter::open(int world, std::int64_t step) {
  const int rank = record_.rank;
  guard_space(0, [&] {
    file_ = h5::create_file(temp_path_);
    hdf5_bytes_.reset(h5::divert_writes_to_memory(file_.get()));
    if (hdf5_bytes_.valid()) file_ = h5::Id(file_.release(), H5Fclose);  // in memory: no reserve
    const hid_t f = file_.get();
    h5::write_attr(f, "format", kShardFormat);
    h5::write_attr(f, "format_version", kShardFormatVersion);
    h5::write_attr(f, "rank", std::int64_t{rank});
    h5::write_attr(f, "world", std::int64_t{world});
    h5::write_attr(f, "step", step);
    raw_ = std::make_unique<RawWriter>(temp_path_);
  });
}

void ShardWriter::expect(std::uint64_t data_bytes, std::size_t datasets) {
  expected_ = data_bytes + kMetadataBase + kMetadataPerDataset * (datasets + 1);
  require_space(step_dir_, fmt::format("'{}'", record_.file), expected_);
}

ShardWriter::~ShardWriter() {
  if (!committed_) drop();
}

void ShardWriter::drop() noexcept {
  raw_.reset();
  groups_.clear();
  if (hdf5_bytes_.valid())
    file_.reset();  // in memory: a full disk cannot make the close fail
  else
    h5::discard_file(file_);
  ::unlink(temp_path_.c_str());
}

void ShardWriter::write_hdf5_bytes() {
  struct stat st {};
  if (::fstat(hdf5_bytes_.get(), &st) != 0)
    fail("checkpoint", "cannot stat HDF5's bytes of '{}': {}", temp_path_, std::strerror(errno));
  const auto size = static_cast<std::uint64_t>(st.st_size);
  std::sort(data_ranges_.begin(), data_ranges_.end());
  UniqueFd out(::open(temp_path_.c_str(), O_WRONLY | O_CLOEXEC));
  if (!out.valid())
    io_fail(errno, temp_path_, fmt::format("cannot open '{}' for writing", temp_path_));
  std::vector<unsigned char> buf;
  std::uint32_t crc = 0;
  auto copy = [&](std::uint64_t a, std::uint64_t b) {  // [a, b) from memory to the file
    for (std::uint64_t at = a; at < b;) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(b - at, 1 << 20));
      buf.resize(n);
      pread_all(hdf5_bytes_.get(), buf.data(), n, at, temp_path_);
      pwrite_all(out.get(), buf.data(), n, at, temp_path_, -1, nullptr);
      crc = crc32(buf.data(), n, crc);
      at += n;
    }
    // The manifest records where HDF5's bytes lie and their checksum (hdf5_bytes.hpp).
    auto& ext = record_.hdf5_extents;
    if (!ext.empty() && ext.back().first + ext.back().second == a)
      ext.back().second += b - a;
    else
      ext.push_back({a, b - a});
  };
  // The extents HDF5 wrote (holes skipped: the unused part of a metadata block stays sparse),
  // less the datasets' own bytes.
  for (std::uint64_t pos = 0; pos < size;) {
    off_t a = ::lseek(hdf5_bytes_.get(), static_cast<off_t>(pos), SEEK_DATA);
    if (a < 0 && errno == ENXIO) break;  // no data past pos
    off_t b = a < 0 ? static_cast<off_t>(size) : ::lseek(hdf5_bytes_.get(), a, SEEK_HOLE);
    if (a < 0) a = static_cast<off_t>(pos);  // SEEK_DATA unsupported: everything
    if (b < 0) b = static_cast<off_t>(size);
    auto cur = static_cast<std::uint64_t>(a);
    const auto end = static_cast<std::uint64_t>(b);
    for (const auto& [ds, de] : data_ranges_) {
      if (de <= cur) continue;
      if (ds >= end) break;
      if (ds > cur) copy(cur, ds);
      cur = std::max(cur, de);
    }
    if (cur < end) copy(cur, end);
    pos = end;
  }
  if (::ftruncate(out.get(), static_cast<off_t>(size)) != 0)
    io_fail(errno, temp_path_, fmt::format("cannot set the size of '{}'", temp_path_));
  out.close(temp_path_);
  record_.hdf5_checksum = crc;
}

void ShardWriter::add(const SliceRef& s) {
  STRATA_CHECK(!committed_, "checkpoint", "{}: add() after commit()", final_path_);
  validate_slice(s, final_path_);
  const auto bytes = static_cast<std::uint64_t>(s.end - s.begin) * dtype_size(s.dtype);
  guard_space(bytes, [&] { add_slice(s); });
  written_ += bytes;
}

void ShardWriter::add_slice(const SliceRef& s) {
  auto g = groups_.find(s.kind);
  if (g == groups_.end())
    g = groups_.emplace(s.kind, h5::create_group(file_.get(), fmt::format("/{}", s.kind))).first;
  std::string path = fmt::format("/{}/{}", s.kind, s.name);
  if (h5::has_link(file_.get(), path)) path = fmt::format("/{}/{}@{}", s.kind, s.name, s.begin);
  STRATA_CHECK(!h5::has_link(file_.get(), path), "checkpoint",
               "{}: two slices of {} {} start at {}", final_path_, s.kind, s.name, s.begin);
  const std::int64_t n = s.end - s.begin;
  const std::size_t bytes = static_cast<std::size_t>(n) * dtype_size(s.dtype);
  h5::Id ds = h5::create_contiguous_dataset(file_.get(), path, s.dtype, n);
  const auto offset = h5::raw_data_offset(ds.get());
  STRATA_CHECK(offset.has_value(), "checkpoint", "{}: HDF5 allocated no storage for {}", temp_path_,
               path);
  data_ranges_.push_back({*offset, *offset + bytes});
  std::uint32_t crc = 0;
  if (s.checksum) {
    raw_->write_borrowed(*offset, s.data, bytes);
    crc = *s.checksum;
  } else {
    crc = raw_->write(*offset, s.data, bytes);
  }
  h5::write_attr(ds.get(), "global_name", s.name);
  h5::write_attr(ds.get(), "kind", s.kind);
  h5::write_attr(ds.get(), "global_shape", s.global_shape.dims());
  h5::write_attr(ds.get(), "slice_begin", s.begin);
  h5::write_attr(ds.get(), "slice_end", s.end);
  if (s.run > 0) {  // a hyperslab of rows (flat slices keep the attributes they always had)
    h5::write_attr(ds.get(), "slice_run", s.run);
    h5::write_attr(ds.get(), "slice_stride", s.stride);
  }
  h5::write_attr(ds.get(), "dtype", std::string(dtype_name(s.dtype)));
  h5::write_attr(ds.get(), "checksum", format_checksum(crc));
  ds.close("dataset");
  DatasetRecord rec{path, s.kind, s.name, s.global_shape, s.dtype, s.begin, s.end, crc};
  rec.run = s.run;
  rec.stride = s.stride;
  record_.datasets.push_back(std::move(rec));
}

void ShardWriter::set_rank_state(const RankState& state) {
  STRATA_CHECK(!committed_, "checkpoint", "{}: set_rank_state() after commit()", final_path_);
  STRATA_CHECK(!has_state_, "checkpoint", "{}: rank state set twice", final_path_);
  const std::string text = to_json(state).dump();
  guard_space(text.size(), [&] {
    h5::Id group = h5::create_group(file_.get(), "/state");
    h5::Id ds = h5::write_string_dataset(file_.get(), kRankStateDataset, text);
    record_.state_checksum = crc32(text.data(), text.size());
    h5::write_attr(ds.get(), "checksum", format_checksum(record_.state_checksum));
    h5::write_attr(ds.get(), "content", "application/json");
  });
  has_state_ = true;
}

ShardRecord ShardWriter::commit() {
  STRATA_CHECK(!committed_, "checkpoint", "{}: commit() twice", final_path_);
  if (!has_state_) set_rank_state(RankState{});
  guard_space(0, [&] {
    groups_.clear();
    file_.close(temp_path_.c_str());
    if (hdf5_bytes_.valid()) {
      write_hdf5_bytes();
      hdf5_bytes_.reset();
    }
    raw_->sync_and_close();  // the data and HDF5's metadata: one fsync
  });
  fault_point("rank_file_tmp", step_, record_.rank);
  rename_durable(temp_path_, final_path_);
  fault_point("after_rank_file", step_, record_.rank);
  committed_ = true;
  struct stat st {};
  if (::stat(final_path_.c_str(), &st) != 0)
    fail("checkpoint", "cannot stat '{}': {}", final_path_, std::strerror(errno));
  record_.bytes = static_cast<std::uint64_t>(st.st_size);
  return record_;
}

}  // namespace strata::checkpoint
