// Pipeline schedules as pure functions of (stages, stage, micro-batches): the order in which one
// stage runs the forward and backward passes of a step's micro-batches, and the transfers each
// implies. 1F1B (PipeDream-Flush, Megatron-LM's default): stage s runs min(pp - s - 1, m) warm-up
// forwards, then alternates one forward and one backward, then drains the remaining backwards, so
// at most min(pp - s, m) micro-batches are in flight (forward done, backward not) on stage s. The
// pipeline engine executes these lists; simulate.hpp runs every stage's list together.
#pragma once

#include <string>
#include <vector>

namespace strata::parallel::pipeline {

enum class Pass { forward, backward };

struct Action {
  Pass pass = Pass::forward;
  int micro = 0;  // micro-batch index in the step, 0..m-1
  // forward: receive the input activation from stage - 1, send the output to stage + 1;
  // backward: receive the output's gradient from stage + 1, send the input's gradient to stage - 1.
  bool recv = false;
  bool send = false;
  bool operator==(const Action&) const = default;
};

// "F3" / "B0", with "<" for a receive and ">" for a send: "<F3>".
std::string to_string(const Action& a);
std::string to_string(const std::vector<Action>& actions);

// The 1F1B schedule of stage `stage` of `stages` over `micro_batches` micro-batches. Throws when
// stages < 1, stage is not in [0, stages) or micro_batches < 1.
std::vector<Action> one_f_one_b(int stages, int stage, int micro_batches);
// Forwards stage `stage` runs before its first backward under 1F1B, beyond the one that starts
// the steady state: min(stages - stage - 1, micro_batches).
int warmup_forwards(int stages, int stage, int micro_batches);
// The most micro-batches in flight on a stage under an action list (forward run, backward not).
int max_in_flight(const std::vector<Action>& actions);

}  // namespace strata::parallel::pipeline
