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
                   nn::ParamStore& store, train::Trainer& trainer, int zero_stage,
                   CheckpointStage stage = {});

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
  // What the checkpoint resume() loaded recorded in its state's `extra` ({} when none).
  const checkpoint::json& resumed_extra() const { return resumed_extra_; }
  // Collective. Loads only the weights of a step directory (fresh optimizer state: --init-from).
  void load_weights(const std::string& step_dir) { ckpt_.load(step_dir, true); }
  // Recorded in the `extra` state of every checkpoint this run saves.
  void set_extra(checkpoint::json extra) { extra_ = std::move(extra); }
  // Adds (or replaces) one key of it.
  void put_extra(const std::string& key, checkpoint::json value) { extra_[key] = std::move(value); }
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
  checkpoint::json resumed_extra_ = checkpoint::json::object();
  checkpoint::json extra_ = checkpoint::json::object();
};

}  // namespace strata::parallel
