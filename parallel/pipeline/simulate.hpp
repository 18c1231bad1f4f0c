// Runs every stage's action list together, as the pipeline engine executes them: each stage runs
// its actions in order, an action that receives waits until the neighbour's matching send has run,
// and a stage waits for its sends only as Execution says. Checks that the
// lists form a valid step (every forward has its backward after it, forwards in micro-batch order,
// transfers where the stage's position says, every send matched by exactly one receive, no
// deadlock) and measures the ideal timeline with fixed costs per pass.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "parallel/pipeline/schedule.hpp"

namespace strata::parallel::pipeline {

using ScheduleFn = std::function<std::vector<Action>(int stages, int stage, int micro_batches)>;

struct Timeline {
  std::vector<std::string> problems;  // empty: a valid, deadlock-free step
  double makespan = 0;                // when the last action ends
  std::vector<double> busy;           // compute time of each stage
  std::vector<int> in_flight;         // most micro-batches in flight on each stage
  // Idle fraction of the step over all stages: 1 - sum(busy) / (stages * makespan). For 1F1B with
  // equal stages it is (pp - 1) / (m + pp - 1).
  double bubble() const;
};

// How the engine carries a list out. Receives: at the start of each action the stage posts the
// receive of that action and of its next receiving action (one receive ahead). Sends are posted
// when an action's compute ends; a send completes once its receive is posted (the conservative,
// rendezvous case), and with send_window = w > 0 the stage waits for it before starting the
// action w places later (0: only at the end of the step).
struct Execution {
  int send_window = 0;
};

// The action index at whose start a stage posts the receive of action j (one receive ahead).
std::size_t receive_posted_at(const std::vector<Action>& actions, std::size_t j);

Timeline simulate(int stages, int micro_batches, const ScheduleFn& schedule,
                  double forward_cost = 1.0, double backward_cost = 2.0, Execution how = {});

// The bubble fraction of a synchronous pipeline of `stages` equal stages over `micro_batches`
// micro-batches: (pp - 1) / (m + pp - 1).
double ideal_bubble(int stages, int micro_batches);

}  // namespace strata::parallel::pipeline
