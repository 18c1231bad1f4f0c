#include "examples/train_gpt/stop_signal.hpp"

#include <csignal>

namespace strata::examples {

namespace {
volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_stop_signal(int sig) {
  g_signal = sig;
}
}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // file writes and waits carry on; the loop looks at the flag
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

bool stop_requested() {
  return g_signal != 0;
}

const char* stop_signal_name() {
  switch (g_signal) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    default:
      return g_signal ? "a signal" : "";
  }
}

}  // namespace strata::examples
