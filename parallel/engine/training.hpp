// Training: the one assembly of a training job from a validated config, the world and a model —
// the process grid, the ZeRO-sharded ParamStore (parameter slices offloaded as configured,
// gradients offloaded with the optimizer state, initialised), the Trainer (optimizer state
// offloaded as configured), the data-parallel engine
// with the model's unit schedule, and the checkpoint policy. With pipeline_parallel_size > 1 each
// rank holds and runs its pipeline stage of the model (nn::Model::stage); with
// tensor_parallel_size > 1 the model is built as this rank's part (tensor_shard) and its layers
// communicate over the grid's tp group (Context::tp); ZeRO shards each part over dp. train_gpt, examples/mlp,
// the tests and the benchmarks all build their jobs with it, and the memory planner
// (parallel/plan) builds the same job on the meta device to count its memory.
#pragma once

#include <memory>
#include <string>

#include "framework/config/config.hpp"
#include "framework/nn/model.hpp"
#include "parallel/engine/checkpoint_policy.hpp"
#include "parallel/engine/dp_engine.hpp"
#include "parallel/engine/tp_comm.hpp"
#include "parallel/grid/grid.hpp"
#include "parallel/plan/planner.hpp"
#include "parallel/zero/zero_memory.hpp"

namespace strata::parallel {

// What a job gives besides its config.
struct TrainingExtras {
  MemoryLedger* ledger = nullptr;  // every allocation's ledger; nullptr: MemoryLedger::global()
  // Where ZeRO-3 parameter slices live instead of the store offload_param configures (tests
  // inject failing stores here); stage 3 only.
  std::shared_ptr<nn::ValueShardStore> value_store;
  // Where the device tier's tensors live: the cpu, or Device::meta() / meta_cuda() for a plan
  // (parallel/plan; the flavour picks the backend whose workspace the ops are charged):
  // the same assembly and steps, every byte charged to the ledger and none allocated, no disk
  // touched, the offload paths not checked on this machine.
  Device device = Device::cpu();
  // Builds another instance of the model from a config. With it, an out-of-memory error gets the
  // memory planner's advice (the whole step's need, changes that are predicted to fit), and an
  // "auto" train_micro_batch_size_per_gpu is planned; without it, default advice and no "auto".
  plan::ModelFactory model_factory;
  // Tests: run the offload paths of a GPU job on the cpu — what moves between the device tier
  // and the offload stores' host memory is staged and copied as on a GPU
  // (nn::ParamStoreOptions::host_staging), so those paths and their ledger run here.
  bool host_staging = false;

  static TrainingExtras on(MemoryLedger* l) {
    TrainingExtras e;
    e.ledger = l;
    return e;
  }
};

// The tensor-parallel part a model must be built as on this rank of `world`
// (strata.tensor_parallel_size; adjacent ranks share a layer, as in Grid; with
// strata.sequence_parallel its activations between the split layers hold 1/tp of the tokens).
nn::TpShard tensor_shard(const config::Config& cfg, const Group& world);

// strata.activation_checkpointing as the model's recomputation mode.
nn::Recompute recompute_mode(config::Recompute r);

// The engine's options (micro-batch, accumulation, ZeRO) from a resolved config.
EngineOptions engine_options(const config::Config& cfg);

// What of `cfg` does not run on a GPU yet, as the subject of a one-line error (an optimizer
// without CUDA kernels with its state on the GPU); empty when it runs. Training refuses a GPU job with it, and
// the memory planner proposes no change that a GPU job would refuse.
std::string gpu_refusal(const config::Config& cfg);

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
  // This rank's pipeline stage (null when pipeline_parallel_size is 1).
  const nn::ModelStage* stage() const { return stage_.get(); }
  nn::ParamStore& store() { return *store_; }
  const nn::ParamStore& store() const { return *store_; }
  train::Trainer& trainer() { return *trainer_; }
  const train::Trainer& trainer() const { return *trainer_; }
  DataParallelEngine& engine() { return *engine_; }
  CheckpointPolicy& checkpoints() { return *checkpoints_; }
  MemoryLedger& ledger() const { return ledger_; }
  int zero_stage() const { return cfg_.zero_optimization.stage; }

  // One optimizer step over the configured accumulation of micro-batches. With a data source,
  // strata.memory.on_oom = "recover" can redo the step with smaller micro-batches; the micro-batch
  // in force is kept in checkpoints, and the first step of a resumed run takes it back.
  EngineStep step(const DataParallelEngine::NextBatch& next) { return engine_->train_step(next); }
  EngineStep step(nn::BatchSource& data);

  // The layers' tensor-parallel communicator (null with tp = 1): its bytes and wait.
  const GroupTpComm* tp_comm() const { return tp_comm_.get(); }
  // The model-state bytes per rank the ZeRO formula predicts for this config (without offload).
  ModelStateBytes predicted_model_states() const;
  // Model-state bytes per rank on the device tier now (params, grads, optimizer).
  ModelStateBytes measured_model_states() const;
  // "AdamW8bit: 6.00 bytes per parameter (fp32 master 4 + m, v 2.00)" and any replicated part.
  std::string optimizer_state_description() const;

 private:
  config::Config cfg_;
  nn::Model& model_;
  MemoryLedger& ledger_;
  Grid grid_;
  std::unique_ptr<nn::ModelStage> stage_;
  std::unique_ptr<GroupTpComm> tp_comm_;  // the layers' tensor-parallel group (tp > 1)
  std::unique_ptr<nn::ParamStore> store_;
  std::unique_ptr<train::Trainer> trainer_;
  std::unique_ptr<DataParallelEngine> engine_;
  std::unique_ptr<CheckpointPolicy> checkpoints_;
  bool resumed_micro_batch_applied_ = false;
  // Puts the ledger's previous advisor back (declared last: restored first, also when the
  // constructor throws after installing the planner's).
  struct AdvisorRestore {
    MemoryLedger* ledger = nullptr;
    OomAdvisor previous;
    ~AdvisorRestore() {
      if (ledger) ledger->set_advisor(std::move(previous));
    }
  } advisor_restore_;
};

}  // namespace strata::parallel
