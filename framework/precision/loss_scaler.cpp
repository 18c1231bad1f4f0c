// Static and dynamic loss scalers.
#include "framework/precision/loss_scaler.hpp"

#include <algorithm>
#include <cmath>

#include "framework/core/error.hpp"

namespace strata::precision {

StaticLossScaler::StaticLossScaler(double scale) : scale_(scale) {
  if (!(std::isfinite(scale) && scale > 0.0)) {
    user_fail("precision", "fp16.loss_scale must be a finite number > 0 (or 0 for dynamic), "
              "got {}", scale);
  }
}

DynamicLossScaler::DynamicLossScaler(const DynamicLossScalerOptions& o) : options_(o) {
  if (!(std::isfinite(o.init_scale) && o.init_scale > 0.0))
    user_fail("precision", "initial loss scale must be finite and > 0, got {}", o.init_scale);
  if (!(std::isfinite(o.min_scale) && o.min_scale > 0.0))
    user_fail("precision", "fp16.min_loss_scale must be finite and > 0, got {}", o.min_scale);
  if (!(std::isfinite(o.scale_factor) && o.scale_factor > 1.0))
    user_fail("precision", "loss scale factor must be > 1, got {}", o.scale_factor);
  if (o.scale_window < 1)
    user_fail("precision", "fp16.loss_scale_window must be >= 1, got {}", o.scale_window);
  if (o.delayed_shift < 1)
    user_fail("precision", "fp16.hysteresis must be >= 1, got {}", o.delayed_shift);
  state_.cur_scale = o.init_scale;
  state_.cur_iter = 0;
  state_.last_overflow_iter = -1;
  state_.cur_hysteresis = o.delayed_shift;
}

void DynamicLossScaler::update(bool overflow) {
  const auto& o = options_;
  auto& s = state_;
  if (overflow) {
    if (o.delayed_shift == 1 || s.cur_hysteresis == 1) {
      if (s.cur_scale == o.min_scale && o.raise_error_at_min_scale) {
        fail("precision",
             "gradients overflowed (inf/NaN) at iteration {} with the loss scale already at its "
             "minimum ({}, fp16.min_loss_scale): fp16 training cannot go on. Train in bf16 "
             "instead (\"bf16\": {{\"enabled\": true}}), lower the learning rate or add warmup / "
             "gradient_clipping, and check the data for inf/NaN.",
             s.cur_iter, o.min_scale);
      }
      s.cur_scale = std::max(s.cur_scale / o.scale_factor, o.min_scale);
    } else {
      s.cur_hysteresis -= 1;
    }
    s.last_overflow_iter = s.cur_iter;
  } else {
    if (o.consecutive_hysteresis) s.cur_hysteresis = o.delayed_shift;
    if ((s.cur_iter - s.last_overflow_iter) % o.scale_window == 0) {
      if (!o.consecutive_hysteresis) s.cur_hysteresis = o.delayed_shift;
      s.cur_scale *= o.scale_factor;
    }
  }
  s.cur_iter += 1;
}

void DynamicLossScaler::set_state(const LossScalerState& st) {
  STRATA_CHECK(std::isfinite(st.cur_scale) && st.cur_scale > 0.0, "precision",
               "checkpointed loss scale must be finite and > 0, got {}", st.cur_scale);
  STRATA_CHECK(st.cur_hysteresis >= 1 && st.cur_hysteresis <= options_.delayed_shift,
               "precision", "checkpointed hysteresis {} is outside [1, {}] (fp16.hysteresis)",
               st.cur_hysteresis, options_.delayed_shift);
  STRATA_CHECK(st.cur_iter >= 0 && st.last_overflow_iter >= -1 &&
                   st.last_overflow_iter < st.cur_iter,
               "precision",
               "checkpointed loss-scaler iterations are inconsistent (cur_iter {}, "
               "last_overflow_iter {})",
               st.cur_iter, st.last_overflow_iter);
  state_ = st;
}

std::unique_ptr<LossScaler> make_loss_scaler(double loss_scale,
                                             const DynamicLossScalerOptions& options) {
  if (loss_scale == 0.0) return std::make_unique<DynamicLossScaler>(options);
  return std::make_unique<StaticLossScaler>(loss_scale);
}

}  // namespace strata::precision
