// The planning transport: rank `rank` of a world of `size` ranks that exists only on paper, for
// the memory planner (parallel/plan), which runs one rank's real training step on the meta device
// without launching the others. Every call completes at once and moves no data: meta buffers are
// left as they are; host buffers get what they would if every rank had contributed what this one
// did (an all-reduce or broadcast leaves the input, an all-gather repeats it in every block, a
// reduce-scatter keeps this rank's block). Splits assume every rank passes this rank's colour (as
// the engine's splits of dp and world do); parallel::Grid builds a planning world's axis groups
// itself. Point-to-point calls on host buffers fail (there is no peer to receive from).
// Chosen explicitly (planning_world), never as a fallback: no launcher selects it.
#pragma once

#include <string>

#include "parallel/comm/group.hpp"

namespace strata::parallel {

// "planning": Group::transport() of a planning group.
inline constexpr const char* kPlanningTransport = "planning";

// A planning group of `size` ranks seen from `rank`, named `name`.
Group planning_world(int size, int rank = 0, std::string name = "world");

// True for a group made by planning_world (or split from one).
bool is_planning(const Group& g);

}  // namespace strata::parallel
