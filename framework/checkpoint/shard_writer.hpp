// ShardWriter: writes one rank's file of a checkpoint. Datasets go to `rank_XXXXX.h5.tmp`; commit()
// closes it, fsyncs, renames it to `rank_XXXXX.h5` and fsyncs the directory, so a file with the
// final name is always complete. Each dataset is self-describing (attributes global_name, kind,
// global_shape, slice_begin, slice_end, dtype, checksum) so h5py can read it without Strata.
// HDF5 lays out each (contiguous) dataset; its bytes go to disk through raw_io's RawWriter.
// HDF5's own bytes (metadata, the rank state) are kept in memory while the file is built and
// written out by commit(): a full disk then fails Strata's writes, which report it cleanly, and
// never HDF5's (HDF 1.10 cannot close a file whose flush failed, and crashes at exit).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "framework/checkpoint/durable_fs.hpp"
#include "framework/checkpoint/h5_handle.hpp"
#include "framework/checkpoint/raw_io.hpp"
#include "framework/checkpoint/shard_record.hpp"
#include "framework/checkpoint/slice.hpp"
#include "framework/checkpoint/train_state.hpp"

namespace strata::checkpoint {

class ShardWriter {
 public:
  // Creates step_dir if needed and opens the temporary file.
  ShardWriter(const std::string& step_dir, int rank, int world, std::int64_t step);
  // Without commit(): closes and removes the temporary file (a failed save leaves no final file).
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // The file will hold about `datasets` slices of `data_bytes` in all: fails now (NoSpaceError
  // naming the directory and the bytes) when the file system has less room than that plus
  // HDF5's metadata, and a later out-of-space error names the same need.
  void expect(std::uint64_t data_bytes, std::size_t datasets);
  // Writes one slice as /<kind>/<name> (a second slice of the same kind and name in this file
  // becomes /<kind>/<name>@<begin>). Without slice.checksum the data is copied (checksummed on
  // the way) and may change once add() returns; with it (staged data) it must stay unchanged
  // until commit() and is written from where it is when it lies like the file.
  void add(const SliceRef& slice);
  // Writes the rank's state as the JSON string dataset /state/rank (once).
  void set_rank_state(const RankState& state);
  // Close, fsync, rename, fsync directory. Returns what the file holds.
  ShardRecord commit();

  const std::string& final_path() const { return final_path_; }
  // Whether whole blocks go to the disk with O_DIRECT, in how many requests, how many bytes
  // (tests, benchmarks).
  bool direct_io() const { return raw_ && raw_->direct(); }
  std::uint64_t direct_requests() const { return raw_ ? raw_->direct_requests() : 0; }
  std::uint64_t direct_bytes() const { return raw_ ? raw_->direct_bytes() : 0; }
  const std::string& temp_path() const { return temp_path_; }

  // Room for HDF5's metadata assumed on top of the data (expect()): a base and per dataset
  // (measured: about 1 KiB per dataset with its attributes).
  static constexpr std::uint64_t kMetadataBase = 8 * 1024;
  static constexpr std::uint64_t kMetadataPerDataset = 1024;

 private:
  // Runs f(); a NoSpaceError from it becomes one naming the step directory and the bytes this
  // file needs (`pending`: bytes of the write under way, when the total is not known).
  template <typename F>
  auto guard_space(std::uint64_t pending, F&& f);
  void open(int world, std::int64_t step);  // the constructor's work
  void drop() noexcept;                     // closes and removes an unfinished file
  void add_slice(const SliceRef& slice);
  // Copies HDF5's bytes from memory into the file: everything HDF5 wrote except the datasets'
  // ranges, which RawWriter wrote.
  void write_hdf5_bytes();

  std::string step_dir_, final_path_, temp_path_;
  ShardRecord record_;
  std::int64_t step_ = 0;
  std::uint64_t expected_ = 0;  // expect(): data + metadata allowance; 0 = not said
  std::uint64_t written_ = 0;   // slice bytes added so far
  bool has_state_ = false;
  bool committed_ = false;
  h5::Id file_;
  UniqueFd hdf5_bytes_;  // the memory file HDF5 writes to (invalid: HDF5 writes the disk itself)
  std::vector<std::pair<std::uint64_t, std::uint64_t>> data_ranges_;  // [offset, end), by RawWriter
  std::unique_ptr<RawWriter> raw_;
  std::map<std::string, h5::Id> groups_;
};

}  // namespace strata::checkpoint
