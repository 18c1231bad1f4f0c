#include "parallel/pipeline/schedule.hpp"

#include <algorithm>

#include "framework/core/error.hpp"

namespace strata::parallel::pipeline {

std::string to_string(const Action& a) {
  return fmt::format("{}{}{}{}", a.recv ? "<" : "", a.pass == Pass::forward ? "F" : "B", a.micro,
                     a.send ? ">" : "");
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

}  // namespace strata::parallel::pipeline
