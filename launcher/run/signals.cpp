#include "launcher/run/signals.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "framework/core/error.hpp"

namespace strata::launcher::run {

namespace {

int g_pipe[2] = {-1, -1};
std::map<int, struct sigaction> g_previous;

void on_signal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  (void)!write(g_pipe[1], &b, 1);
  errno = saved;
}

}  // namespace

SignalPipe::SignalPipe(std::initializer_list<int> signals) : signals_(signals) {
  STRATA_CHECK(g_pipe[0] < 0, "run", "only one SignalPipe may exist at a time");
  if (pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
    fail("run", "pipe failed: {}", std::strerror(errno));
  for (int sig : signals_) {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    struct sigaction old {};
    sigaction(sig, &sa, &old);
    g_previous[sig] = old;
  }
}

SignalPipe::~SignalPipe() {
  for (int sig : signals_) sigaction(sig, &g_previous[sig], nullptr);
  g_previous.clear();
  close(g_pipe[0]);
  close(g_pipe[1]);
  g_pipe[0] = g_pipe[1] = -1;
}

int SignalPipe::fd() const {
  return g_pipe[0];
}

std::vector<int> SignalPipe::drain() {
  std::vector<int> out;
  unsigned char buf[64];
  for (;;) {
    const ssize_t n = read(g_pipe[0], buf, sizeof buf);
    if (n <= 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  return out;
}

std::vector<int> SignalPipe::wait(int ms) {
  pollfd p{g_pipe[0], POLLIN, 0};
  poll(&p, 1, ms);
  return drain();
}

}  // namespace strata::launcher::run
