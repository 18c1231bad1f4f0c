// DeepSpeed's LR schedules, transcribed from deepspeed/runtime/lr_schedules.py with the same
// double-precision operations in the same order.
#include "framework/optim/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "framework/core/error.hpp"

namespace strata::optim {

namespace {

enum class WarmupType { log, linear };

WarmupType parse_warmup_type(const std::string& s) {
  if (s == "log") return WarmupType::log;
  if (s == "linear") return WarmupType::linear;
  user_fail("optim", "scheduler.params.warmup_type must be \"log\" or \"linear\", got \"{}\"", s);
}

// The warmup fraction DeepSpeed calls gamma (WarmupLR) or ratio (WarmupCosineLR), for
// 0 <= i < warmup_num_steps.
struct Warmup {
  std::int64_t num_steps;  // max(2, warmup_num_steps)
  double inverse_log;      // 1 / log(num_steps)
  WarmupType type;

  Warmup(std::int64_t steps, WarmupType t)
      : num_steps(std::max<std::int64_t>(2, steps)),
        inverse_log(1.0 / std::log(static_cast<double>(num_steps))),
        type(t) {}

  double fraction(std::int64_t i) const {
    if (type == WarmupType::log) return inverse_log * std::log(static_cast<double>(i + 1));
    return static_cast<double>(i) / static_cast<double>(num_steps);
  }
};

class ConstantLR final : public LRSchedule {
 public:
  explicit ConstantLR(double lr) : lr_(lr) {}
  double lr(std::int64_t) const override { return lr_; }
  const char* name() const override { return "constant"; }

 private:
  double lr_;
};

// WarmupLR and WarmupDecayLR: min_lr + (max_lr - min_lr) * gamma(i).
class WarmupLR : public LRSchedule {
 public:
  WarmupLR(double min_lr, double max_lr, Warmup warmup)
      : min_lr_(min_lr), delta_lr_(max_lr - min_lr), warmup_(warmup) {}
  double lr(std::int64_t i) const override {
    if (i < 0) return min_lr_;  // the rate set at construction
    return min_lr_ + delta_lr_ * gamma(i);
  }
  const char* name() const override { return "WarmupLR"; }

 protected:
  virtual double gamma(std::int64_t i) const {
    if (i < warmup_.num_steps) return warmup_.fraction(i);
    return 1.0;
  }
  double min_lr_;
  double delta_lr_;
  Warmup warmup_;
};

class WarmupDecayLR final : public WarmupLR {
 public:
  WarmupDecayLR(double min_lr, double max_lr, Warmup warmup, std::int64_t total_num_steps)
      : WarmupLR(min_lr, max_lr, warmup), total_num_steps_(total_num_steps) {}
  const char* name() const override { return "WarmupDecayLR"; }

 protected:
  double gamma(std::int64_t i) const override {
    if (i < warmup_.num_steps) return warmup_.fraction(i);
    return std::max(0.0, static_cast<double>(total_num_steps_ - i) /
                             std::max(1.0, static_cast<double>(total_num_steps_ -
                                                               warmup_.num_steps)));
  }

 private:
  std::int64_t total_num_steps_;
};

// base_lr * ratio(i): warmup from warmup_min_ratio to 1, then cosine down to cos_min_ratio.
class WarmupCosineLR final : public LRSchedule {
 public:
  WarmupCosineLR(double base_lr, Warmup warmup, std::int64_t total_num_steps,
                 double warmup_min_ratio, double cos_min_ratio)
      : base_lr_(base_lr),
        warmup_(warmup),
        total_num_steps_(total_num_steps),
        warmup_min_ratio_(warmup_min_ratio),
        cos_min_ratio_(cos_min_ratio) {}
  double lr(std::int64_t i) const override {
    if (i < 0) return 0.0;  // DeepSpeed sets 0.0 at construction
    return base_lr_ * ratio(i);
  }
  const char* name() const override { return "WarmupCosineLR"; }

 private:
  double ratio(std::int64_t i) const {
    if (i < warmup_.num_steps) {
      const double r = warmup_.fraction(i);
      const double delta = 1.0 - warmup_min_ratio_;
      return warmup_min_ratio_ + r * delta;
    }
    const double real_last_step = static_cast<double>(i - warmup_.num_steps + 1);
    const double real_total_steps = static_cast<double>(total_num_steps_ - warmup_.num_steps);
    const double delta = 1.0 - cos_min_ratio_;
    const double r =
        (1.0 + std::cos(std::numbers::pi * real_last_step / real_total_steps)) / 2.0;
    return std::max(0.0, cos_min_ratio_ + delta * r);
  }
  double base_lr_;
  Warmup warmup_;
  std::int64_t total_num_steps_;
  double warmup_min_ratio_;
  double cos_min_ratio_;
};

void check_finite(double x, const char* what) {
  if (!std::isfinite(x)) user_fail("optim", "scheduler.params.{} must be finite, got {}", what, x);
}

}  // namespace

std::unique_ptr<LRSchedule> make_schedule(const ScheduleSpec& spec, double base_lr) {
  check_finite(base_lr, "lr (optimizer)");
  if (spec.type == "constant") return std::make_unique<ConstantLR>(base_lr);

  const bool warmup_lr = spec.type == "WarmupLR";
  const bool decay_lr = spec.type == "WarmupDecayLR";
  const bool cosine_lr = spec.type == "WarmupCosineLR";
  if (!warmup_lr && !decay_lr && !cosine_lr) {
    user_fail("optim",
              "unknown scheduler.type \"{}\": supported are \"WarmupLR\", \"WarmupDecayLR\", "
              "\"WarmupCosineLR\" (DeepSpeed's names, case-sensitive) or no scheduler",
              spec.type);
  }
  if (spec.warmup_num_steps < 0) {
    user_fail("optim", "scheduler.params.warmup_num_steps must be >= 0, got {}",
              spec.warmup_num_steps);
  }
  const Warmup warmup(spec.warmup_num_steps, parse_warmup_type(spec.warmup_type));
  if (decay_lr || cosine_lr) {
    if (spec.total_num_steps <= 0) {
      user_fail("optim", "scheduler.params.total_num_steps is required for {} (got {})",
                spec.type, spec.total_num_steps);
    }
    if (spec.total_num_steps < spec.warmup_num_steps) {
      user_fail("optim",
                "scheduler.params.total_num_steps ({}) is less than warmup_num_steps ({})",
                spec.total_num_steps, spec.warmup_num_steps);
    }
  }
  if (cosine_lr) {
    if (spec.total_num_steps <= warmup.num_steps) {
      user_fail("optim",
                "WarmupCosineLR needs total_num_steps ({}) > warmup steps ({}; DeepSpeed "
                "uses at least 2)",
                spec.total_num_steps, warmup.num_steps);
    }
    check_finite(spec.warmup_min_ratio, "warmup_min_ratio");
    check_finite(spec.cos_min_ratio, "cos_min_ratio");
    return std::make_unique<WarmupCosineLR>(base_lr, warmup, spec.total_num_steps,
                                            spec.warmup_min_ratio, spec.cos_min_ratio);
  }
  check_finite(spec.warmup_min_lr, "warmup_min_lr");
  const double max_lr = spec.warmup_max_lr.value_or(warmup_lr ? base_lr : 0.001);
  check_finite(max_lr, "warmup_max_lr");
  if (warmup_lr) return std::make_unique<WarmupLR>(spec.warmup_min_lr, max_lr, warmup);
  return std::make_unique<WarmupDecayLR>(spec.warmup_min_lr, max_lr, warmup,
                                         spec.total_num_steps);
}

}  // namespace strata::optim
