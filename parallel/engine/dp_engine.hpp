// DataParallelEngine: one optimizer step of data-parallel training of any nn::Model at a ZeRO
// stage — accumulate micro-batches (gradients reduced over dp as backward produces them; see
// ZeroHooks), then the Trainer's update of the owned slices and the parameter all-gather. Every dp
// rank ends the step with the same parameters. The model's unit schedule drives ZeRO-3 prefetch
// and release and the offload stores' read-ahead. With a pipeline (PipelineSetup) the rank runs
// one stage of the model: the micro-batches are the pipeline's, run by a PipelineExecutor under
// the 1F1B schedule (whose order of unit uses the hooks then follow), the tied units' gradients
// are summed across stages before the update, and the loss comes from the last stage.
// With recover_oom an out-of-memory error in a step's forward/backward releases the step, splits
// the micro-batch, and redoes the step (below; not with a pipeline).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "framework/nn/model.hpp"
#include "framework/train/trainer.hpp"
#include "parallel/engine/step_times.hpp"
#include "parallel/pipeline/executor.hpp"
#include "parallel/zero/zero_hooks.hpp"

namespace strata::parallel {

struct EngineOptions {
  int micro_batch = 1;   // samples per micro-batch the data fills (train_micro_batch_size_per_gpu)
  int accumulation = 1;  // micro-batches per step
  ZeroOptions zero;
  // strata.memory.on_oom = "recover": an OutOfMemory in forward/backward unwinds the step (ZeRO
  // hooks aborted, saved activations dropped, data rewound, nothing applied), every rank agrees,
  // and the step is redone with the data's micro-batches split in two (compute micro-batch halved,
  // accumulation doubled: the same samples, the same global batch) — down to micro-batch 1.
  bool recover_oom = false;
  // fp16.auto_cast (with fp16.enabled): every batch's f32 fields rounded to fp16 before forward.
  bool auto_cast_fp16 = false;
};

// The micro-batch the engine computes changed: out-of-memory recovery, or a resumed run that had
// recovered.
struct MicroBatchChange {
  int from = 0, to = 0;  // compute micro-batch
  int accumulation = 0;  // micro-batches per step now (same samples per step)
  std::string why;       // the out-of-memory error's first line, or "resumed"
};

// Cross-rank sums and "any" for a Trainer whose store is sharded over dp (ZeRO stage >= 1).
train::ShardReductions dp_reductions(const Group& dp);

struct EngineStep {
  double loss = 0;        // mean over the micro-batches and the dp ranks
  double local_loss = 0;  // this rank's mean over its micro-batches
  train::StepResult result;
  StepTimes times;
  std::vector<MicroBatchChange> micro_batch_changes;  // made during this step
};

class DataParallelEngine {
 public:
  // Fills this rank's next micro-batch (laid out as model.batch_fields(micro_batch)).
  using NextBatch = std::function<void(nn::Batch& batch)>;

  // `store` holds the model's units, or with a pipeline those of pipeline.stage (which, like the
  // model, must outlive the engine).
  DataParallelEngine(Group dp, nn::Model& model, nn::ParamStore& store, train::Trainer& trainer,
                     const EngineOptions& opts, nn::Context ctx = {}, PipelineSetup pipeline = {});
  ~DataParallelEngine();

  // One step. Out-of-memory recovery needs the overload with a data source (it rewinds the data
  // to the step's start); with a NextBatch an out-of-memory error under recover_oom says so.
  EngineStep train_step(const NextBatch& next_batch);
  EngineStep train_step(nn::BatchSource& data);
  // The micro-batch forward/backward computes: options().micro_batch, or a divisor of it after
  // recovery (each data micro-batch is then computed in options().micro_batch / micro_batch()
  // pieces), and the micro-batches per step that go with it.
  int micro_batch() const { return micro_; }
  int accumulation() const { return opts_.accumulation * (opts_.micro_batch / micro_); }
  // Computes micro-batches of m samples from now on (m divides options().micro_batch; a resumed
  // run that had recovered). Returns the change, if any.
  std::optional<MicroBatchChange> set_micro_batch(int m, std::string why);
  const Group& dp() const { return dp_; }
  const ZeroHooks& zero() const { return hooks_; }
  nn::Model& model() { return model_; }
  const EngineOptions& options() const { return opts_; }
  // A context for evaluation or sampling (nothing saved; ZeRO-3 gathers still happen); the whole
  // model only without a pipeline (see eval_loss).
  nn::Context eval_context() const;
  // Forward only of one micro-batch laid out as model().batch_fields: its mean loss (with a
  // pipeline: through every stage, the loss on every rank).
  double eval_loss(const nn::Batch& batch);
  // The engine's buffer for one data micro-batch (options().micro_batch samples), free between
  // steps: an evaluation fills it rather than holding a second micro-batch in host memory.
  nn::Batch& batch_buffer() { return batch_; }
  // Mean of a value over dp ranks (e.g. a validation loss), max for peaks.
  double mean_over_dp(double v) const;
  double max_over_dp(double v) const;
  // Max over every rank of the data-parallel replica set and its pipeline stages.
  double max_over_ranks(double v) const;
  // The pipeline this rank runs a stage of (null without one).
  const PipelineExecutor* pipeline() const { return pipe_.get(); }
  // Host reads of the micro-batches' losses so far: one per step (none on a pipeline's stages
  // but the last), however many micro-batches.
  std::size_t loss_reads() const { return pipe_ ? pipe_->loss_reads() : losses_.reads(); }

 private:
  double io_wait_seconds() const;
  // The step's body; `recoverable` is cleared once forward/backward of every micro-batch is done.
  EngineStep run_step(const NextBatch& next_batch, bool& recoverable);
  // Every rank says whether its forward/backward ran out of memory; true when all did.
  bool agree_out_of_memory(bool mine, const std::exception_ptr& error) const;

  Group dp_;
  nn::Model& model_;
  nn::ParamStore& store_;
  train::Trainer& trainer_;
  EngineOptions opts_;
  ZeroHooks hooks_;
  std::unique_ptr<PipelineExecutor> pipe_;
  nn::Context ctx_;
  nn::Batch batch_;             // the data's micro-batch (options().micro_batch samples)
  std::vector<nn::Batch> parts_;  // its pieces of micro_ samples when micro_ is smaller
  int micro_;
  nn::LossSums losses_;  // this step's micro-batch losses (without a pipeline)
  Group oom_;  // recover_oom: a group of dp's ranks for the agreement, apart from training's
};

}  // namespace strata::parallel
