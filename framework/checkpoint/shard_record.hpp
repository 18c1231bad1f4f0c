// What one rank file holds, as the manifest records it: every slice dataset (path, parameter,
// global shape, range, stored dtype, checksum) and the rank-state checksum.
#pragma once

#include "framework/checkpoint/slice.hpp"
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "framework/core/dtype.hpp"
#include "framework/core/shape.hpp"

namespace strata::checkpoint {

// Format tags written into every rank file's root attributes.
inline constexpr const char* kShardFormat = "strata-checkpoint-shard";
inline constexpr std::int64_t kShardFormatVersion = 1;
// The rank-state JSON document inside a rank file.
inline constexpr const char* kRankStateDataset = "/state/rank";

struct DatasetRecord {
  std::string path;  // inside the file: "/param/transformer.wte.weight"
  std::string kind;
  std::string name;
  Shape global_shape;
  DType dtype = DType::f32;
  std::int64_t begin = 0, end = 0;
  std::uint32_t checksum = 0;  // CRC-32 of the stored little-endian bytes
  // Reading: where the contiguous raw data starts in the file (nullopt: read through HDF5).
  std::optional<std::uint64_t> data_offset = std::nullopt;
  std::int64_t run = 0, stride = 0;  // a hyperslab's rows (SliceRef); 0: the flat [begin, end)
  std::int64_t numel() const { return end - begin; }
  SliceLayout layout() const { return {begin, end, run, stride}; }
};

struct ShardRecord {
  std::string file;  // name within the step directory: "rank_00003.h5"
  int rank = 0;
  std::uint64_t bytes = 0;  // file size once complete
  std::uint32_t state_checksum = 0;
  std::vector<DatasetRecord> datasets;
  // HDF5's own bytes in the file (hdf5_bytes.hpp): (offset, length) extents and their CRC-32;
  // no checksum when not known.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> hdf5_extents{};
  std::optional<std::uint32_t> hdf5_checksum{};
};

}  // namespace strata::checkpoint
