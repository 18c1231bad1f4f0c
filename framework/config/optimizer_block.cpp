// config::Optimizer: a registered type with its spec's defaults.
#include "framework/config/config.hpp"

namespace strata::config {

Optimizer::Optimizer() : Optimizer(kDefaultOptimizer) {}

Optimizer::Optimizer(std::string_view t)
    : type(optim::optimizer_spec(t).name), params(optim::optimizer_spec(t).defaults()) {}

}  // namespace strata::config
