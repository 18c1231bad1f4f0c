// The optimizers Strata has: each config optimizer.type and the function that makes its object
// from the config's optimizer block. Adding an optimizer adds one line to registry.cpp.
#pragma once

#include <memory>
#include <span>

#include "framework/config/config.hpp"
#include "framework/optim/optimizers/optimizer.hpp"

namespace strata::optim {

struct OptimizerEntry {
  config::OptimizerType type;
  std::shared_ptr<const Optimizer> (*make)(const config::Optimizer&);
};

std::span<const OptimizerEntry> registered_optimizers();

// The optimizer of a config's optimizer block (its type's entry; its hyperparameters are checked
// when a Trainer binds it).
std::shared_ptr<const Optimizer> make_optimizer(const config::Optimizer& c);

}  // namespace strata::optim
