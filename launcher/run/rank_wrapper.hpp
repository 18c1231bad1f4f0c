// The wrapper `strata _rank` that mpirun starts as each rank: runs the program with its stdout
// on a pseudo-terminal (line-buffered, as under plain mpirun) and stderr on a pipe, writes both
// to <log-dir>/rank_XXXXX.log, echoes rank 0's lines and every rank's errors to the console
// prefixed with the rank, turns SIGUSR1 (graceful stop, forwarded by mpirun) and SIGTERM into
// SIGTERM for the program, and records how a failing program ended.
#pragma once

#include <string>
#include <vector>

namespace strata::launcher::run {

struct RankWrapperOptions {
  std::string log_dir;
  std::string status_dir;
  std::vector<std::string> program;
};

// This process's world rank from the launcher's environment (Open MPI, PMIx, PMI), else 0.
int rank_from_environment();

// Runs the program; returns its exit status, or 128 + the signal that killed it.
int run_rank(const RankWrapperOptions& o);

}  // namespace strata::launcher::run
