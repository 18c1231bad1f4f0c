// A training job's checkpoint policy (strata.checkpoint) on top of parallel::Checkpointer: resume
// at start-up (strata.checkpoint.resume: auto, none or a path), save every interval steps, when
// stopping early and at the end (when strata.checkpoint.dir is set), retention, and background
// saves (strata.checkpoint.async). The data position comes from the job's nn::BatchSource.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "framework/config/config.hpp"
#include "framework/nn/batch.hpp"
#include "parallel/engine/checkpointing.hpp"

namespace strata::parallel {

// Checkpointer options from strata.checkpoint (root, retention, async).
CheckpointOptions checkpoint_options(const config::Config& cfg);

class CheckpointPolicy {
 public:
  // Collective over world.
  CheckpointPolicy(const config::Config& cfg, const Group& world, const Group& dp,
                   nn::ParamStore& store, train::Trainer& trainer, int zero_stage);

  // The job's data, whose position checkpoints save and resume restores (null: none); it must
  // outlive this.
  void set_data(nn::BatchSource* data) { data_ = data; }
  // Collective. Loads the checkpoint the config asks for into the model, trainer and data
  // position; returns the step to continue after (0: fresh start). Rank 0 prints what it did.
  std::int64_t resume();
  // A checkpoint directory is configured.
  bool enabled() const { return !ckpt_.options().root.empty(); }
  // strata.checkpoint.interval says to save after `step`.
  bool due(std::int64_t step) const;
  // Collective. Saves `step` (in the background with strata.checkpoint.async).
  void save(std::int64_t step);
  std::optional<std::int64_t> last_saved() const { return last_saved_; }
  // Local: a background save failed on this rank (agree on it before acting).
  bool background_failed() { return ckpt_.background_failed(); }
  // Collective: waits for a background save; throws on every rank if any rank's failed.
  void finish() { ckpt_.finish(); }
  Checkpointer& checkpointer() { return ckpt_; }

 private:
  const config::Config& cfg_;
  bool lead_;
  nn::BatchSource* data_ = nullptr;
  Checkpointer ckpt_;
  std::optional<std::int64_t> last_saved_;
};

}  // namespace strata::parallel
