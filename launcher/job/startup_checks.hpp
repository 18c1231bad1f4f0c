// A GPT job's checks of its arguments before any work (and before the ranks connect): where
// checkpoints and metrics go must be usable, so a bad path fails at start-up with one line, not
// at the first save after minutes of training.
#pragma once

#include <string>

#include "framework/config/config.hpp"

namespace strata::job {

// UserError naming the first unusable path: strata.checkpoint.dir (must be a directory or
// creatable, and take new files) and the --metrics file.
void check_outputs(const config::Config& cfg, const std::string& metrics_path);

}  // namespace strata::job
