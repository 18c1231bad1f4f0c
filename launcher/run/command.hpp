// Builds the command that starts one attempt of a job: `mpirun ... strata _rank ... -- PROGRAM`
// (or, for -n 1 on this machine, the rank wrapper alone), with the environment the ranks need.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/run/options.hpp"

namespace strata::launcher::run {

// The facts about this machine and process that the command depends on.
struct PlanContext {
  std::string self_exe;                 // the strata binary (each rank's wrapper)
  int cores = 1;                        // physical cores this process may use
  bool root = false;                    // running as root: mpirun needs OMPI_ALLOW_RUN_AS_ROOT*
  std::vector<std::string> strata_env;  // names of STRATA_* variables in our environment
  std::function<const char*(const char*)> getenv;
};
PlanContext current_context();

// Where one attempt writes: logs (appended over attempts), progress and exit records (fresh).
struct AttemptDirs {
  std::string log_dir;
  std::string progress_dir;
  std::string status_dir;
  int attempt = 1;
};
AttemptDirs attempt_dirs(const std::string& log_dir, int attempt);

struct LaunchPlan {
  std::vector<std::string> argv;                         // argv[0] is looked up on PATH
  std::vector<std::pair<std::string, std::string>> env;  // added to the launched environment
  bool direct = false;                                   // no mpirun
  bool oversubscribed = false;
  std::string describe() const;  // one shell line: NAME=value ... argv...
};

// Throws UserError for an --env NAME that is not set.
LaunchPlan build_plan(const RunOptions& o, const AttemptDirs& dirs, const PlanContext& ctx);

// Slots named by --host ("h1:4,h2" = 5) or a hostfile ("slots=N"; -1 when a line has none).
int count_host_slots(const std::string& hosts);
int count_hostfile_slots(const std::string& path);

// The full path of `name` as execvp would find it; throws UserError naming `what` if none.
std::string resolve_executable(const std::string& name, const std::string& what);

std::string shell_quote(const std::string& s);

}  // namespace strata::launcher::run
