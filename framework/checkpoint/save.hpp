// Saving a checkpoint: the commit protocol. Every rank writes its own file (temporary name,
// fsync, rename); after all ranks report success, rank 0 writes the manifest the same way, then
// atomically moves `latest` and applies retention. Ranks agree through one small callback the
// caller supplies (an all-reduce of a boolean: the parallel engine's job; identity in one
// process), so this layer knows nothing of MPI.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "framework/checkpoint/manifest.hpp"
#include "framework/checkpoint/retention.hpp"
#include "framework/checkpoint/slice.hpp"

namespace strata::checkpoint {

// Called collectively with whether this rank's part succeeded; returns whether every rank's did.
// Every rank calls it the same number of times (twice per save), also when its part failed.
using AllRanksOk = std::function<bool(bool this_rank_ok)>;
// Optional, collective: every rank passes a text; rank 0 gets all of them, in rank order (the
// others get an empty vector). With it, each rank sends rank 0 the record of what it wrote and
// rank 0 builds the manifest from those (checking each file's presence and size) instead of
// re-reading every rank file.
using GatherToRoot = std::function<std::vector<std::string>(const std::string& mine)>;
// The single-process AllRanksOk.
inline bool single_process_ok(bool ok) {
  return ok;
}

struct SaveSpec {
  std::string root;       // checkpoint root; the step directory is root/step_XXXXXXXX
  int rank = 0;           // 0 <= rank < header.layout.world
  ManifestHeader header;  // step, config, layout, ZeRO stage, training state (rank 0's is used)
  RetentionPolicy retention;
};

struct SaveResult {
  std::string step_dir;
  bool committed = false;            // rank 0: manifest and `latest` written
  std::vector<std::string> removed;  // rank 0: checkpoints removed by retention
};

// Rank 0's first phase of a save: creates root and the step directory, removes an older
// checkpoint's manifest of the same step (so the directory never claims to be complete with a mix
// of files), then the temporaries an earlier save of this step left when it was killed (a rank
// file's ".tmp", the manifest's ".tmp.<pid>"), which no later save would otherwise overwrite.
void prepare_step_dir(const std::string& root, const std::string& step_dir);

// The whole protocol for one rank. Phase 1: rank 0 creates the step directory and invalidates an
// older checkpoint of the same step (its manifest is removed). Phase 2: each rank writes its file.
// Then rank 0 commits. Throws this rank's own error, or Error("... another rank failed ...") when
// only some other rank failed; the checkpoint is then not committed.
// With `gather`, it is called once more after the files are written, on every rank.
SaveResult save_checkpoint(const SaveSpec& spec, const std::vector<SliceRef>& slices,
                           const RankState& rank_state, const AllRanksOk& all_ok,
                           const GatherToRoot& gather = {});

// Rank 0's commit after every rank file is complete: builds and validates the manifest from the
// ranks' records — given (gathered from the ranks; each file's presence and size are checked), or
// when `records` is empty read back from each file's self-description — writes it atomically and
// updates `latest`. Returns the manifest.
Manifest commit_checkpoint(const std::string& root, const ManifestHeader& header,
                           std::vector<ShardRecord> records = {});
// The records gathered from the ranks' texts (record_to_json dumps).
std::vector<ShardRecord> parse_records(const std::vector<std::string>& texts);

}  // namespace strata::checkpoint
