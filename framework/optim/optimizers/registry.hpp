// The optimizers Strata has: each config optimizer.type (its hyperparameters declared in
// framework/optim/hparams) and the function that makes its object from the config's optimizer
// block. Adding an optimizer adds one line to registry.cpp (and its spec's line to
// hparams/registry.cpp; a test checks the two lists agree).
#pragma once

#include <memory>
#include <span>

#include "framework/config/config.hpp"
#include "framework/optim/optimizers/optimizer.hpp"

namespace strata::optim {

struct OptimizerEntry {
  std::string_view type;  // the spec's name: optimizer.type as the config writes it
  std::shared_ptr<const Optimizer> (*make)(const config::Optimizer&);
};

std::span<const OptimizerEntry> registered_optimizers();

// The optimizer of a config's optimizer block (its type's entry; its hyperparameters are checked
// when a Trainer binds it).
std::shared_ptr<const Optimizer> make_optimizer(const config::Optimizer& c);

}  // namespace strata::optim
