// set_num_threads also sets OpenMP's default team size, so OpenMP loops outside the kernels (the
// optimizer's chunked updates) follow the thread count the user chose.
#include <gtest/gtest.h>
#include <omp.h>

#include "framework/backend/cpu/kernels.hpp"

namespace strata::cpu::test {
namespace {

TEST(Threads, SetNumThreadsAlsoSetsOpenMpDefault) {
  const int prev = num_threads();
  set_num_threads(1);
  EXPECT_EQ(num_threads(), 1);
  EXPECT_EQ(omp_get_max_threads(), 1);
  set_num_threads(3);
  EXPECT_EQ(omp_get_max_threads(), 3);  // the team size of a plain `omp parallel`
  set_num_threads(prev);
}

}  // namespace
}  // namespace strata::cpu::test
