// Main of the multi-rank communication tests: initialises the world through Strata, prints
// gtest output on rank 0 only (other ranks print their failures prefixed with their rank), and
// fails every rank when any rank failed. Built with STRATA_DIST_NEEDS_GPU (tests/dist/gpu), it
// first exits 77 (skipped) where no GPU can run the tests.
#include <gtest/gtest.h>

#include <cstdio>

#include "parallel/comm/init.hpp"
#include "tests/dist/comm/dist_env.hpp"
#ifdef STRATA_DIST_NEEDS_GPU
#include "tests/dist/gpu/gpu_env.hpp"
#endif

namespace strata::test {

namespace {
parallel::Group g_world;

// Prints only failures, as "[rank N] file:line: message".
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: failure in %s\n%s\n", rank_,
                 r.file_name() ? r.file_name() : "?", r.line_number(), current_.c_str(),
                 r.message());
  }
  void OnTestStart(const ::testing::TestInfo& t) override {
    current_ = std::string(t.test_suite_name()) + "." + t.name();
  }

 private:
  int rank_;
  std::string current_;
};
}  // namespace

const parallel::Group& world() {
  return g_world;
}
void set_world(const parallel::Group& g) {
  g_world = g;
}

}  // namespace strata::test

int main(int argc, char** argv) {
  using namespace strata;
  ::testing::InitGoogleTest(&argc, argv);
#ifdef STRATA_DIST_NEEDS_GPU
  // Tests that need a GPU (tests/dist/gpu): without one, every rank stops before MPI starts with
  // the status ctest counts as skipped (SKIP_RETURN_CODE 77; mpirun passes it on).
  if (const std::string why = test::why_no_gpu(); !why.empty()) {
    std::printf("skipped: %s\n", why.c_str());
    return 77;
  }
#endif
  std::int32_t failed = 0;
  {
    parallel::InitOptions opts;
    opts.strict = true;                       // these tests must run under mpirun
    opts.timeout = std::chrono::seconds(60);  // a broken test fails instead of hanging
    parallel::World w(opts);
    const parallel::Group& g = w.group();
    test::set_world(g);
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    if (g.rank() != 0) {
      delete listeners.Release(listeners.default_result_printer());
      listeners.Append(new test::RankFailurePrinter(g.rank()));
    }
    const std::int32_t mine = RUN_ALL_TESTS() != 0;
    failed = g.all_reduce_value(mine, parallel::ReduceOp::max);
    if (g.rank() == 0 && failed && !mine)
      std::fprintf(stderr, "[  FAILED  ] another rank failed (see its [rank N] lines above)\n");
    test::set_world(parallel::Group());
  }
  return failed ? 1 : 0;
}
