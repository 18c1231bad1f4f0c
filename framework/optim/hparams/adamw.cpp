// optimizer.type "AdamW" and "Adam" (both the AdamW object: Strata's Adam decouples weight decay,
// DeepSpeed's default adam_w_mode): DeepSpeed's FusedAdam/CPUAdam names and defaults.
#include "framework/optim/hparams/common.hpp"

namespace strata::optim {

namespace {
constexpr std::string_view kAdamBiasCorrection =
    "Divide the moments by 1 - beta^t (PyTorch, DeepSpeed's default); false steps by "
    "lr * m / (sqrt(v) + eps) as DeepSpeed's FusedAdam and CPUAdam do.";

void adam_check(const HValues& v, HReport& r) {
  if (r.given("adam_w_mode") && r.ok("adam_w_mode") && !v.flag("adam_w_mode"))
    r.not_implemented("adam_w_mode", "false", "Adam with weight decay added to the gradient (L2)",
                      "remove the key or set it to true: decoupled weight decay, DeepSpeed's "
                      "default");
}
}  // namespace

const OptimizerSpec& adamw_spec() {
  static const OptimizerSpec spec = [] {
    OptimizerSpec s;
    s.name = "AdamW";
    s.params = {hparams::lr(), hparams::betas(hparams::kAdamBetas), hparams::eps(),
                hparams::weight_decay(0.01, hparams::kDecoupledDecay),
                hparams::flag("bias_correction", true, kAdamBiasCorrection)};
    s.deepspeed_params = {"torch_adam", "adam_w_mode", "amsgrad"};
    s.unit_steps = true;
    return s;
  }();
  return spec;
}

const OptimizerSpec& adam_spec() {
  static const OptimizerSpec spec = [] {
    OptimizerSpec s;
    s.name = "Adam";
    s.params = {hparams::lr(), hparams::betas(hparams::kAdamBetas), hparams::eps(),
                hparams::weight_decay(0.0, hparams::kDecoupledDecay),
                hparams::flag("adam_w_mode", true,
                              "Decoupled weight decay as in DeepSpeed's default; must be true "
                              "(L2-coupled Adam is not implemented)."),
                hparams::flag("bias_correction", true, kAdamBiasCorrection)};
    s.deepspeed_params = {"torch_adam", "amsgrad"};
    s.unit_steps = true;
    s.check = adam_check;
    return s;
  }();
  return spec;
}

}  // namespace strata::optim
