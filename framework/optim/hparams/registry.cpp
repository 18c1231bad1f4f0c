// The optimizer types Strata has, in the order messages list them: the spec column of
// framework/optim/registry.def (one line per optimizer; optim/optimizers/registry.cpp reads the
// other column, the function making each object).
#include "framework/optim/hparams/hparams.hpp"

namespace strata::optim {

#define STRATA_OPTIMIZER(spec, make) const OptimizerSpec& spec();
#include "framework/optim/registry.def"

std::span<const OptimizerSpec* const> optimizer_specs() {
  static const OptimizerSpec* const specs[] = {
#define STRATA_OPTIMIZER(spec, make) &spec(),
#include "framework/optim/registry.def"
  };
  return specs;
}

}  // namespace strata::optim
