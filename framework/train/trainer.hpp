// Trainer: the optimizer side of a training step over a ParamStore's flat units — fp32 master
// weights for 16-bit parameters, optimizer moments, loss-scale unscaling and overflow skipping,
// global-norm clipping, the LR schedule. Model forward/backward and gradient accumulation are the
// caller's: run micro-batches, then call step() (or, updating in backward, step_unit for each
// unit whose gradient is final, then step()).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "framework/nn/param_store.hpp"
#include "framework/optim/adafactor.hpp"
#include "framework/optim/adamw.hpp"
#include "framework/optim/lamb.hpp"
#include "framework/optim/onebit_adam.hpp"
#include "framework/optim/onebit_lamb.hpp"
#include "framework/optim/lr_schedule.hpp"
#include "framework/optim/sgd.hpp"
#include "framework/precision/loss_scaler.hpp"
#include "framework/train/state_store.hpp"

namespace strata::train {

enum class Precision { f32, bf16, fp16 };
enum class OptimizerKind { adamw, sgd, adamw8bit, adafactor, lamb, onebit_adam, onebit_lamb };

struct TrainerOptions {
  OptimizerKind optimizer = OptimizerKind::adamw;
  optim::AdamWHyper adamw;  // AdamW and AdamW8bit; lr/weight_decay here are the base values
  optim::SGDHyper sgd;
  optim::AdafactorHyper adafactor;
  optim::LambHyper lamb;
  optim::OneBitAdamHyper onebit;
  optim::OneBitLambHyper onebit_lamb;
  optim::ScheduleSpec schedule;
  double max_grad_norm = 0.0;  // 0: no clipping
  // The caller updates each unit with step_unit as soon as its gradient is final (in the last
  // micro-batch's backward: strata.optimizer_in_backward); step() updates the units it did not
  // and finishes the step. AdamW, AdamW8bit and SGD, without clipping or fp16.
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

// How the trainer combines per-shard numbers when each process owns only a slice of every unit
// (ZeRO): the sum of squares for the global gradient norm, and "did any shard overflow". The
// defaults are for a trainer that owns everything. framework/ knows nothing of ranks: the
// parallel engine supplies collectives here.
struct ShardReductions {
  std::function<double(double)> sum = [](double v) { return v; };
  std::function<bool(bool)> any = [](bool b) { return b; };
  // Element-wise sum over shards, in place (Adafactor's partial row/column statistics and sums
  // of squares); every shard must end with bitwise the same values.
  std::function<void(std::span<double>)> sum_vector = [](std::span<double>) {};
  // Units whose parameters another process also holds and counts (the copy of a tied embedding
  // on a pipeline's last stage): left out of the gradient norm so that they count once.
  std::vector<std::size_t> counted_elsewhere;
  // False on tensor-parallel parts other than the first: the parameters that are not split
  // (placement replicated, equal on every part) are left out of this part's gradient norm.
  bool count_replicated = true;
  // 1-bit Adam and 1-bit LAMB: the data-parallel ranks whose momenta compressed_average averages
  // in place (optim::ErrorFeedbackTensor; the error buffers are sized for `ranks`). ranks 1: not
  // called.
  int ranks = 1;
  std::function<void(std::span<const optim::ErrorFeedbackTensor>)> compressed_average;
};

class AdafactorStep;
class LambStep;
class OneBitLambStep;

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

  // Optimizer state of the owned slices (checkpoints): acquire, use, release.
  OptimizerStateStore& states() { return *states_; }
  // A copy of the f32 master values of unit u's owned slice (the master copy, or the
  // parameters themselves when they are f32).
  Tensor master_shard(std::size_t u) const;
  precision::LossScaler* scaler() const { return scaler_.get(); }
  // The Adafactor update's view of the units (null for other optimizers).
  const AdafactorStep* adafactor() const { return adafactor_.get(); }
  // The LAMB update (null for other optimizers): its last trust ratios.
  const LambStep* lamb() const { return lamb_.get(); }
  // The 1-bit LAMB update (null for other optimizers): its last coefficients.
  const OneBitLambStep* onebit_lamb() const { return onebit_lamb_.get(); }
  void set_updates(std::int64_t n) { updates_ = n; }
  // Whether the next step folds each rank's own gradients into its momentum (1-bit Adam or 1-bit
  // LAMB past freeze_step on several ranks): the engine then skips the gradient all-reduce.
  bool local_gradients_next() const;
  // 1-bit Adam: unit u's parameters' error buffers as offsets into its `errors` state (worker
  // error at .worker, server error at .server), for checkpoints. 1-bit LAMB exchanges one fused
  // tensor: its errors are the first unit's first parameter's slot (OneBitLambStep::errors_unit),
  // every other slot has size 0.
  struct ErrorSlots {
    std::int64_t worker = 0, server = 0, size = 0;  // size: worker + server floats
  };
  std::vector<ErrorSlots> error_slots(std::size_t u) const;
  int error_ranks() const { return red_.ranks; }

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
  double grad_sum_squares(std::size_t unit) const;
  double grad_sum_squares_of(std::size_t unit, const Tensor& owned) const;
  bool grads_overflow() const;
  void step_elementwise(std::int64_t k, double lr, float grad_scale);
  // One unit of step_elementwise (step_on_meta): its gradient is `grad` when given (resident),
  // else acquired from the store.
  void update_unit(std::size_t u, std::int64_t k, double lr, float grad_scale, const Tensor* grad);
  void meta_unit(std::size_t u, bool overwrite, const Tensor* grad);
  // step_unit's update of unit u for update k.
  void update_in_backward(std::size_t u, const Tensor& grad);
  StepResult finish_step_in_backward();
  // Whether unit u counts in this process's gradient norm (ShardReductions::counted_elsewhere).
  bool counted_here(std::size_t u) const;
  // After an applied update: write-backs finished or left running as the stores do, the loss
  // scale advanced, gradients zeroed, the update counted.
  void end_update();
  void step_onebit_frozen(double lr, float grad_scale);
  void step_on_meta();

  nn::ParamStore& store_;
  TrainerOptions opts_;
  std::unique_ptr<optim::LRSchedule> schedule_;
  std::unique_ptr<precision::LossScaler> scaler_;
  ShardReductions red_;
  std::unique_ptr<OptimizerStateStore> states_;
  std::unique_ptr<AdafactorStep> adafactor_;
  std::unique_ptr<LambStep> lamb_;
  std::unique_ptr<OneBitLambStep> onebit_lamb_;
  std::int64_t updates_ = 0;
  std::vector<std::optional<double>> noted_ss_;  // per unit: note_final_gradient's share
  std::vector<bool> stepped_;                     // step_in_backward: updated in this step
  std::size_t stepped_count_ = 0, last_in_backward_ = 0;
  std::vector<std::size_t> step_order_, seen_order_;  // the last step's order; this step's so far
};

// "AdamW", "SGD", "AdamW8bit", "Adafactor", "Lamb", "OneBitAdam", "OneBitLamb" (as in the
// config).
const char* optimizer_name(OptimizerKind k);

// The ParamStore pad_multiple an optimizer needs for `shard_count` shards: AdamW8bit's
// quantization blocks never straddle two shards when every owned slice is a multiple of
// optim::kQuantBlock (padding = kQuantBlock × shard_count); 1 for the others.
int state_pad_multiple(const TrainerOptions& o, int shard_count);

// The name of a precision in configs and reports: "f32", "bf16" or "fp16".
const char* precision_name(Precision p);

}  // namespace strata::train
