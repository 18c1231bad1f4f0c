// DataParallelEngine: one optimizer step of data-parallel training at a ZeRO stage — accumulate
// micro-batches (gradients reduced over dp as backward produces them; see ZeroHooks), then the
// Trainer's update of the owned slices and the parameter all-gather. Every dp rank ends the step
// with the same parameters.
#pragma once

#include <functional>

#include "framework/nn/gpt.hpp"
#include "framework/train/trainer.hpp"
#include "parallel/zero/zero_hooks.hpp"

namespace strata::parallel {

struct EngineOptions {
  int micro_batch = 1;
  int accumulation = 1;
  int seq_len = 1;
  ZeroOptions zero;
};

// Cross-rank sums and "any" for a Trainer whose store is sharded over dp (ZeRO stage >= 1).
train::ShardReductions dp_reductions(const Group& dp);

struct EngineStep {
  double loss = 0;        // mean over the micro-batches and the dp ranks
  double local_loss = 0;  // this rank's mean over its micro-batches
  train::StepResult result;
};

class DataParallelEngine {
 public:
  using NextBatch = std::function<void(std::int32_t* inputs, std::int32_t* targets)>;

  DataParallelEngine(Group dp, nn::Gpt& model, nn::ParamStore& store, train::Trainer& trainer,
                     const EngineOptions& opts, nn::Context ctx = {});

  EngineStep train_step(const NextBatch& next_batch);
  const Group& dp() const { return dp_; }
  const ZeroHooks& zero() const { return hooks_; }
  // A context for evaluation or sampling (nothing saved; ZeRO-3 gathers still happen).
  nn::Context eval_context() const;
  // Mean of a value over dp ranks (e.g. a validation loss), max for peaks.
  double mean_over_dp(double v) const;
  double max_over_dp(double v) const;

 private:
  Group dp_;
  nn::Gpt& model_;
  train::Trainer& trainer_;
  EngineOptions opts_;
  ZeroHooks hooks_;
  nn::Context ctx_;
  std::vector<std::int32_t> in_, tgt_;
};

}  // namespace strata::parallel
