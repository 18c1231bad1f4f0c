// optimizer.type "Lion8bit": Lion's params and defaults (bitsandbytes' Lion8bit takes the same).
#include "framework/optim/hparams/common.hpp"

namespace strata::optim {

const OptimizerSpec& lion8bit_spec() {
  static const OptimizerSpec spec = [] {
    OptimizerSpec s;
    s.name = "Lion8bit";
    s.summary = "Lion with an 8-bit block-wise quantized momentum, as bitsandbytes' Lion8bit";
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
