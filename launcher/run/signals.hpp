// Turns asynchronous signals into bytes on a pipe that a poll() loop can wait on (the
// self-pipe trick), so the launcher and the rank wrapper handle signals in their main loop.
#pragma once

#include <initializer_list>
#include <vector>

namespace strata::launcher::run {

// One at a time per process. Installs handlers for `signals` (SA_RESTART) and restores the
// previous ones on destruction.
class SignalPipe {
 public:
  explicit SignalPipe(std::initializer_list<int> signals);
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  int fd() const;            // readable when a signal arrived
  std::vector<int> drain();  // the signals received since the last call, in order
  // Waits up to `ms` milliseconds (or until a signal) and returns the signals received.
  std::vector<int> wait(int ms);

 private:
  std::vector<int> signals_;
};

}  // namespace strata::launcher::run
