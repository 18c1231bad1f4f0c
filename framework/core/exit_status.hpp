// The exit statuses of every Strata program — `strata` and each of its subcommands, `strata run`,
// train_gpt — as one table with one meaning everywhere (docs/exit-codes.md).
#pragma once

namespace strata {

inline constexpr int kExitOk = 0;
// Bad input: a config, data file, checkpoint or argument value that must be fixed first.
inline constexpr int kExitBadInput = 1;
// Usage: the command line itself (an unknown option, a missing argument).
inline constexpr int kExitUsage = 2;
// A failure that is not the input's fault: an I/O or communication failure, an internal error.
inline constexpr int kExitFailure = 3;
// `strata run` only: the job failed and --max-restarts restarts were used up.
inline constexpr int kExitGaveUp = 4;
// `strata run` only: stopped by SIGINT/SIGTERM after every rank saved and exited cleanly.
inline constexpr int kExitStopped = 5;
// `strata run` only: stopped by a signal, but the job did not end cleanly.
inline constexpr int kExitStopKilled = 6;
// A memory tier ran out (strata::OutOfMemory reached the top level): change the config.
inline constexpr int kExitOutOfMemory = 7;

// Whether running the same command again can end differently: not after bad input, a usage
// error or running out of memory (`strata run` does not restart those).
constexpr bool restart_can_help(int status) {
  return status != kExitBadInput && status != kExitUsage && status != kExitOutOfMemory;
}

// A few words for messages: "bad input", "a usage error", ...
constexpr const char* exit_status_meaning(int status) {
  switch (status) {
    case kExitOk:
      return "success";
    case kExitBadInput:
      return "bad input";
    case kExitUsage:
      return "a usage error";
    case kExitFailure:
      return "a failure";
    case kExitGaveUp:
      return "restarts used up";
    case kExitStopped:
      return "stopped";
    case kExitStopKilled:
      return "stopped, not cleanly";
    case kExitOutOfMemory:
      return "out of memory";
    default:
      return "not a Strata exit status";
  }
}

// One line for `--help` footers.
inline constexpr const char* kExitStatusHelp =
    "Exit status: 0 success; 1 bad input (config, data, checkpoint, argument values); 2 usage "
    "error; 3 failure that is not the input's (I/O, communication, internal error); 7 out of "
    "memory (see docs/exit-codes.md).";

}  // namespace strata
