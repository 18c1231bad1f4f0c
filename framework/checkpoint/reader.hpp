// CheckpointReader: loads from one complete step directory onto any layout. read_range() returns
// an arbitrary flat range of a named parameter (or of its optimizer state), assembled from
// whichever rank files hold the pieces — so a checkpoint saved on 4 ranks loads on 1, 2 or 3 —
// checking every dataset it touches against the manifest and, once per dataset, its checksum.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "framework/checkpoint/manifest.hpp"
#include "framework/checkpoint/shard_file.hpp"

namespace strata::checkpoint {

struct ReaderOptions {
  bool verify_checksums = true;  // checksum every dataset the reader touches (once each)
};

// Not thread-safe: one reader per thread.
class CheckpointReader {
 public:
  // Reads and validates the manifest (CheckpointError if it is missing or invalid).
  explicit CheckpointReader(std::string step_dir, ReaderOptions options = {});
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const std::string& dir() const { return dir_; }
  const Manifest& manifest() const { return manifest_; }
  const TrainState& state() const { return manifest_.state; }
  std::int64_t step() const { return manifest_.step; }
  // Whether the checkpoint holds `kind` for parameter `name`.
  bool has(std::string_view kind, const std::string& name) const;

  // Writes elements [begin, end) of parameter `name`'s `kind` to out as `want` (converting from the
  // stored dtype). Throws UserError for an unknown name/kind or a range outside the parameter, and
  // CheckpointError naming the file and dataset for anything wrong on disk.
  void read_range(std::string_view kind, const std::string& name, std::int64_t begin,
                  std::int64_t end, void* out, DType want);
  // The whole of parameter `name`'s `kind` as f32.
  std::vector<float> read_f32(std::string_view kind, const std::string& name);
  // The per-rank state saved by `rank` (0 <= rank < manifest().layout.world), checksum verified.
  RankState rank_state(int rank);

 private:
  const ShardFile& file(const std::string& name);       // opened, for reading data
  const ShardFile& open_file(const std::string& name);  // opened and checked
  const DatasetRecord& dataset(const ShardFile& f, const ParamEntry& p, const SliceEntry& s);

  std::string dir_;
  ReaderOptions options_;
  Manifest manifest_;
  std::map<std::string, std::unique_ptr<ShardFile>> files_;
  const ShardFile* reading_ = nullptr;  // the one file whose raw reads keep read-ahead buffers
  std::map<std::pair<std::string, std::string>, DatasetRecord> described_;
  std::set<std::pair<std::string, std::string>> verified_;
};

}  // namespace strata::checkpoint
