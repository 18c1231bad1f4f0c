// optimizer.type "Lamb": DeepSpeed's FusedLamb names and defaults.
#include <fmt/format.h>

#include "framework/optim/hparams/lamb_params.hpp"

namespace strata::optim {

const OptimizerSpec& lamb_spec() {
  static const OptimizerSpec spec = [] {
    OptimizerSpec s;
    s.name = "Lamb";
    s.summary = "DeepSpeed's FusedLamb: per-parameter trust ratio";
    s.params = {hparams::lr(),
                hparams::betas(hparams::kAdamBetas),
                hparams::eps(),
                hparams::weight_decay(0.0, hparams::kLambDecay),
                hparams::flag("bias_correction", true,
                              "Step size lr × sqrt(1 - beta2^t) / (1 - beta1^t), as FusedLamb."),
                hparams::max_coeff(),
                hparams::min_coeff(),
                hparams::flag("eps_inside_sqrt", false,
                              "Denominator sqrt(v + eps) instead of sqrt(v) + eps.")};
    s.deepspeed_params = {"amsgrad", "max_grad_norm"};
    s.check = hparams::check_trust_ratio_bounds;
    return s;
  }();
  return spec;
}

}  // namespace strata::optim
