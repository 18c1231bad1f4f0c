// A rank that fails by throwing must not hang the job: under mpirun -np 2, rank 1 throws right
// after start-up while rank 0 waits in a collective; the job must end quickly with an error.
#include <cstdio>
#include <stdexcept>

#include "parallel/comm/init.hpp"

int main() {
  using namespace strata;
  try {
    parallel::InitOptions o;
    o.timeout = std::chrono::seconds(120);  // far longer than the test allows
    parallel::World world(o);
    const auto& g = world.group();
    if (g.rank() == 1) throw std::runtime_error("rank 1 fails on purpose");
    float x = 1;
    g.all_reduce(parallel::span(&x, 1), parallel::span(&x, 1)).wait();
    std::printf("rank %d: collective completed (unexpected)\n", g.rank());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "failing_rank: %s\n", e.what());
    return 1;
  }
}
