// The interleaved 1F1B schedule (virtual pipeline stages) as a pure function: the exact lists of
// a small case against Megatron-LM's order, one chunk giving 1F1B's lists exactly, the refusal of
// m not a multiple of pp (and of pp 1), and for every pp <= 8, v <= 4 (v 1 at pp 1), m <= 32 (a
// multiple of pp) a run of all
// ranks together (also with the executor's send window) that finds every pass matched, no
// deadlock, and the bubble of Narayanan et al. 2021 §2.2.2 exactly.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "framework/core/error.hpp"
#include "parallel/pipeline/schedule.hpp"
#include "parallel/pipeline/simulate.hpp"

using namespace strata::parallel::pipeline;

namespace {

std::string listed(const Timeline& t) {
  std::string s;
  for (const auto& p : t.problems) s += p + "\n";
  return s;
}

bool reports(const Timeline& t, const std::string& what) {
  for (const auto& p : t.problems)
    if (p.find(what) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(Interleaved, ExactListsOfSmallCase) {
  // pp 2, v 2, m 4: rank 0 holds virtual stages 0 and 2, rank 1 holds 1 and 3. Megatron's warm-up
  // is (pp - r - 1) * 2 + (v - 1) * pp: 4 forwards on rank 0, 2 on rank 1. Forwards run groups of
  // pp = 2 micro-batches through chunk 0, then chunk 1; backwards start from the last chunk.
  EXPECT_EQ(to_string(interleaved_one_f_one_b(2, 0, 4, 2)),
            "F0> F1> <F0.1> <F1.1> F2> <B0.1> F3> <B1.1> <F2.1> <B0 <F3.1> <B1 "
            "<B2.1> <B3.1> <B2 <B3");
  EXPECT_EQ(to_string(interleaved_one_f_one_b(2, 1, 4, 2)),
            "<F0> <F1> <F0.1 B0.1> <F1.1 B1.1> <F2> <B0> <F3> <B1> <F2.1 B2.1> <F3.1 B3.1> "
            "<B2> <B3>");
  EXPECT_EQ(interleaved_warmup_forwards(2, 0, 4, 2), 4);
  EXPECT_EQ(interleaved_warmup_forwards(2, 1, 4, 2), 2);
  // Clipped to the v m forwards of the step: pp 4, v 2, m 4 on rank 0 wants 6 + 4 > 8.
  EXPECT_EQ(interleaved_warmup_forwards(4, 0, 4, 2), 8);
}

TEST(Interleaved, OneChunkIsOneFOneB) {
  for (int pp = 1; pp <= 8; ++pp)
    for (int m = 1; m <= 16; ++m)
      for (int s = 0; s < pp; ++s) {
        SCOPED_TRACE(fmt::format("pp {} stage {} m {}", pp, s, m));
        EXPECT_EQ(interleaved_one_f_one_b(pp, s, m, 1), one_f_one_b(pp, s, m));
        EXPECT_EQ(interleaved_warmup_forwards(pp, s, m, 1), warmup_forwards(pp, s, m));
      }
}

TEST(Interleaved, RefusesMicroBatchesNotAMultipleOfStages) {
  try {
    interleaved_one_f_one_b(4, 0, 6, 2);
    FAIL() << "m 6 over pp 4 was accepted";
  } catch (const strata::UserError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("6 micro-batches per step is not a multiple of 4"), std::string::npos) << what;
    EXPECT_NE(what.find("groups of pipeline_parallel_size"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  EXPECT_THROW(interleaved_one_f_one_b(4, 0, 4, 0), strata::Error);
  EXPECT_NO_THROW(interleaved_one_f_one_b(4, 0, 6, 1));  // 1F1B takes any m
  // One rank's chunks would send to itself.
  EXPECT_THROW(interleaved_one_f_one_b(1, 0, 4, 2), strata::UserError);
}

// Every rank's list together, chunks of equal cost (forward 1, backward 2 per chunk), m a
// multiple of pp. The ideal step is v m (1 + 2) per rank; the paper's bubble is B = (pp - 1) /
// (v m) of it, so the makespan is (v m + pp - 1) * 3 exactly and Timeline::bubble() (idle over
// pp x makespan) is B / (1 + B) = (pp - 1) / (v m + pp - 1). Checked for the ideal execution and
// for the executor's (each send completed before the next action, two receives posted ahead, and
// a send complete only once its receive is posted), with rank r's peak in flight its warm-up + 1.
TEST(Interleaved, AllRanksTogetherUpTo8By4By32) {
  int cases = 0;
  for (bool executor : {false, true})
    for (int pp = 1; pp <= 8; ++pp)
      for (int v = 1; v <= (pp == 1 ? 1 : 4); ++v)
        for (int m = pp; m <= 32; m += pp) {
          SCOPED_TRACE(fmt::format("executor {} pp {} v {} m {}", executor, pp, v, m));
          const Timeline t = simulate(pp, v, m, interleaved_one_f_one_b, 1.0, 2.0,
                                      executor ? executor_execution(v) : Execution{});
          ASSERT_TRUE(t.problems.empty()) << listed(t);
          const double ideal = v * m * 3.0;
          EXPECT_DOUBLE_EQ(t.makespan, (v * m + pp - 1) * 3.0);
          EXPECT_NEAR(t.makespan / ideal - 1.0, paper_bubble(pp, m, v), 1e-12);
          const double B = paper_bubble(pp, m, v);
          EXPECT_NEAR(t.bubble(), B / (1.0 + B), 1e-12);
          EXPECT_NEAR(t.bubble(), ideal_bubble(pp, m, v), 1e-12);
          for (int s = 0; s < pp; ++s)
            EXPECT_EQ(t.in_flight[static_cast<std::size_t>(s)],
                      std::min(interleaved_warmup_forwards(pp, s, m, v) + 1, v * m));
          ++cases;
        }
  EXPECT_EQ(cases, 2 * (32 + 4 * (16 + 10 + 8 + 6 + 5 + 4 + 4)));
}

// Why the executor posts two receives ahead with interleaving: with one, sends that must complete
// before the next action deadlock.
TEST(Interleaved, OneReceiveAheadDeadlocks) {
  const Timeline t = simulate(2, 2, 4, interleaved_one_f_one_b, 1.0, 2.0, Execution{1, 1});
  EXPECT_TRUE(reports(t, "deadlock: stage 0 waits forever at <B1.1>")) << listed(t);
  EXPECT_TRUE(reports(t, "deadlock: stage 1 waits forever at <B0>")) << listed(t);
  EXPECT_EQ(executor_execution(1).receives_ahead, 1);  // 1F1B as before
  EXPECT_EQ(executor_execution(2).receives_ahead, 2);
}

// Per chunk, the most micro-batches in flight: never more than the whole rank's, and together at
// least it (the planner sizes activation memory from them).
TEST(Interleaved, InFlightPerChunk) {
  const auto acts = interleaved_one_f_one_b(4, 0, 8, 2);
  EXPECT_EQ(max_in_flight(acts), 11);  // warm-up (4 - 1) * 2 + 4 = 10, then one more
  EXPECT_EQ(max_in_flight(acts, 0), 8);
  EXPECT_EQ(max_in_flight(acts, 1), 4);
  const auto last = interleaved_one_f_one_b(4, 3, 8, 2);
  EXPECT_EQ(max_in_flight(last), 5);
  EXPECT_EQ(max_in_flight(last, 0), 5);  // F4 (of chunk 0) runs before B0 of chunk 0
  EXPECT_EQ(max_in_flight(last, 1), 1);
}

// The simulator's checks see chunks: a pass on the wrong chunk leaves transfers unmatched.
TEST(Interleaved, SimulatorFindsAPassOnTheWrongChunk) {
  auto wrong_chunk = [](int pp, int s, int m, int v) {
    auto a = interleaved_one_f_one_b(pp, s, m, v);
    if (s == 0) a[2].chunk = 0;  // <F0.1> becomes a second <F0>
    return a;
  };
  const Timeline t = simulate(2, 2, 4, wrong_chunk);
  EXPECT_TRUE(reports(t, "forward of micro-batch 0 where 2 comes next")) << listed(t);
  EXPECT_TRUE(reports(t, "stage 1 chunk 0 sends an activation of micro-batch 0 to stage 0 chunk 1"))
      << listed(t);
}
