// What a GPT job (train_gpt, the Python package) tells the user before the first step: the run's log folder with the resolved
// configuration written into it, and a short console summary (world, model, batch, optimizer,
// ZeRO/offload, model-state memory measured against the ZeRO prediction, where the config went).
#pragma once

#include <string>

#include "framework/config/config.hpp"
#include "framework/nn/gpt.hpp"
#include "parallel/engine/training.hpp"

namespace strata::job {

inline constexpr const char* kResolvedConfigFile = "resolved_config.json";

// The run's log folder: --log-dir; else the folder `strata run` keeps this run's logs in (the
// parent of $STRATA_PROGRESS_DIR, which the launcher makes <log-dir>/progress); else the folder
// of the --metrics file; else the checkpoint directory; else "" (none).
std::string resolve_log_dir(const std::string& log_dir_flag, const std::string& metrics,
                            const config::Config& cfg);

// Writes config::to_json(cfg) to <dir>/resolved_config.json (creating dir; atomically).
// Returns the file's path.
std::string write_resolved_config(const std::string& dir, const config::Config& cfg);

struct SummaryInputs {
  const parallel::Training& job;
  const nn::GptConfig& model;
  int threads = 1;
  std::string config_file;  // written resolved config ("" = not written)
};

// The summary, ~10 lines ending in a newline.
std::string run_summary(const SummaryInputs& in);

}  // namespace strata::job
