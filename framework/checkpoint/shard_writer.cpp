#include "framework/checkpoint/shard_writer.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "framework/checkpoint/checksum.hpp"
#include "framework/checkpoint/durable_fs.hpp"
#include "framework/checkpoint/h5_io.hpp"
#include "framework/checkpoint/naming.hpp"
#include "framework/core/error.hpp"

namespace strata::checkpoint {

ShardWriter::ShardWriter(const std::string& step_dir, int rank, int world, std::int64_t step)
    : step_dir_(step_dir) {
  STRATA_CHECK(rank >= 0 && rank < world, "checkpoint", "rank {} outside world of {}", rank, world);
  STRATA_CHECK(step >= 0, "checkpoint", "negative step {}", step);
  make_dirs(step_dir_);
  record_.rank = rank;
  record_.file = rank_file_name(rank);
  final_path_ = join_path(step_dir_, record_.file);
  temp_path_ = final_path_ + std::string(kTmpSuffix);
  file_ = h5::create_file(temp_path_);
  const hid_t f = file_.get();
  h5::write_attr(f, "format", kShardFormat);
  h5::write_attr(f, "format_version", kShardFormatVersion);
  h5::write_attr(f, "rank", std::int64_t{rank});
  h5::write_attr(f, "world", std::int64_t{world});
  h5::write_attr(f, "step", step);
  raw_ = std::make_unique<RawWriter>(temp_path_);
}

ShardWriter::~ShardWriter() {
  if (committed_) return;
  raw_.reset();
  groups_.clear();
  file_.reset();
  ::unlink(temp_path_.c_str());
}

void ShardWriter::add(const SliceRef& s) {
  STRATA_CHECK(!committed_, "checkpoint", "{}: add() after commit()", final_path_);
  validate_slice(s, final_path_);
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
  h5::write_attr(ds.get(), "dtype", std::string(dtype_name(s.dtype)));
  h5::write_attr(ds.get(), "checksum", format_checksum(crc));
  ds.close("dataset");
  record_.datasets.push_back(
      DatasetRecord{path, s.kind, s.name, s.global_shape, s.dtype, s.begin, s.end, crc});
}

void ShardWriter::set_rank_state(const RankState& state) {
  STRATA_CHECK(!committed_, "checkpoint", "{}: set_rank_state() after commit()", final_path_);
  STRATA_CHECK(!has_state_, "checkpoint", "{}: rank state set twice", final_path_);
  const std::string text = to_json(state).dump();
  h5::Id group = h5::create_group(file_.get(), "/state");
  h5::Id ds = h5::write_string_dataset(file_.get(), kRankStateDataset, text);
  record_.state_checksum = crc32(text.data(), text.size());
  h5::write_attr(ds.get(), "checksum", format_checksum(record_.state_checksum));
  h5::write_attr(ds.get(), "content", "application/json");
  has_state_ = true;
}

ShardRecord ShardWriter::commit() {
  STRATA_CHECK(!committed_, "checkpoint", "{}: commit() twice", final_path_);
  if (!has_state_) set_rank_state(RankState{});
  groups_.clear();
  file_.close(temp_path_.c_str());
  raw_->sync_and_close();  // the data and HDF5's metadata: one fsync
  rename_durable(temp_path_, final_path_);
  committed_ = true;
  struct stat st {};
  if (::stat(final_path_.c_str(), &st) != 0)
    fail("checkpoint", "cannot stat '{}': {}", final_path_, std::strerror(errno));
  record_.bytes = static_cast<std::uint64_t>(st.st_size);
  return record_;
}

}  // namespace strata::checkpoint
