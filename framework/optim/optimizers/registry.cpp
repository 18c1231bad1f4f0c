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
  using T = config::OptimizerType;
  static const OptimizerEntry entries[] = {
      {T::adamw, &AdamW::from_config},
      {T::adam, &AdamW::from_config},  // AdamW semantics (adam_w_mode true, the config's rule)
      {T::sgd, &SGD::from_config},
      {T::adamw8bit, &AdamW8bit::from_config},
      {T::adafactor, &Adafactor::from_config},
      {T::lamb, &Lamb::from_config},
      {T::onebit_adam, &OneBitAdam::from_config},
      {T::onebit_lamb, &OneBitLamb::from_config},
      {T::lion, &Lion::from_config},
      {T::lion8bit, &Lion8bit::from_config},
  };
  return entries;
}

std::shared_ptr<const Optimizer> make_optimizer(const config::Optimizer& c) {
  for (const OptimizerEntry& e : registered_optimizers())
    if (e.type == c.type) return e.make(c);
  fail("optim", "optimizer.type {} has no optimizer registered (framework/optim/optimizers/"
       "registry.cpp)", config::to_string(c.type));
}

}  // namespace strata::optim
