#include "framework/nn/batch_device.hpp"

#include "framework/core/meta_device.hpp"

namespace strata::nn {

Tensor on_compute_device(const Context& ctx, const Tensor& t) {
  const Device d = ctx.activations.device;
  return (d.is_cuda() || is_meta_cuda(d)) && !t.device().is_cuda() ? t.clone(ctx.activations) : t;
}

Tensor kept_for_backward(const Context& ctx, const Tensor& on_device, const Tensor& given) {
  return on_device.storage() == given.storage() ? given.clone(ctx.activations) : on_device;
}

}  // namespace strata::nn
