// ShardFile: one rank file opened read-only, with every attribute it returns checked (types,
// ranges, extent against the claimed slice) — a file is never trusted. Errors are
// CheckpointError naming the file and dataset. The data of contiguous datasets is read at the
// offset HDF5 reports (checked against the file's size) by a RawReader, which reads ahead with
// O_DIRECT and checksums while it copies; other layouts go through HDF5.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <memory>

#include "framework/checkpoint/h5_handle.hpp"
#include "framework/checkpoint/raw_io.hpp"
#include "framework/checkpoint/shard_record.hpp"
#include "framework/checkpoint/train_state.hpp"

namespace strata::checkpoint {

struct ShardHeader {
  std::int64_t format_version = 0;
  int rank = 0;
  int world = 0;
  std::int64_t step = 0;
};

class ShardFile {
 public:
  explicit ShardFile(std::string path);
  ~ShardFile();
  ShardFile(const ShardFile&) = delete;
  ShardFile& operator=(const ShardFile&) = delete;

  const std::string& path() const { return path_; }
  hid_t id() const { return file_.get(); }
  const ShardHeader& header() const { return header_; }

  // The self-description of one slice dataset, read from its attributes and checked against its
  // extent and stored type.
  DatasetRecord describe(const std::string& dataset_path) const;
  // Every slice dataset in the file (all groups but /state), described.
  std::vector<DatasetRecord> scan() const;
  h5::Id open_dataset(const std::string& dataset_path) const;
  // CRC-32 of a described dataset's stored bytes, read in bounded chunks.
  std::uint32_t checksum(const DatasetRecord& d) const;
  // Elements [offset, offset + count) of a described dataset, in its stored dtype.
  void read(const DatasetRecord& d, std::int64_t offset, std::int64_t count, void* out) const;
  // The same, and returns the CRC-32 of the whole dataset, reading each of its bytes once (the
  // elements outside the range pass through a bounded buffer). The caller compares it with the
  // expected checksum; on a mismatch `out` holds unverified data.
  std::uint32_t read_checksummed(const DatasetRecord& d, std::int64_t offset, std::int64_t count,
                                 void* out) const;

  // The rank-state JSON text and the checksum stored beside it.
  std::string rank_state_text(std::uint32_t* stored_checksum) const;
  // Parsed rank state; when expected_checksum is given, the text must match it.
  RankState rank_state(const std::uint32_t* expected_checksum) const;

  // Frees the read-ahead buffers of raw reads (24 MiB) until the next read.
  void idle() const;

 private:
  // Reads bytes [from, from + n) of d's stored data into out (raw path or HDF5) and returns
  // their CRC-32, continuing from seed.
  std::uint32_t read_bytes(const DatasetRecord& d, std::uint64_t from, std::size_t n, void* out,
                           std::uint32_t seed) const;

  std::string path_;
  h5::Id file_;
  ShardHeader header_;
  int fd_ = -1;  // the same file, for raw reads
  std::uint64_t size_ = 0;
  std::unique_ptr<RawReader> raw_;  // reads ahead of raw reads
};

// Builds the record of a complete rank file from its own attributes (for the manifest): what the
// file says it holds, checked for consistency, with its size.
ShardRecord scan_shard(const std::string& step_dir, const std::string& file_name);

}  // namespace strata::checkpoint
