// What `strata run` was asked to do: the parsed command line, shared by the command builder,
// the supervisor and the watchdog.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace strata::launcher::run {

struct RunOptions {
  int ranks = 1;                             // -n
  bool ranks_given = true;                   // false: -n left out (then SLURM_NTASKS)
  bool no_slurm = false;                     // --no-slurm: ignore a Slurm allocation
  std::string slurm_job;                     // the Slurm job whose allocation was taken
  std::string hostfile;                      // --hostfile FILE
  std::string hosts;                         // --host h1:4,h2:4
  int max_restarts = 3;                      // --max-restarts K
  double restart_delay_s = 5.0;              // --restart-delay S
  double watchdog_s = 0;                     // --watchdog S (0: off)
  std::optional<double> watchdog_startup_s;  // --watchdog-startup S (default: --watchdog)
  double kill_grace_s = 5.0;          // --kill-grace: a failed rank's job must end within this
                                      // long, or gets SIGTERM; SIGKILL after as long again
  std::string log_dir;                // --log-dir DIR (default strata-logs/<time>)
  std::vector<std::string> env;       // -x/--env NAME or NAME=VALUE
  std::vector<std::string> mpi_args;  // --mpi-arg ARG, passed to mpirun before the program
  std::string mpirun = "mpirun";      // --mpirun PATH
  bool force_mpirun = false;          // --use-mpirun: use mpirun even for -n 1
  bool dry_run = false;               // --dry-run
  bool always_restart = false;        // --always-restart: also after bad input, usage, OOM
  std::vector<std::string> program;   // PROGRAM ARGS...
  std::string nodes;                  // --nodes MIN:MAX or N: elastic (see elastic.hpp)
  double node_grace_s = 30;           // --node-grace: how long a lost node may take to answer
  bool node_grace_given = false;      // --node-grace on the command line (only with --nodes)
  // Variables the launcher itself adds for the ranks (STRATA_ELASTIC_CHANGE): exported like
  // STRATA_PROGRESS_DIR.
  std::vector<std::pair<std::string, std::string>> launcher_env;

  // -n 1 on this machine runs the program without mpirun (see docs/launcher.md).
  bool direct() const { return ranks == 1 && hostfile.empty() && hosts.empty() && !force_mpirun; }
  double startup_s() const { return watchdog_startup_s.value_or(watchdog_s); }
};

// Throws UserError naming the first bad value (N < 1, both --host and --hostfile, ...).
void validate(const RunOptions& o);

}  // namespace strata::launcher::run
