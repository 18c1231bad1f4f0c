// Starts the world as a Strata program would and reports the outcome on one line, so ctest can
// check that a world smaller than the launched one is refused.
#include <cstdio>

#include "parallel/comm/init.hpp"

int main() {
  try {
    strata::parallel::World w;
    std::printf("init_world formed %s\n", w.group().describe().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::printf("init_world failed: %s\n", e.what());
    return 1;
  }
}
