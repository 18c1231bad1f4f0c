// Copies between a GPU's memory and host memory beside the compute (offload from a GPU): a
// CopyStream queues each copy on a stream of its own after the work queued so far on the device's
// current (compute) stream — the kernels that wrote its source, those still reading its
// destination, and the earlier users of a destination block the caching allocator recycled — and
// returns the event it completes at; whoever reads the destination waits for that event (the
// compute stream on the device, the host by synchronizing). StagingBuffers are the pinned host
// buffers such copies go through, reused in turn once their copies have completed.
//
// On the CPU and the meta device (a plan) there is nothing to overlap: copies run at once (a meta
// tensor moves nothing) and every event is complete, so the same calls and allocations run on a
// machine without a GPU — the memory planner's run and the CPU tests of the offload paths take
// them exactly as a GPU run does.
#pragma once

#include <cstdint>
#include <vector>

#include "framework/backend/stream.hpp"
#include "framework/core/tensor.hpp"

namespace strata {

class CopyStream {
 public:
  CopyStream() = default;  // the CPU's: copies run at once
  // A CUDA device: a new (non-blocking) stream there. Any other device: copies run at once.
  explicit CopyStream(Device device);
  Device device() const { return device_; }
  const Stream& stream() const { return stream_; }

  // dst <- src (the same shape and dtype, contiguous; each on the CPU or on this device), queued
  // on the copy stream after everything queued so far on the device's current stream. Returns the
  // event it completes at. The caller keeps both tensors' memory alive and unchanged until then.
  Event copy(const Tensor& dst, const Tensor& src);
  // An event everything queued so far on the copy stream (copies, or work posted on it under a
  // StreamGuard) completes at.
  Event mark();
  // The device's current stream waits, on the device, for everything queued on the copy stream so
  // far (the host does not block): kernels queued after this read what the copies wrote.
  void order_before_current();
  // The host waits for everything queued on the copy stream so far.
  void synchronize() const;

 private:
  Device device_ = Device::cpu();
  Stream stream_;  // the copy stream (the CPU's where copies run at once)
  Event ready_;    // the current stream's point a copy waits for, re-recorded for each copy
};

// `count` host buffers of `bytes` each, handed out in turn for copies to and from a GPU: pinned
// (page-locked, so that the copies are truly asynchronous) where a GPU can pin them, allocated at
// the first take (charged to the host tier under `host`'s category and ledger; on the meta device
// charged only), and handed out again only after the host has waited for the copies that used
// them last.
class StagingBuffers {
 public:
  StagingBuffers() = default;
  StagingBuffers(int count, std::size_t bytes, const TensorOptions& host);

  // The next buffer in turn as n elements of dt (n × its size <= bytes), once the copies that
  // used it last have completed. Its contents are whatever they were.
  Tensor take(std::int64_t n, DType dt);
  // The buffer `take` handed out last is read or written by a copy that completes at `e`.
  void used_until(const Event& e);
  // Every copy that used the buffers has completed.
  void synchronize();
  std::size_t bytes() const { return bytes_; }

 private:
  struct Buffer {
    Tensor mem;  // u8 × bytes_, allocated at the first take
    Event last;  // the last copy that used it
  };
  std::vector<Buffer> bufs_;
  std::size_t bytes_ = 0;
  TensorOptions host_;
  std::size_t next_ = 0, taken_ = 0;
};

}  // namespace strata
