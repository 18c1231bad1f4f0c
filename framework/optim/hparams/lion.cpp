// optimizer.type "Lion": DeepSpeed's Lion names and defaults (lr, betas, weight_decay).
#include "framework/optim/hparams/common.hpp"

namespace strata::optim {

const OptimizerSpec& lion_spec() {
  static const OptimizerSpec spec = [] {
    OptimizerSpec s;
    s.name = "Lion";
    s.summary = "DeepSpeed's Lion: the sign of an interpolated momentum";
    s.params = {hparams::lr(),
                hparams::betas("[beta1, beta2]: the update's interpolation of momentum and "
                               "gradient, and the momentum's decay; each in [0, 1)."),
                hparams::weight_decay(0.0, hparams::kDecoupledDecay)};
    s.unit_steps = true;
    return s;
  }();
  return spec;
}

}  // namespace strata::optim
