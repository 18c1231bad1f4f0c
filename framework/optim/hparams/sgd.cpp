// optimizer.type "SGD": PyTorch's SGD names and defaults (as DeepSpeed loads it).
#include <fmt/format.h>

#include "framework/optim/hparams/common.hpp"

namespace strata::optim {

namespace {
void sgd_check(const HValues& v, HReport& r) {
  if (v.flag("nesterov") && v.number("momentum") <= 0 && r.ok("nesterov") && r.ok("momentum"))
    r.mistake("nesterov",
              fmt::format("{} is true but {} is {}; Nesterov momentum needs momentum > 0",
                          r.path("nesterov"), r.path("momentum"), v.number("momentum")));
}
}  // namespace

const OptimizerSpec& sgd_spec() {
  static const OptimizerSpec spec = [] {
    OptimizerSpec s;
    s.name = "SGD";
    s.params = {hparams::lr(),
                hparams::number("momentum", 0.0, HRange::unit_open(), "Momentum in [0, 1)."),
                hparams::weight_decay(0.0, "Weight decay, on parameters with >= 2 dims only."),
                hparams::flag("nesterov", false, "Nesterov momentum (needs momentum > 0).")};
    s.deepspeed_params = {"dampening", "maximize"};
    s.unit_steps = true;
    s.check = sgd_check;
    return s;
  }();
  return spec;
}

}  // namespace strata::optim
