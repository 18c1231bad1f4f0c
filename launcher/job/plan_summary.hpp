// A GPT job's memory plan lines: the planner's per-rank peaks per tier printed at start-up (before
// anything is allocated), and at the end the same beside the peaks the run measured.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "parallel/plan/planner.hpp"

namespace strata::job {

// "plan       per rank before allocating: device 82.14 MiB (activations 69.29 MiB, ...), ..."
std::string plan_summary(const parallel::plan::MemoryPlan& plan);

// A table tier | planned | measured | difference, ending in a newline.
std::string plan_versus_measured(const parallel::plan::MemoryPlan& plan,
                                 const std::array<std::uint64_t, kNumTiers>& measured);

}  // namespace strata::job
