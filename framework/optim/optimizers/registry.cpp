#include "framework/optim/optimizers/registry.hpp"

#include "framework/optim/optimizers/adafactor.hpp"
#include "framework/optim/optimizers/adamw.hpp"
#include "framework/optim/optimizers/adamw8bit.hpp"
#include "framework/optim/optimizers/lamb.hpp"
#include "framework/optim/optimizers/lion.hpp"
#include "framework/optim/optimizers/lion8bit.hpp"
#include "framework/optim/optimizers/onebit_adam.hpp"
#include "framework/optim/optimizers/onebit_lamb.hpp"
#include "framework/optim/optimizers/sgd.hpp"

namespace strata::optim {

std::span<const OptimizerEntry> registered_optimizers() {
  static const OptimizerEntry entries[] = {
      {"AdamW", &AdamW::from_config},
      {"Adam", &AdamW::from_config},  // AdamW semantics (adam_w_mode true, the config's rule)
      {"SGD", &SGD::from_config},
      {"AdamW8bit", &AdamW8bit::from_config},
      {"Adafactor", &Adafactor::from_config},
      {"Lamb", &Lamb::from_config},
      {"OneBitAdam", &OneBitAdam::from_config},
      {"OneBitLamb", &OneBitLamb::from_config},
      {"Lion", &Lion::from_config},
      {"Lion8bit", &Lion8bit::from_config},
  };
  return entries;
}

std::shared_ptr<const Optimizer> make_optimizer(const config::Optimizer& c) {
  for (const OptimizerEntry& e : registered_optimizers())
    if (e.type == c.type) return e.make(c);
  fail("optim", "optimizer.type {} has no optimizer registered (framework/optim/optimizers/"
       "registry.cpp)", c.type);
}

}  // namespace strata::optim
