// train_gpt's stop flag (examples/train_gpt/stop_signal.cpp): a SIGTERM that another thread of the
// process takes (Open MPI's and PMIx's threads take process-directed signals too) is seen by the
// training loop's thread. Under ThreadSanitizer (scripts/test --sanitize thread) this is also the
// check that the flag is not a data race: the volatile sig_atomic_t it was made its process report
// one (first seen in run_netns_elastic_grow: the handler on a PMIx thread).
#include <gtest/gtest.h>

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "examples/train_gpt/stop_signal.hpp"

namespace strata::examples {
namespace {

TEST(StopSignal, ASignalTakenByAnotherThreadIsSeenByTheLoop) {
  install_stop_handlers();
  EXPECT_FALSE(stop_requested());
  EXPECT_STREQ(stop_signal_name(), "");
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &term, &old), 0);  // this thread never takes it
  std::thread taker([term] {  // created with SIGTERM blocked; unblocks it: the only taker
    ASSERT_EQ(pthread_sigmask(SIG_UNBLOCK, &term, nullptr), 0);
    ASSERT_EQ(kill(getpid(), SIGTERM), 0);
  });
  bool seen = false;
  for (int i = 0; i < 5000 && !seen; ++i) {
    seen = stop_requested();
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  taker.join();
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, &old, nullptr), 0);
  EXPECT_TRUE(seen) << "SIGTERM taken by another thread was not seen in 5 s";
  EXPECT_STREQ(stop_signal_name(), "SIGTERM");
}

}  // namespace
}  // namespace strata::examples
