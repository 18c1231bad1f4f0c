// How a plan is shown: the per-rank table of peaks per tier × category with the caps, the JSON of
// `strata plan --json`, and the table of options a recommendation considered.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "parallel/plan/recommend.hpp"

namespace strata::parallel::plan {

// "memory plan per rank: 1 rank, micro-batch 16 x accumulation 1, ZeRO stage 0\n", the table
// (format_plan) and "fits the caps\n" or "does NOT fit the caps\n": what `strata plan` prints.
std::string format_plan_report(const MemoryPlan& plan, const config::Config& cfg);

// "tier  category  peak" rows, each tier's total with its cap and whether it fits.
std::string format_plan(const MemoryPlan& plan);

// {"ranks": N, "micro_batch": m, "gradient_accumulation_steps": a,
//  "peak": {"device": bytes, "host": bytes, "nvme": bytes},
//  "by_category": {"device": {"params": bytes, ...}, ...}, "caps": {...}, "fits": bool}
nlohmann::json plan_json(const MemoryPlan& plan);

// One row per option: rung, checkpointing, micro-batch × accumulation, peak per tier, fits,
// estimated relative cost; the chosen one marked, and the flags that select it.
std::string format_recommendation(const Recommendation& r, const config::Config& cfg);
nlohmann::json recommendation_json(const Recommendation& r);

}  // namespace strata::parallel::plan
