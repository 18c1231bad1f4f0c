// Training: the one assembly of a training job from a validated config, the world and a model —
// the process grid, the ZeRO-sharded ParamStore (parameter slices offloaded as configured,
// initialised), the Trainer (optimizer state offloaded as configured), the data-parallel engine
// with the model's unit schedule, and the checkpoint policy. train_gpt, examples/mlp, the tests and
// the benchmarks all build their jobs with it.
#pragma once

#include <memory>
#include <string>

#include "framework/config/config.hpp"
#include "framework/nn/model.hpp"
#include "parallel/engine/checkpoint_policy.hpp"
#include "parallel/engine/dp_engine.hpp"
#include "parallel/grid/grid.hpp"
#include "parallel/zero/zero_memory.hpp"

namespace strata::parallel {

// What a job gives besides its config.
struct TrainingExtras {
  MemoryLedger* ledger = nullptr;  // every allocation's ledger; nullptr: MemoryLedger::global()
  // Where ZeRO-3 parameter slices live instead of the store offload_param configures (tests
  // inject failing stores here); stage 3 only.
  std::shared_ptr<nn::ValueShardStore> value_store;

  static TrainingExtras on(MemoryLedger* l) {
    TrainingExtras e;
    e.ledger = l;
    return e;
  }
};

// The engine's options (micro-batch, accumulation, ZeRO) from a resolved config.
EngineOptions engine_options(const config::Config& cfg);

class Training {
 public:
  // Collective over `world`. `cfg` must be validated (config::parse_config/load_config); its
  // batch sizes are resolved here for the grid's data-parallel size, and the offload settings
  // checked (offload::validate). `model` must outlive this.
  Training(config::Config cfg, const Group& world, nn::Model& model, TrainingExtras extras = {});
  ~Training();
  Training(const Training&) = delete;
  Training& operator=(const Training&) = delete;

  const config::Config& config() const { return cfg_; }
  const Grid& grid() const { return grid_; }
  const Group& world() const { return grid_.world(); }
  const Group& dp() const { return grid_.dp(); }
  nn::Model& model() { return model_; }
  nn::ParamStore& store() { return *store_; }
  train::Trainer& trainer() { return *trainer_; }
  DataParallelEngine& engine() { return *engine_; }
  CheckpointPolicy& checkpoints() { return *checkpoints_; }
  MemoryLedger& ledger() const { return ledger_; }
  int zero_stage() const { return cfg_.zero_optimization.stage; }

  // One optimizer step over the configured accumulation of micro-batches.
  EngineStep step(const DataParallelEngine::NextBatch& next) { return engine_->train_step(next); }
  EngineStep step(nn::BatchSource& data) {
    return engine_->train_step([&](nn::Batch& b) { data.next(b); });
  }

  // The model-state bytes per rank the ZeRO formula predicts for this config (without offload).
  ModelStateBytes predicted_model_states() const;
  // Model-state bytes per rank on the device tier now (params, grads, optimizer).
  ModelStateBytes measured_model_states() const;

 private:
  config::Config cfg_;
  nn::Model& model_;
  MemoryLedger& ledger_;
  Grid grid_;
  std::unique_ptr<nn::ParamStore> store_;
  std::unique_ptr<train::Trainer> trainer_;
  std::unique_ptr<DataParallelEngine> engine_;
  std::unique_ptr<CheckpointPolicy> checkpoints_;
};

}  // namespace strata::parallel
