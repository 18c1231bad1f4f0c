// Engine-level checkpoints: every rank saves its owned ZeRO slices (fp32 master weights and
// optimizer moments, padding never stored) plus the job's shared state through
// framework/checkpoint's commit protocol, synchronously or in the background, and loads any
// checkpoint back onto any dp size or ZeRO stage (resharding), bit-exactly.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "framework/checkpoint/async_saver.hpp"
#include "framework/checkpoint/catalog.hpp"
#include "framework/checkpoint/compat.hpp"
#include "framework/checkpoint/retention.hpp"
#include "framework/checkpoint/train_state.hpp"
#include "framework/nn/param_store.hpp"
#include "framework/train/trainer.hpp"
#include "parallel/comm/group.hpp"
#include "parallel/engine/optimizer_checkpoint.hpp"

namespace strata::parallel {

struct CheckpointOptions {
  std::string root;                       // checkpoint root (strata.checkpoint.dir); "" = no saves
  checkpoint::RetentionPolicy retention;  // save_total_limit, keep_every
  bool async = false;                     // stage into host buffers, write in the background
  // How long a rank waits for the others to finish writing their files (a collective on a
  // group of its own, so background saves never interleave with training collectives).
  std::chrono::milliseconds agree_timeout = std::chrono::hours(1);
};

// What the job adds to the trainer's own state (updates, loss scaler, optimizer moments).
struct JobState {
  std::int64_t step = 0;                                 // training steps completed
  checkpoint::json config = checkpoint::json::object();  // the resolved config
  std::optional<checkpoint::SamplerRecord> sampler;      // data position (the same on every rank)
  checkpoint::RankState rank;                            // this rank's RNG streams, if any
  checkpoint::json extra = checkpoint::json::object();
};

// What a load found, for the job to apply to what the Checkpointer does not own (the sampler).
struct LoadedCheckpoint {
  std::string step_dir;
  std::int64_t step = 0;
  checkpoint::WorldLayout saved_layout;
  int saved_zero_stage = 0;
  checkpoint::TrainState state;  // optimizer updates, loss scaler, sampler, extra (as saved)
  checkpoint::json config;       // the config the checkpoint was written with
  checkpoint::RankState rank;    // this rank's saved state (empty if the saving job was smaller)
};

// With pipeline parallelism a rank's store holds one stage's units: the ranks of each stage save
// their slices of that stage's units, so that every parameter (named globally) is saved once.
struct CheckpointStage {
  int pp = 1;     // pipeline stages (world = dp x tp x pp)
  int index = 0;  // this rank's stage
  // Tensor-parallel parts and this rank's: each part saves its split parameters' runs of the
  // whole parameters (by their placement) and part 0 the replicated ones, so a checkpoint holds
  // whole parameters and loads at any tp.
  int tp = 1, tp_index = 0;
  // Every stage's parameters, which a checkpoint must hold ({}: the store's).
  std::vector<checkpoint::ExpectedParam> model;
  // Units holding a copy of parameters another stage saves (a tied embedding): loaded, not saved.
  std::vector<std::size_t> copies;
};

// Saves and loads the state of one data-parallel replica set: a ParamStore sharded by ZeRO over
// `dp` and the Trainer that updates it (with pipeline stages, this rank's stage of it). Every call
// marked collective must be made by every rank of `world` (rank files are numbered by world rank;
// world == dp x tp x pp).
class Checkpointer {
 public:
  // Collective (splits a private group for the commit protocol's agreement).
  Checkpointer(const Group& world, const Group& dp, nn::ParamStore& store, train::Trainer& trainer,
               int zero_stage, CheckpointOptions options, CheckpointStage stage = {});
  // Waits for a background save; an error nobody collected is reported on stderr.
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  const CheckpointOptions& options() const { return opts_; }

  // Collective. Saves step job.step under options().root. Synchronous: returns once the
  // checkpoint is committed (or throws on every rank when any rank failed). Async: waits for the
  // previous background save (rethrowing its error), copies this rank's slices into host staging
  // buffers and returns; the files are written while training continues. Either way one unit at a
  // time is acquired from the OptimizerStateStore (a synchronous save writes it in place).
  void save(const JobState& job);
  // Local, never blocks: whether a background save has finished with an error (kept until
  // wait() rethrows it). Ranks learn of each other's failures through the commit protocol, but
  // not at the same moment: agree on this flag (an all-reduce) before acting on it.
  bool background_failed();
  bool in_flight() const;
  // Local: waits for the save in flight and rethrows this rank's error.
  void wait();
  // Collective: waits for the save in flight; when it failed on any rank, every rank throws
  // (rank 0 alone can fail after the files are written, while committing the manifest).
  void finish();

  // Collective. Loads a step directory into the store and trainer (parameters re-rounded from
  // the fp32 masters for 16-bit training, masters, moments, update count, loss scaler) whatever
  // dp size and ZeRO stage wrote it. Throws UserError listing every difference when the model
  // does not match, CheckpointError for anything wrong on disk — on every rank when any rank
  // failed. After a failed load the parameters are undefined (load another checkpoint).
  // Must run before any ZeRO-3 gather (i.e. before the first step or evaluation).
  // weights_only: parameters (and masters) only; the optimizer state, update count and loss
  // scaler stay as they are (fresh), whatever the checkpoint holds — for fine-tuning.
  LoadedCheckpoint load(const std::string& step_dir, bool weights_only = false);

  // Collective. `spec` is "none" (nullopt), "auto" (the newest complete checkpoint under
  // options().root; nullopt if there is none; a checkpoint that fails to load — corrupt data —
  // is skipped with a warning for the next older one) or a path (a step directory, or a root
  // whose `latest` is used; no fallback). Warnings go to `warn` on rank 0.
  std::optional<LoadedCheckpoint> resume(
      const std::string& spec, const checkpoint::WarningSink& warn = checkpoint::warn_to_stderr);

 private:
  checkpoint::TrainState train_state(const JobState& job) const;
  void save_sync(const checkpoint::SaveSpec& spec, const checkpoint::RankState& rs);
  void save_async(checkpoint::SaveSpec spec, checkpoint::RankState rs);
  // What this rank's file of a save holds: bytes of data and number of slices (datasets' parts).
  struct SavedSize {
    std::size_t bytes = 0, slices = 0;
  };
  SavedSize saved_size() const;
  void load_local(const std::string& step_dir, bool weights_only, LoadedCheckpoint& out);
  void apply_shared_state(const LoadedCheckpoint& loaded);
  // The element range of unit u this rank writes (none for a tied copy).
  StateSaveRange save_range(std::size_t u) const;

  Group world_, dp_;
  Group agree_;  // private: the commit protocol's all-ranks-ok all-reduce
  nn::ParamStore& store_;
  train::Trainer& trainer_;
  int stage_;
  CheckpointOptions opts_;
  CheckpointStage pipeline_;
  std::unique_ptr<checkpoint::AsyncSaver> saver_;
  std::exception_ptr background_error_;
};

// The element range of unit `u` that this rank writes: its ZeRO range [lo, hi) for stages
// 1-3; for stage 0 (every rank holds everything) a 1/dp share of [0, numel), so each element is
// written once.
std::pair<std::int64_t, std::int64_t> checkpoint_save_range(const nn::UnitLayout& l, int stage,
                                                            int dp_size, int dp_rank);

}  // namespace strata::parallel
