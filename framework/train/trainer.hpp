// Trainer: the optimizer side of a training step over a ParamStore's flat units — fp32 master
// weights for 16-bit parameters, optimizer moments, loss-scale unscaling and overflow skipping,
// global-norm clipping, the LR schedule. Model forward/backward and gradient accumulation are the
// caller's: run micro-batches, then call step().
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "framework/nn/param_store.hpp"
#include "framework/optim/adamw.hpp"
#include "framework/optim/lr_schedule.hpp"
#include "framework/optim/sgd.hpp"
#include "framework/precision/loss_scaler.hpp"

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

class Trainer {
 public:
  Trainer(nn::ParamStore& store, const TrainerOptions& opts);

  // The factor backward passes multiply d(loss) by (loss scale for fp16, else 1).
  float loss_scale() const;
  // After the micro-batches' gradients are accumulated: unscale, check overflow, clip, update,
  // write back 16-bit parameters, zero gradients, advance the schedule.
  StepResult step();
  // Applied optimizer updates so far.
  std::int64_t updates() const { return updates_; }
  double current_lr() const;
  const TrainerOptions& options() const { return opts_; }

 private:
  struct UnitState {
    Tensor master;  // f32 copy of the parameters when they are 16-bit (else undefined)
    Tensor m, v;    // AdamW moments, or SGD momentum in m
  };
  double grad_sum_squares(std::size_t unit) const;
  bool grads_overflow() const;

  nn::ParamStore& store_;
  TrainerOptions opts_;
  std::unique_ptr<optim::LRSchedule> schedule_;
  std::unique_ptr<precision::LossScaler> scaler_;
  std::vector<UnitState> state_;
  std::int64_t updates_ = 0;
};

// Parses "f32"/"bf16"/"fp16" names used in configs and reports.
const char* precision_name(Precision p);

}  // namespace strata::train
