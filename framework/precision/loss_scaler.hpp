// Loss scaling for fp16 training: the factor the loss is multiplied by before backward and how
// it adapts to overflow, with DeepSpeed's exact semantics (deepspeed/runtime/fp16/loss_scaler.py).
#pragma once

#include <cstdint>
#include <memory>

namespace strata::precision {

// What the engine holds: the current scale, and a report of each step's overflow check. On
// overflow the engine skips the optimizer update (and the LR schedule step); gradients are
// unscaled by multiplying with 1/scale() (fused into the optimizer's grad_scale).
class LossScaler {
 public:
  virtual ~LossScaler() = default;
  virtual double scale() const = 0;
  virtual void update(bool overflow) = 0;
  virtual bool dynamic() const = 0;
};

// fp16.loss_scale > 0: a fixed scale; overflowed steps are still skipped.
class StaticLossScaler final : public LossScaler {
 public:
  // Throws UserError unless scale is finite and > 0.
  explicit StaticLossScaler(double scale);
  double scale() const override { return scale_; }
  void update(bool) override {}
  bool dynamic() const override { return false; }

 private:
  double scale_;
};

// DeepSpeed's fp16 config defaults (which differ from DynamicLossScaler's own constructor
// defaults of 2^32 and delayed_shift 1).
struct DynamicLossScalerOptions {
  double init_scale = 65536.0;          // 2^initial_scale_power, initial_scale_power = 16
  double scale_factor = 2.0;
  std::int64_t scale_window = 1000;     // loss_scale_window
  double min_scale = 1.0;               // min_loss_scale
  std::int64_t delayed_shift = 2;       // hysteresis
  bool consecutive_hysteresis = false;  // consecutive_hysteresis
  bool raise_error_at_min_scale = true;
};

// Everything a checkpoint must hold to resume the scaler bit-exactly.
struct LossScalerState {
  double cur_scale = 0.0;
  std::int64_t cur_iter = 0;
  std::int64_t last_overflow_iter = -1;
  std::int64_t cur_hysteresis = 0;
  bool operator==(const LossScalerState&) const = default;
};

// update(overflow), exactly as DeepSpeed:
//   overflow:  if delayed_shift == 1 or cur_hysteresis == 1:
//                if cur_scale == min_scale (and raise_error_at_min_scale): throw Error("[precision]")
//                else cur_scale = max(cur_scale / scale_factor, min_scale)
//              else cur_hysteresis -= 1
//              last_overflow_iter = cur_iter
//   otherwise: if consecutive_hysteresis: cur_hysteresis = delayed_shift
//              if (cur_iter - last_overflow_iter) % scale_window == 0:
//                if not consecutive_hysteresis: cur_hysteresis = delayed_shift
//                cur_scale *= scale_factor
//   then cur_iter += 1.  Initially cur_iter = 0, last_overflow_iter = -1, cur_hysteresis =
//   delayed_shift. (So with no overflow the scale first grows after scale_window updates.)
class DynamicLossScaler final : public LossScaler {
 public:
  // Throws UserError for init_scale/min_scale not > 0, scale_factor not > 1, scale_window < 1
  // or delayed_shift < 1.
  explicit DynamicLossScaler(const DynamicLossScalerOptions& options = {});
  double scale() const override { return state_.cur_scale; }
  void update(bool overflow) override;
  bool dynamic() const override { return true; }

  const DynamicLossScalerOptions& options() const { return options_; }
  LossScalerState state() const { return state_; }
  // Restores a checkpointed state; throws Error("[precision]") if it is impossible for these
  // options (scale not > 0, hysteresis outside [1, delayed_shift], iterations out of order).
  void set_state(const LossScalerState& state);

 private:
  DynamicLossScalerOptions options_;
  LossScalerState state_;
};

// DeepSpeed's fp16.loss_scale: 0 selects the dynamic scaler with `options`, > 0 a static one.
std::unique_ptr<LossScaler> make_loss_scaler(double loss_scale,
                                             const DynamicLossScalerOptions& options = {});

}  // namespace strata::precision
