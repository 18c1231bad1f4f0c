// optimizer.type "OneBitAdam": DeepSpeed's OnebitAdam names and defaults.
#include "framework/optim/hparams/common.hpp"

namespace strata::optim {

namespace {
void onebit_adam_check(const HValues& v, HReport& r) {
  hparams::never_applied(v, r, "bias_correction", "bias correction in 1-bit Adam", "OnebitAdam");
}
}  // namespace

const OptimizerSpec& onebit_adam_spec() {
  static const OptimizerSpec spec = [] {
    OptimizerSpec s;
    s.name = "OneBitAdam";
    s.summary =
        "DeepSpeed's 1-bit Adam: compressed momentum exchange after freeze_step; ZeRO "
        "stage 0";
    s.params = {hparams::lr(),
                hparams::betas(hparams::kAdamBetas),
                hparams::eps(),
                hparams::weight_decay(0.0, hparams::kDecoupledDecay),
                hparams::flag("bias_correction", false,
                              "False only (DeepSpeed's OnebitAdam never applies it)."),
                hparams::integer("freeze_step", 100000, HRange::at_least(0),
                                 "Adam steps (gradients averaged, no bias correction) before the "
                                 "second moment freezes and the momenta are averaged by the 1-bit "
                                 "compressed all-reduce.")};
    s.deepspeed_params = {"cuda_aware", "comm_backend_name"};
    s.check = onebit_adam_check;
    return s;
  }();
  return spec;
}

}  // namespace strata::optim
