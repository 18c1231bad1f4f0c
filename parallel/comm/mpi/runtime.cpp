#include "parallel/comm/mpi/runtime.hpp"

#include <algorithm>
#include <cstdlib>

#include "parallel/comm/mpi/datatypes.hpp"
#include "parallel/comm/mpi/mpi_check.hpp"

namespace strata::parallel::mpi {

namespace {

using Clock = std::chrono::steady_clock;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

std::mutex g_mu;
std::shared_ptr<Runtime> g_runtime;  // one per process, lives until exit

const char* level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
  }
  return "unknown";
}

// "MPI_ERR_TRUNCATE: message truncated" for the first failed request of a Testall.
std::string status_errors(const std::vector<MPI_Status>& st, int rc) {
  if (rc == MPI_ERR_IN_STATUS) {
    for (const auto& s : st)
      if (s.MPI_ERROR != MPI_SUCCESS && s.MPI_ERROR != MPI_ERR_PENDING)
        return error_string(s.MPI_ERROR);
  }
  return error_string(rc);
}

}  // namespace

std::shared_ptr<Runtime> Runtime::acquire(std::chrono::milliseconds spin) {
  std::lock_guard lk(g_mu);
  if (g_runtime && !g_runtime->shut_down()) return g_runtime;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || g_runtime)
    fail("comm", "MPI was already finalized in this process; it cannot be initialised again");
  std::shared_ptr<Runtime> rt(new Runtime());
  rt->spin_ = spin;
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    // Open MPI's non-blocking all-reduce (libnbc) uses a binomial tree for fewer than 4 ranks
    // and for every in-place call: on large buffers ~1.5x slower than the blocking all-reduce.
    // Ask for Rabenseifner's reduce-scatter + all-gather instead (libnbc itself falls back to a
    // ring when a buffer has fewer elements than ranks). A value set by the user (mpirun --mca
    // or the environment) wins; other MPI libraries ignore the variable.
    ::setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", /*overwrite=*/0);
    // Likewise its non-blocking all-gather defaults to "linear" (every rank posts a send and a
    // receive to every other at once): 0.70x the blocking call at 1-4 MiB on 2 ranks. Recursive
    // doubling matches it; libnbc uses it only for power-of-two sizes and stays linear otherwise.
    ::setenv("OMPI_MCA_coll_libnbc_iallgather_algorithm", "2", /*overwrite=*/0);
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) fail("comm", "MPI_Init_thread failed: {}", error_string(rc));
    rt->owns_mpi_ = true;
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    if (rt->owns_mpi_) MPI_Finalize();
    fail("comm",
         "MPI provides only {}; Strata's progress thread needs MPI_THREAD_SERIALIZED or better "
         "(MPI_THREAD_MULTIPLE to mix in your own MPI calls){}",
         level_name(provided),
         initialized ? ": initialise MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...)" : "");
  }
  create_user_ops();
  rt->thread_ = std::thread([r = rt.get()] { r->loop(); });
  g_runtime = rt;
  return rt;
}

Runtime::~Runtime() {
  shutdown(std::chrono::milliseconds(0));
}

void Runtime::submit(std::unique_ptr<Pending> p) {
  {
    std::lock_guard lk(q_mu_);
    inbox_.push_back(std::move(p));
    outstanding_.fetch_add(1);
  }
  last_event_ns_.store(now_ns());
  q_cv_.notify_one();
}

void Runtime::add_poller(std::weak_ptr<Poller> p) {
  std::lock_guard lk(q_mu_);
  pollers_.push_back(std::move(p));
}

bool Runtime::pass() {
  std::vector<std::unique_ptr<Pending>> finished;
  std::vector<std::shared_ptr<Poller>> polled;  // released after the lock
  {
    auto lk = lock();
    if (shut_.load()) return false;
    {
      std::lock_guard q(q_mu_);
      for (auto& p : inbox_) active_.push_back(std::move(p));
      inbox_.clear();
      // Responders answer questions about timeouts; once a millisecond is plenty.
      const std::int64_t now = now_ns();
      const bool poll = now - last_poll_ns_ >= 1000000;
      if (poll) last_poll_ns_ = now;
      for (auto it = pollers_.begin(); poll && it != pollers_.end();) {
        if (auto sp = it->lock()) {
          polled.push_back(std::move(sp));
          ++it;
        } else {
          it = pollers_.erase(it);
        }
      }
    }
    for (auto& slot : active_) {
      Pending& p = *slot;
      bool done = true;
      while (done && !p.reqs.empty()) {
        int flag = 0;
        p.statuses.resize(p.reqs.size());
        const int rc =
            MPI_Testall(static_cast<int>(p.reqs.size()), p.reqs.data(), &flag, p.statuses.data());
        if (rc != MPI_SUCCESS) {
          p.error = std::make_exception_ptr(Error("comm", status_errors(p.statuses, rc)));
          break;
        }
        if (!flag) {
          done = false;
          break;
        }
        if (!p.advance) break;
        bool more = false;
        try {
          more = p.advance(p);
        } catch (...) {
          p.error = std::current_exception();
        }
        if (!more || p.error) break;
        // New requests were posted: test them at once (they may already be complete).
      }
      if (done) finished.push_back(std::move(slot));
    }
    std::erase_if(active_, [](const auto& p) { return p == nullptr; });
    for (auto& poller : polled) poller->poll_locked();
  }
  if (finished.empty()) return false;
  outstanding_.fetch_sub(finished.size());
  last_event_ns_.store(now_ns());
  for (auto& f : finished) {
    if (!f->error && f->finish) {
      try {
        f->finish(*f);
      } catch (...) {
        f->error = std::current_exception();
      }
    }
    f->keep.clear();  // staging buffers go back to the ledger before anyone sees completion
    if (f->work) {
      if (f->error) {
        try {
          std::rethrow_exception(f->error);
        } catch (const Error& e) {
          // Say which call failed, unless the error already does.
          const std::string what = e.what();
          if (what.find(f->work->op().str()) != std::string::npos)
            f->work->fail(f->error);
          else
            f->work->fail(what);
        } catch (...) {
          f->work->fail(f->error);
        }
      } else {
        f->work->complete();
      }
    }
  }
  return true;
}

void Runtime::loop() {
  using std::chrono::microseconds;
  while (true) {
    {
      std::unique_lock lk(q_mu_);
      if (stop_) return;
      if (drivers_.load() > 0) {
        // A waiter is driving progress itself: stay out of its way.
        q_cv_.wait_for(lk, microseconds(1000));
        continue;
      }
      if (outstanding_.load() == 0) {
        // Idle: only responders to poll (peers asking where we are after a timeout).
        q_cv_.wait_for(lk, microseconds(2000), [&] { return stop_ || outstanding_.load() > 0; });
        if (stop_) return;
      }
    }
    const bool completed = pass();
    if (completed || outstanding_.load() == 0) continue;
    const auto since = std::chrono::nanoseconds(now_ns() - last_event_ns_.load());
    if (since < spin_) {
      std::this_thread::yield();  // communication is moving: keep testing
    } else {
      // Waiting on a late rank: poll gently instead of burning a core.
      std::unique_lock lk(q_mu_);
      q_cv_.wait_for(lk, microseconds(200));
    }
  }
}

namespace {
std::atomic<bool> g_abandon_mpi{false};
}  // namespace

void Runtime::abandon_mpi() { g_abandon_mpi.store(true); }

void Runtime::shutdown(std::chrono::milliseconds drain) {
  if (shut_.load()) return;
  // Let calls in flight finish, within bounds.
  const auto until = Clock::now() + drain;
  while (outstanding_.load() > 0 && Clock::now() < until) {
    pass();
    std::this_thread::yield();
  }
  {
    std::lock_guard lk(q_mu_);
    stop_ = true;
  }
  q_cv_.notify_all();
  if (thread_.joinable()) {
    if (thread_.get_id() == std::this_thread::get_id())
      thread_.detach();
    else
      thread_.join();
  }
  std::vector<std::unique_ptr<Pending>> abandoned;
  std::vector<std::shared_ptr<Poller>> pollers;
  {
    auto lk = lock();
    if (shut_.exchange(true)) return;
    {
      std::lock_guard q(q_mu_);
      for (auto& p : inbox_) active_.push_back(std::move(p));
      inbox_.clear();
      for (auto& w : pollers_)
        if (auto sp = w.lock()) pollers.push_back(std::move(sp));
      pollers_.clear();
    }
    abandoned = std::move(active_);
    active_.clear();
    for (auto& p : pollers) p->release_locked();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
      free_user_ops();
      if (owns_mpi_ && !g_abandon_mpi.load()) MPI_Finalize();
    }
  }
  for (auto& p : abandoned)
    if (p->work)
      p->work->fail(
          "the communication runtime was shut down (finalize_world) while this call "
          "was still in flight");
}

}  // namespace strata::parallel::mpi
