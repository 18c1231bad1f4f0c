// optimizer.type "AdamW8bit": AdamW's params and defaults (bitsandbytes' AdamW8bit takes the same).
#include "framework/optim/hparams/common.hpp"

namespace strata::optim {

const OptimizerSpec& adamw8bit_spec() {
  static const OptimizerSpec spec = [] {
    OptimizerSpec s;
    s.name = "AdamW8bit";
    s.summary = "AdamW with 8-bit block-wise quantized m and v";
    s.params = {
        hparams::lr(), hparams::betas(hparams::kAdamBetas), hparams::eps(),
        hparams::weight_decay(0.01, hparams::kDecoupledDecay),
        hparams::flag("bias_correction", true, "Divide the moments by 1 - beta^t, as AdamW.")};
    s.deepspeed_params = {"torch_adam", "adam_w_mode", "amsgrad"};
    s.unit_steps = true;
    return s;
  }();
  return spec;
}

}  // namespace strata::optim
