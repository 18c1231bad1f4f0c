// The manifest (`manifest.json` in a step directory), written last by rank 0: format and Strata
// version, step, config, world layout dp × tp × pp, ZeRO stage, the job's training state, every
// rank file, and for each parameter its global name, shape and dtype and which file holds which
// slice of which kind, with the slice's checksum. A step directory without a valid manifest is
// not a checkpoint.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "framework/checkpoint/shard_record.hpp"
#include "framework/checkpoint/train_state.hpp"
#include "framework/checkpoint/slice.hpp"
#include "framework/core/dtype.hpp"
#include "framework/core/shape.hpp"

namespace strata::checkpoint {

inline constexpr const char* kManifestFormat = "strata-checkpoint";
// 2: the manifest carries a checksum of its own contents ("checksum"); 1 (older) is still read.
// 3: slices may be hyperslabs (SliceEntry::run/stride; written as 3 only when some slice is one,
// so other checkpoints stay readable by builds that read 2).
inline constexpr int kManifestFormatVersion = 3;
inline constexpr int kFlatManifestFormatVersion = 2;
inline constexpr int kOldestManifestFormatVersion = 1;

// The Strata version this library was built as ("0.1.0").
const char* strata_version();

struct WorldLayout {
  int world = 1;  // = dp * tp * pp
  int dp = 1, tp = 1, pp = 1;
  bool operator==(const WorldLayout&) const = default;
};

struct SliceEntry {
  std::string file;     // "rank_00002.h5"
  std::string dataset;  // path inside the file
  std::string kind;
  DType dtype = DType::f32;
  std::int64_t begin = 0, end = 0;
  std::uint32_t checksum = 0;
  std::int64_t run = 0, stride = 0;  // a hyperslab's rows (SliceRef); 0: the flat [begin, end)
  SliceLayout layout() const { return {begin, end, run, stride}; }
};

struct ParamEntry {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;        // stored dtype of its "param" slices
  std::vector<SliceEntry> slices;  // every kind, ordered by kind then begin
  std::int64_t numel() const { return shape.numel(); }
  std::vector<std::string> kinds() const;  // distinct, sorted
};

struct FileEntry {
  std::string name;  // "rank_00002.h5"
  int rank = 0;
  std::uint64_t bytes = 0;
  std::uint32_t state_checksum = 0;
  // HDF5's own bytes (metadata, rank state): where they lie and their CRC-32, checked before HDF5
  // opens the file (hdf5_bytes.hpp); absent in older checkpoints.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> hdf5_extents;
  std::optional<std::uint32_t> hdf5_checksum;
};

// What rank 0 knows when it commits; the files and parameters come from the rank files.
struct ManifestHeader {
  std::int64_t step = 0;
  json config = json::object();  // the resolved training config (opaque here)
  WorldLayout layout;
  int zero_stage = 0;
  TrainState state;
};

struct Manifest {
  int format_version = kManifestFormatVersion;
  std::string strata_version;
  std::string created;  // UTC, ISO 8601
  std::int64_t step = 0;
  json config = json::object();
  WorldLayout layout;
  int zero_stage = 0;
  TrainState state;
  std::vector<FileEntry> files;    // by rank
  std::vector<ParamEntry> params;  // in the order the rank files list them

  const ParamEntry* find(const std::string& name) const;
  std::uint64_t total_bytes() const;  // of all rank files
};

// Combines the header with every rank's record. Throws strata::Error unless the records form a
// whole checkpoint: one file per rank of the layout, consistent shapes and dtypes per parameter,
// and every kind of every parameter covered completely by its slices.
Manifest build_manifest(const ManifestHeader& header, const std::vector<ShardRecord>& records);

json to_json(const Manifest& m);
// One rank's record as JSON and back (strict), so a rank can send rank 0 what it wrote instead of
// rank 0 re-reading every file to build the manifest.
json record_to_json(const ShardRecord& r);
ShardRecord record_from_json(const json& j);
// Strict: any missing, unknown or ill-typed key, or an inconsistency build_manifest would reject,
// throws strata::Error naming it.
Manifest manifest_from_json(const json& j);

// CRC-32 of a manifest's JSON without its "checksum" key, over its compact text (keys sorted):
// any change to a value a resume reads — step, layout, state, config, files, slices — changes it.
std::uint32_t manifest_checksum(const json& without_checksum);

// Writes <step_dir>/manifest.json atomically (temporary name, fsync, rename, fsync directory),
// with "checksum" = manifest_checksum of the rest.
void write_manifest_atomic(const std::string& step_dir, const Manifest& m);
// Reads and validates <step_dir>/manifest.json and its checksum; a missing, invalid or edited
// one throws CheckpointError naming the manifest.
Manifest read_manifest(const std::string& step_dir);

}  // namespace strata::checkpoint
