// Out-of-memory advice from the memory planner: what a whole step of this config needs on the
// tier (its planned peak, rounded up — not the allocation that failed), and the changes the
// planner predicts fit under the caps, each as the exact command-line flags, valid for this
// config (optimizer offload with ZeRO stage >= 1, no sharding on one rank), cheapest estimated
// step first, raising the cap last. Following the first literally fits in one try (tested).
#pragma once

#include "framework/memory/ledger.hpp"
#include "parallel/plan/trial.hpp"

namespace strata::parallel::plan {

// The advice for `cfg` (resolved) on `ranks` ranks that ran out of `tier` under `caps`.
OomAdvice plan_advice(const config::Config& cfg, int ranks, const ModelFactory& model, Tier tier,
                      const Caps& caps);

// The advisor parallel::Training installs on its ledger: plan_advice for the ledger's caps at the
// time of the error (computed once per tier and caps). Falls back to default_oom_advice, with
// the planner's error, when planning fails, and when an error happens inside the planner itself.
OomAdvisor planned_oom_advisor(config::Config cfg, int ranks, ModelFactory model);

}  // namespace strata::parallel::plan
