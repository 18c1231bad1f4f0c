// Exit statuses of `strata run`: the shared table (framework/core/exit_status.hpp,
// docs/exit-codes.md) and the text for `strata run --help`.
#pragma once

#include "framework/core/exit_status.hpp"

namespace strata::launcher::run {

constexpr const char* kExitCodesHelp =
    "Exit status: 0 the job finished (after any restarts); 1 bad input (argument values, program "
    "not found), or a rank failed on bad input (config, data, checkpoint): not restarted; 2 usage "
    "error (or a rank's: not restarted); 3 failure of the launcher itself; 4 the job failed and "
    "the restarts were used up (a summary of every attempt is printed); 5 stopped by "
    "SIGINT/SIGTERM after the ranks saved and exited cleanly; 6 stopped by a signal but the job "
    "did not end cleanly (ranks killed or failed); 7 a rank ran out of memory: not restarted "
    "(docs/exit-codes.md).";

}  // namespace strata::launcher::run
