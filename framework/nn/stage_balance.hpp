// Cutting a stack of equal layers into pipeline stages: contiguous runs of at least one layer
// each, balanced so that the most expensive stage (which sets the pipeline's pace) is as cheap as
// possible when the first and last stages also carry extra work (embeddings, an LM head).
#pragma once

#include <vector>

namespace strata::nn {

// The first layer of each of `stages` stages over `layers` layers, then `layers` (stages + 1
// entries). A stage of k layers costs k, plus first_extra on the first and last_extra on the last
// (in units of one layer's cost). Minimises the largest stage cost (the pipeline's pace); among
// such cuts, the most even one (least sum of squared stage costs), and among those the one with the
// fewest layers on the earlier stages (which hold more micro-batches in flight under 1F1B).
// Throws UserError when stages is not in [1, layers].
std::vector<int> balance_stages(int layers, int stages, double first_extra = 0,
                                double last_extra = 0);

}  // namespace strata::nn
