// strata/strata.hpp: the whole public API of Strata (docs/api.md): a model (strata/model.hpp),
// its training (strata/training.hpp) and the version built against (strata/version.hpp).
#pragma once

#include "strata/model.hpp"
#include "strata/training.hpp"
#include "strata/version.hpp"
