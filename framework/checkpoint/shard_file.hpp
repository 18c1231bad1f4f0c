// ShardFile: one rank file opened read-only, with every attribute it returns checked (types,
// ranges, extent against the claimed slice) — a file is never trusted. Errors are
// CheckpointError naming the file and dataset.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "framework/checkpoint/h5_handle.hpp"
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

  // The rank-state JSON text and the checksum stored beside it.
  std::string rank_state_text(std::uint32_t* stored_checksum) const;
  // Parsed rank state; when expected_checksum is given, the text must match it.
  RankState rank_state(const std::uint32_t* expected_checksum) const;

 private:
  std::string path_;
  h5::Id file_;
  ShardHeader header_;
};

// Builds the record of a complete rank file from its own attributes (for the manifest): what the
// file says it holds, checked for consistency, with its size.
ShardRecord scan_shard(const std::string& step_dir, const std::string& file_name);

}  // namespace strata::checkpoint
