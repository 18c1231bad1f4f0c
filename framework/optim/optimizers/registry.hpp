// The optimizers Strata has: each config optimizer.type (its hyperparameters declared in
// framework/optim/hparams) and the function that makes its object from the config's optimizer
// block, both named by its one line of framework/optim/registry.def (which hparams/registry.cpp
// reads too, for the specs alone).
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
