// optimizer.type "Adafactor": transformers.optimization.Adafactor's names, defaults and rules
// (its `eps` is the pair [eps1, eps2]; beta1 null = no first moment; lr only without
// relative_step).
#include <fmt/format.h>

#include "framework/optim/hparams/common.hpp"

namespace strata::optim {

namespace {
void adafactor_check(const HValues& v, HReport& r) {
  if (v.flag("relative_step") && r.given("lr"))
    r.mistake("lr", fmt::format("{} is given but Adafactor's relative_step is true (the step size "
                                "is then min(1e-2, 1/sqrt(step))); remove lr, or set {} to false "
                                "to use it",
                                r.path("lr"), r.path("relative_step")));
  if (v.flag("warmup_init") && !v.flag("relative_step"))
    r.mistake("warmup_init",
              fmt::format("{} is true but relative_step is false; warmup_init shapes "
                          "the relative step size: set relative_step to true or "
                          "remove warmup_init",
                          r.path("warmup_init")));
}

std::string adafactor_own_step_size(const HValues& v) {
  if (!v.flag("relative_step")) return {};
  return "Adafactor's relative_step is true, which sets the step size itself (min(1e-2, "
         "1/sqrt(step))); remove the scheduler, or set optimizer.params.relative_step to false "
         "and give optimizer.params.lr";
}

// With relative_step the step size is relative: lr is no setting then (and refused).
bool adafactor_printed(std::string_view param, const HValues& v) {
  return param != "lr" || !v.flag("relative_step");
}
}  // namespace

const OptimizerSpec& adafactor_spec() {
  static const OptimizerSpec spec = [] {
    OptimizerSpec s;
    s.name = "Adafactor";
    s.params = {
        hparams::lr("Step size when relative_step is false (the peak rate when a scheduler "
                    "runs)."),
        {"eps", HKind::pair, HPair{1e-30, 1e-3}, HRange::positive(),
         "[eps1, eps2]: eps1 added to grad² before its means, eps2 the least parameter scale "
         "(scale_parameter).",
         "a pair [eps1, eps2] (default [1e-30, 0.001]: added to grad², and the least parameter "
         "scale)"},
        hparams::number("clip_threshold", 1.0, HRange::positive(),
                        "The update is divided by max(1, RMS(update) / clip_threshold) (per "
                        "parameter)."),
        hparams::number("decay_rate", -0.8, HRange{-1, 0, false, true},
                        "Second-moment decay beta2 = 1 - step^decay_rate; in [-1, 0)."),
        {"beta1", HKind::optional_number, std::optional<double>{}, HRange::unit_open(),
         "First-moment decay in [0, 1); null = no first moment (4 bytes per parameter less).", ""},
        hparams::weight_decay(0.0, hparams::kDecoupledDecay),
        hparams::flag("scale_parameter", true,
                      "Multiply the step size by max(eps2, RMS(parameter))."),
        hparams::flag("relative_step", true,
                      "Step size min(1e-2, 1/sqrt(step)) instead of lr (then lr must not be "
                      "given and no scheduler may run)."),
        hparams::flag("warmup_init", false,
                      "Relative step size min(1e-6 × step, 1/sqrt(step)); needs relative_step.")};
    s.check = adafactor_check;
    s.own_step_size = adafactor_own_step_size;
    s.printed = adafactor_printed;
    return s;
  }();
  return spec;
}

}  // namespace strata::optim
