#include "framework/backend/stream.hpp"

#include <map>
#include <mutex>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/core/tensor.hpp"

namespace strata {

struct Stream::State {
  void* handle = nullptr;
  int device = 0;
  ~State() { cuda::stream_destroy(handle); }
};

struct Event::State {
  void* handle = nullptr;
  int device = -1;  // the device it was created for; -1: only CPU streams recorded so far
  bool recorded = false;
  ~State() { cuda::event_destroy(handle); }
};

Stream Stream::create(Device device) {
  Stream s;
  s.device_ = device;
  if (device.is_cuda()) {
    s.s_ = std::make_shared<State>();
    s.s_->device = device.index;
    s.s_->handle = cuda::stream_create(device.index);
  }
  return s;
}

void* Stream::handle() const { return s_ ? s_->handle : nullptr; }

void Stream::synchronize() const {
  if (s_) cuda::stream_synchronize(s_->handle);
}

void Event::record(const Stream& stream) {
  if (!stream.device().is_cuda()) {
    // The CPU's stream has run everything queued on it: the point is reached at once.
    s_.reset();
    return;
  }
  if (!s_ || s_->device != stream.device().index) {
    s_ = std::make_shared<State>();
    s_->device = stream.device().index;
    s_->handle = cuda::event_create(stream.device().index);
  }
  cuda::event_record(s_->handle, stream.handle());
  s_->recorded = true;
}

void Event::wait(const Stream& stream) const {
  if (!s_ || !s_->recorded) return;
  if (stream.device().is_cuda()) cuda::stream_wait_event(stream.handle(), s_->handle);
  else cuda::event_synchronize(s_->handle);  // the CPU's stream waits by blocking its host thread
}

void Event::synchronize() const {
  if (s_ && s_->recorded) cuda::event_synchronize(s_->handle);
}

bool Event::query() const { return !s_ || !s_->recorded || cuda::event_query(s_->handle); }

namespace {
// Per thread: the stream a StreamGuard made current, per CUDA device; and each device's default
// compute stream (created on first use, shared by the process's threads).
thread_local std::map<int, Stream> current_streams;

Stream default_stream(int device) {
  static std::mutex mu;
  static std::map<int, Stream> defaults;
  std::lock_guard lk(mu);
  auto it = defaults.find(device);
  if (it == defaults.end()) it = defaults.emplace(device, Stream::create(Device::cuda(device))).first;
  return it->second;
}
}  // namespace

Stream current_stream(Device device) {
  // The CPU's stream for the CPU and for the meta device (a plan queues nothing anywhere).
  if (!device.is_cuda()) return Stream();
  if (auto it = current_streams.find(device.index); it != current_streams.end()) return it->second;
  return default_stream(device.index);
}

StreamGuard::StreamGuard(const Stream& stream) : previous_(current_stream(stream.device())) {
  if (stream.device().is_cuda()) current_streams[stream.device().index] = stream;
}

StreamGuard::~StreamGuard() {
  if (previous_.device().is_cuda()) current_streams[previous_.device().index] = previous_;
}

void copy_async(const Tensor& dst, const Tensor& src, const Stream& stream) {
  STRATA_CHECK(dst.shape() == src.shape() && dst.dtype() == src.dtype() && dst.is_contiguous() &&
                   src.is_contiguous(),
               "core", "copy_async needs tensors of one shape and dtype, contiguous ({} {} into {} {})",
               dtype_name(src.dtype()), src.shape().str(), dtype_name(dst.dtype()), dst.shape().str());
  const bool sc = src.device().is_cuda(), dc = dst.device().is_cuda();
  if (!sc && !dc) {
    Tensor d = dst;
    d.copy_from(src);
    return;
  }
  STRATA_CHECK(stream.device().is_cuda(), "core",
               "a copy to or from {} must be ordered on a CUDA stream, not the CPU's",
               (sc ? src : dst).device().str());
  if (src.numel() == 0) return;
  cuda::memcpy_async(dst.raw(), src.raw(), src.nbytes(),
                     sc && dc ? cuda::CopyKind::device_to_device
                     : sc     ? cuda::CopyKind::device_to_host
                              : cuda::CopyKind::host_to_device,
                     stream.handle());
}

}  // namespace strata
