#include "framework/backend/transfer.hpp"

#include "framework/core/error.hpp"

namespace strata {

CopyStream::CopyStream(Device device) : device_(device) {
  if (device.is_cuda()) stream_ = Stream::create(device);
}

Event CopyStream::copy(const Tensor& dst, const Tensor& src) {
  Event done;
  if (!device_.is_cuda()) {
    // Nothing runs beside the host here: the copy is made now (between meta tensors: nothing).
    STRATA_CHECK(!dst.device().is_cuda() && !src.device().is_cuda(), "core",
                 "a copy between {} and {} on the copy stream of {}", src.device().str(),
                 dst.device().str(), device_.str());
    Tensor(dst).copy_from(src);
    return done;
  }
  for (const Tensor* t : {&dst, &src})
    STRATA_CHECK(!t->device().is_cuda() || t->device() == device_, "core",
                 "a tensor on {} copied on the copy stream of {}", t->device().str(), device_.str());
  // After the kernels queued so far on the compute stream: they wrote the source, or still read
  // the destination (or the block of memory it was recycled from).
  ready_.record(current_stream(device_));
  ready_.wait(stream_);
  copy_async(dst, src, stream_);
  done.record(stream_);
  return done;
}

Event CopyStream::mark() {
  Event e;
  if (device_.is_cuda()) e.record(stream_);
  return e;
}

void CopyStream::order_before_current() {
  if (!device_.is_cuda()) return;
  Event e;
  e.record(stream_);
  e.wait(current_stream(device_));
}

void CopyStream::synchronize() const { stream_.synchronize(); }

StagingBuffers::StagingBuffers(int count, std::size_t bytes, const TensorOptions& host)
    : bufs_(static_cast<std::size_t>(count)), bytes_(bytes), host_(host) {
  STRATA_CHECK(count >= 1, "core", "staging needs at least one buffer, not {}", count);
  host_.tier = Tier::host;
}

Tensor StagingBuffers::take(std::int64_t n, DType dt) {
  STRATA_CHECK(!bufs_.empty(), "core", "no staging buffers");
  const std::size_t want = static_cast<std::size_t>(n) * dtype_size(dt);
  STRATA_CHECK(n >= 0 && want <= bytes_, "core", "{} elements of {} ({} bytes) do not fit a {}-byte "
               "staging buffer", n, dtype_name(dt), want, bytes_);
  taken_ = next_;
  next_ = (next_ + 1) % bufs_.size();
  Buffer& b = bufs_[taken_];
  b.last.synchronize();  // its last copy has completed: the host may write it or read it
  b.last = Event();
  if (!b.mem.defined())
    b.mem = Tensor::empty(Shape{static_cast<std::int64_t>(std::max<std::size_t>(bytes_, 1))},
                          DType::u8, host_);
  return Tensor(b.mem.storage(), dt, Shape{n}, {1}, 0);
}

void StagingBuffers::used_until(const Event& e) {
  STRATA_CHECK(!bufs_.empty(), "core", "no staging buffers");
  bufs_[taken_].last = e;
}

void StagingBuffers::synchronize() {
  for (Buffer& b : bufs_) {
    b.last.synchronize();
    b.last = Event();
  }
}

}  // namespace strata
