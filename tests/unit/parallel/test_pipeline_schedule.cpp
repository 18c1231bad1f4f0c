// The 1F1B schedule as a pure function: the exact lists of small cases, warm-up counts, and for
// every (pp, m) up to 8 x 16 a run of all stages together that finds every forward with its
// backward, every send with its receive, no deadlock, min(pp - s, m) micro-batches in flight and
// the bubble (pp - 1) / (m + pp - 1). The simulator itself is shown to catch broken schedules.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "framework/core/error.hpp"
#include "parallel/pipeline/schedule.hpp"
#include "parallel/pipeline/simulate.hpp"

using namespace strata::parallel::pipeline;

namespace {

std::string problems(const Timeline& t) {
  std::string s;
  for (const auto& p : t.problems) s += p + "\n";
  return s;
}

bool mentions(const Timeline& t, const std::string& what) {
  for (const auto& p : t.problems)
    if (p.find(what) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(OneFOneB, ExactListsOfSmallCases) {
  // Four stages, six micro-batches: warm-up 3, 2, 1, 0 forwards, then alternate, then drain.
  EXPECT_EQ(to_string(one_f_one_b(4, 0, 6)), "F0> F1> F2> F3> <B0 F4> <B1 F5> <B2 <B3 <B4 <B5");
  EXPECT_EQ(to_string(one_f_one_b(4, 1, 6)),
            "<F0> <F1> <F2> <B0> <F3> <B1> <F4> <B2> <F5> <B3> <B4> <B5>");
  EXPECT_EQ(to_string(one_f_one_b(4, 3, 6)), "<F0 B0> <F1 B1> <F2 B2> <F3 B3> <F4 B4> <F5 B5>");
  // Fewer micro-batches than stages: the warm-up is cut to m.
  EXPECT_EQ(to_string(one_f_one_b(4, 0, 2)), "F0> F1> <B0 <B1");
  // One stage: forward, backward, no transfers (the data-parallel loop).
  EXPECT_EQ(to_string(one_f_one_b(1, 0, 3)), "F0 B0 F1 B1 F2 B2");
}

TEST(OneFOneB, WarmupCountsAndInFlight) {
  for (int pp = 1; pp <= 8; ++pp)
    for (int m = 1; m <= 16; ++m)
      for (int s = 0; s < pp; ++s) {
        SCOPED_TRACE(fmt::format("pp {} stage {} m {}", pp, s, m));
        const auto acts = one_f_one_b(pp, s, m);
        EXPECT_EQ(warmup_forwards(pp, s, m), std::min(pp - s - 1, m));
        int before_first_backward = 0;
        while (acts[static_cast<std::size_t>(before_first_backward)].pass == Pass::forward)
          ++before_first_backward;
        EXPECT_EQ(before_first_backward, std::min(pp - s, m));
        EXPECT_EQ(max_in_flight(acts), std::min(pp - s, m));
        EXPECT_EQ(acts.size(), static_cast<std::size_t>(2 * m));
      }
}

TEST(OneFOneB, AllStagesTogetherUpTo8By16) {
  for (int pp = 1; pp <= 8; ++pp)
    for (int m = 1; m <= 16; ++m) {
      SCOPED_TRACE(fmt::format("pp {} m {}", pp, m));
      const Timeline t = simulate(pp, m, one_f_one_b, 1.0, 2.0);
      ASSERT_TRUE(t.problems.empty()) << problems(t);
      for (int s = 0; s < pp; ++s) EXPECT_EQ(t.in_flight[static_cast<std::size_t>(s)], std::min(pp - s, m));
      // Equal stages, backward twice a forward: the step takes (m + pp - 1) forward+backward
      // slots, so the idle fraction is the textbook (pp - 1) / (m + pp - 1).
      EXPECT_DOUBLE_EQ(t.makespan, (m + pp - 1) * 3.0);
      EXPECT_NEAR(t.bubble(), ideal_bubble(pp, m), 1e-12);
    }
}

TEST(OneFOneB, RejectsImpossibleArguments) {
  EXPECT_THROW(one_f_one_b(0, 0, 1), strata::Error);
  EXPECT_THROW(one_f_one_b(4, 4, 1), strata::Error);
  EXPECT_THROW(one_f_one_b(4, 0, 0), strata::Error);
}

// The checks can fail: broken schedules are reported, each for what is wrong with it.
TEST(Simulator, FindsDeadlock) {
  // Stage 0 waits for B0 before sending F1; stage 1 wants F1 before it sends B0.
  auto sched = [](int, int s, int) {
    if (s == 0) return std::vector<Action>{{Pass::forward, 0, false, true}, {Pass::backward, 0, true, false},
                                           {Pass::forward, 1, false, true}, {Pass::backward, 1, true, false}};
    return std::vector<Action>{{Pass::forward, 0, true, false}, {Pass::forward, 1, true, false},
                               {Pass::backward, 0, false, true}, {Pass::backward, 1, false, true}};
  };
  const Timeline t = simulate(2, 2, sched);
  EXPECT_TRUE(mentions(t, "deadlock: stage 0 waits forever at <B0")) << problems(t);
  EXPECT_TRUE(mentions(t, "deadlock: stage 1 waits forever at <F1")) << problems(t);
}

TEST(Simulator, FindsMissingBackwardAndUnmatchedTransfers) {
  auto no_backward = [](int pp, int s, int m) {
    auto a = one_f_one_b(pp, s, m);
    if (s == 1) a.pop_back();
    return a;
  };
  EXPECT_TRUE(mentions(simulate(3, 4, no_backward), "micro-batch 3 has 1 forward(s) and 0 backward(s)"));
  auto no_recv = [](int pp, int s, int m) {
    auto a = one_f_one_b(pp, s, m);
    if (s == 2) a[0].recv = false;
    return a;
  };
  const Timeline t = simulate(3, 4, no_recv);
  EXPECT_TRUE(mentions(t, "<F0> should receive") || mentions(t, "F0 should receive")) << problems(t);
  EXPECT_TRUE(mentions(t, "stage 1 sends an activation of micro-batch 0 to stage 2 1 time(s), which "
                          "receives it 0 time(s)")) << problems(t);
  auto out_of_order = [](int pp, int s, int m) {
    auto a = one_f_one_b(pp, s, m);
    if (s == 0) std::swap(a[0], a[1]);
    return a;
  };
  EXPECT_TRUE(mentions(simulate(2, 4, out_of_order), "forward of micro-batch 1 where 0 comes next"));
  auto backward_first = [](int pp, int s, int m) {
    auto a = one_f_one_b(pp, s, m);
    if (s == pp - 1) std::swap(a[0], a[1]);
    return a;
  };
  EXPECT_TRUE(mentions(simulate(2, 2, backward_first), "backward of micro-batch 0 before its forward"));
}

TEST(Simulator, GpipeHoldsEveryMicroBatch) {
  // All forwards, then all backwards: valid and deadlock-free, but m micro-batches in flight.
  auto gpipe = [](int pp, int s, int m) {
    std::vector<Action> a;
    for (int i = 0; i < m; ++i) a.push_back({Pass::forward, i, s > 0, s < pp - 1});
    for (int i = 0; i < m; ++i) a.push_back({Pass::backward, i, s < pp - 1, s > 0});
    return a;
  };
  const Timeline t = simulate(4, 8, gpipe);
  ASSERT_TRUE(t.problems.empty()) << problems(t);
  EXPECT_EQ(t.in_flight, (std::vector<int>{8, 8, 8, 8}));
}

// The engine completes each send before the next action's compute (send window 1, one receive
// posted ahead; window 2 checked too): still no deadlock for any (pp, m) up to 8 x 16, even when a
// send completes only once its receive is posted, and the same ideal timeline.
TEST(OneFOneB, NoDeadlockWhenSendsMustComplete) {
  for (int window : {1, 2})
    for (int pp = 1; pp <= 8; ++pp)
      for (int m = 1; m <= 16; ++m) {
        SCOPED_TRACE(fmt::format("send window {} pp {} m {}", window, pp, m));
        const Timeline t = simulate(pp, m, one_f_one_b, 1.0, 2.0, Execution{window});
        ASSERT_TRUE(t.problems.empty()) << problems(t);
        EXPECT_NEAR(t.bubble(), ideal_bubble(pp, m), 1e-12) << "makespan " << t.makespan;
      }
}
