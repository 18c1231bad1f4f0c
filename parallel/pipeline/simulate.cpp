#include "parallel/pipeline/simulate.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

namespace strata::parallel::pipeline {

double Timeline::bubble() const {
  if (busy.empty() || makespan <= 0) return 0;
  double sum = 0;
  for (double b : busy) sum += b;
  return 1.0 - sum / (static_cast<double>(busy.size()) * makespan);
}

double ideal_bubble(int stages, int micro_batches) {
  return static_cast<double>(stages - 1) / static_cast<double>(micro_batches + stages - 1);
}

namespace {

// Per-stage checks of one action list.
void check_stage(int stages, int s, int m, const std::vector<Action>& acts,
                 std::vector<std::string>& problems) {
  auto problem = [&](const std::string& what) {
    problems.push_back(fmt::format("stage {} ({}): {}", s, to_string(acts), what));
  };
  const bool first = s == 0, last = s == stages - 1;
  std::vector<int> fwd(static_cast<std::size_t>(m), 0), bwd(static_cast<std::size_t>(m), 0);
  int next_forward = 0;
  for (const Action& a : acts) {
    if (a.micro < 0 || a.micro >= m) {
      problem(fmt::format("{} names micro-batch {} of {}", to_string(a), a.micro, m));
      continue;
    }
    const auto i = static_cast<std::size_t>(a.micro);
    const bool fw = a.pass == Pass::forward;
    const bool want_recv = fw ? !first : !last, want_send = fw ? !last : !first;
    if (a.recv != want_recv || a.send != want_send)
      problem(fmt::format("{} should {}receive and {}send", to_string(a), want_recv ? "" : "not ",
                          want_send ? "" : "not "));
    if (fw) {
      if (a.micro != next_forward)
        problem(fmt::format("forward of micro-batch {} where {} comes next", a.micro, next_forward));
      next_forward = a.micro + 1;
      ++fwd[i];
    } else {
      if (fwd[i] == 0) problem(fmt::format("backward of micro-batch {} before its forward", a.micro));
      ++bwd[i];
    }
  }
  for (int i = 0; i < m; ++i) {
    const auto k = static_cast<std::size_t>(i);
    if (fwd[k] != 1 || bwd[k] != 1)
      problem(fmt::format("micro-batch {} has {} forward(s) and {} backward(s)", i, fwd[k], bwd[k]));
  }
}

}  // namespace

std::size_t receive_posted_at(const std::vector<Action>& actions, std::size_t j) {
  for (std::size_t k = j; k-- > 0;)
    if (actions[k].recv) return k;
  return 0;
}

Timeline simulate(int stages, int m, const ScheduleFn& schedule, double forward_cost,
                  double backward_cost, Execution how) {
  Timeline tl;
  std::vector<std::vector<Action>> lists;
  for (int s = 0; s < stages; ++s) lists.push_back(schedule(stages, s, m));
  for (int s = 0; s < stages; ++s) check_stage(stages, s, m, lists[static_cast<std::size_t>(s)], tl.problems);
  // Every message: (from, to, pass, micro) sent and received exactly once.
  std::map<std::tuple<int, int, int, int>, int> sent, received;
  for (int s = 0; s < stages; ++s)
    for (const Action& a : lists[static_cast<std::size_t>(s)]) {
      const int dir = a.pass == Pass::forward ? 1 : -1;
      const int p = static_cast<int>(a.pass);
      if (a.send) ++sent[{s, s + dir, p, a.micro}];
      if (a.recv) ++received[{s - dir, s, p, a.micro}];
    }
  for (const auto& [k, n] : sent)
    if (received[k] != n)
      tl.problems.push_back(fmt::format("stage {} sends {} of micro-batch {} to stage {} {} time(s), "
                                        "which receives it {} time(s)", std::get<0>(k),
                                        std::get<2>(k) == 0 ? "an activation" : "a gradient",
                                        std::get<3>(k), std::get<1>(k), n, received[k]));
  for (const auto& [k, n] : received)
    if (!sent.count(k))
      tl.problems.push_back(fmt::format("stage {} receives {} of micro-batch {} from stage {} that "
                                        "never sends it", std::get<1>(k),
                                        std::get<2>(k) == 0 ? "an activation" : "a gradient",
                                        std::get<3>(k), std::get<0>(k)));
  if (!tl.problems.empty()) return tl;

  // Run: when each stage's actions start and end (-1: not yet).
  const auto n = static_cast<std::size_t>(stages);
  std::vector<std::size_t> pc(n, 0);
  std::vector<double> clock(n, 0.0);
  std::vector<std::vector<double>> start(n), end(n);
  // Where each (pass, micro) is in each stage's list.
  std::vector<std::map<std::pair<int, int>, std::size_t>> where(n);
  for (std::size_t s = 0; s < n; ++s) {
    start[s].assign(lists[s].size(), -1);
    end[s].assign(lists[s].size(), -1);
    for (std::size_t k = 0; k < lists[s].size(); ++k)
      where[s][{static_cast<int>(lists[s][k].pass), lists[s][k].micro}] = k;
  }
  // When the send of action k of stage s completes (its receive posted); -1 while unknown.
  auto send_done = [&](std::size_t s, std::size_t k) {
    const Action& a = lists[s][k];
    const std::size_t r = a.pass == Pass::forward ? s + 1 : s - 1;
    const std::size_t j = where[r].at({static_cast<int>(a.pass), a.micro});
    const double posted = start[r][receive_posted_at(lists[r], j)];
    return posted < 0 ? -1.0 : std::max(posted, end[s][k]);
  };
  tl.busy.assign(n, 0.0);
  for (bool progress = true; progress;) {
    progress = false;
    for (std::size_t s = 0; s < n; ++s) {
      while (pc[s] < lists[s].size()) {
        const std::size_t k = pc[s];
        const Action& a = lists[s][k];
        const bool fw = a.pass == Pass::forward;
        double ready = clock[s];
        if (a.recv) {
          const std::size_t peer = fw ? s - 1 : s + 1;
          const double dep = end[peer][where[peer].at({static_cast<int>(a.pass), a.micro})];
          if (dep < 0) break;  // waits for the neighbour's send
          ready = std::max(ready, dep);
        }
        bool blocked = false;
        if (how.send_window > 0 && k >= static_cast<std::size_t>(how.send_window)) {
          const std::size_t old = k - static_cast<std::size_t>(how.send_window);
          if (lists[s][old].send) {
            const double done = send_done(s, old);
            if (done < 0) blocked = true;  // waits for the neighbour to post the receive
            ready = std::max(ready, done);
          }
        }
        if (blocked) break;
        const double cost = fw ? forward_cost : backward_cost;
        start[s][k] = ready;
        clock[s] = ready + cost;
        end[s][k] = clock[s];
        tl.busy[s] += cost;
        ++pc[s];
        progress = true;
      }
    }
  }
  for (std::size_t s = 0; s < n; ++s) {
    if (pc[s] < lists[s].size())
      tl.problems.push_back(fmt::format("deadlock: stage {} waits forever at {}", s,
                                        to_string(lists[s][pc[s]])));
    tl.makespan = std::max(tl.makespan, clock[s]);
    tl.in_flight.push_back(max_in_flight(lists[s]));
  }
  return tl;
}

}  // namespace strata::parallel::pipeline
