// Trying configurations against memory caps with the planner: a change applied to a config and
// planned, and the largest micro-batch (keeping micro-batch × accumulation, hence the global
// batch) that fits. Shared by the recommendation, the out-of-memory advice and "auto" micro-batch.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "parallel/plan/change.hpp"
#include "parallel/plan/planner.hpp"

namespace strata::parallel::plan {

using Caps = std::array<std::optional<std::uint64_t>, kNumTiers>;

// The caps of a config (strata.memory.*_limit).
Caps caps_of(const config::Config& cfg);

struct Trial {
  Change change;
  config::Config cfg;  // the config with the change applied (resolved)
  MemoryPlan plan;     // its caps are the caps tried against
  bool fits() const { return plan.fits(); }
};

class Trials {
 public:
  Trials(ModelFactory model, int ranks, Caps caps) : model_(std::move(model)), ranks_(ranks), caps_(caps) {}

  // base with `change` applied and planned; nullopt when the change makes the config invalid.
  std::optional<Trial> run(const config::Config& base, const Change& change) const;
  // The largest micro-batch below `below` (0: any) that fits, among the divisors of base's
  // samples per rank and step (micro × accumulation), with `change` applied too: the change
  // then also sets train_micro_batch_size_per_gpu and gradient_accumulation_steps. Bisection: a
  // smaller micro-batch never needs more memory. nullopt when none fits.
  std::optional<Trial> largest_micro(const config::Config& base, const Change& change,
                                     int below = 0) const;
  const Caps& caps() const { return caps_; }
  int ranks() const { return ranks_; }

 private:
  ModelFactory model_;
  int ranks_;
  Caps caps_;
};

// Divisors of n, ascending.
std::vector<std::int64_t> divisors(std::int64_t n);

}  // namespace strata::parallel::plan
