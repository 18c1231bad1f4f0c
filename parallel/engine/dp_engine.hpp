// DataParallelEngine: one optimizer step of data-parallel training of any nn::Model at a ZeRO
// stage — accumulate micro-batches (gradients reduced over dp as backward produces them; see
// ZeroHooks), then the Trainer's update of the owned slices and the parameter all-gather. Every dp
// rank ends the step with the same parameters. The model's unit schedule drives ZeRO-3 prefetch
// and release and the offload stores' read-ahead.
#pragma once

#include <functional>

#include "framework/nn/model.hpp"
#include "framework/train/trainer.hpp"
#include "parallel/engine/step_times.hpp"
#include "parallel/zero/zero_hooks.hpp"

namespace strata::parallel {

struct EngineOptions {
  int micro_batch = 1;
  int accumulation = 1;
  ZeroOptions zero;
};

// Cross-rank sums and "any" for a Trainer whose store is sharded over dp (ZeRO stage >= 1).
train::ShardReductions dp_reductions(const Group& dp);

struct EngineStep {
  double loss = 0;        // mean over the micro-batches and the dp ranks
  double local_loss = 0;  // this rank's mean over its micro-batches
  train::StepResult result;
  StepTimes times;
};

class DataParallelEngine {
 public:
  // Fills this rank's next micro-batch (laid out as model.batch_fields(micro_batch)).
  using NextBatch = std::function<void(nn::Batch& batch)>;

  DataParallelEngine(Group dp, nn::Model& model, nn::ParamStore& store, train::Trainer& trainer,
                     const EngineOptions& opts, nn::Context ctx = {});

  EngineStep train_step(const NextBatch& next_batch);
  const Group& dp() const { return dp_; }
  const ZeroHooks& zero() const { return hooks_; }
  nn::Model& model() { return model_; }
  const EngineOptions& options() const { return opts_; }
  // A context for evaluation or sampling (nothing saved; ZeRO-3 gathers still happen).
  nn::Context eval_context() const;
  // Mean of a value over dp ranks (e.g. a validation loss), max for peaks.
  double mean_over_dp(double v) const;
  double max_over_dp(double v) const;

 private:
  double io_wait_seconds() const;

  Group dp_;
  nn::Model& model_;
  nn::ParamStore& store_;
  train::Trainer& trainer_;
  EngineOptions opts_;
  ZeroHooks hooks_;
  nn::Context ctx_;
  nn::Batch batch_;
};

}  // namespace strata::parallel
