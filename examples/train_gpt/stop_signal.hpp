// Graceful stop for train_gpt: SIGTERM/SIGINT only set a flag; the training loop checks it at
// the end of each step (agreeing over all ranks), saves a checkpoint and exits 0.
#pragma once

namespace strata::examples {

// Installs the handlers (replacing the default "terminate at once").
void install_stop_handlers();
// Whether SIGTERM or SIGINT arrived since install_stop_handlers().
bool stop_requested();
// The signal's name for messages ("SIGTERM"), or "" when none arrived.
const char* stop_signal_name();

}  // namespace strata::examples
