// Retention: which checkpoints to keep after a save — the newest `save_total_limit`, plus every
// step that is a multiple of `keep_every`, plus whatever `latest` names — and deleting the rest
// safely (manifest first, so a half-deleted directory is never mistaken for a checkpoint).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::checkpoint {

struct RetentionPolicy {
  std::int64_t save_total_limit = 0;  // newest complete checkpoints kept; 0 = keep all
  std::int64_t keep_every = 0;        // also keep steps that are multiples of this; 0 = none
};

// Removes the complete checkpoints under root that the policy does not keep, and incomplete step
// directories older than the newest complete checkpoint (left by failed saves). Never removes
// the one `latest` names. Returns the removed directories, oldest first.
std::vector<std::string> apply_retention(const std::string& root, const RetentionPolicy& policy);

// Removes one step directory: its manifest first (durably), then the directory is renamed out of
// sight and its files are deleted in the background (reclaim.hpp).
void remove_checkpoint(const std::string& step_dir);

}  // namespace strata::checkpoint
