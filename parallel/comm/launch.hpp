// How this process was started: under an MPI launcher (and on how many ranks), or alone. Used
// to refuse a world smaller than the one launched instead of silently running on one rank.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace strata::parallel {

struct LaunchInfo {
  bool under_launcher = false;
  std::string evidence;     // "OMPI_COMM_WORLD_SIZE=4", "PMIX_RANK=0", ... (empty when alone)
  std::optional<int> size;  // ranks the launcher started, when it says
};

using EnvLookup = std::function<const char*(const char*)>;

// Reads the launcher's environment: OMPI_COMM_WORLD_SIZE (Open MPI), PMI_SIZE (MPICH, Slurm),
// MV2_COMM_WORLD_SIZE (MVAPICH), STRATA_WORLD_SIZE (`strata run`), and PMIX_RANK / PMI_RANK /
// OMPI_COMM_WORLD_RANK for presence. Throws UserError on a malformed size.
LaunchInfo detect_launch(const EnvLookup& env);
LaunchInfo detect_launch();  // from the process environment

// Throws strata::Error unless a world of `got` ranks is what the launcher started and what the
// caller expects.
void check_world_size(const LaunchInfo& launch, std::optional<int> expected, int got);

}  // namespace strata::parallel
