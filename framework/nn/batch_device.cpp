#include "framework/nn/batch_device.hpp"

#include <algorithm>
#include <cstring>

#include "framework/core/meta_device.hpp"

namespace strata::nn {

Tensor on_compute_device(const Context& ctx, const Tensor& t) {
  const Device d = ctx.activations.device;
  if (!(d.is_cuda() || is_meta_cuda(d)) || t.device().is_cuda()) return t;
  if (ctx.uploads && t.is_contiguous() && t.device().is_cpu())
    return ctx.uploads->upload(t, ctx.activations);
  return t.clone(ctx.activations);
}

BatchUploads::~BatchUploads() {
  for (const Buffer& b : bufs_) {
    try {
      b.copied.synchronize();
    } catch (...) {  // a failed GPU: nothing to wait for
    }
  }
}

Tensor BatchUploads::upload(const Tensor& t, const TensorOptions& to) {
  Tensor dst = Tensor::empty(t.shape(), t.dtype(), to);
  Buffer& b = bufs_[next_];
  next_ = (next_ + 1) % kBuffers;
  b.copied.synchronize();  // its last copy has run: the host may refill it
  const std::size_t bytes = t.nbytes();
  if (!b.pinned.defined() || static_cast<std::size_t>(b.pinned.numel()) < bytes) {
    TensorOptions host{is_meta_cuda(to.device) ? Device::meta() : Device::cpu(), Tier::host,
                       Category::other, to.ledger};
    host.pinned = true;
    b.pinned = Tensor();  // the smaller one first
    b.pinned = Tensor::empty(Shape{static_cast<std::int64_t>(std::max<std::size_t>(bytes, 1))},
                             DType::u8, host);
  }
  if (!to.device.is_cuda()) return dst;  // a plan: charged, nothing to move
  const Tensor staged(b.pinned.storage(), t.dtype(), t.shape(), t.shape().contiguous_strides());
  std::memcpy(staged.raw(), t.raw(), bytes);
  const Stream s = current_stream(to.device);
  copy_async(dst, staged, s);
  b.copied.record(s);
  return dst;
}

Tensor kept_for_backward(const Context& ctx, const Tensor& on_device, const Tensor& given) {
  return on_device.storage() == given.storage() ? given.clone(ctx.activations) : on_device;
}

}  // namespace strata::nn
