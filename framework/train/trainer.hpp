// Trainer: the optimizer side of a training step over a ParamStore's flat units — fp32 master
// weights for 16-bit parameters, optimizer moments, loss-scale unscaling and overflow skipping,
// global-norm clipping, the LR schedule. Model forward/backward and gradient accumulation are the
// caller's: run micro-batches, then call step().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "framework/nn/param_store.hpp"
#include "framework/optim/adamw.hpp"
#include "framework/optim/lr_schedule.hpp"
#include "framework/optim/sgd.hpp"
#include "framework/precision/loss_scaler.hpp"
#include "framework/train/state_store.hpp"

namespace strata::train {

enum class Precision { f32, bf16, fp16 };
enum class OptimizerKind { adamw, sgd };

struct TrainerOptions {
  OptimizerKind optimizer = OptimizerKind::adamw;
  optim::AdamWHyper adamw;  // lr/weight_decay here are the base values
  optim::SGDHyper sgd;
  optim::ScheduleSpec schedule;
  double max_grad_norm = 0.0;  // 0: no clipping
  Precision precision = Precision::f32;
  double static_loss_scale = 0.0;  // fp16 only; 0 = dynamic
  precision::DynamicLossScalerOptions dynamic_scaler;
};

struct StepResult {
  bool applied = true;      // false: skipped for fp16 overflow
  double grad_norm = 0.0;   // of the unscaled gradients, before clipping (NaN/inf on overflow)
  double lr = 0.0;          // rate used by this update
  double loss_scale = 1.0;  // scale that was in force for this step's backward passes
};

// How the trainer combines per-shard numbers when each process owns only a slice of every unit
// (ZeRO): the sum of squares for the global gradient norm, and "did any shard overflow". The
// defaults are for a trainer that owns everything. framework/ knows nothing of ranks: the
// parallel engine supplies collectives here.
struct ShardReductions {
  std::function<double(double)> sum = [](double v) { return v; };
  std::function<bool(bool)> any = [](bool b) { return b; };
};

class Trainer {
 public:
  // Updates the owned slice [lo, hi) of every unit of `store` (all of it without sharding).
  // Optimizer state lives in `states` (default: resident beside the parameters).
  Trainer(nn::ParamStore& store, const TrainerOptions& opts, ShardReductions reductions = {},
          std::unique_ptr<OptimizerStateStore> states = nullptr);

  // The factor backward passes multiply d(loss) by (loss scale for fp16, else 1).
  float loss_scale() const;
  // After the micro-batches' gradients are accumulated: unscale, check overflow, clip, update,
  // write back 16-bit parameters, zero gradients, advance the schedule.
  StepResult step();
  // Applied optimizer updates so far.
  std::int64_t updates() const { return updates_; }
  double current_lr() const;
  const TrainerOptions& options() const { return opts_; }

  // Optimizer state of the owned slices (checkpoints): acquire, use, release.
  OptimizerStateStore& states() { return *states_; }
  // A copy of the f32 master values of unit u's owned slice (the master copy, or the
  // parameters themselves when they are f32).
  Tensor master_shard(std::size_t u) const;
  precision::LossScaler* scaler() const { return scaler_.get(); }
  void set_updates(std::int64_t n) { updates_ = n; }

 private:
  double grad_sum_squares(std::size_t unit) const;
  bool grads_overflow() const;

  nn::ParamStore& store_;
  TrainerOptions opts_;
  std::unique_ptr<optim::LRSchedule> schedule_;
  std::unique_ptr<precision::LossScaler> scaler_;
  ShardReductions red_;
  std::unique_ptr<OptimizerStateStore> states_;
  std::int64_t updates_ = 0;
};

// The name of a precision in configs and reports: "f32", "bf16" or "fp16".
const char* precision_name(Precision p);

}  // namespace strata::train
