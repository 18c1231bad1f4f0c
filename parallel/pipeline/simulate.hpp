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
// A schedule of ranks holding several model chunks each (interleaved_one_f_one_b).
using ChunkedScheduleFn =
    std::function<std::vector<Action>(int stages, int stage, int micro_batches, int chunks)>;

struct Timeline {
  std::vector<std::string> problems;  // empty: a valid, deadlock-free step
  double makespan = 0;                // when the last action ends
  std::vector<double> busy;           // compute time of each stage
  std::vector<int> in_flight;         // most micro-batches in flight on each stage
  // Idle fraction of the step over all stages: 1 - sum(busy) / (stages * makespan). For 1F1B with
  // equal stages it is (pp - 1) / (m + pp - 1); see ideal_bubble.
  double bubble() const;
};

// How the engine carries a list out. Receives: at the start of each action the stage posts the
// receive of that action and of its next `receives_ahead` receiving actions. Sends are posted
// when an action's compute ends; a send completes once its receive is posted (the conservative,
// rendezvous case), and with send_window = w > 0 the stage waits for it before starting the
// action w places later (0: only at the end of the step).
struct Execution {
  int send_window = 0;
  int receives_ahead = 1;
};

// How PipelineExecutor carries a list out: each send completed before the next action computes
// (window 1); the receives of the next receiving action posted ahead, of the next two with
// interleaving (as Megatron-LM posts the next forward's and backward's receives together: with one
// ahead, pp 2, v 2, m 4 deadlocks — rank 0 waits for its send of F3 before <B1.1>, rank 1 for its
// send of F2 before <B0>, and each posts the other's receive only after).
Execution executor_execution(int chunks);

// The action index at whose start a stage posts the receive of action j: that of the
// `ahead`-th receiving action before j, or 0.
std::size_t receive_posted_at(const std::vector<Action>& actions, std::size_t j, int ahead = 1);

Timeline simulate(int stages, int micro_batches, const ScheduleFn& schedule,
                  double forward_cost = 1.0, double backward_cost = 2.0, Execution how = {});
// The same for ranks of `chunks` model chunks each: the costs are those of one chunk's pass, and
// a transfer goes between consecutive virtual stages (rank pp - 1's chunk c feeds rank 0's chunk
// c + 1). in_flight counts every chunk's micro-batches together.
Timeline simulate(int stages, int chunks, int micro_batches, const ChunkedScheduleFn& schedule,
                  double forward_cost = 1.0, double backward_cost = 2.0, Execution how = {});

// The bubble fraction (Timeline::bubble: idle over stages x makespan) of a synchronous pipeline of
// `stages` equal ranks of `chunks` equal chunks each over `micro_batches` micro-batches, when
// every micro-batch's pass of one chunk waits only for its neighbour: the paper's bubble, relative
// to the ideal step time m (f + b), is B = (pp - 1) / (v m) (Narayanan et al. 2021, §2.2.2; v = 1:
// (pp - 1) / m), the makespan (1 + B) m (f + b), so the idle fraction is B / (1 + B) =
// (pp - 1) / (v m + pp - 1).
double ideal_bubble(int stages, int micro_batches, int chunks = 1);
// The paper's figure: (pp - 1) / (v m), the bubble time over the ideal step time.
double paper_bubble(int stages, int micro_batches, int chunks = 1);

}  // namespace strata::parallel::pipeline
