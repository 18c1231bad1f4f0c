// Pipeline schedules as pure functions of (stages, stage, micro-batches): the order in which one
// stage runs the forward and backward passes of a step's micro-batches, and the transfers each
// implies. 1F1B (PipeDream-Flush, Megatron-LM's default): stage s runs min(pp - s - 1, m) warm-up
// forwards, then alternates one forward and one backward, then drains the remaining backwards, so
// at most min(pp - s, m) micro-batches are in flight (forward done, backward not) on stage s. The
// pipeline engine executes these lists; simulate.hpp runs every stage's list together.
//
// The interleaved 1F1B schedule (Megatron-LM's virtual pipeline stages; Narayanan et al. 2021,
// §2.2.2): the model is cut into pp * v chunks, and rank r holds chunks r, r + pp, ..., r + (v-1)pp
// (its chunk c is virtual stage c * pp + r). Forwards run micro-batches in groups of pp through
// chunk 0, then the same group through chunk 1, ..., and backwards the other way; with equal
// chunks the bubble falls from (pp - 1) / m of the ideal step to (pp - 1) / (v m).
#pragma once

#include <string>
#include <vector>

namespace strata::parallel::pipeline {

enum class Pass { forward, backward };

struct Action {
  Pass pass = Pass::forward;
  int micro = 0;  // micro-batch index in the step, 0..m-1
  // forward: receive the input activation from the previous virtual stage, send the output to the
  // next; backward: receive the output's gradient from the next, send the input's gradient to the
  // previous. Virtual stage c * pp + r follows c * pp + r - 1: rank r - 1's chunk c, or for r = 0
  // rank pp - 1's chunk c - 1.
  bool recv = false;
  bool send = false;
  int chunk = 0;  // the model chunk of this rank the pass runs (0 without interleaving)
  bool operator==(const Action&) const = default;
};

// "F3" / "B0", with "<" for a receive and ">" for a send: "<F3>"; a chunk other than 0 follows
// as ".c": "<F3.1>".
std::string to_string(const Action& a);
std::string to_string(const std::vector<Action>& actions);

// The 1F1B schedule of stage `stage` of `stages` over `micro_batches` micro-batches. Throws when
// stages < 1, stage is not in [0, stages) or micro_batches < 1.
std::vector<Action> one_f_one_b(int stages, int stage, int micro_batches);
// Forwards stage `stage` runs before its first backward under 1F1B, beyond the one that starts
// the steady state: min(stages - stage - 1, micro_batches).
int warmup_forwards(int stages, int stage, int micro_batches);
// The most micro-batches in flight on a stage under an action list (forward run, backward not),
// over all its chunks together.
int max_in_flight(const std::vector<Action>& actions);
// The same for one chunk's passes alone.
int max_in_flight(const std::vector<Action>& actions, int chunk);

// The interleaved 1F1B schedule of rank `stage` of `stages` holding `chunks` model chunks, over
// `micro_batches` micro-batches (Megatron-LM's forward_backward_pipelining_with_interleaving). Of
// the v m passes each way, the rank runs interleaved_warmup_forwards() forwards, then alternates
// one forward and one backward, then drains the backwards. Forward pass k runs chunk
// (k mod (pp v)) / pp on micro-batch (k / (pp v)) pp + k mod pp; backward pass k the same
// micro-batch on chunk v - 1 - (k mod (pp v)) / pp. chunks = 1 is one_f_one_b exactly. Throws a
// UserError when chunks > 1 and stages is 1, or micro_batches is not a multiple of stages (see the
// .cpp).
std::vector<Action> interleaved_one_f_one_b(int stages, int stage, int micro_batches, int chunks);
// Megatron's warm-up for chunks > 1: min((pp - r - 1) * 2 + (v - 1) * pp, v m).
int interleaved_warmup_forwards(int stages, int stage, int micro_batches, int chunks);

}  // namespace strata::parallel::pipeline
