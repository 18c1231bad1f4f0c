// The `latest` pointer of a checkpoint root: a one-line file naming the newest committed step
// directory ("step_00000100"), replaced atomically after the manifest is written.
#pragma once

#include <optional>
#include <string>

namespace strata::checkpoint {

// Writes <root>/latest = step_dir_name, atomically (temporary, fsync, rename, fsync root).
void update_latest_atomic(const std::string& root, const std::string& step_dir_name);
// The step directory name `latest` holds; nullopt if there is no `latest`. Throws
// CheckpointError naming the file when its content is not a step directory name.
std::optional<std::string> read_latest(const std::string& root);

}  // namespace strata::checkpoint
