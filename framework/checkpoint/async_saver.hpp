// AsyncSaver: writes checkpoints in a background thread while training goes on. The caller stages
// the state into host buffers the job owns (staging.hpp) and submits it; at most one save is in
// flight (submit waits for the previous one). A background failure is never lost: poll() at the
// next step rethrows it, wait() at exit rethrows it, and the destructor reports one nobody
// collected.
#pragma once

#include <atomic>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "framework/checkpoint/catalog.hpp"
#include "framework/checkpoint/save.hpp"
#include "framework/checkpoint/staging.hpp"

namespace strata::checkpoint {

struct SaveJob {
  SaveSpec spec;
  std::vector<StagedSlice> slices;  // owned copies; released when the write finishes
  RankState rank_state;
};

class AsyncSaver {
 public:
  // all_ok runs on the background thread (the engine must allow a collective there).
  explicit AsyncSaver(AllRanksOk all_ok, WarningSink on_unreported_error = warn_to_stderr);
  // Waits for the save in flight; an error nobody collected goes to on_unreported_error.
  ~AsyncSaver();
  AsyncSaver(const AsyncSaver&) = delete;
  AsyncSaver& operator=(const AsyncSaver&) = delete;

  // Waits for the save in flight (rethrowing its error), then starts this one.
  void submit(SaveJob job);
  // Rethrows the error of a finished save (once); returns at once if none or still running.
  void poll();
  // Waits for the save in flight and rethrows its error.
  void wait();
  bool in_flight() const;
  // The result of the last save that succeeded.
  std::optional<SaveResult> last_result() const;

 private:
  void join_and_rethrow();

  AllRanksOk all_ok_;
  WarningSink on_unreported_error_;
  std::thread worker_;
  std::atomic<bool> done_{true};
  mutable std::mutex mu_;
  std::exception_ptr error_;
  std::optional<SaveResult> last_;
};

}  // namespace strata::checkpoint
