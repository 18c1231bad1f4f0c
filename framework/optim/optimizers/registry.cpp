// The optimizer objects: the make column of framework/optim/registry.def (one line per
// optimizer), each under its spec's name.
#include "framework/optim/optimizers/registry.hpp"

#include "framework/optim/hparams/hparams.hpp"

namespace strata::optim {

#define STRATA_OPTIMIZER(spec, make)                                   \
  const OptimizerSpec& spec();                                         \
  std::shared_ptr<const Optimizer> make(const config::Optimizer& c);
#include "framework/optim/registry.def"

std::span<const OptimizerEntry> registered_optimizers() {
  static const OptimizerEntry entries[] = {
#define STRATA_OPTIMIZER(spec, make) {spec().name, &make},
#include "framework/optim/registry.def"
  };
  return entries;
}

std::shared_ptr<const Optimizer> make_optimizer(const config::Optimizer& c) {
  for (const OptimizerEntry& e : registered_optimizers())
    if (e.type == c.type) return e.make(c);
  fail("optim", "optimizer.type {} has no optimizer registered (framework/optim/registry.def)",
       c.type);
}

}  // namespace strata::optim
