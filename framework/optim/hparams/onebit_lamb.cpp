// optimizer.type "OneBitLamb": DeepSpeed's OnebitLamb names and defaults.
#include <fmt/format.h>

#include "framework/optim/hparams/lamb_params.hpp"

namespace strata::optim {

namespace {
void onebit_lamb_check(const HValues& v, HReport& r) {
  hparams::check_trust_ratio_bounds(v, r);
  if (v.number("factor_min") > v.number("factor_max"))
    r.mistake("factor_min",
              fmt::format("{} {} is above factor_max {}: the compressed phase's factor is clamped "
                          "to [factor_min, factor_max]; make factor_min <= factor_max",
                          r.path("factor_min"), v.number("factor_min"), v.number("factor_max")));
  hparams::never_applied(v, r, "bias_correction", "bias correction in 1-bit LAMB", "OnebitLamb");
  hparams::never_applied(v, r, "eps_inside_sqrt", "eps inside the square root in 1-bit LAMB",
                         "OnebitLamb");
}
}  // namespace

const OptimizerSpec& onebit_lamb_spec() {
  static const OptimizerSpec spec = [] {
    OptimizerSpec s;
    s.name = "OneBitLamb";
    s.summary =
        "DeepSpeed's 1-bit LAMB: compressed momentum exchange after LAMB's warm-up; ZeRO "
        "stage 0";
    s.params = {
        hparams::lr(), hparams::betas(hparams::kAdamBetas), hparams::eps(),
        hparams::weight_decay(0.0, hparams::kLambDecay),
        hparams::flag("bias_correction", false,
                      "False only (DeepSpeed's OnebitLamb never applies it)."),
        hparams::max_coeff(), hparams::min_coeff(),
        hparams::flag("eps_inside_sqrt", false,
                      "False only (DeepSpeed's OnebitLamb never applies it)."),
        // At least one LAMB step: the compressed phase scales by the warm-up's trust ratios.
        hparams::integer("freeze_step", 100000, HRange::at_least(1),
                         "LAMB steps (>= 1) before the second moment freezes and the momenta "
                         "are averaged by the 1-bit compressed all-reduce."),
        hparams::number("coeff_beta", 0.9, HRange::unit_open(),
                        "Decay of the running average of the warm-up's trust ratios (the "
                        "compressed phase's base coefficient), in [0, 1)."),
        hparams::number("factor_max", 4.0, HRange::positive(),
                        "Upper bound of the compressed phase's factor on that coefficient."),
        hparams::number("factor_min", 0.5, HRange::positive(),
                        "Lower bound of that factor; > 0 and <= factor_max."),
        hparams::number("factor_threshold", 0.1, HRange::unit_open(),
                        "Most the factor moves from one update to the next (relative), in "
                        "[0, 1).")};
    s.deepspeed_params = {"amsgrad", "max_grad_norm", "cuda_aware", "comm_backend_name"};
    s.check = onebit_lamb_check;
    return s;
  }();
  return spec;
}

}  // namespace strata::optim
