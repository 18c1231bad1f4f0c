// How a GPT job (train_gpt, the Python package) starts: resume its own checkpoint, or (--init-from) a new run from pretrained
// weights — a Strata checkpoint, a Hugging Face GPT-2 (safetensors) or an HDF5 export — with
// fresh optimizer state at step 0; and (--save-initial) the step-0 weights saved before training.
#pragma once

#include <cstdint>
#include <string>

#include "parallel/engine/checkpoint_policy.hpp"
#include "framework/config/config.hpp"
#include "parallel/comm/group.hpp"

namespace strata::job {

struct StartOptions {
  std::string init_from;    // "" = none
  std::string scratch_dir;  // where an HF/HDF5 source is converted ("" = a temporary directory)
  bool save_initial = false;
};

// Checks the options against the config before any work (one-line UserErrors): --init-from with
// an explicit --resume PATH, --save-initial without a checkpoint directory, a missing source.
void check_start_options(const config::Config& cfg, const StartOptions& o);

// Collective. Resumes (strata.checkpoint.resume) or, with --init-from and nothing of this run's
// own to resume, loads the source's weights only. A checkpoint this run finds wins over
// --init-from (a restarted fine-tuning continues) when it was started from the same source;
// one started otherwise is an error. With --save-initial, saves step 0 before training unless
// the run resumed. Rank 0 prints what it did. Returns the step to continue after.
std::int64_t start_training(const config::Config& cfg, const parallel::Group& world,
                            parallel::CheckpointPolicy& checkpoints, const StartOptions& o);

}  // namespace strata::job
