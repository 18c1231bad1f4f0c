// Learning-rate schedules with DeepSpeed's names, parameters and formulas (constant, WarmupLR,
// WarmupDecayLR, WarmupCosineLR; deepspeed/runtime/lr_schedules.py), as pure functions of the
// step index so that a resumed run computes the same rates.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace strata::optim {

// The "scheduler" section of a DeepSpeed config: its "type" and the "params" this schedule
// reads (others are ignored by the schedule; config validation rejects unknown keys).
struct ScheduleSpec {
  // "constant" (no scheduler: the optimizer's lr throughout), "WarmupLR", "WarmupDecayLR",
  // "WarmupCosineLR".
  std::string type = "constant";
  // WarmupLR / WarmupDecayLR.
  double warmup_min_lr = 0.0;
  // Unset: the optimizer's lr for WarmupLR, 0.001 for WarmupDecayLR (DeepSpeed's defaults).
  std::optional<double> warmup_max_lr = std::nullopt;
  // All warmup schedules; DeepSpeed uses max(2, warmup_num_steps).
  std::int64_t warmup_num_steps = 1000;
  // "log" (DeepSpeed's default) or "linear".
  std::string warmup_type = "log";
  // WarmupDecayLR / WarmupCosineLR: required (> 0).
  std::int64_t total_num_steps = 0;
  // WarmupCosineLR: ratios of the optimizer's lr.
  double warmup_min_ratio = 0.0;
  double cos_min_ratio = 0.0001;
};

// A schedule, indexed like DeepSpeed's `last_batch_iteration`: lr(i) is the rate the scheduler
// sets after its (i+1)-th step() call, and lr(-1) the rate it sets when constructed.
//
// DeepSpeed's engine calls scheduler.step() AFTER each optimizer update that was not skipped
// for overflow, so update k (1-based, counting only applied updates) runs with lr(k - 2): the
// first update with the construction-time rate. lr_for_update(k) gives exactly that.
class LRSchedule {
 public:
  virtual ~LRSchedule() = default;
  // Rate at scheduler index `iteration` (>= -1; anything below -1 is treated as -1).
  virtual double lr(std::int64_t iteration) const = 0;
  // The schedule's DeepSpeed type name.
  virtual const char* name() const = 0;
  // Rate for the k-th applied optimizer update (k >= 1), as DeepSpeed's engine would use.
  double lr_for_update(std::int64_t k) const { return lr(k - 2); }
};

// Builds the schedule for `spec`; base_lr is the optimizer's lr. Throws UserError("[optim]")
// for an unknown type (listing the supported ones), an unknown warmup_type, or missing /
// inconsistent step counts (WarmupCosineLR needs total_num_steps > max(2, warmup_num_steps)).
std::unique_ptr<LRSchedule> make_schedule(const ScheduleSpec& spec, double base_lr);

}  // namespace strata::optim
