#include "parallel/pipeline/schedule.hpp"

#include <algorithm>

#include "framework/core/error.hpp"

namespace strata::parallel::pipeline {

std::string to_string(const Action& a) {
  return fmt::format("{}{}{}{}{}", a.recv ? "<" : "", a.pass == Pass::forward ? "F" : "B", a.micro,
                     a.chunk != 0 ? fmt::format(".{}", a.chunk) : "", a.send ? ">" : "");
}

std::string to_string(const std::vector<Action>& actions) {
  std::string s;
  for (const Action& a : actions) s += (s.empty() ? "" : " ") + to_string(a);
  return s;
}

namespace {
void check_args(int stages, int stage, int micro_batches) {
  STRATA_CHECK(stages >= 1 && stage >= 0 && stage < stages && micro_batches >= 1, "pipeline",
               "no schedule for stage {} of {} over {} micro-batches", stage, stages, micro_batches);
}
}  // namespace

int warmup_forwards(int stages, int stage, int micro_batches) {
  check_args(stages, stage, micro_batches);
  return std::min(stages - stage - 1, micro_batches);
}

std::vector<Action> one_f_one_b(int stages, int stage, int micro_batches) {
  const int warmup = warmup_forwards(stages, stage, micro_batches);
  const bool first = stage == 0, last = stage == stages - 1;
  auto fwd = [&](int i) { return Action{Pass::forward, i, !first, !last}; };
  auto bwd = [&](int i) { return Action{Pass::backward, i, !last, !first}; };
  std::vector<Action> out;
  int f = 0, b = 0;
  while (f < warmup) out.push_back(fwd(f++));
  while (f < micro_batches) {  // steady state: one forward, one backward
    out.push_back(fwd(f++));
    out.push_back(bwd(b++));
  }
  while (b < micro_batches) out.push_back(bwd(b++));  // cool-down
  return out;
}

int max_in_flight(const std::vector<Action>& actions) {
  int now = 0, most = 0;
  for (const Action& a : actions) {
    now += a.pass == Pass::forward ? 1 : -1;
    most = std::max(most, now);
  }
  return most;
}

int max_in_flight(const std::vector<Action>& actions, int chunk) {
  int now = 0, most = 0;
  for (const Action& a : actions) {
    if (a.chunk != chunk) continue;
    now += a.pass == Pass::forward ? 1 : -1;
    most = std::max(most, now);
  }
  return most;
}

namespace {
void check_interleaved(int stages, int stage, int micro_batches, int chunks) {
  check_args(stages, stage, micro_batches);
  STRATA_CHECK(chunks >= 1, "pipeline", "no schedule over {} model chunks per stage", chunks);
  if (chunks > 1 && stages == 1)
    user_fail("pipeline", "the interleaved schedule ({} model chunks per stage) needs "
              "pipeline_parallel_size 2 or more (one stage's chunks are just its layers); set "
              "strata.virtual_pipeline_stages to 1", chunks);
  // Megatron-LM's reason: forwards go through the chunks in groups of pp micro-batches, and a
  // group's output of rank pp - 1's chunk c is rank 0's input of chunk c + 1 for that same group;
  // a short last group would leave rank 0 waiting on passes scheduled after its own.
  if (chunks > 1 && micro_batches % stages != 0)
    user_fail("pipeline", "the interleaved schedule ({} model chunks per stage) runs micro-batches "
              "in groups of pipeline_parallel_size: {} micro-batches per step is not a multiple "
              "of {}; set gradient_accumulation_steps to a multiple of {}, or "
              "strata.virtual_pipeline_stages to 1", chunks, micro_batches, stages, stages, stages);
}
}  // namespace

int interleaved_warmup_forwards(int stages, int stage, int micro_batches, int chunks) {
  check_interleaved(stages, stage, micro_batches, chunks);
  if (chunks == 1) return warmup_forwards(stages, stage, micro_batches);
  return std::min((stages - stage - 1) * 2 + (chunks - 1) * stages, chunks * micro_batches);
}

std::vector<Action> interleaved_one_f_one_b(int stages, int stage, int micro_batches, int chunks) {
  if (chunks == 1) {
    check_interleaved(stages, stage, micro_batches, chunks);
    return one_f_one_b(stages, stage, micro_batches);
  }
  const int warmup = interleaved_warmup_forwards(stages, stage, micro_batches, chunks);
  const int total = chunks * micro_batches, group = stages * chunks;
  const int last_virtual = stages * chunks - 1;
  auto pass = [&](Pass p, int k) {
    const int c = (k % group) / stages;
    Action a;
    a.pass = p;
    a.micro = (k / group) * stages + k % stages;
    a.chunk = p == Pass::forward ? c : chunks - 1 - c;
    const int virt = a.chunk * stages + stage;
    const bool first = virt == 0, last = virt == last_virtual;
    a.recv = p == Pass::forward ? !first : !last;
    a.send = p == Pass::forward ? !last : !first;
    return a;
  };
  std::vector<Action> out;
  int f = 0, b = 0;
  while (f < warmup) out.push_back(pass(Pass::forward, f++));
  while (f < total) {  // steady state: one forward, one backward
    out.push_back(pass(Pass::forward, f++));
    out.push_back(pass(Pass::backward, b++));
  }
  while (b < total) out.push_back(pass(Pass::backward, b++));  // cool-down
  return out;
}

}  // namespace strata::parallel::pipeline
