// The process's MPI runtime: initialisation and finalisation, the lock that serialises Strata's
// MPI calls, and the progress engine — a background thread (and any waiting thread) that tests
// outstanding requests so communication advances while the main thread computes.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "parallel/comm/work.hpp"

namespace strata::parallel::mpi {

// Requests the engine tests until they complete, then finishes a Work.
struct Pending {
  std::shared_ptr<WorkState> work;  // null for internal traffic
  std::vector<MPI_Request> reqs;
  std::vector<MPI_Status> statuses;
  // Runs (MPI lock held) when every request completed; may post new requests into reqs and
  // return true to continue. Throwing fails the work.
  std::function<bool(Pending&)> advance;
  // Runs (no lock) after the last stage, e.g. avg's division or copying out of staging.
  std::function<void(Pending&)> finish;
  std::vector<std::shared_ptr<const void>> keep;  // communicator, staging buffers
  std::exception_ptr error;
};

// Something polled on every progress pass with the MPI lock held (a communicator's responder).
class Poller {
 public:
  virtual ~Poller() = default;
  virtual void poll_locked() = 0;
  // Frees MPI resources at shutdown (lock held); later calls must not touch MPI.
  virtual void release_locked() = 0;
};

class Runtime final : public ProgressDriver {
 public:
  // Initialises MPI (unless the program did) and starts the progress thread, once per process.
  static std::shared_ptr<Runtime> acquire(std::chrono::milliseconds spin);
  // From now on shutdown() skips MPI_Finalize (the process is leaving because of an error;
  // finalizing would wait for the other ranks).
  static void abandon_mpi();
  ~Runtime() override;

  std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(mpi_mu_); }
  bool shut_down() const { return shut_.load(); }  // read with the lock held for certainty
  std::chrono::milliseconds spin() const { return spin_; }

  // Hands requests to the engine (call without the MPI lock).
  void submit(std::unique_ptr<Pending> p);
  void add_poller(std::weak_ptr<Poller> p);

  // Finishes pending work (bounded by `drain`), stops the thread, releases every communicator
  // and, if Strata initialised MPI, calls MPI_Finalize. Idempotent.
  void shutdown(std::chrono::milliseconds drain);

  // ProgressDriver: a waiting thread runs passes itself; the background thread then sleeps.
  void begin_drive() override { drivers_.fetch_add(1); }
  void step() override { pass(); }
  void end_drive() override { drivers_.fetch_sub(1); }

 private:
  Runtime() = default;
  bool pass();  // one progress pass; true if something completed
  void loop();

  std::mutex mpi_mu_;
  std::atomic<bool> shut_{false};
  bool owns_mpi_ = false;
  std::chrono::milliseconds spin_{200};

  std::mutex q_mu_;  // inbox_, pollers_, stop_; taken after mpi_mu_ when both are needed
  std::condition_variable q_cv_;
  std::vector<std::unique_ptr<Pending>> inbox_;
  std::vector<std::weak_ptr<Poller>> pollers_;
  bool stop_ = false;
  std::int64_t last_poll_ns_ = 0;

  std::vector<std::unique_ptr<Pending>> active_;  // guarded by mpi_mu_
  std::atomic<std::size_t> outstanding_{0};       // inbox + active
  std::atomic<std::int64_t> last_event_ns_{0};    // last submit or completion
  std::atomic<int> drivers_{0};
  std::thread thread_;
};

}  // namespace strata::parallel::mpi
