#include "examples/train_gpt/stop_signal.hpp"

#include <atomic>
#include <csignal>

namespace strata::examples {

namespace {
// Atomic, not volatile sig_atomic_t: the handler may run on any thread of the process (Open MPI's
// and PMIx's threads take process-directed signals too), while the training loop reads the flag on
// its own; a lock-free atomic is safe in a signal handler and between threads. (ThreadSanitizer
// reported the volatile flag as a data race in run_netns_elastic_grow: the handler on a PMIx
// thread, the loop's read on the main thread.)
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the stop flag must be lock-free");

extern "C" void on_stop_signal(int sig) {
  g_signal.store(sig, std::memory_order_relaxed);
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
  return g_signal.load(std::memory_order_relaxed) != 0;
}

const char* stop_signal_name() {
  const int sig = g_signal.load(std::memory_order_relaxed);
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    default:
      return sig ? "a signal" : "";
  }
}

}  // namespace strata::examples
