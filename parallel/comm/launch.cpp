#include "parallel/comm/launch.hpp"

#include <charconv>
#include <cstdlib>
#include <cstring>

#include "framework/core/error.hpp"

namespace strata::parallel {

LaunchInfo detect_launch(const EnvLookup& env) {
  LaunchInfo info;
  for (const char* key :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "STRATA_WORLD_SIZE"}) {
    const char* v = env(key);
    if (!v) continue;
    int n = 0;
    const char* end = v + std::strlen(v);
    auto [p, ec] = std::from_chars(v, end, n);
    if (ec != std::errc() || p != end || n < 1)
      user_fail("comm", "{}='{}' is not a positive rank count", key, v);
    if (info.size && *info.size != n)
      user_fail("comm",
                "the launcher's environment disagrees on the number of ranks: {} and "
                "{}={}",
                info.evidence, key, n);
    info.under_launcher = true;
    info.size = n;
    if (info.evidence.empty()) info.evidence = fmt::format("{}={}", key, n);
  }
  for (const char* key : {"PMIX_RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK"}) {
    const char* v = env(key);
    if (!v || info.under_launcher) continue;
    info.under_launcher = true;
    info.evidence = fmt::format("{}={}", key, v);
  }
  return info;
}

LaunchInfo detect_launch() {
  return detect_launch([](const char* k) -> const char* { return std::getenv(k); });
}

void check_world_size(const LaunchInfo& launch, std::optional<int> expected, int got) {
  if (launch.size && *launch.size != got)
    fail("comm",
         "this job was launched on {} ranks ({}) but MPI formed a world of {}: the ranks could "
         "not join one group (is the program linked against the MPI library of the mpirun that "
         "started it?). Refusing to run as {} separate jobs",
         *launch.size, launch.evidence, got, *launch.size);
  if (expected && *expected != got)
    fail("comm", "expected a world of {} ranks but {} ({})", *expected, got,
         launch.under_launcher ? "launched with " + launch.evidence
                               : std::string("not started by a launcher such as mpirun"));
}

}  // namespace strata::parallel
