// train_micro_batch_size_per_gpu: "auto" that nothing else determines (Hugging Face's integration
// fills it from the command line; here a device cap is given instead): the memory planner picks
// the largest micro-batch whose whole training step fits the caps — doubling from 1, then
// bisecting — before config::resolve_batch. gradient_accumulation_steps stays as given.
#pragma once

#include <optional>

#include "parallel/plan/planner.hpp"

namespace strata::parallel::plan {

// Sets cfg.train_micro_batch_size_per_gpu when the config leaves it "auto" with nothing that
// determines it, and returns the plan of the chosen micro-batch (nullopt: nothing to choose).
// Throws UserError when not even micro-batch 1 fits, with what would.
std::optional<MemoryPlan> resolve_auto_micro_batch(config::Config& cfg, int ranks,
                                                   const ModelFactory& model);

}  // namespace strata::parallel::plan
