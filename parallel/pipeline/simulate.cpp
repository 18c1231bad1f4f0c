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

double ideal_bubble(int stages, int micro_batches, int chunks) {
  return static_cast<double>(stages - 1) / static_cast<double>(chunks * micro_batches + stages - 1);
}

double paper_bubble(int stages, int micro_batches, int chunks) {
  return static_cast<double>(stages - 1) / static_cast<double>(chunks * micro_batches);
}

namespace {

// Virtual stage of rank s's chunk c, of stages * chunks.
int virtual_stage(int stages, int s, int chunk) { return chunk * stages + s; }

// Per-rank checks of one action list.
void check_stage(int stages, int chunks, int s, int m, const std::vector<Action>& acts,
                 std::vector<std::string>& problems) {
  auto problem = [&](const std::string& what) {
    problems.push_back(fmt::format("stage {} ({}): {}", s, to_string(acts), what));
  };
  const auto v = static_cast<std::size_t>(chunks), n = static_cast<std::size_t>(m);
  std::vector<std::vector<int>> fwd(v, std::vector<int>(n, 0)), bwd = fwd;
  std::vector<int> next_forward(v, 0);
  for (const Action& a : acts) {
    if (a.micro < 0 || a.micro >= m || a.chunk < 0 || a.chunk >= chunks) {
      problem(fmt::format("{} names micro-batch {} of {}, chunk {} of {}", to_string(a), a.micro, m,
                          a.chunk, chunks));
      continue;
    }
    const auto i = static_cast<std::size_t>(a.micro), c = static_cast<std::size_t>(a.chunk);
    const int virt = virtual_stage(stages, s, a.chunk);
    const bool first = virt == 0, last = virt == stages * chunks - 1;
    const bool fw = a.pass == Pass::forward;
    const bool want_recv = fw ? !first : !last, want_send = fw ? !last : !first;
    if (a.recv != want_recv || a.send != want_send)
      problem(fmt::format("{} should {}receive and {}send", to_string(a), want_recv ? "" : "not ",
                          want_send ? "" : "not "));
    if (fw) {
      if (a.micro != next_forward[c])
        problem(fmt::format("forward of micro-batch {} where {} comes next", a.micro, next_forward[c]));
      next_forward[c] = a.micro + 1;
      ++fwd[c][i];
    } else {
      if (fwd[c][i] == 0) problem(fmt::format("backward of micro-batch {} before its forward", a.micro));
      ++bwd[c][i];
    }
  }
  for (std::size_t c = 0; c < v; ++c)
    for (std::size_t k = 0; k < n; ++k)
      if (fwd[c][k] != 1 || bwd[c][k] != 1)
        problem(fmt::format("micro-batch {}{} has {} forward(s) and {} backward(s)", k,
                            chunks > 1 ? fmt::format(" of chunk {}", c) : "", fwd[c][k], bwd[c][k]));
}

// (pass, chunk, micro): an action's identity on its rank.
using Key = std::tuple<int, int, int>;
Key key_of(const Action& a) { return {static_cast<int>(a.pass), a.chunk, a.micro}; }

}  // namespace

Execution executor_execution(int chunks) { return Execution{1, chunks > 1 ? 2 : 1}; }

std::size_t receive_posted_at(const std::vector<Action>& actions, std::size_t j, int ahead) {
  for (std::size_t k = j; k-- > 0;)
    if (actions[k].recv && --ahead == 0) return k;
  return 0;
}

Timeline simulate(int stages, int m, const ScheduleFn& schedule, double forward_cost,
                  double backward_cost, Execution how) {
  return simulate(stages, 1, m,
                  [&](int pp, int s, int mb, int) { return schedule(pp, s, mb); },
                  forward_cost, backward_cost, how);
}

Timeline simulate(int stages, int chunks, int m, const ChunkedScheduleFn& schedule,
                  double forward_cost, double backward_cost, Execution how) {
  Timeline tl;
  const int virtuals = stages * chunks;
  std::vector<std::vector<Action>> lists;
  for (int s = 0; s < stages; ++s) lists.push_back(schedule(stages, s, m, chunks));
  for (int s = 0; s < stages; ++s)
    check_stage(stages, chunks, s, m, lists[static_cast<std::size_t>(s)], tl.problems);
  // The neighbouring virtual stage an action of rank s sends to (direction +1 forward) or
  // receives from, as (rank, chunk).
  auto neighbour = [&](int s, const Action& a, bool towards_send) {
    const int dir = (a.pass == Pass::forward) == towards_send ? 1 : -1;
    const int virt = virtual_stage(stages, s, a.chunk) + dir;
    return std::pair<int, int>{virt % stages, virt / stages};
  };
  // Every message: (from virtual stage, to virtual stage, pass, micro) sent and received once.
  std::map<std::tuple<int, int, int, int>, int> sent, received;
  for (int s = 0; s < stages; ++s)
    for (const Action& a : lists[static_cast<std::size_t>(s)]) {
      if (a.chunk < 0 || a.chunk >= chunks) continue;  // reported above
      const int dir = a.pass == Pass::forward ? 1 : -1;
      const int p = static_cast<int>(a.pass), virt = virtual_stage(stages, s, a.chunk);
      if (a.send) ++sent[{virt, virt + dir, p, a.micro}];
      if (a.recv) ++received[{virt - dir, virt, p, a.micro}];
    }
  auto name = [&](int virt) {
    return chunks == 1 ? fmt::format("stage {}", virt)
                       : fmt::format("stage {} chunk {}", virt % stages, virt / stages);
  };
  for (const auto& [k, n] : sent)
    if (received[k] != n)
      tl.problems.push_back(fmt::format("{} sends {} of micro-batch {} to {} {} time(s), "
                                        "which receives it {} time(s)", name(std::get<0>(k)),
                                        std::get<2>(k) == 0 ? "an activation" : "a gradient",
                                        std::get<3>(k), name(std::get<1>(k)), n, received[k]));
  for (const auto& [k, n] : received)
    if (!sent.count(k))
      tl.problems.push_back(fmt::format("{} receives {} of micro-batch {} from {} that "
                                        "never sends it", name(std::get<1>(k)),
                                        std::get<2>(k) == 0 ? "an activation" : "a gradient",
                                        std::get<3>(k),
                                        std::get<0>(k) < 0 || std::get<0>(k) >= virtuals
                                            ? fmt::format("virtual stage {}", std::get<0>(k))
                                            : name(std::get<0>(k))));
  if (!tl.problems.empty()) return tl;

  // Run: when each stage's actions start and end (-1: not yet).
  const auto n = static_cast<std::size_t>(stages);
  std::vector<std::size_t> pc(n, 0);
  std::vector<double> clock(n, 0.0);
  std::vector<std::vector<double>> start(n), end(n);
  // Where each (pass, chunk, micro) is in each stage's list.
  std::vector<std::map<Key, std::size_t>> where(n);
  for (std::size_t s = 0; s < n; ++s) {
    start[s].assign(lists[s].size(), -1);
    end[s].assign(lists[s].size(), -1);
    for (std::size_t k = 0; k < lists[s].size(); ++k) where[s][key_of(lists[s][k])] = k;
  }
  // The index, in rank r's list, of the action on chunk c matching `a` (same pass and micro).
  auto at = [&](std::pair<int, int> rc, const Action& a) {
    Action b = a;
    b.chunk = rc.second;
    return where[static_cast<std::size_t>(rc.first)].at(key_of(b));
  };
  // When the send of action k of stage s completes (its receive posted); -1 while unknown.
  auto send_done = [&](std::size_t s, std::size_t k) {
    const Action& a = lists[s][k];
    const auto to = neighbour(static_cast<int>(s), a, true);
    const auto r = static_cast<std::size_t>(to.first);
    const double posted = start[r][receive_posted_at(lists[r], at(to, a), how.receives_ahead)];
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
          const auto from = neighbour(static_cast<int>(s), a, false);
          const double dep = end[static_cast<std::size_t>(from.first)][at(from, a)];
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
