// The optimizer types Strata has, in the order messages list them: one line each (and one in
// optim/optimizers/registry.cpp, which makes the object of each; a test checks they agree).
#include "framework/optim/hparams/hparams.hpp"

namespace strata::optim {

const OptimizerSpec& adam_spec();
const OptimizerSpec& adamw_spec();
const OptimizerSpec& adamw8bit_spec();
const OptimizerSpec& adafactor_spec();
const OptimizerSpec& lamb_spec();
const OptimizerSpec& onebit_adam_spec();
const OptimizerSpec& onebit_lamb_spec();
const OptimizerSpec& sgd_spec();
const OptimizerSpec& lion_spec();
const OptimizerSpec& lion8bit_spec();

std::span<const OptimizerSpec* const> optimizer_specs() {
  static const OptimizerSpec* const specs[] = {
      &adam_spec(), &adamw_spec(),       &adamw8bit_spec(),   &adafactor_spec(),
      &lamb_spec(), &onebit_adam_spec(), &onebit_lamb_spec(), &sgd_spec(),
      &lion_spec(), &lion8bit_spec(),
  };
  return specs;
}

}  // namespace strata::optim
