// Exit statuses of `strata run` (documented in docs/launcher.md and `strata run --help`).
#pragma once

namespace strata::launcher::run {

// 1, 2 and 3 are the statuses every strata command uses (bad input, usage, internal error).
constexpr int kExitOk = 0;          // the job finished cleanly (possibly after restarts)
constexpr int kExitGaveUp = 4;      // the job failed and --max-restarts restarts were used up
constexpr int kExitStopped = 5;     // stopped by SIGINT/SIGTERM; every rank exited cleanly
constexpr int kExitStopKilled = 6;  // stopped by a signal; the job did not end cleanly

// The text for `strata run --help`.
constexpr const char* kExitCodesHelp =
    "Exit status: 0 the job finished (after any restarts); 1 bad input (argument values, "
    "program not found); 2 usage error; 3 internal error; 4 the job failed and the restarts "
    "were used up (a summary of every attempt is printed); 5 stopped by SIGINT/SIGTERM after the "
    "ranks saved and exited cleanly; 6 stopped by a signal but the job did not end cleanly (ranks "
    "killed or failed).";

}  // namespace strata::launcher::run
