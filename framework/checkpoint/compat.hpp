// Whether a checkpoint fits a model: every difference in parameter names and shapes, listed at
// once, so a user sees the whole mismatch (a different n_layer, n_embd, vocabulary...) in one go.
#pragma once

#include <string>
#include <vector>

#include "framework/checkpoint/manifest.hpp"

namespace strata::checkpoint {

struct ExpectedParam {
  std::string name;
  Shape shape;
};

// One line per difference: "missing from the checkpoint: x [2, 3]", "not in the model: y [4]",
// "shape of z: checkpoint [4, 8], model [8, 4]". Empty when they match.
std::vector<std::string> compatibility_differences(const Manifest& m,
                                                   const std::vector<ExpectedParam>& model);
// Throws UserError("[checkpoint] <source> does not match the model: N differences: ...") listing
// up to 20 of them.
void check_compatible(const Manifest& m, const std::vector<ExpectedParam>& model,
                      const std::string& source);

}  // namespace strata::checkpoint
