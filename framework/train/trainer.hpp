// Trainer: the optimizer side of a training step over a ParamStore's flat units — fp32 master
// weights for 16-bit parameters, optimizer moments, loss-scale unscaling and overflow skipping,
// global-norm clipping, the LR schedule. Model forward/backward and gradient accumulation are the
// caller's: run micro-batches, then call step() (or, updating in backward, step_unit for each
// unit whose gradient is final, then step()).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "framework/nn/param_store.hpp"
#include "framework/optim/lr_schedule.hpp"
#include "framework/optim/optimizers/adamw.hpp"
#include "framework/optim/optimizers/optimizer.hpp"
#include "framework/precision/loss_scaler.hpp"
#include "framework/train/grad_sums.hpp"
#include "framework/train/shard_reductions.hpp"
#include "framework/train/state_store.hpp"
#include "framework/train/value_staging.hpp"

namespace strata::train {

enum class Precision { f32, bf16, fp16 };

// What is common to every optimizer's step; the optimizer itself (with its hyperparameters) is an
// object (framework/optim/optimizers: docs/optimizers.md).
struct TrainerOptions {
  // lr: the base rate the schedule scales. Default: AdamW with optim::AdamWHyper's defaults.
  std::shared_ptr<const optim::Optimizer> optimizer = std::make_shared<optim::AdamW>();
  optim::ScheduleSpec schedule;
  double max_grad_norm = 0.0;  // 0: no clipping
  // The caller updates each unit with step_unit as soon as its gradient is final (in the last
  // micro-batch's backward: strata.optimizer_in_backward); step() updates the units it did not
  // and finishes the step. Optimizers that update each unit on its own (declared unit_steps),
  // without clipping or fp16.
  bool step_in_backward = false;
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
  // Updates the owned slice [lo, hi) of every unit of `store` (all of it without sharding).
  // Optimizer state lives in `states` (default: resident beside the parameters).
  Trainer(nn::ParamStore& store, const TrainerOptions& opts, ShardReductions reductions = {},
          std::unique_ptr<OptimizerStateStore> states = nullptr);
  ~Trainer();

  // The factor backward passes multiply d(loss) by (loss scale for fp16, else 1).
  float loss_scale() const;
  // After the micro-batches' gradients are accumulated: unscale, check overflow, clip, update,
  // write back 16-bit parameters, zero gradients, advance the schedule. With step_in_backward:
  // updates the units step_unit did not, then the rest of the above.
  StepResult step();
  // Applied optimizer updates so far.
  std::int64_t updates() const { return updates_; }
  double current_lr() const;
  const TrainerOptions& options() const { return opts_; }

  // The optimizer this trainer steps: its own copy of options().optimizer, bound to the store.
  const optim::Optimizer& optimizer() const { return *opt_; }
  // The same as optimizer T (throws when it is another).
  template <typename T>
  const T& optimizer_as() const {
    const T* t = dynamic_cast<const T*>(opt_.get());
    STRATA_CHECK(t, "train", "the trainer's optimizer is {}", opt_->name());
    return *t;
  }
  // Optimizer state of the owned slices (checkpoints): acquire, use, release.
  OptimizerStateStore& states() { return *states_; }
  // A copy of the f32 master values of unit u's owned slice (the master copy, or the
  // parameters themselves when they are f32).
  Tensor master_shard(std::size_t u) const;
  precision::LossScaler* scaler() const { return scaler_.get(); }
  void set_updates(std::int64_t n) { updates_ = n; }
  // Whether the next step folds each rank's own gradients into its state (the optimizer's
  // local_gradients, on several ranks: 1-bit past freeze_step): the engine then skips the
  // gradient all-reduce.
  bool local_gradients_next() const;
  // Unit u's compression-error slots in its rank_errors state (optim::error_slots; empty for
  // optimizers without one), for checkpoints.
  std::vector<optim::ErrorSlot> error_slots(std::size_t u) const;
  int error_ranks() const { return red_.ranks; }
  // Host reads of the gradient norm's and overflow check's sums so far: one per step (per device
  // the gradients were on), however many units.
  std::size_t grad_sum_reads() const { return grad_sums_.reads(); }

  // Unit u's owned gradient slice (`owned`, resident) holds this step's final value, or the last
  // accumulation so far (a later call for u replaces this one): its share of the gradient norm is
  // taken here, so that step() need not read offloaded gradients once more for the norm (DeepSpeed
  // also takes the norm where gradients are partitioned). The same value step() would compute.
  void note_final_gradient(std::size_t u, const Tensor& owned);
  // Forgets the noted shares (the gradients were zeroed or changed after the notes).
  void forget_final_gradients();

  // step_in_backward: unit u's owned gradient slice `owned` (resident) is final for this step.
  // Updates the unit now, as step() would (same kernels, rate and update count), and notes its
  // share of the gradient norm; the caller need not keep the gradient. step() then updates the
  // units left and finishes the step. The optimizer-state store reads ahead in the order the
  // last step updated its units (first step: n-1..0, backward's order).
  void step_unit(std::size_t u, const Tensor& owned);
  // Units step_unit has updated since the last step(): after one, this step cannot be redone.
  std::size_t units_stepped() const { return stepped_count_; }
  // Units the last step() found updated by step_unit (the rest it updated itself).
  std::size_t last_updated_in_backward() const { return last_in_backward_; }

 private:
  // Unit u's shares of the norm and the overflow check from its owned gradient slice, queued where
  // the slice is (GradSums); read_grad_sums reads every unit's at once (taking those not noted).
  void take_grad_sums(std::size_t unit, const Tensor& owned);
  std::vector<std::array<double, 2>> read_grad_sums();
  // step_unit's update of unit u for update k.
  void update_in_backward(std::size_t u, const Tensor& grad);
  StepResult finish_step_in_backward();
  // Whether unit u counts in this process's gradient norm (ShardReductions::counted_elsewhere).
  bool counted_here(std::size_t u) const;
  // After an applied update: write-backs finished or left running as the stores do, the loss
  // scale advanced, gradients zeroed, the update counted.
  void end_update();

  nn::ParamStore& store_;
  TrainerOptions opts_;
  std::unique_ptr<optim::Optimizer> opt_;
  std::unique_ptr<optim::LRSchedule> schedule_;
  std::unique_ptr<precision::LossScaler> scaler_;
  ShardReductions red_;
  std::unique_ptr<OptimizerStateStore> states_;
  // The value slices' way to the update where they live apart from the state (a GPU with
  // offload); null otherwise.
  std::unique_ptr<ValueStaging> staging_;
  std::int64_t updates_ = 0;
  GradSums grad_sums_;  // this step's shares of the gradient norm and the overflow check
  std::vector<bool> stepped_;                     // step_in_backward: updated in this step
  std::size_t stepped_count_ = 0, last_in_backward_ = 0;
  std::vector<std::size_t> step_order_, seen_order_;  // the last step's order; this step's so far
};

// The ParamStore pad_multiple the optimizer needs for `shard_count` shards: its blocks state never
// straddles two shards when every owned slice is whole blocks (optim::state_pad_multiple).
int state_pad_multiple(const TrainerOptions& o, int shard_count);

// The name of a precision in configs and reports: "f32", "bf16" or "fp16".
const char* precision_name(Precision p);

}  // namespace strata::train
