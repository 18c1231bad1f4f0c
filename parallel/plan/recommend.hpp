// Given memory caps, the fastest configuration that fits: the ZeRO ladder in the order DeepSpeed's
// documentation gives it (no ZeRO, ZeRO-1, ZeRO-2, ZeRO-2 + optimizer offload, ZeRO-3, ZeRO-3 +
// optimizer offload, ZeRO-3 + parameter offload, NVMe), each without activation recomputation, with
// selective and with full recomputation, at the largest micro-batch that fits while micro-batch ×
// accumulation (the global batch) stays — and, for a tensor-parallel job without it, each of those
// with sequence parallelism too (strata.sequence_parallel: the LayerNorm and residual activations
// split over the tp ranks; it composes with either recomputation); the first rung with a
// configuration that fits wins, its cheapest one by the cost estimate (cost.hpp: selective costs
// less compute than full, so it is proposed when it is what makes the rung fit; on a tie the option
// without sequence parallelism, which is listed first). Every option considered (the rungs up to the chosen one) is kept, with its
// plan and estimated cost.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "parallel/plan/cost.hpp"
#include "parallel/plan/trial.hpp"

namespace strata::parallel::plan {

struct Option {
  std::string rung;             // "ZeRO-2 + optimizer offload"
  config::Recompute recompute = config::Recompute::none;  // strata.activation_checkpointing
  bool sequence_parallel = false;  // turned on by this option (strata.sequence_parallel=true)
  std::string skipped;          // why the rung was not planned ("" when it was)
  std::optional<Trial> trial;   // the largest micro-batch that fits, else micro-batch 1 (not fitting)
  StepCost cost;
  double relative = 0;          // cost / the cheapest fitting option's (all options' if none fits)
};

struct Recommendation {
  std::vector<Option> options;
  std::optional<std::size_t> chosen;  // index into options
  CostModel model;
};

// cfg: validated, batch sizes resolved for `ranks` ranks. Plans against `caps`.
Recommendation recommend(const config::Config& cfg, int ranks, const ModelFactory& model,
                         const Caps& caps, const CostModel& cost = {});

}  // namespace strata::parallel::plan
