// Work: the handle every communication call returns. The call is in flight until the handle
// completes; wait(timeout) blocks until then and throws if the call failed or timed out, naming
// the operation, its sequence number, the group, and the ranks that had not arrived.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "framework/backend/stream.hpp"
#include "parallel/comm/op.hpp"

namespace strata::parallel {

// Something a waiting thread can drive forward itself (as MPI_Wait does) instead of sleeping
// while a background thread does it.
class ProgressDriver {
 public:
  virtual ~ProgressDriver() = default;
  virtual void begin_drive() = 0;  // a waiter is about to call step() in a loop
  virtual void step() = 0;         // one progress pass over every outstanding request
  virtual void end_drive() = 0;
};

// Shared state of one call: filled in by the transport, read by Work.
class WorkState {
 public:
  using Explain = std::function<std::string(std::chrono::milliseconds budget)>;

  WorkState(OpDesc op, std::string group, std::chrono::milliseconds timeout);

  const OpDesc& op() const { return op_; }
  const std::string& group() const { return group_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Transport side.
  void complete();                    // success (idempotent; the first outcome wins)
  void fail(std::exception_ptr e);    // failure; wait() rethrows it
  void fail(const std::string& why);  // failure as "[comm] <op> on <group> failed: why"
  // Completion is found by polling (e.g. a cudaEvent) rather than signalled.
  void set_poll(std::function<bool()> poll);
  // A waiter may drive progress itself for up to `spin` before sleeping.
  void set_driver(std::shared_ptr<ProgressDriver> d, std::chrono::milliseconds spin);
  // Explains a timeout (asks peers where they are); called on the waiting thread.
  void set_explain(Explain e);
  // The call is queued on a device stream and `done` was recorded after it there: a consumer
  // stream can then wait for it on the device (Work::wait_on) without blocking the host.
  void set_device_event(Event done);
  // Keeps buffers (tensor storage, staging) alive until the operation completes (or, if it
  // failed, until the state dies: a failed call may still be in flight).
  void keep_alive(std::shared_ptr<const void> p);

  bool is_completed();
  void wait(std::chrono::milliseconds timeout);
  // The device event set_device_event gave, if any.
  const Event* device_event() const { return has_device_event_ ? &device_done_ : nullptr; }

 private:
  [[noreturn]] void throw_timeout(std::chrono::milliseconds timeout);

  OpDesc op_;
  std::string group_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> done_{false};
  std::exception_ptr error_;
  std::function<bool()> poll_;
  std::shared_ptr<ProgressDriver> driver_;
  std::chrono::milliseconds spin_{0};
  Explain explain_;
  Event device_done_;
  bool has_device_event_ = false;
  std::vector<std::shared_ptr<const void>> keep_;
};

class Work {
 public:
  Work() = default;  // an already-completed no-op
  explicit Work(std::shared_ptr<WorkState> s) : s_(std::move(s)) {}

  // True once the call finished (successfully or not). Never calls into MPI: completion is
  // detected by the background progress thread.
  bool is_completed() const;
  // Blocks until completion; throws strata::Error("[comm] ...") if the call failed, or if it
  // did not finish within `timeout` (the error names the op, its sequence number, the group and
  // the ranks that had not arrived). A timed-out Work stays valid and can be waited on again.
  void wait(std::chrono::milliseconds timeout) const;
  // Waits with the group's timeout (strata.comm.timeout_s, default 300 s).
  void wait() const;
  // Orders `stream` after the call: a device stream waits for the call's device event without
  // blocking the host (NCCL); a call without one (MPI, the host-staged device transport, whose
  // result is on the device when the call completes), or the CPU's stream, is waited for here.
  // Use it where the result is read only by work queued later on `stream` (its kernels, or the
  // host through copies ordered on it); wait() where the host reads the buffer itself.
  void wait_on(const Stream& stream) const;
  const OpDesc* op() const { return s_ ? &s_->op() : nullptr; }
  // Keeps p alive at least until the call completes.
  void keep_alive(std::shared_ptr<const void> p) const {
    if (s_) s_->keep_alive(std::move(p));
  }

 private:
  std::shared_ptr<WorkState> s_;
};

// Waits for every work in order (with each one's own timeout).
void wait_all(const std::vector<Work>& works);

}  // namespace strata::parallel
