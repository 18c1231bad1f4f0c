// The `strata run` loop: start the job, watch it (exit, watchdog, signals), and restart it
// after a failure until it finishes or the restarts are used up.
#pragma once

#include "launcher/run/options.hpp"

namespace strata::launcher::run {

// Runs the job as `o` says and returns the exit status of `strata run` (exit_codes.hpp).
// Throws UserError for bad options (before anything is started).
int supervise(RunOptions o);

}  // namespace strata::launcher::run
