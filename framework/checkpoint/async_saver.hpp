// AsyncSaver: writes checkpoints in a background thread while training goes on. The caller stages
// the state into host buffers the job owns (staging.hpp) and submits it; at most one save is in
// flight (submit waits for the previous one). A background failure is never lost: poll() at the
// next step rethrows it, wait() at exit rethrows it, and the destructor reports one nobody
// collected. The writing thread runs at low CPU priority (nice 19) by default: its work is
// mostly waiting for the disk (O_DIRECT from the staging buffers, whose checksums staging
// computed), and the training threads win the CPU it needs. Not SCHED_IDLE by default: with every
// core busy training, an idle-class writer may never run, and the next save (and the other ranks'
// agreement on it) would wait on it.
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

// CPU priority of the background writer: idle (SCHED_IDLE: runs when a core would otherwise
// idle), low (nice 19) or normal (the caller's). STRATA_CHECKPOINT_WRITER_PRIORITY =
// idle|low|normal overrides the constructor's choice (for benchmarks).
enum class WriterPriority { idle, low, normal };

struct SaveJob {
  SaveSpec spec;
  std::vector<StagedSlice> slices;  // owned copies; released when the write finishes
  RankState rank_state;
};

class AsyncSaver {
 public:
  // all_ok runs on the background thread (the engine must allow a collective there).
  explicit AsyncSaver(AllRanksOk all_ok, WarningSink on_unreported_error = warn_to_stderr,
                      WriterPriority priority = WriterPriority::low);
  // Waits for the save in flight; an error nobody collected goes to on_unreported_error.
  ~AsyncSaver();
  AsyncSaver(const AsyncSaver&) = delete;
  AsyncSaver& operator=(const AsyncSaver&) = delete;

  // Rank 0 builds manifests from records the ranks send through `gather` (on the background
  // thread, like all_ok) instead of re-reading their files. Set before the first submit.
  void set_gather(GatherToRoot gather) { gather_ = std::move(gather); }
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
  GatherToRoot gather_;
  WarningSink on_unreported_error_;
  WriterPriority priority_;
  std::thread worker_;
  std::atomic<bool> done_{true};
  mutable std::mutex mu_;
  std::exception_ptr error_;
  std::optional<SaveResult> last_;
};

}  // namespace strata::checkpoint
