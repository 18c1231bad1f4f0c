// Finding checkpoints under a root directory: which step directories are complete, which one to
// resume from (following `latest`, verifying it, falling back to an older complete checkpoint
// with a warning when it is broken), and what a user's DIR argument means.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "framework/checkpoint/verify.hpp"

namespace strata::checkpoint {

struct CheckpointInfo {
  std::string dir;  // the step directory
  std::int64_t step = 0;
  bool operator==(const CheckpointInfo&) const = default;
};

// Every step_* directory under root, complete or not, oldest first.
std::vector<CheckpointInfo> list_step_dirs(const std::string& root);
// Step directories whose manifest is present and valid, oldest first (files are not opened).
std::vector<CheckpointInfo> list_complete_checkpoints(const std::string& root);

// Receives warnings (a checkpoint skipped, and why). Default: one line on stderr.
using WarningSink = std::function<void(const std::string&)>;
void warn_to_stderr(const std::string& message);

struct FindOptions {
  VerifyLevel level = VerifyLevel::structure;
  // Broken newest checkpoint: true = warn and use the next older complete one; false = throw.
  bool fallback = true;
  WarningSink warn = warn_to_stderr;
};

// The checkpoint to resume from: the newest step directory that verifies. `latest` is its normal
// pointer; a newer complete one (a crash between manifest and `latest`) or an older one (the
// newest is broken) is used with a warning. A step directory without a manifest that `latest`
// does not name is a save that never committed: it is ignored (with a warning when it is newer
// than the checkpoint chosen). nullopt when root holds no committed checkpoint at all; throws
// CheckpointError when checkpoints exist but none is usable (or the newest is broken and
// fallback is off), naming each one and what is wrong with it.
std::optional<CheckpointInfo> find_latest(const std::string& root, const FindOptions& options = {});

// A user's DIR: a step directory (it has a manifest) as is, or a checkpoint root, which means
// the step directory `latest` names. Throws UserError when it is neither.
std::string resolve_checkpoint_dir(const std::string& dir);

}  // namespace strata::checkpoint
