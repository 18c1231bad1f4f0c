// Streams and events: the order of work on a device. Ops run on the current stream of their
// device; on the CPU a stream runs work at once (an op has finished when it returns), so recording
// or waiting on an event there is free. On CUDA a Stream wraps a cudaStream_t and an Event a
// cudaEvent_t (through backend/cuda_runtime.hpp): compute, communication and host↔device copies
// each get a stream, ordered by events, never by the legacy default stream.
#pragma once

#include <memory>

#include "framework/core/device.hpp"

namespace strata {

class Tensor;

class Stream {
 public:
  Stream() = default;  // the CPU's stream
  // A new stream on `device` (the CPU's stream for the CPU: there is only one).
  static Stream create(Device device);
  Device device() const { return device_; }
  // cudaStream_t for CUDA streams; nullptr on the CPU.
  void* handle() const;
  // Blocks the host until everything queued on the stream so far has run.
  void synchronize() const;
  bool operator==(const Stream& o) const { return device_ == o.device_ && handle() == o.handle(); }

 private:
  struct State;
  Device device_ = Device::cpu();
  std::shared_ptr<State> s_;
};

class Event {
 public:
  Event() = default;  // never recorded: complete
  // Marks the point everything queued on `stream` so far reaches (replacing an earlier record).
  void record(const Stream& stream);
  // Makes `stream` wait (on the device, the host does not block) until the event has happened.
  void wait(const Stream& stream) const;
  // Blocks the host until the event has happened.
  void synchronize() const;
  // Whether it has happened.
  bool query() const;

 private:
  struct State;
  std::shared_ptr<State> s_;
};

// The current stream of a device on this thread (ops run on it): the CPU's stream (for the CPU
// and the meta device), or the device's compute stream unless a StreamGuard set another.
Stream current_stream(Device device);

// Makes `stream` the current stream of its device on this thread for a scope.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
};

// dst = src (same shape and dtype, contiguous) ordered on `stream`: a host↔device or
// device↔device copy queued there (pinned host memory makes it truly asynchronous); between CPU
// tensors it runs at once.
void copy_async(const Tensor& dst, const Tensor& src, const Stream& stream);

}  // namespace strata
